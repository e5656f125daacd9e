//===- DeploymentReplay.h - A search's run, run again -----------*- C++ -*-===//
//
// A deployment search keeps a run's summary, not its iterations and
// requests, which a window of traces is made of (ServingWindow.h). A
// replay runs the run again on its own, as the search ran it: the same
// instance plans, cost models, engine, router and workload point, so the
// same summary, and the compile options of each pool's instance for the
// window. `stage-search --serve --emit-top` writes the best runs' windows
// from their replays.
//
//===----------------------------------------------------------------------===//

#ifndef STG_SERVE_DEPLOYMENTREPLAY_H
#define STG_SERVE_DEPLOYMENTREPLAY_H

#include "stg/Serve/DeploymentSearch.h"

#include <memory>
#include <optional>
#include <vector>

namespace stg {

struct ReplayedRun {
  /// The pools' cost models, which `deployment` points into.
  std::vector<std::unique_ptr<IterationCostModel>> models;
  ServingDeployment deployment;
  ServingResult result;
  ServingSummary summary;
  /// What compiles an instance of the pool that decodes (aggregated: that
  /// serves both phases), and of the prefill pool when disaggregated.
  CompileOptions instance;
  std::optional<CompileOptions> prefillInstance;
};

/// Runs `run` of `table` again. A plan whose cost model does not build or
/// a run that fails reports to `diags`.
std::optional<ReplayedRun>
replayDeploymentRun(const DeploymentTable &table, const DeploymentRun &run,
                    const DeploymentSearchOptions &options,
                    const SystemSpec &system, DiagnosticEngine &diags);

} // namespace stg

#endif // STG_SERVE_DEPLOYMENTREPLAY_H
