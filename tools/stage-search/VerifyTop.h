//===- VerifyTop.h - The best plans, simulated by ASTRA-sim -------*- C++ -*-===//
//
// `stage-search --verify-top K --astra-sim PATH`: the best K plans' trace
// sets (as --emit-top writes them, with the ASTRA-sim configs stagec
// writes) run through ASTRA-sim's analytical backend, one after another;
// each simulated step (the last rank to finish) beside stagec's estimate,
// and the order ASTRA-sim puts them in. A second opinion on the ranking
// from a simulator that replays every rank's graph.
//
//===----------------------------------------------------------------------===//

#ifndef STG_TOOLS_STAGE_SEARCH_VERIFYTOP_H
#define STG_TOOLS_STAGE_SEARCH_VERIFYTOP_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <CLI/CLI.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace stg {

/// `--emit-top K`, `--verify-top K`, `--astra-sim PATH`,
/// `--astra-sim-timeout S`: the best of a search written into -o, and run
/// through ASTRA-sim.
struct TopFlags {
  unsigned emitTop = 0;
  unsigned verifyTop = 0, astraSimTimeout = 1800;
  std::string astraSim;
};

/// Declares the flags in `group`; `what` names what is written of each of
/// the best K: "traces" or "window".
void addTopFlags(CLI::App &app, TopFlags &flags, llvm::StringRef what,
                 const char *group);

/// The first problem of the flags, with -o given or not; resolves
/// --astra-sim to the binary, and --verify-top K implies --emit-top K.
std::optional<std::string> checkTopFlags(TopFlags &flags, bool hasOutput);

/// Creates DIR/rank-K for the K-th best: where to write it (absolute) and
/// where to say it is (under the output directory's target).
llvm::Error createRankDirectory(llvm::StringRef directory,
                                llvm::StringRef target, unsigned rank,
                                std::string &path, std::string &shown);

/// One plan's trace set, as --emit-top wrote it.
struct EmittedPlan {
  unsigned rank = 0;      ///< Its rank in the search.
  std::string label;      ///< The plan, as plans.csv names it.
  std::string directory;  ///< DIR/rank-K (while -o is being written).
  std::string prefix;     ///< The trace files' prefix.
  unsigned ranks = 0;     ///< The trace set's ranks.
  double stepMicros = 0;  ///< stagec's estimate.
};

/// The ASTRA-sim binary `path` names: the binary itself, or a directory
/// that holds `bin/AstraSim_Analytical_Congestion_Unaware` (as
/// ../shared/astra-sim does). An error says what was looked for.
llvm::Expected<std::string> findAstraSim(llvm::StringRef path);

/// ASTRA-sim's time of `plan`'s trace set, in nanoseconds (the last rank's
/// finish), its log in the set's astra-sim.log; fails unless every rank
/// finishes within `timeoutSeconds`.
llvm::Expected<uint64_t> simulateTraceSet(const EmittedPlan &plan,
                                          llvm::StringRef simulator,
                                          unsigned timeoutSeconds);

/// Runs `simulator` on each plan's trace set (its log in DIR/rank-K/
/// astra-sim.log, at most `timeoutSeconds` each), prints the comparison to
/// `os` and writes `verify.json` into `directory`. Fails if ASTRA-sim does
/// not finish every rank of a set.
llvm::Error verifyTopPlans(llvm::ArrayRef<EmittedPlan> plans,
                           llvm::StringRef simulator,
                           llvm::StringRef directory, unsigned timeoutSeconds,
                           llvm::raw_ostream &os);

} // namespace stg

#endif // STG_TOOLS_STAGE_SEARCH_VERIFYTOP_H
