//===- DeploymentSearch.cpp - The best serving deployments ----------------===//
//
// The plans are built one after the other in this thread (GiNaC, which
// binds their expressions, is not thread-safe; a plan costs about 0.1 s
// for Llama-3-70B); the runs, which only read the built cost models, go to
// threads. A unit of work is a group of deployments (an aggregated one, or
// the splits of a pair of prefill and decode plans) at one workload point:
// its deployments in order, each at its batch caps in ascending order.
// When a run's cap never bound, the larger caps of the same cost model
// would replay it exactly, so they are not run (nor listed); a sweep over
// the splits ends once the runs stop improving (SplitSweep).
//
//===----------------------------------------------------------------------===//

#include "stg/Serve/DeploymentSearch.h"
#include "stg/Serve/RequestLengths.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/Sequence.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MathExtras.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <numeric>
#include <thread>

using namespace stg;

namespace {

/// What the search needs of the model, read once.
struct ModelInfo {
  std::string name;
  unsigned layers = 1;
  bool hasExperts = false; ///< Some weight is split over ep.
};

std::optional<ModelInfo> inspectModel(const CompileOptions &base,
                                      DiagnosticEngine &diags) {
  CompileOptions options = base;
  options.mode = "prefill";
  options.degrees.clear();
  options.foldLayers = true;
  options.microbatches = 1;
  std::optional<CompiledModel> compiled = compileModel(options, diags);
  if (!compiled)
    return std::nullopt;
  const Module &module = *compiled->module;
  if (!module.lookupDim("MB")) {
    diags.error(module.getModelLoc(),
                "a serving search sets the sequences of a step through the "
                "dim MB (the micro-batch, as the templates declare `dim B = "
                "MB * dp * ep`); the model declares no MB");
    return std::nullopt;
  }
  ModelInfo info;
  info.name = module.getModel()->getName().str();
  info.layers = std::max(1u, compiled->programs.numLayers);
  module.getModel()->walkValues([&](const Value *value) {
    const Op *def = value->getDefiningOp();
    if (!def || def->getKind() != OpKind::Param)
      return;
    const Distribution &layout = value->getType().getDistribution();
    for (unsigned dim = 0; dim < value->getType().getRank(); ++dim)
      for (const Axis *axis : layout.getPartition(dim))
        if (const Axis *ranks = axis->resolve())
          if (ranks->name == "ep")
            info.hasExperts = true;
  });
  return info;
}

std::vector<unsigned> powersOfTwo(unsigned last) {
  std::vector<unsigned> values;
  for (unsigned value = 1; value <= last; value *= 2)
    values.push_back(value);
  return values;
}

/// The first line of what a DiagnosticEngine printed, without the tool's
/// prefix: a table's reason.
std::string firstLine(llvm::StringRef text) {
  llvm::StringRef line = text.split('\n').first.trim();
  line.consume_front("stage-search: error: ");
  return line.str();
}

class Search {
public:
  Search(const DeploymentSearchOptions &options, const SystemSpec &system,
         DiagnosticEngine &diags)
      : options(options), system(system), diags(diags) {
    caps = options.maxBatches;
    llvm::sort(caps);
    caps.erase(std::unique(caps.begin(), caps.end()), caps.end());
    limits = getSearchLimits(options);
    maxContext = limits.maxContext;
  }

  std::optional<DeploymentTable> run(const DeploymentProgress &progress);

private:
  ServingLimits getLimits(uint64_t cap) const {
    ServingLimits capped = limits;
    capped.maxBatch = cap;
    return capped;
  }
  uint64_t getRequests(size_t point) const {
    return getRunRequests(options, point);
  }
  /// Builds `plan` at the smallest cap and records whether it fits.
  InstancePlanResult tryPlan(const InstancePlan &plan);
  void addPlans(const ModelInfo &info);
  /// The plan's cost model at `cap`: the same at every cap.
  const IterationCostModel *getModel(unsigned plan, uint64_t cap);
  /// One deployment at one cap by one router; the cost models it ran on.
  DeploymentRun runOne(const Deployment &deployment, size_t slot, Router router,
                       const ServingWorkload &workload,
                       const IterationCostModel *&serveCost,
                       const IterationCostModel *&prefillCost) const;
  /// The router that routes the deployment's requests as `router` does at
  /// cap `slot` (stg::getEffectiveRouter, on the pool that prefills).
  Router getEffectiveRouter(const Deployment &deployment, size_t slot,
                            Router router) const;
  /// A group of deployments (Search::groups) at one workload point.
  void runUnit(size_t unit, std::vector<DeploymentRun> &runs,
               size_t &repeated, size_t &skipped) const;

