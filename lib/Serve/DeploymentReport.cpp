//===- DeploymentReport.cpp - A deployment search's files and summary -----===//
//
// deployments.json (the search's inputs, the instance plans and every run,
// for scripts and `stage-plot serving`), deployments.csv (one row a run)
// and the printed summary. The same table gives the same bytes.
//
//===----------------------------------------------------------------------===//

#include "stg/Serve/DeploymentSearch.h"
#include "stg/Serve/RequestLengths.h"

#include "stg/Support/Version.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

using namespace stg;

static const InstancePlan &getPlan(const DeploymentTable &table,
                                   const PoolChoice &pool) {
  return table.plans[pool.plan].plan;
}

/// What a label adds after a plan: ` fp8` for a precision other than bf16,
/// ` tbo` for two-batch overlap.
static std::string getRecipeSuffix(const InstancePlan &plan) {
  std::string suffix;
  if (plan.precision != Precision::BF16)
    (suffix += ' ') += getPrecisionName(plan.precision);
  if (plan.twoBatchOverlap)
    suffix += " tbo";
  return suffix;
}

static std::string getPoolLabel(const DeploymentTable &table,
                                const PoolChoice &pool) {
  return std::to_string(pool.instances) + "x" +
         getPlan(table, pool).getLabel();
}

std::string stg::getDeploymentLabel(const DeploymentTable &table,
                                    const Deployment &deployment) {
  std::string label;
  if (deployment.prefill)
    label = getPoolLabel(table, *deployment.prefill) + " -> ";
  label += getPoolLabel(table, deployment.serve);
  return label + getRecipeSuffix(getPlan(table, deployment.serve));
}

