//===- ServingFlags.h - The serving engine's shared flags -------*- C++ -*-===//
//
// The engine's flags that `stagec --mode serve` and `stage-search --serve`
// read the same way: `--kv-allocation`, `--linear-kernels` (stagec's
// prefill and decode too), and speculative decoding's
// `--speculative-tokens`, `--acceptance-rate` and `--draft-layers`
// (docs/serving.md).
//
//===----------------------------------------------------------------------===//

#ifndef STG_TOOLS_COMMON_SERVINGFLAGS_H
#define STG_TOOLS_COMMON_SERVINGFLAGS_H

#include "CommandLine.h"

#include "stg/Serve/ServingSimulation.h"

#include <optional>
#include <string>

namespace stg {

/// `--kv-allocation reserve|on-demand` into `name`; parseKVAllocation
/// reads it.
inline void addKVAllocationOption(CLI::App &app, std::string &name,
                                  const std::string &group) {
  app.add_option("--kv-allocation", name,
                 "reserve (default: a sequence's whole cache at admission, "
                 "as TensorRT-LLM's GUARANTEED_NO_EVICT) or on-demand (a "
                 "block as it grows, preempting the newest sequence when "
                 "full, to recompute later, as vLLM)")
      ->check(
          CLI::IsMember({getKVAllocationName(KVAllocation::Reserve).str(),
                         getKVAllocationName(KVAllocation::OnDemand).str()}))
      ->group(group);
}

/// `--linear-kernels separate|fused` into `name` ("fused" sets
/// CompileOptions::fusedLinearKernels).
inline void addLinearKernelsOption(CLI::App &app, std::string &name,
                                   const std::string &group) {
  app.add_option("--linear-kernels", name,
                 "inference: separate (default: a kernel per linear layer's "
                 "GEMM) or fused (the GEMMs that read the same input, q, k "
                 "and v or gate and up, as one kernel, as engines load "
                 "their weights; docs/serving.md)")
      ->check(CLI::IsMember({"separate", "fused"}))
      ->group(group);
}

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

#endif // STG_TOOLS_COMMON_SERVINGFLAGS_H