  const DeploymentSearchOptions &options;
  const SystemSpec &system;
  DiagnosticEngine &diags;
  std::vector<uint64_t> caps;
  ServingLimits limits;
  uint64_t maxContext = 0;

  DeploymentTable table;
  std::vector<Deployment> deployments;
  /// The deployments run together: an aggregated one alone, the splits of
  /// a prefill and a decode plan in the order of their prefill instances.
  std::vector<std::vector<unsigned>> groups;
  /// Per plan and cap (caps' order), the plan's cost model; distinct
  /// models are owned by `owned`.
  std::vector<std::vector<const IterationCostModel *>> models;
  /// Why a plan's model did not build at a cap (then null in `models`).
  std::vector<std::vector<std::string>> failures;
  std::vector<std::unique_ptr<IterationCostModel>> owned;
  /// The model tryPlan built at the smallest cap, per plan.
  std::vector<std::unique_ptr<IterationCostModel>> first;
};

} // namespace

InstancePlanResult Search::tryPlan(const InstancePlan &plan) {
  InstancePlanResult result;
  result.plan = plan;
  CompileOptions base = getInstanceOptions(options, plan);
  std::string errors;
  llvm::raw_string_ostream os(errors);
  DiagnosticEngine planDiags(os);
  planDiags.setProgramName("stage-search");
  std::optional<IterationCostModel> model =
      IterationCostModel::build(base, system, getLimits(caps.front()),
                                planDiags);
  if (!model) {
    result.failed = true;
    result.reason = firstLine(os.str());
    first.push_back(nullptr);
    return result;
  }
  result.weightBytes = model->weightBytes;
  result.kvBudgetBytes = model->kvBudget;
  // As simulateServing checks: a sequence reserves whole pages of its
  // tokens, on each pipeline slot's share of the rank's cache.
  double budget = model->kvBudget / model->stages;
  double perToken = model->kvBytes(double(maxContext)) / double(maxContext);
  if (perToken > 0 && budget > 0)
    result.kvTokens = uint64_t(budget / perToken) * model->replicas *
                      model->stages;
  uint64_t block = options.engine.blockTokens;
  double prefillNeed = 0, decodeNeed = 0;
  for (const RequestLengths &lengths : options.lengths) {
    auto need = [&](uint64_t tokens) {
      return model->kvBytes(double((tokens + block - 1) / block * block));
    };
    prefillNeed = std::max(prefillNeed, need(lengths.input + 1));
    decodeNeed = std::max(decodeNeed, need(lengths.input + lengths.output));
  }
  result.fitsPrefill = prefillNeed <= budget;
  result.fitsDecode = decodeNeed <= budget;
  if (!result.fitsDecode)
    result.reason =
        llvm::formatv("a request needs {0:F2} GB of KV cache a rank{1}, "
                      "and {2:F2} GB is left beside the weights and "
                      "activations",
                      decodeNeed / 1e9,
                      result.fitsPrefill ? " (prefill alone fits)" : "",
                      std::max(0.0, budget) / 1e9)
            .str();
  first.push_back(std::make_unique<IterationCostModel>(std::move(*model)));
  return result;
}