std::string stg::getStagecFlags(const DeploymentTable &table,
                                const DeploymentRun &run,
                                const DeploymentSearchOptions &options) {
  std::string flags;
  llvm::raw_string_ostream os(flags);
  os << "--mode serve --system " << table.system;
  const CompileOptions &base = options.base;
  for (const std::string &dir : base.includeDirs)
    os << " -I " << dir;
  for (const auto &[name, value] : base.overrides)
    os << " --set " << name << "=" << value;
  if (base.elementType)
    os << " --dtype " << getElementTypeName(*base.elementType);
  if (base.kvCacheType)
    os << " --kv-cache-dtype " << getElementTypeName(*base.kvCacheType);
  if (base.weightPrecision)
    os << " --weight-precision " << getPrecisionName(*base.weightPrecision)
       << (base.weightPrecisionExpertsOnly ? " --weight-precision-scope experts"
                                           : "");
  if (base.fusedLinearKernels)
    os << " --linear-kernels fused";
  if (base.deepEpMode != CompileOptions::DeepEpMode::Off)
    os << " --deepep-mode " << getDeepEpModeName(base.deepEpMode)
       << " --deepep-sms " << base.deepEpUnits;
  if (options.lengthsFile.empty())
    os << " --isl " << options.lengths.front().input << " --osl "
       << options.lengths.front().output;
  else
    os << " --lengths " << options.lengthsFile;
  const Deployment &deployment = run.deployment;
  const InstancePlan &serve = getPlan(table, deployment.serve);
  if (deployment.prefill) {
    os << " --prefill-pool " << getPoolLabel(table, *deployment.prefill)
       << " --decode-pool " << getPoolLabel(table, deployment.serve);
  } else {
    for (const auto &[axis, degree] : serve.getDegrees())
      os << " --" << axis << " " << degree;
    os << " --instances " << deployment.serve.instances;
  }
  if (serve.precision != Precision::BF16)
    os << " --precision " << getPrecisionName(serve.precision);
  if (serve.twoBatchOverlap)
    os << " --two-batch-overlap";
  os << " --max-batch " << run.maxBatch;
  // The engine's settings always: stagec's defaults may change.
  const ServingEngineSettings &engine = options.engine;
  os << " --max-batched-tokens " << engine.limits.maxBatchedTokens;
  if (engine.limits.freeMemoryFraction)
    os << " --kv-free-memory-fraction "
       << formatShortest(*engine.limits.freeMemoryFraction);
  else
    os << " --kv-memory-fraction "
       << formatShortest(engine.limits.memoryFraction);
  os << " --kv-block-tokens " << engine.blockTokens
     << " --iteration-overhead-us "
     << formatShortest(engine.iterationOverheadMicros);
  if (engine.kvAllocation != KVAllocation::Reserve)
    os << " --kv-allocation " << getKVAllocationName(engine.kvAllocation);
  if (!engine.chunkedPrefill)
    os << " --chunked-prefill off";
  if (!engine.mixedBatches)
    os << " --mixed-batches off";
  if (engine.limits.wholeWindowCaches)
    os << " --kv-window-cache whole";
  if (run.router != Router::Load)
    os << " --router " << getRouterName(run.router);
  if (run.router == Router::KVAware)
    os << " --kv-overlap-weight " << formatShortest(engine.kvOverlapWeight);
  if (const CacheAwareRouting &rule = engine.cacheAware;
      run.router == Router::CacheAware)
    os << " --cache-threshold " << formatShortest(rule.cacheThreshold)
       << " --balance-abs-threshold " << rule.balanceAbsolute
       << " --balance-rel-threshold " << formatShortest(rule.balanceRelative);
  if (options.sharedPrefix)
    os << " --shared-prefix " << options.sharedPrefix;
  if (options.prefixGroups > 1)
    os << " --prefix-groups " << options.prefixGroups;
  if (options.turns > 1)
    os << " --turns " << options.turns << " --think-time-ms "
       << formatShortest(options.thinkMicros / 1e3);
  if (engine.offloadBytes > 0)
    os << " --kv-offload-gb " << formatShortest(engine.offloadBytes / 1e9);
  if (uint64_t tokens = options.promptBlocks.tokens;
      tokens && tokens != DefaultTraceBlockTokens)
    os << " --trace-block-tokens " << tokens;
  if ((options.sharedPrefix || options.turns > 1 ||
       !options.promptBlocks.empty()) &&
      !engine.prefixCaching)
    os << " --prefix-caching off";
  if (const SpeculativeDecoding &speculation = engine.speculation;
      speculation.draftTokens)
    os << " --speculative-tokens " << speculation.draftTokens
       << " --acceptance-rate " << formatShortest(speculation.acceptance)
       << " --draft-layers " << speculation.draftLayers;
  if (run.concurrency)
    os << " --concurrency " << *run.concurrency;
  else
    os << " --request-rate " << formatShortest(*run.requestRate);
  if (options.requests)
    os << " --requests " << *options.requests;
  if (options.warmupRequests)
    os << " --warmup-requests " << options.warmupRequests;
  if (options.sloAttainment) {
    // stagec reports the share of its requests within the same bounds.
    if (options.maxTTFTMillis)
      os << " --slo-ttft-ms " << formatShortest(*options.maxTTFTMillis);
    if (options.maxTPOTMillis)
      os << " --slo-tpot-ms " << formatShortest(*options.maxTPOTMillis);
  }
  if (run.requestRate && options.burstiness != 1)
    os << " --burstiness " << formatShortest(options.burstiness);
  if (run.requestRate && options.seed)
    os << " --seed " << options.seed;
  return os.str();
}

static const char *getStatusName(RunStatus status) {
  switch (status) {
  case RunStatus::Meets:
    return "meets";
  case RunStatus::Misses:
    return "misses";
  case RunStatus::Failed:
    return "failed";
  }
  return "failed";
}

static void addPool(llvm::json::Object &row, llvm::StringRef prefix,
                    const DeploymentTable &table, const PoolChoice &pool) {
  const InstancePlan &plan = getPlan(table, pool);
  row[(prefix + "instances").str()] = int64_t(pool.instances);
  row[(prefix + "plan").str()] = plan.getLabel();
  row[(prefix + "tp").str()] = int64_t(plan.tp);
  row[(prefix + "pp").str()] = int64_t(plan.pp);
  row[(prefix + "ep").str()] = int64_t(plan.ep);
}

