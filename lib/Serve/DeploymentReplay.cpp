//===- DeploymentReplay.cpp - A search's run, run again -------------------===//
//
// The search builds each plan's cost model once, at its smallest batch cap,
// and shares it across caps (a model does not depend on the cap); a replay
// builds the run's plans at the run's cap, which gives the same models.
//
//===----------------------------------------------------------------------===//

#include "stg/Serve/DeploymentReplay.h"

#include "stg/Serve/ServingReport.h"

#include "llvm/ADT/STLExtras.h"

using namespace stg;

/// The run's workload point: its concurrency's index, or its request
/// rate's after the concurrencies.
static std::optional<size_t> findPoint(const DeploymentSearchOptions &options,
                                       const DeploymentRun &run) {
  if (run.concurrency) {
    auto found = llvm::find(options.concurrencies, *run.concurrency);
    if (found != options.concurrencies.end())
      return size_t(found - options.concurrencies.begin());
    return std::nullopt;
  }
  for (size_t index = 0; index < options.requestRates.size(); ++index)
    if (run.requestRate && options.requestRates[index] == *run.requestRate)
      return options.concurrencies.size() + index;
  return std::nullopt;
}

std::optional<ReplayedRun>
stg::replayDeploymentRun(const DeploymentTable &table, const DeploymentRun &run,
                         const DeploymentSearchOptions &options,
                         const SystemSpec &system, DiagnosticEngine &diags) {
  std::optional<size_t> point = findPoint(options, run);
  if (!point) {
    diags.error({}, "the run's workload point is not among the search's");
    return std::nullopt;
  }
  ServingEngineSettings settings = options.engine;
  settings.limits = getSearchLimits(options);
  settings.limits.maxBatch = run.maxBatch;
  settings.router = run.router;

  ReplayedRun replay;
  auto price = [&](const PoolChoice &pool,
                   CompileOptions &instance) -> std::optional<EnginePool> {
    const InstancePlan &plan = table.plans[pool.plan].plan;
    instance = getInstanceOptions(options, plan);
    std::optional<IterationCostModel> model =
        IterationCostModel::build(instance, system, settings.limits, diags);
    if (!model)
      return std::nullopt;
    replay.models.push_back(
        std::make_unique<IterationCostModel>(std::move(*model)));
    return EnginePool{replay.models.back().get(), pool.instances,
                      plan.getLabel()};
  };
  const Deployment &deployment = run.deployment;
  std::optional<EnginePool> decode = price(deployment.serve, replay.instance);
  if (!decode)
    return std::nullopt;
  replay.deployment.decode = *decode;
  if (deployment.prefill) {
    replay.prefillInstance.emplace();
    replay.deployment.prefill =
        price(*deployment.prefill, *replay.prefillInstance);
    if (!replay.deployment.prefill)
      return std::nullopt;
  }
  setDeploymentLinks(replay.deployment, system);

  std::optional<ServingResult> result = simulateServing(
      replay.deployment, settings, getPointWorkload(options, *point), diags);
  if (!result)
    return std::nullopt;
  replay.result = std::move(*result);
  replay.summary = summarizeServing(replay.result, options.warmupRequests,
                                    options.getRequestSLO());
  return replay;
}