void Search::addPlans(const ModelInfo &info) {
  unsigned budget = options.gpus;
  std::vector<unsigned> tps = options.tp;
  if (tps.empty())
    tps = powersOfTwo(std::min(budget, std::max(1u, system.gpusPerNode)));
  std::vector<unsigned> eps = options.ep;
  if (eps.empty())
    eps = info.hasExperts ? powersOfTwo(budget) : std::vector<unsigned>{1};
  for (Precision precision : options.precisions)
    for (bool overlap : options.twoBatchOverlap)
      for (unsigned ep : eps)
        for (unsigned tp : tps) {
          if (uint64_t(tp) * ep > budget || (overlap && ep == 1))
            continue;
          if (!options.pp.empty()) {
            for (unsigned pp : options.pp)
              if (uint64_t(tp) * ep * pp <= budget)
                table.plans.push_back(
                    tryPlan({tp, pp, ep, precision, overlap}));
            continue;
          }
          // As deep a pipeline as memory needs: the least pp at which a
          // whole request fits (a plan the compiler refuses ends the tp).
          for (unsigned pp = 1;
               pp <= info.layers && uint64_t(tp) * ep * pp <= budget; pp *= 2) {
            table.plans.push_back(tryPlan({tp, pp, ep, precision, overlap}));
            if (table.plans.back().fitsDecode || table.plans.back().failed)
              break;
          }
        }
}

const IterationCostModel *Search::getModel(unsigned plan, uint64_t cap) {
  // An instance's cost model does not depend on the batch cap
  // (IterationCost.h): the one built at the smallest cap serves them all.
  size_t slot = llvm::find(caps, cap) - caps.begin();
  std::vector<const IterationCostModel *> &built = models[plan];
  if (!built.front() && first[plan]) {
    owned.push_back(std::move(first[plan]));
    built.front() = owned.back().get();
  }
  failures[plan][slot] = failures[plan].front();
  return built[slot] = built.front();
}

Router Search::getEffectiveRouter(const Deployment &deployment, size_t slot,
                                  Router router) const {
  const PoolChoice &pool =
      deployment.prefill ? *deployment.prefill : deployment.serve;
  const IterationCostModel *model = models[pool.plan][slot];
  return stg::getEffectiveRouter(router, pool.instances,
                                 model ? model->replicas : 1);
}

DeploymentRun Search::runOne(const Deployment &deployment, size_t slot,
                             Router router, const ServingWorkload &workload,
                             const IterationCostModel *&serveCost,
                             const IterationCostModel *&prefillCost) const {
  uint64_t cap = caps[slot];
  DeploymentRun run;
  run.deployment = deployment;
  run.maxBatch = cap;
  run.router = router;
  run.concurrency = workload.concurrency;
  run.requestRate = workload.requestRate;
  run.requests = workload.requests;

  ServingDeployment serving;
  const InstancePlan &servePlan = table.plans[deployment.serve.plan].plan;
  serving.decode.cost = serveCost = models[deployment.serve.plan][slot];
  serving.decode.instances = deployment.serve.instances;
  serving.decode.plan = servePlan.getLabel();
  run.gpus = deployment.serve.instances * servePlan.getGPUs();
  std::string failure = failures[deployment.serve.plan][slot];
  prefillCost = nullptr;
  if (deployment.prefill) {
    const InstancePlan &prefillPlan =
        table.plans[deployment.prefill->plan].plan;
    EnginePool pool;
    pool.cost = prefillCost = models[deployment.prefill->plan][slot];
    pool.instances = deployment.prefill->instances;
    pool.plan = prefillPlan.getLabel();
    serving.prefill = pool;
    run.gpus += deployment.prefill->instances * prefillPlan.getGPUs();
    if (failure.empty())
      failure = failures[deployment.prefill->plan][slot];
  }
  setDeploymentLinks(serving, system);

  ServingEngineSettings settings = options.engine;
  settings.limits = getLimits(cap);
  settings.router = router;
  std::string errors;
  llvm::raw_string_ostream os(errors);
  DiagnosticEngine diags(os);
  diags.setProgramName("stage-search");
  std::optional<ServingResult> result;
  if (failure.empty())
    result = simulateServing(serving, settings, workload, diags);
  if (!result) {
    run.status = RunStatus::Failed;
    run.reason = failure.empty() ? firstLine(os.str()) : failure;
    return run;
  }
  run.summary = summarizeServing(*result, options.warmupRequests,
                                 options.getRequestSLO());
  // The cap held a sequence back only where a replica was at the cap while
  // requests waited: a record shows the engine right after its admissions,
  // with the sequences of all its replicas (at least one replica's).
  run.maxBatchBinding = llvm::any_of(
      result->iterations, [&](const IterationRecord &iteration) {
        return iteration.waiting > 0 && iteration.running >= cap;
      });
  std::optional<std::string> missed = checkSLOs(run.summary, options);
  run.status = missed ? RunStatus::Misses : RunStatus::Meets;
  run.reason = missed.value_or("");
  return run;
}