static llvm::json::Value getRunJSON(const DeploymentTable &table,
                                    const DeploymentRun &run,
                                    const DeploymentSearchOptions &options) {
  const Deployment &deployment = run.deployment;
  const InstancePlan &serve = getPlan(table, deployment.serve);
  llvm::json::Object row{
      {"status", getStatusName(run.status)},
      {"pareto", run.pareto},
      {"kind", deployment.prefill ? "disaggregated" : "aggregated"},
      {"deployment", getDeploymentLabel(table, deployment)},
      {"gpus", int64_t(run.gpus)},
      {"precision", getPrecisionName(serve.precision)},
      {"two_batch_overlap", serve.twoBatchOverlap},
      {"max_batch", int64_t(run.maxBatch)},
      {"max_batch_binding", run.maxBatchBinding},
      {"router", getRouterName(run.router)},
      {"requests", int64_t(run.requests)},
      {"stagec", getStagecFlags(table, run, options)}};
  addPool(row, "", table, deployment.serve);
  if (deployment.prefill)
    addPool(row, "prefill_", table, *deployment.prefill);
  if (run.rank)
    row["rank"] = int64_t(run.rank);
  if (!run.reason.empty())
    row["reason"] = run.reason;
  if (run.concurrency)
    row["concurrency"] = int64_t(*run.concurrency);
  else if (std::isfinite(*run.requestRate))
    row["request_rate"] = *run.requestRate;
  else
    row["request_rate"] = "inf";
  if (run.status != RunStatus::Failed) {
    const ServingSummary &summary = run.summary;
    row["ttft_ms"] = getLatencyJSON(summary.ttft);
    row["queue_ms"] = getLatencyJSON(summary.queue);
    row["tpot_ms"] = getLatencyJSON(summary.tpot);
    row["e2e_latency_ms"] = getLatencyJSON(summary.e2e);
    row["duration_s"] = summary.durationSeconds;
    row["iterations"] = int64_t(summary.iterations);
    row["requests_per_s"] = summary.requestsPerSecond;
    row["output_tokens_per_s"] = summary.outputTokensPerSecond;
    row["output_tokens_per_s_per_gpu"] = summary.outputTokensPerSecondPerGPU;
    row["output_tokens_per_s_per_user"] = summary.outputTokensPerSecondPerUser;
    if (summary.slo)
      row["slo_attainment"] = summary.slo->attainment;
    row["mean_batch"] = summary.meanBatch;
    row["mean_kv_cache_used"] = summary.meanKVUsed;
    row["peak_kv_cache_used"] = summary.peakKVUsed;
  }
  return row;
}

