//===- ServeEmit.h - The best serving runs' windows as traces ---*- C++ -*-===//
//
// `stage-search --serve --emit-top K` writes the best K runs' serving
// windows into DIR/rank-1/ .. rank-K/, each what `stagec` writes for the
// run's command (its `stagec` flags in deployments.json) with `-o`: the
// run replayed (DeploymentReplay.h), its window's traces, comm groups,
// manifest and ASTRA-sim configs. `--verify-top K` runs ASTRA-sim on them
// and prints each window's time beside stagec's estimate.
//
//===----------------------------------------------------------------------===//

#ifndef STG_TOOLS_STAGE_SEARCH_SERVEEMIT_H
#define STG_TOOLS_STAGE_SEARCH_SERVEEMIT_H

#include "VerifyTop.h"

#include "stg/Perf/System.h"
#include "stg/Serve/DeploymentSearch.h"

#include <atomic>

namespace stg {

/// Writes the windows of `count` iterations of the best runs of `table`
/// (rank 1 to `count`) under `directory` (shown as `target`); says what it
/// wrote in `emitted`.
llvm::Error emitTopWindows(const DeploymentTable &table,
                           const DeploymentSearchOptions &options,
                           const SystemSpec &system, unsigned count,
                           unsigned iterations, llvm::StringRef directory,
                           llvm::StringRef target,
                           const std::atomic<bool> *cancel,
                           std::vector<EmittedPlan> &emitted);

/// ASTRA-sim on each window (at most `timeoutSeconds` each): its time
/// beside stagec's estimate printed to `os` and written to `verify.json`
/// in `directory`.
llvm::Error verifyTopWindows(llvm::ArrayRef<EmittedPlan> windows,
                             llvm::StringRef simulator,
                             llvm::StringRef directory, unsigned timeoutSeconds,
                             llvm::raw_ostream &os);

} // namespace stg

#endif // STG_TOOLS_STAGE_SEARCH_SERVEEMIT_H