namespace {

/// One cap's sweep over a pair of pools' splits, fewest prefill instances
/// first. Past the split that balances the pools, each further prefill
/// instance takes a decode instance's GPUs: the same clients on fewer
/// decode instances, slower per GPU and per user, and a longer time per
/// output token (docs/search.md). So a run counts against the sweep when it
/// misses the time-per-token SLO, or when an earlier run of the sweep that
/// meets the SLOs beats it (at least as many tokens/s per GPU and per user,
/// more of one) or it misses an SLO after such a run; `patience` such runs
/// in a row end it.
struct SplitSweep {
  std::vector<const ServingSummary *> meeting;
  unsigned against = 0;
  bool done = false;

  void add(const DeploymentRun &run, const DeploymentSearchOptions &options,
           unsigned patience) {
    const ServingSummary &summary = run.summary;
    bool counts = run.status == RunStatus::Failed;
    if (run.status != RunStatus::Failed && options.maxTPOTMillis)
      counts = summary.slo && options.sloAttainment
                   ? summary.slo->tpot < *options.sloAttainment
                   : getLatencyStatistic(summary.tpot, options.sloStatistic) >
                         *options.maxTPOTMillis;
    if (!meeting.empty())
      counts = counts || run.status != RunStatus::Meets ||
               llvm::any_of(meeting, [&](const ServingSummary *other) {
                 return other->outputTokensPerSecondPerGPU >=
                            summary.outputTokensPerSecondPerGPU &&
                        other->outputTokensPerSecondPerUser >=
                            summary.outputTokensPerSecondPerUser &&
                        (other->outputTokensPerSecondPerGPU >
                             summary.outputTokensPerSecondPerGPU ||
                         other->outputTokensPerSecondPerUser >
                             summary.outputTokensPerSecondPerUser);
               });
    if (run.status == RunStatus::Meets)
      meeting.push_back(&summary);
    against = counts ? against + 1 : 0;
    done = patience && against >= patience;
  }
};

} // namespace

void Search::runUnit(size_t unit, std::vector<DeploymentRun> &runs,
                     size_t &repeated, size_t &skipped) const {
  size_t points = options.concurrencies.size() + options.requestRates.size();
  const std::vector<unsigned> &group = groups[unit / points];
  size_t point = unit % points;

  ServingWorkload workload = getPointWorkload(options, point);

  // The sweeps point into the runs: room for the most this unit makes.
  size_t routers = options.routers.size();
  runs.reserve(group.size() * caps.size() * routers);
  // A sweep a cap and router.
  std::vector<SplitSweep> sweeps(caps.size() * routers);
  unsigned patience =
      group.size() > 1 ? options.splitPatience : 0; // aggregated: one run
  for (unsigned index : group) {
    const Deployment &deployment = deployments[index];
    for (size_t choice = 0; choice < routers; ++choice) {
      const IterationCostModel *lastServe = nullptr, *lastPrefill = nullptr;
      const DeploymentRun *last = nullptr;
      for (size_t slot = 0; slot < caps.size(); ++slot) {
        SplitSweep &sweep = sweeps[slot * routers + choice];
        if (sweep.done) {
          ++skipped;
          last = nullptr;
          continue;
        }
        // A router that routes as an earlier one: that run says it all.
        Router effective =
            getEffectiveRouter(deployment, slot, options.routers[choice]);
        if (llvm::any_of(llvm::seq<size_t>(0, choice), [&](size_t earlier) {
              return getEffectiveRouter(deployment, slot,
                                        options.routers[earlier]) == effective;
            })) {
          ++repeated;
          continue;
        }
        const IterationCostModel *serveCost =
            models[deployment.serve.plan][slot];
        const IterationCostModel *prefillCost =
            deployment.prefill ? models[deployment.prefill->plan][slot]
                               : nullptr;
        // A cap that never held a sequence back, on the same models: the
        // next cap's run would repeat it.
        if (last && last->status != RunStatus::Failed &&
            !last->maxBatchBinding && serveCost == lastServe &&
            prefillCost == lastPrefill) {
          ++repeated;
          sweep.add(*last, options, patience);
          continue;
        }
        runs.push_back(runOne(deployment, slot, options.routers[choice],
                              workload, lastServe, lastPrefill));
        last = &runs.back();
        sweep.add(*last, options, patience);
      }
    }
  }
}