void stg::writeDeploymentsJSON(llvm::raw_ostream &os,
                               const DeploymentTable &table,
                               const DeploymentSearchOptions &options) {
  llvm::json::Object workload;
  if (options.lengthsFile.empty()) {
    workload["input_tokens"] = int64_t(options.lengths.front().input);
    workload["output_tokens"] = int64_t(options.lengths.front().output);
  } else {
    workload["lengths_file"] = options.lengthsFile;
    workload["lengths_in_file"] = int64_t(options.lengths.size());
    if (!options.promptBlocks.empty())
      workload["trace_block_tokens"] = int64_t(options.promptBlocks.tokens);
  }
  llvm::json::Array points;
  if (!options.concurrencies.empty()) {
    for (uint64_t clients : options.concurrencies)
      points.push_back(int64_t(clients));
    workload["concurrency"] = std::move(points);
  } else {
    for (double rate : options.requestRates)
      points.push_back(std::isfinite(rate) ? llvm::json::Value(rate)
                                           : llvm::json::Value("inf"));
    workload["request_rate"] = std::move(points);
  }
  workload["warmup_requests"] = int64_t(options.warmupRequests);
  workload["shared_prefix"] = int64_t(options.sharedPrefix);
  workload["prefix_groups"] = int64_t(options.prefixGroups);
  workload["turns"] = int64_t(options.turns);
  workload["think_time_ms"] = options.thinkMicros / 1e3;
  if (!options.requestRates.empty()) {
    workload["seed"] = int64_t(options.seed);
    workload["burstiness"] = options.burstiness;
  }
  if (options.requests)
    workload["requests"] = int64_t(*options.requests);
  else
    workload["requests"] = options.concurrencies.empty()
                               ? "1000"
                               : "10 x concurrency, at least 100";

  llvm::json::Array caps;
  for (uint64_t cap : options.maxBatches)
    caps.push_back(int64_t(cap));
  llvm::json::Object engine = getEngineSettingsJSON(options.engine);
  engine["max_batch"] = std::move(caps);
  // Each run's router is its own.
  engine.erase("router");
  llvm::json::Array routers;
  for (Router router : options.routers)
    routers.push_back(getRouterName(router));
  engine["routers"] = std::move(routers);
  const CompileOptions &base = options.base;
  engine["linear_kernels"] = base.fusedLinearKernels ? "fused" : "separate";
  engine["deepep_mode"] = getDeepEpModeName(base.deepEpMode);
  engine["deepep_sms"] = int64_t(base.deepEpUnits);
  engine["kv_cache_dtype"] =
      base.kvCacheType
          ? llvm::json::Value(getElementTypeName(*base.kvCacheType))
          : llvm::json::Value("the model's");
  if (base.weightPrecision)
    engine["weight_precision"] = llvm::json::Object{
        {"format", getPrecisionName(*base.weightPrecision)},
        {"scope", base.weightPrecisionExpertsOnly ? "experts" : "all"}};

  llvm::json::Object slo{
      {"statistic", getSLOStatisticName(options.sloStatistic)}};
  if (options.maxTTFTMillis)
    slo["max_ttft_ms"] = *options.maxTTFTMillis;
  if (options.maxTPOTMillis)
    slo["max_tpot_ms"] = *options.maxTPOTMillis;
  if (options.sloAttainment)
    slo["attainment"] = *options.sloAttainment;

  llvm::json::Array plans;
  for (const InstancePlanResult &result : table.plans) {
    const InstancePlan &plan = result.plan;
    llvm::json::Object entry{{"plan", plan.getLabel()},
                             {"precision", getPrecisionName(plan.precision)},
                             {"two_batch_overlap", plan.twoBatchOverlap},
                             {"tp", int64_t(plan.tp)},
                             {"pp", int64_t(plan.pp)},
                             {"ep", int64_t(plan.ep)},
                             {"gpus", int64_t(plan.getGPUs())},
                             {"status", result.failed        ? "failed"
                                        : result.fitsDecode  ? "fits"
                                        : result.fitsPrefill ? "prefill-only"
                                                             : "over-memory"}};
    if (!result.failed) {
      entry["weight_bytes"] = int64_t(result.weightBytes);
      entry["kv_cache_bytes"] = result.kvBudgetBytes;
      entry["kv_cache_tokens"] = int64_t(result.kvTokens);
    }
    if (!result.reason.empty())
      entry["reason"] = result.reason;
    plans.push_back(std::move(entry));
  }

  uint64_t counts[3] = {0, 0, 0}, front = 0;
  llvm::json::Array runs;
  for (const DeploymentRun &run : table.runs) {
    ++counts[unsigned(run.status)];
    front += run.pareto;
    runs.push_back(getRunJSON(table, run, options));
  }
  llvm::json::Object document{
      {"generator", "stage-search"},
      {"generator_version", getToolVersion()},
      {"search", "serve"},
      {"input", table.input},
      {"model", table.model},
      {"gpus", int64_t(table.gpus)},
      {"system",
       llvm::json::Object{{"name", table.system},
                          {"accelerator", table.accelerator},
                          {"gpus_per_node", int64_t(table.gpusPerNode)},
                          {"memory_bytes", int64_t(table.deviceMemoryBytes)}}},
      {"workload", std::move(workload)},
      {"engine", std::move(engine)},
      {"slo", std::move(slo)},
      {"instance_plans", std::move(plans)},
      {"counts",
       llvm::json::Object{
           {"aggregated_deployments", int64_t(table.aggregatedDeployments)},
           {"disaggregated_deployments",
            int64_t(table.disaggregatedDeployments)},
           {"candidate_runs", int64_t(table.candidateRuns)},
           {"repeated_runs", int64_t(table.repeatedRuns)},
           {"skipped_runs", int64_t(table.skippedRuns)},
           {"runs", int64_t(table.runs.size())},
           {"meet", int64_t(counts[unsigned(RunStatus::Meets)])},
           {"miss", int64_t(counts[unsigned(RunStatus::Misses)])},
           {"failed", int64_t(counts[unsigned(RunStatus::Failed)])},
           {"pareto", int64_t(front)}}},
      {"deployments", std::move(runs)}};
  os << llvm::formatv("{0:2}", llvm::json::Value(std::move(document))) << "\n";
}

/// A CSV cell: quoted when it holds a comma, a quote or a line break.
static std::string csvCell(llvm::StringRef text) {
  if (text.find_first_of(",\"\n\r") == llvm::StringRef::npos)
    return text.str();
  std::string quoted = "\"";
  for (char c : text) {
    if (c == '"')
      quoted += '"';
    quoted += c;
  }
  return quoted + "\"";
}

