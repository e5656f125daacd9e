//===- VerifyTop.h - The best plans, written and simulated ----*- C++ -*-===//
//
// `stage-search --emit-top K`: the best K plans' (or serving runs'
// windows') trace sets, each written as stagec -o writes one.
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

#include "stg/Emit/Manifest.h"
#include "stg/Emit/TraceEmitter.h"
#include "stg/Perf/System.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"
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

/// One plan's (or run's window's) trace set, as --emit-top wrote it.
struct EmittedPlan {
  unsigned rank = 0;      ///< Its rank in the search.
  std::string label;      ///< The plan, as plans.csv names it.
  std::string directory;  ///< DIR/rank-K (while -o is being written).
  std::string prefix;     ///< The trace files' prefix.
  unsigned ranks = 0;     ///< The trace set's ranks.
  double stepMicros = 0;  ///< stagec's estimate.
};

/// The manifest's inputs of a trace set --emit-top writes: the model
/// `input`, files named `prefix`, and `options` saying what the set is.
ManifestInputs
getEmittedInputs(llvm::StringRef input, llvm::StringRef prefix,
                 std::vector<std::pair<std::string, std::string>> options);

/// Writes `programs` into DIR/rank-K (`plan.rank`; `directory` shown as
/// `target`), as stagec -o writes a trace set: ASTRA-sim's configs (said in
/// `manifest`), the comm groups, the traces and `manifest`; refuses first
/// if the disk has no room (`diskHint` says what to do). Appends `plan`,
/// its directory, prefix and ranks filled in, to `emitted`.
llvm::Error writeEmittedSet(llvm::StringRef directory, llvm::StringRef target,
                            EmittedPlan plan, const ProgramSet &programs,
                            const SystemSpec &system,
                            const EmitOptions &emitOptions,
                            llvm::json::Value manifest,
                            llvm::StringRef diskHint,
                            std::vector<EmittedPlan> &emitted);

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