std::optional<DeploymentTable>
Search::run(const DeploymentProgress &progress) {
  if (!system.device.memoryBytes) {
    diags.error({}, "the " + system.device.name +
                        "'s memory is not known (`memory_gb` in its device "
                        "file): serving needs it to size the KV cache");
    return std::nullopt;
  }
  std::optional<ModelInfo> info = inspectModel(options.base, diags);
  if (!info)
    return std::nullopt;
  table.input = options.base.input;
  table.model = info->name;
  table.system = system.name;
  table.accelerator = system.device.name;
  table.gpus = options.gpus;
  table.gpusPerNode = system.gpusPerNode;
  table.deviceMemoryBytes = system.device.memoryBytes;

  addPlans(*info);
  models.assign(table.plans.size(),
                std::vector<const IterationCostModel *>(caps.size()));
  failures.assign(table.plans.size(), std::vector<std::string>(caps.size()));
  deployments = enumerateDeployments(table.plans, options.gpus,
                                     options.aggregated,
                                     options.disaggregated);
  for (const Deployment &deployment : deployments)
    ++(deployment.prefill ? table.disaggregatedDeployments
                          : table.aggregatedDeployments);
  size_t points = options.concurrencies.size() + options.requestRates.size();
  size_t routers = options.routers.size();
  table.candidateRuns = llvm::SaturatingMultiply(
      llvm::SaturatingMultiply(uint64_t(deployments.size()),
                               uint64_t(caps.size()) * routers),
      uint64_t(points));
  if (table.candidateRuns > options.maxRuns) {
    diags.error({}, llvm::formatv("the search has {0} runs ({1} deployments "
                                  "x {2} batch caps x {3} router{4} x {5} "
                                  "workload points), more than the {6} a "
                                  "search takes: narrow it (--tp, --pp, "
                                  "--max-batch, --router, --deployments, "
                                  "fewer points)",
                                  table.candidateRuns, deployments.size(),
                                  caps.size(), routers, routers == 1 ? "" : "s",
                                  points, options.maxRuns)
                        .str());
    return std::nullopt;
  }

  // Every model the deployments use, in this thread, before the runs.
  std::vector<bool> used(table.plans.size());
  for (const Deployment &deployment : deployments) {
    used[deployment.serve.plan] = true;
    if (deployment.prefill)
      used[deployment.prefill->plan] = true;
  }
  for (unsigned plan = 0; plan < table.plans.size(); ++plan)
    if (used[plan])
      for (uint64_t cap : caps)
        getModel(plan, cap);
  first.clear();

  // Aggregated deployments alone; a pair of pools' splits together.
  for (unsigned index = 0; index < deployments.size(); ++index) {
    const Deployment &deployment = deployments[index];
    if (index && deployment.prefill) {
      const Deployment &before = deployments[index - 1];
      if (before.prefill && before.prefill->plan == deployment.prefill->plan &&
          before.serve.plan == deployment.serve.plan) {
        groups.back().push_back(index);
        continue;
      }
    }
    groups.push_back({index});
  }

  // The units with the most requests first, so that no thread is left
  // with a long one at the end; the table keeps the units' order.
  size_t units = groups.size() * points;
  std::vector<size_t> order(units);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return getRequests(a % points) > getRequests(b % points);
  });
  std::vector<std::vector<DeploymentRun>> results(units);
  std::vector<size_t> repeated(units), skipped(units);
  std::atomic<size_t> next{0};
  size_t done = 0;
  std::mutex progressLock;
  auto work = [&] {
    for (size_t taken = next++; taken < units; taken = next++) {
      size_t unit = order[taken];
      runUnit(unit, results[unit], repeated[unit], skipped[unit]);
      std::lock_guard<std::mutex> lock(progressLock);
      done += groups[unit / points].size() * caps.size() * routers;
      if (progress)
        progress(done, table.candidateRuns);
    }
  };
  unsigned threads =
      unsigned(std::min<size_t>(std::max(1u, options.jobs), units));
  std::vector<std::thread> pool;
  for (unsigned index = 1; index < threads; ++index)
    pool.emplace_back(work);
  work();
  for (std::thread &thread : pool)
    thread.join();

  for (size_t unit = 0; unit < units; ++unit) {
    for (DeploymentRun &run : results[unit])
      table.runs.push_back(std::move(run));
    table.repeatedRuns += repeated[unit];
    table.skippedRuns += skipped[unit];
  }
  rankDeployments(table);
  return std::move(table);
}