void stg::writeDeploymentsCSV(llvm::raw_ostream &os,
                              const DeploymentTable &table) {
  os << "rank,pareto,status,kind,deployment,gpus,instances,plan,"
        "prefill_instances,prefill_plan,precision,two_batch_overlap,max_batch,"
        "max_batch_binding,router,concurrency,request_rate,requests,"
        "ttft_ms_mean,ttft_ms_p50,ttft_ms_p90,ttft_ms_p99,"
        "tpot_ms_mean,tpot_ms_p50,tpot_ms_p90,tpot_ms_p99,e2e_latency_ms_p50,"
        "output_tokens_per_s_per_gpu,output_tokens_per_s_per_user,"
        "output_tokens_per_s,requests_per_s,mean_batch,peak_kv_cache_used,"
        "reason\n";
  auto number = [&](double value) { os << llvm::format("%.4f", value); };
  for (const DeploymentRun &run : table.runs) {
    const Deployment &deployment = run.deployment;
    if (run.rank)
      os << run.rank;
    os << "," << (run.pareto ? "true" : "false") << ","
       << getStatusName(run.status) << ","
       << (deployment.prefill ? "disaggregated" : "aggregated") << ","
       << csvCell(getDeploymentLabel(table, deployment)) << "," << run.gpus
       << "," << deployment.serve.instances << ","
       << getPlan(table, deployment.serve).getLabel() << ",";
    if (deployment.prefill)
      os << deployment.prefill->instances << ","
         << getPlan(table, *deployment.prefill).getLabel();
    else
      os << ",";
    const InstancePlan &serve = getPlan(table, deployment.serve);
    os << "," << getPrecisionName(serve.precision) << ","
       << (serve.twoBatchOverlap ? "true" : "false") << "," << run.maxBatch
       << "," << (run.maxBatchBinding ? "true" : "false") << ","
       << getRouterName(run.router) << ",";
    if (run.concurrency)
      os << *run.concurrency << ",";
    else
      os << "," << formatShortest(*run.requestRate);
    os << "," << run.requests;
    if (run.status == RunStatus::Failed) {
      os << std::string(15, ',');
    } else {
      const ServingSummary &summary = run.summary;
      for (const LatencySummary *latency : {&summary.ttft, &summary.tpot})
        for (double value :
             {latency->mean, latency->p50, latency->p90, latency->p99}) {
          os << ",";
          number(value);
        }
      for (double value :
           {summary.e2e.p50, summary.outputTokensPerSecondPerGPU,
            summary.outputTokensPerSecondPerUser,
            summary.outputTokensPerSecond, summary.requestsPerSecond,
            summary.meanBatch, summary.peakKVUsed}) {
        os << ",";
        number(value);
      }
    }
    os << "," << csvCell(run.reason) << "\n";
  }
}

static std::string describePoints(const DeploymentSearchOptions &options) {
  std::vector<std::string> points;
  for (uint64_t clients : options.concurrencies)
    points.push_back(std::to_string(clients));
  for (double rate : options.requestRates)
    points.push_back(formatShortest(rate));
  if (!options.concurrencies.empty())
    return "concurrency " + llvm::join(points, ",");
  return "request rate " + llvm::join(points, ",") + " /s";
}

