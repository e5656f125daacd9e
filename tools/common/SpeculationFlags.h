//===- SpeculationFlags.h - Speculative decoding's flags --------*- C++ -*-===//
//
// `--speculative-tokens`, `--acceptance-rate` and `--draft-layers`, read
// the same way by `stagec --mode serve` and `stage-search --serve`
// (docs/serving.md, "Speculative decoding").
//
//===----------------------------------------------------------------------===//

#ifndef STG_TOOLS_COMMON_SPECULATIONFLAGS_H
#define STG_TOOLS_COMMON_SPECULATIONFLAGS_H

#include "CommandLine.h"

#include "stg/Serve/ServingSimulation.h"

#include <optional>
#include <string>

namespace stg {

inline void addSpeculationOptions(CLI::App &app,
                                  SpeculativeDecoding &speculation,
                                  const std::string &group) {
  app.add_option("--speculative-tokens", speculation.draftTokens,
                 "speculative decoding: draft tokens each decode step "
                 "proposes and verifies (an MTP module's, EAGLE's; default "
                 "0, none)")
      ->check(wholeNumber(0, 64))
      ->group(group);
  app.add_option("--acceptance-rate", speculation.acceptance,
                 "with --speculative-tokens: the chance each draft token is "
                 "accepted after those before it")
      ->check(finiteNumber(0, 1))
      ->group(group);
  app.add_option("--draft-layers", speculation.draftLayers,
                 "with --speculative-tokens: decoder layers a draft token "
                 "runs, with the LM head (default 1: an MTP module)")
      ->check(wholeNumber(1, 1024))
      ->group(group);
}

/// What is wrong with the flags addSpeculationOptions read, if anything.
inline std::optional<std::string>
checkSpeculationOptions(const CLI::App &app,
                        const SpeculativeDecoding &speculation) {
  bool speculative = speculation.draftTokens > 0;
  for (const char *flag : {"--acceptance-rate", "--draft-layers"})
    if (!speculative && app.count(flag))
      return std::string(flag) + " needs --speculative-tokens N (N > 0)";
  if (speculative && !app.count("--acceptance-rate"))
    return std::string("--speculative-tokens needs --acceptance-rate P: how "
                       "often a draft token is accepted depends on the "
                       "model, the draft and the data");
  return std::nullopt;
}

} // namespace stg

#endif // STG_TOOLS_COMMON_SPECULATIONFLAGS_H