CompileOptions stg::getInstanceOptions(const DeploymentSearchOptions &options,
                                       const InstancePlan &plan) {
  CompileOptions base = options.base;
  base.degrees = plan.getDegrees();
  if (plan.precision != Precision::BF16)
    base.precision = plan.precision;
  base.twoBatchOverlap = plan.twoBatchOverlap;
  // As --precision fp16 does: tensors in fp16 unless --dtype says.
  if (plan.precision == Precision::FP16 && !options.base.elementType)
    base.elementType = ElementType::FP16;
  return base;
}

ServingLimits stg::getSearchLimits(const DeploymentSearchOptions &options) {
  ServingLimits limits = options.engine.limits;
  limits.maxContext = getLongestContext(options.lengths, options.turns);
  return limits;
}

ServingWorkload stg::getPointWorkload(const DeploymentSearchOptions &options,
                                      size_t point) {
  ServingWorkload workload;
  workload.lengths = options.lengths;
  workload.promptBlocks = options.promptBlocks;
  workload.requests = getRunRequests(options, point);
  workload.seed = options.seed;
  workload.burstiness = options.burstiness;
  workload.sharedPrefix = options.sharedPrefix;
  workload.prefixGroups = options.prefixGroups;
  workload.turns = options.turns;
  workload.thinkMicros = options.thinkMicros;
  if (point < options.concurrencies.size())
    workload.concurrency = options.concurrencies[point];
  else
    workload.requestRate =
        options.requestRates[point - options.concurrencies.size()];
  return workload;
}

uint64_t stg::getRunRequests(const DeploymentSearchOptions &options,
                             size_t point) {
  if (options.requests)
    return *options.requests;
  std::optional<uint64_t> concurrency;
  if (point < options.concurrencies.size())
    concurrency = options.concurrencies[point];
  return getDefaultRequests(concurrency);
}

uint64_t stg::getFewestRequests(const DeploymentSearchOptions &options) {
  uint64_t fewest = UINT64_MAX;
  for (size_t point = 0;
       point < options.concurrencies.size() + options.requestRates.size();
       ++point)
    fewest = std::min(fewest, getRunRequests(options, point));
  return fewest;
}

std::optional<DeploymentTable>
stg::searchDeployments(const DeploymentSearchOptions &options,
                       const SystemSpec &system, DiagnosticEngine &diags,
                       const DeploymentProgress &progress) {
  if (!options.gpus || options.lengths.empty() || options.maxBatches.empty() ||
      options.routers.empty() ||
      (options.concurrencies.empty() && options.requestRates.empty())) {
    diags.error({}, "a serving search needs GPUs, request lengths, batch "
                    "caps, a router and at least one concurrency or request "
                    "rate");
    return std::nullopt;
  }
  uint64_t fewest = getFewestRequests(options);
  if (options.warmupRequests >= fewest) {
    diags.error({}, "--warmup-requests must leave some of each run's "
                    "requests to measure: a run sends " +
                        llvm::Twine(fewest) + " at the least");
    return std::nullopt;
  }
  if (std::optional<std::string> error =
          checkConversationLength(options.lengths, options.turns)) {
    diags.error({}, *error);
    return std::nullopt;
  }
  return Search(options, system, diags).run(progress);
}