void stg::printDeploymentSummary(llvm::raw_ostream &os,
                                 const DeploymentTable &table,
                                 const DeploymentSearchOptions &options,
                                 unsigned top) {
  os << table.model << " served on " << table.gpus << " GPUs of "
     << table.system << ": ";
  if (options.lengthsFile.empty())
    os << options.lengths.front().input << " input and "
       << options.lengths.front().output << " output tokens";
  else
    os << "the lengths of " << options.lengthsFile;
  os << ", " << describePoints(options) << "\n";

  std::string fit, left;
  for (const InstancePlanResult &result : table.plans) {
    std::string label = result.plan.getLabel() + getRecipeSuffix(result.plan);
    if (result.fitsDecode || result.fitsPrefill)
      fit += (fit.empty() ? "" : ", ") + label +
             (result.fitsDecode ? "" : " (prefill only)");
    if (!result.fitsDecode)
      left += "    " + label + ": " + result.reason + "\n";
  }
  os << "  instance plans: " << table.plans.size() << " built, "
     << (fit.empty() ? std::string("none") : fit) << " hold a request\n"
     << left;
  uint64_t counts[3] = {0, 0, 0}, front = 0;
  for (const DeploymentRun &run : table.runs) {
    ++counts[unsigned(run.status)];
    front += run.pareto;
  }
  os << "  deployments: " << table.aggregatedDeployments << " aggregated, "
     << table.disaggregatedDeployments << " disaggregated; "
     << options.maxBatches.size() << " batch cap"
     << (options.maxBatches.size() == 1 ? "" : "s");
  if (options.routers.size() > 1) {
    os << "; routers";
    for (Router router : options.routers)
      os << (router == options.routers.front() ? " " : ", ")
         << getRouterName(router);
  }
  os << "\n";
  os << "  runs: " << table.runs.size() << " of " << table.candidateRuns;
  if (table.repeatedRuns || table.skippedRuns)
    os << "; left out: " << table.repeatedRuns
       << (options.routers.size() > 1
               ? " that another run repeats (a smaller cap's that never "
                 "bound, an earlier router's that routes alike), "
               : " that a smaller cap's run repeats (it never bound), ")
       << table.skippedRuns << " past a split sweep's end";
  os << "\n";
  os << "  SLO: ";
  if (!options.maxTTFTMillis && !options.maxTPOTMillis) {
    os << "none";
  } else {
    // Per-request bounds name no statistic.
    std::string name =
        options.sloAttainment
            ? ""
            : (getSLOStatisticName(options.sloStatistic) + " ").str();
    if (options.maxTTFTMillis)
      os << "ttft " << name << "<= " << formatShortest(*options.maxTTFTMillis)
         << " ms";
    if (options.maxTTFTMillis && options.maxTPOTMillis)
      os << ", ";
    if (options.maxTPOTMillis)
      os << "tpot " << name << "<= " << formatShortest(*options.maxTPOTMillis)
         << " ms";
    if (options.sloAttainment)
      os << llvm::formatv(" for {0} % of requests",
                          formatShortest(100 * *options.sloAttainment));
  }
  os << ": " << counts[unsigned(RunStatus::Meets)] << " meet, "
     << counts[unsigned(RunStatus::Misses)] << " miss, "
     << counts[unsigned(RunStatus::Failed)] << " failed; " << front
     << " on the Pareto front\n";
  if (!counts[unsigned(RunStatus::Meets)] || !top)
    return;

  llvm::StringRef name = getSLOStatisticName(options.sloStatistic);
  // Per-request SLOs: a column of the share of each run's requests within.
  bool attainment = options.sloAttainment.has_value();
  auto header = [&] {
    os << llvm::formatv("\n {0,4} {1,10} {2,11} {3,9} {4,9} ", "rank",
                        "tok/s/GPU", "tok/s/user", ("ttft " + name).str(),
                        ("tpot " + name).str());
    if (attainment)
      os << llvm::formatv("{0,6} ", "slo %");
    os << llvm::formatv("{0,6} {1,6} {2,5}  {3}\n",
                        options.concurrencies.empty() ? "rate" : "conc", "cap",
                        "GPUs", "deployment");
  };
  auto line = [&](const DeploymentRun &run) {
    const ServingSummary &summary = run.summary;
    std::string point = run.concurrency ? std::to_string(*run.concurrency)
                                        : formatShortest(*run.requestRate);
    std::string cap = std::to_string(run.maxBatch);
    if (!run.maxBatchBinding)
      cap += "+";
    os << llvm::formatv(
        " {0,4} {1,10:F1} {2,11:F1} {3,9:F1} {4,9:F2} ", run.rank,
        summary.outputTokensPerSecondPerGPU,
        summary.outputTokensPerSecondPerUser,
        getLatencyStatistic(summary.ttft, options.sloStatistic),
        getLatencyStatistic(summary.tpot, options.sloStatistic));
    if (attainment)
      os << llvm::formatv("{0,6:F1} ",
                          summary.slo ? 100 * summary.slo->attainment : 0.0);
    std::string label = getDeploymentLabel(table, run.deployment);
    if (options.routers.size() > 1)
      label += ", router " + getRouterName(run.router).str();
    os << llvm::formatv("{0,6} {1,6} {2,5}  {3}{4}\n", point, cap, run.gpus,
                        label, run.pareto ? "  *" : "");
  };
  header();
  unsigned shown = 0;
  for (const DeploymentRun &run : table.runs) {
    if (run.status != RunStatus::Meets || shown++ == top)
      break;
    line(run);
  }
  os << "\n Pareto front (* above), by tokens/s per GPU:";
  header();
  for (const DeploymentRun &run : table.runs)
    if (run.pareto)
      line(run);
}
