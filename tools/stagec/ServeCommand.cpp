//===- ServeCommand.cpp - `stagec --mode serve` ---------------------------===//

#include "ServeCommand.h"
#include "ServeTraces.h"

#include "CommandLine.h"
#include "ServingFlags.h"
#include "SideFiles.h"

#include "stg/Emit/Manifest.h"
#include "stg/Emit/Timeline.h"
#include "stg/Perf/DeviceModel.h"
#include "stg/Serve/RequestLengths.h"
#include "stg/Serve/ServingReport.h"
#include "stg/Serve/ServingWindow.h"
#include "stg/Support/Version.h"

#include "CLI/CLI.hpp"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <memory>
#include <tuple>

using namespace stg;

namespace {

/// `--prefill-pool 2xtp4ep2`: instances and the degrees of each.
struct PoolSpec {
  unsigned instances = 1;
  std::vector<std::pair<std::string, unsigned>> degrees;
  std::string plan;
};

constexpr uint64_t MaxServeRequests = 10'000'000;
constexpr unsigned MaxInstances = 4096;

std::optional<PoolSpec> parsePoolSpec(llvm::StringRef text) {
  PoolSpec spec;
  auto [count, plan] = text.split('x');
  if (count.getAsInteger(10, spec.instances) || spec.instances < 1 ||
      spec.instances > MaxInstances || plan.empty())
    return std::nullopt;
  spec.plan = plan.str();
  while (!plan.empty()) {
    llvm::StringRef axis = plan.take_front(2);
    if (axis != "tp" && axis != "pp" && axis != "ep" && axis != "dp")
      return std::nullopt;
    plan = plan.drop_front(2);
    llvm::StringRef digits = plan.take_while(llvm::isDigit);
    plan = plan.drop_front(digits.size());
    unsigned degree = 0;
    if (digits.empty() || digits.getAsInteger(10, degree) || degree < 1 ||
        degree > 1u << 20)
      return std::nullopt;
    if (degree > 1)
      spec.degrees.push_back({axis.str(), degree});
  }
  return spec;
}

std::string describePlan(
    const std::vector<std::pair<std::string, unsigned>> &degrees) {
  std::string plan;
  for (const auto &[axis, degree] : degrees)
    plan += axis + std::to_string(degree);
  return plan.empty() ? "tp1" : plan;
}

const char *const PoolFormat =
    "COUNTxPLAN: instances, then tp, pp, ep or dp degrees, as 2xtp4 or "
    "1xtp8ep8";

} // namespace

void stg::addServeFlags(CLI::App &app, ServeFlags &flags) {
  const char *group = "Serving (--mode serve; docs/serving.md)";
  app.add_option("--isl", flags.inputTokens, "input tokens of each request")
      ->check(wholeNumber(1, MaxRequestTokens))
      ->group(group);
  app.add_option("--osl", flags.outputTokens, "output tokens of each request")
      ->check(wholeNumber(1, MaxRequestTokens))
      ->group(group);
  app.add_option("--lengths", flags.lengths,
                 "CSV of the requests' `input,output` tokens, one a line, "
                 "used in turn (instead of --isl and --osl); with an "
                 "arrival column (arrival_s, arrival_ms, timestamp; Azure's "
                 "traces), a trace the requests arrive by; or JSON lines as "
                 "Mooncake's traces (timestamp in ms, input_length, "
                 "output_length, hash_ids: the prompt's blocks)")
      ->type_name("FILE")
      ->group(group);
  addTraceBlockOption(app, flags.traceBlockTokens, group);
  app.add_option("--arrival-speedup", flags.arrivalSpeedup,
                 "a trace's arrival times divided by this: 2 sends its "
                 "requests twice as fast (default 1)")
      ->check(finiteNumber(1e-3, 1e6))
      ->group(group);
  app.add_option("--concurrency", flags.concurrency,
                 "clients, each sending its next request when its last one "
                 "finished")
      ->check(wholeNumber(1, 1'000'000))
      ->group(group);
  app.add_option("--request-rate", flags.requestRate,
                 "requests per second, Poisson arrivals from --seed; inf: "
                 "all at once")
      ->check(requestRate())
      ->group(group);
  addBurstinessOption(app, flags.burstiness, group);
  app.add_option("--requests", flags.requests,
                 "requests to send (default: 10 x --concurrency, at least "
                 "100; 1000 with --request-rate)")
      ->check(wholeNumber(1, MaxServeRequests))
      ->group(group);
  app.add_option("--warmup-requests", flags.warmupRequests,
                 "the first N requests run but are not measured: the "
                 "steady state, as genai-perf measures it (default 0)")
      ->check(wholeNumber(0, MaxServeRequests))
      ->group(group);
  app.add_option("--max-batch", flags.maxBatch,
                 "sequences running at once on an attention replica "
                 "(max_num_seqs; default 256)")
      ->check(wholeNumber(1, 1'000'000))
      ->group(group);
  app.add_option("--max-batched-tokens", flags.maxBatchedTokens,
                 "decode and prefill tokens of one iteration on a replica: "
                 "the chunked-prefill budget (default 8192)")
      ->check(wholeNumber(1, MaxRequestTokens))
      ->group(group);
  addKVMemoryOptions(app, flags.kvMemoryFraction, flags.kvFreeMemoryFraction,
                     group);
  app.add_option("--kv-block-tokens", flags.kvBlockTokens,
                 "tokens of a KV cache page (default 16)")
      ->check(wholeNumber(1, 65536))
      ->group(group);
  app.add_option("--iteration-overhead-us", flags.iterationOverheadMicros,
                 "the engine's own time per iteration: scheduling, inputs, "
                 "sampling (default 1500, fitted: docs/serving.md)")
      ->check(finiteNumber(0, 1e6))
      ->group(group);
  addKVAllocationOption(app, flags.kvAllocation, group);
  addChunkedPrefillOption(app, flags.chunkedPrefill, group);
  addMixedBatchesOption(app, flags.mixedBatches, group);
  addWindowCacheOption(app, flags.wholeWindowCaches, group);
  addRouterOptions(app, flags.router, false, flags.kvOverlapWeight,
                   flags.cacheAware, group);
  addPrefixCachingOptions(app, flags.prefixCaching, group);
  addSpeculationOptions(app, flags.speculation, group);
  app.add_option("--instances", flags.instances,
                 "copies of the plan (--tp, --pp, --ep, --dp), each serving "
                 "both phases")
      ->check(wholeNumber(1, MaxInstances))
      ->group(group);
  app.add_option("--prefill-pool", flags.prefillPool,
                 "disaggregated: the prefill engines, " +
                     std::string(PoolFormat))
      ->group(group);
  app.add_option("--decode-pool", flags.decodePool,
                 "disaggregated: the decode engines, as --prefill-pool")
      ->group(group);
  for (auto [flag, bound, what] :
       {std::tuple("--slo-ttft-ms", &flags.sloTTFTMs, "time to first token"),
        std::tuple("--slo-tpot-ms", &flags.sloTPOTMs, "time per output token"),
        std::tuple("--slo-e2e-ms", &flags.sloE2EMs, "end-to-end latency")})
    app.add_option(flag, *bound,
                   std::string("a request's ") + what +
                       " that meets the SLO, in ms: the report gives the "
                       "share of requests within every bound given and the "
                       "goodput, those requests a second")
        ->check(finiteNumber(1e-3, 1e9))
        ->group(group);
  app.add_option("--window", flags.window,
                 "with -o: iterations of the serving window written as "
                 "traces (default 8; docs/serving.md)")
      ->check(wholeNumber(1, MaxWindowIterations))
      ->group(group);
}

std::optional<std::string> stg::checkServeFlags(const CLI::App &app,
                                                const StagecOptions &options) {
  const ServeFlags &flags = options.serve;
  bool serve = options.compile.mode == "serve";
  static const char *const serveOnly[] = {"--isl",
                                          "--osl",
                                          "--lengths",
                                          "--concurrency",
                                          "--request-rate",
                                          "--burstiness",
                                          "--arrival-speedup",
                                          "--trace-block-tokens",
                                          "--requests",
                                          "--warmup-requests",
                                          "--max-batch",
                                          "--max-batched-tokens",
                                          "--kv-memory-fraction",
                                          "--kv-free-memory-fraction",
                                          "--kv-block-tokens",
                                          "--kv-allocation",
                                          "--chunked-prefill",
                                          "--mixed-batches",
                                          "--kv-window-cache",
                                          "--router",
                                          "--kv-overlap-weight",
                                          "--cache-threshold",
                                          "--balance-abs-threshold",
                                          "--balance-rel-threshold",
                                          "--shared-prefix",
                                          "--prefix-groups",
                                          "--turns",
                                          "--think-time-ms",
                                          "--kv-offload-gb",
                                          "--prefix-caching",
                                          "--iteration-overhead-us",
                                          "--speculative-tokens",
                                          "--acceptance-rate",
                                          "--draft-layers",
                                          "--instances",
                                          "--prefill-pool",
                                          "--decode-pool",
                                          "--slo-ttft-ms",
                                          "--slo-tpot-ms",
                                          "--slo-e2e-ms",
                                          "--window"};
  if (!serve) {
    for (const char *flag : serveOnly)
      if (app.count(flag))
        return std::string(flag) + " needs --mode serve";
    return std::nullopt;
  }
  bool fixed = app.count("--isl") || app.count("--osl");
  if (fixed == !flags.lengths.empty())
    return std::string("--mode serve needs the requests' lengths: --isl and "
                       "--osl, or --lengths FILE.csv");
  if (fixed && !(app.count("--isl") && app.count("--osl")))
    return std::string("--isl and --osl go together");
  // A --lengths file with an arrival column is the third way; runServe
  // checks what the file holds.
  if (flags.concurrency && !flags.requestRate.empty())
    return std::string("--concurrency and --request-rate are two ways for "
                       "the requests to arrive: give one");
  if (fixed && !flags.concurrency && flags.requestRate.empty())
    return std::string("--mode serve needs one of --concurrency N (clients) "
                       "and --request-rate R (requests/s)");
  if (app.count("--burstiness") && flags.requestRate.empty())
    return std::string("--burstiness shapes the gaps of --request-rate");
  if (app.count("--arrival-speedup") && fixed)
    return std::string("--arrival-speedup needs a --lengths file with an "
                       "arrival column");
  if (app.count("--trace-block-tokens") && fixed)
    return std::string("--trace-block-tokens needs a --lengths trace whose "
                       "prompts name their blocks (hash_ids)");
  if (options.system.empty() && options.device.empty())
    return std::string("--mode serve needs --system or --device: it times "
                       "iterations");
  if (app.count("--window") && options.outputDir.empty())
    return std::string("--window needs -o DIR: it sizes the traces written");
  if (!options.perturb.empty())
    return std::string("--perturb does not apply to --mode serve");
  if (std::optional<std::string> error =
          checkSpeculationOptions(app, flags.speculation))
    return error;
  if (std::optional<std::string> error =
          checkPrefixCachingOptions(app, flags.prefixCaching))
    return error;
  if (std::optional<std::string> error =
          checkRouterOptions(app, parseRouters(flags.router)))
    return error;
  if (flags.speculation.draftTokens && !options.outputDir.empty())
    return std::string("-o: the serving window's traces run plain decode "
                       "steps; speculative decoding is estimated only "
                       "(--report, --report-json)");
  bool pools = !flags.prefillPool.empty() || !flags.decodePool.empty();
  if (pools) {
    if (flags.prefillPool.empty() || flags.decodePool.empty())
      return std::string("a disaggregated deployment needs both "
                         "--prefill-pool and --decode-pool");
    if (app.count("--instances") || !options.compile.degrees.empty())
      return std::string("with --prefill-pool and --decode-pool, each pool "
                         "gives its own plan: no --instances, --tp, --pp, "
                         "--ep or --dp");
    for (const std::string *pool : {&flags.prefillPool, &flags.decodePool})
      if (!parsePoolSpec(*pool))
        return (pool == &flags.prefillPool ? "--prefill-pool "
                                           : "--decode-pool ") +
               *pool + ": expected " + PoolFormat;
  }
  for (const auto &[axis, degree] : options.compile.degrees)
    if (axis == "cp")
      return std::string("--cp: context parallelism is not modelled in "
                         "serving");
  return std::nullopt;
}

namespace {

/// What is wrong with how the requests arrive, now that the --lengths
/// file (if any) said whether it is a trace of arrivals.
std::optional<std::string> checkArrivalFlags(const ServeFlags &flags,
                                             bool trace) {
  bool loop = flags.concurrency || !flags.requestRate.empty();
  if (trace && loop)
    return "--lengths " + flags.lengths +
           " gives each request's arrival: no --concurrency or "
           "--request-rate";
  if (!trace && !loop)
    return std::string("--mode serve needs one of --concurrency N (clients) "
                       "and --request-rate R (requests/s), or a --lengths "
                       "file with an arrival column");
  if (!trace && flags.arrivalSpeedup != 1)
    return "--arrival-speedup: --lengths " + flags.lengths +
           " has no arrival column";
  if (trace && flags.prefixCaching.turns > 1)
    return std::string("--turns: a trace's lines are single requests, each "
                       "arriving when the file says");
  return std::nullopt;
}

/// The cluster the deployment runs on: --system, or --device as one
/// scale-up domain of `ranks`.
std::optional<SystemSpec> loadServeSystem(const StagecOptions &options,
                                          unsigned ranks,
                                          DiagnosticEngine &diags) {
  if (!options.system.empty()) {
    llvm::Expected<SystemSpec> loaded = loadSystem(options.system);
    if (!loaded) {
      diags.error({}, "--system: " + llvm::toString(loaded.takeError()));
      return std::nullopt;
    }
    return std::move(*loaded);
  }
  llvm::Expected<DeviceSpec> loaded = loadDevice(options.device);
  if (!loaded) {
    diags.error({}, "--device: " + llvm::toString(loaded.takeError()));
    return std::nullopt;
  }
  return makeSingleDomainSystem(*loaded, ranks);
}

} // namespace

int stg::runServe(const StagecOptions &options, DiagnosticEngine &diags) {
  const ServeFlags &flags = options.serve;
  if (failed(checkSideFile(options, "--report-json", options.reportJson,
                           ReportJsonMarker, diags)) ||
      failed(checkSideFile(options, "--timeline", options.timeline,
                           TimelineMarker, diags)) ||
      failed(checkServeOutput(options, diags)))
    return 1;

  ServingWorkload workload;
  if (!flags.lengths.empty()) {
    std::optional<RequestTrace> trace = loadRequestTrace(
        flags.lengths, diags,
        flags.traceBlockTokens.value_or(DefaultTraceBlockTokens));
    if (!trace)
      return 1;
    if (std::optional<std::string> error = checkPromptBlocks(
            trace->blocks, flags.lengths, flags.traceBlockTokens,
            flags.prefixCaching, flags.kvBlockTokens)) {
      diags.error({}, *error);
      return 1;
    }
    workload.lengths = std::move(trace->lengths);
    workload.arrivals = std::move(trace->arrivals);
    workload.promptBlocks = std::move(trace->blocks);
  } else {
    workload.lengths = {{flags.inputTokens, flags.outputTokens}};
  }
  if (std::optional<std::string> error =
          checkArrivalFlags(flags, !workload.arrivals.empty())) {
    diags.error({}, *error);
    return 1;
  }
  workload.seed = options.seed.value_or(0);
  if (flags.concurrency) {
    workload.concurrency = flags.concurrency;
    workload.requests =
        flags.requests.value_or(getDefaultRequests(flags.concurrency));
  } else if (!flags.requestRate.empty()) {
    workload.requestRate = parseRequestRate(flags.requestRate);
    workload.burstiness = flags.burstiness;
    workload.requests =
        flags.requests.value_or(getDefaultRequests(std::nullopt));
  } else {
    for (double &arrival : workload.arrivals)
      arrival /= flags.arrivalSpeedup;
    if (double span = workload.arrivals.back() / 1e6;
        span > MaxArrivalSpanSeconds) {
      diags.error({}, llvm::formatv("--arrival-speedup: {0} then spans "
                                    "{1:e} s, past the {2:e} s a run may span",
                                    flags.lengths, span, MaxArrivalSpanSeconds)
                          .str());
      return 1;
    }
    workload.requests = flags.requests.value_or(workload.arrivals.size());
    if (workload.requests > workload.arrivals.size()) {
      diags.error({}, llvm::formatv("--requests {0}: {1} holds {2}, each sent "
                                    "once at its time",
                                    workload.requests, flags.lengths,
                                    workload.arrivals.size())
                          .str());
      return 1;
    }
  }
  if (flags.warmupRequests >= workload.requests) {
    diags.error({}, "--warmup-requests " + llvm::Twine(flags.warmupRequests) +
                        " leaves none of the " +
                        llvm::Twine(workload.requests) +
                        " requests to measure; give more --requests");
    return 1;
  }

  // The deployment's plans.
  std::optional<PoolSpec> prefillSpec;
  PoolSpec decodeSpec;
  if (!flags.prefillPool.empty()) {
    prefillSpec = parsePoolSpec(flags.prefillPool);
    decodeSpec = *parsePoolSpec(flags.decodePool);
  } else {
    decodeSpec.instances = flags.instances;
    decodeSpec.degrees = options.compile.degrees;
  }
  unsigned largest = 1;
  for (const PoolSpec *spec : {prefillSpec ? &*prefillSpec : nullptr,
                               &decodeSpec}) {
    if (!spec)
      continue;
    unsigned gpus = 1;
    for (const auto &[axis, degree] : spec->degrees)
      gpus *= degree;
    largest = std::max(largest, gpus);
  }
  std::optional<SystemSpec> system = loadServeSystem(options, largest, diags);
  if (!system)
    return 1;
  if (std::optional<std::string> error =
          checkOffloadLink(flags.prefixCaching.offloadGB > 0, *system)) {
    diags.error({}, *error);
    return 1;
  }
  if (options.compile.precision &&
      !system->device.supports(*options.compile.precision)) {
    diags.error({}, (options.system.empty() ? "--device " + options.device
                                            : "--system " + options.system) +
                        ": the " + system->device.name + " has no " +
                        getPrecisionName(*options.compile.precision) +
                        " unit, which the recipe's GEMMs run in (--precision)");
    return 1;
  }

  ServingEngineSettings settings;
  ServingLimits &limits = settings.limits;
  limits.maxBatch = flags.maxBatch;
  limits.maxBatchedTokens = flags.maxBatchedTokens;
  limits.memoryFraction = flags.kvMemoryFraction;
  limits.freeMemoryFraction = flags.kvFreeMemoryFraction;
  limits.wholeWindowCaches = flags.wholeWindowCaches;
  settings.blockTokens = flags.kvBlockTokens;
  settings.iterationOverheadMicros = flags.iterationOverheadMicros;
  settings.speculation = flags.speculation;
  settings.kvAllocation = *parseKVAllocation(flags.kvAllocation);
  settings.chunkedPrefill = flags.chunkedPrefill;
  settings.mixedBatches = flags.mixedBatches;
  settings.router = parseRouters(flags.router).front();
  settings.kvOverlapWeight = flags.kvOverlapWeight;
  settings.cacheAware = flags.cacheAware;
  applyPrefixCachingOptions(flags.prefixCaching, workload.sharedPrefix,
                            workload.prefixGroups, workload.turns,
                            workload.thinkMicros, settings);
  if (std::optional<std::string> error =
          checkConversationLength(workload.lengths, workload.turns)) {
    diags.error({}, *error);
    return 1;
  }
  limits.maxContext = getLongestContext(workload.lengths, workload.turns);

  std::vector<std::unique_ptr<IterationCostModel>> models;
  std::vector<CompileOptions> bases; // Each pool's, for the traces (-o).
  auto price = [&](const PoolSpec &spec) -> std::optional<EnginePool> {
    CompileOptions base = options.compile;
    base.degrees = spec.degrees;
    bases.push_back(base);
    std::optional<IterationCostModel> model =
        IterationCostModel::build(base, *system, limits, diags);
    if (!model)
      return std::nullopt;
    models.push_back(std::make_unique<IterationCostModel>(std::move(*model)));
    EnginePool pool;
    pool.cost = models.back().get();
    pool.instances = spec.instances;
    pool.plan = describePlan(spec.degrees);
    return pool;
  };
  ServingDeployment deployment;
  std::optional<EnginePool> decodePool = price(decodeSpec);
  if (!decodePool)
    return 1;
  deployment.decode = *decodePool;
  if (prefillSpec) {
    deployment.prefill = price(*prefillSpec);
    if (!deployment.prefill)
      return 1;
  }
  setDeploymentLinks(deployment, *system);
  // A window's two instances share one mesh: whether they can, before the
  // run.
  if (!options.outputDir.empty() && deployment.prefill) {
    const IterationCostModel &prefill = *deployment.prefill->cost;
    const IterationCostModel &decode = *deployment.decode.cost;
    llvm::Expected<PairMesh> pair =
        buildPairMesh({&prefill.mesh, prefill.pipelineAxis},
                      {&decode.mesh, decode.pipelineAxis});
    if (!pair) {
      diags.error({}, "-o: " + llvm::toString(pair.takeError()));
      return 1;
    }
  }

  std::optional<ServingResult> result =
      simulateServing(deployment, settings, workload, diags);
  if (!result)
    return 1;
  ServingSLO slo{flags.sloTTFTMs, flags.sloTPOTMs, flags.sloE2EMs};
  ServingSummary summary = summarizeServing(*result, flags.warmupRequests, slo);

  std::string deploymentText =
      deployment.isDisaggregated()
          ? llvm::formatv("prefill {0} x {1}, decode {2} x {3} "
                          "(disaggregated)",
                          deployment.prefill->instances,
                          deployment.prefill->plan,
                          deployment.decode.instances, deployment.decode.plan)
                .str()
          : llvm::formatv("{0} x {1} (aggregated)", deployment.decode.instances,
                          deployment.decode.plan)
                .str();
  if (options.compile.twoBatchOverlap)
    deploymentText += ", two-batch overlap";
  if (const SpeculativeDecoding &speculation = settings.speculation;
      speculation.draftTokens) {
    double p = speculation.acceptance;
    unsigned n = speculation.draftTokens;
    double expected = p < 1 ? (1 - std::pow(p, n + 1)) / (1 - p) : n + 1.0;
    deploymentText += llvm::formatv(
        ", speculative decoding: {0} draft tokens of {1} layer{2} a step, "
        "accepted at {3}: {4:f2} tokens a step on average",
        n, speculation.draftLayers, speculation.draftLayers == 1 ? "" : "s", p,
        expected);
  }
  if (options.report) {
    llvm::outs() << "deployment: " << deploymentText << " on "
                 << system->name << "\n";
    printServingReport(llvm::outs(), summary, *result);
  }

  std::vector<std::unique_ptr<OutputFile>> sideFiles;
  llvm::json::Object engine = getEngineSettingsJSON(settings);
  engine["max_batch"] = int64_t(settings.limits.maxBatch);
  llvm::json::Array given;
  for (const auto &[flag, value] : options.describe())
    given.push_back(llvm::json::Array{flag, value});
  if (failed(createSideFile(
          "--report-json", options.reportJson, ReportJsonMarker,
          [&](llvm::raw_ostream &os) {
            llvm::json::Object report{
                {"kind", "stagec-report"},
                {"tool_version", getToolVersion()},
                {"input", options.compile.input},
                {"options", std::move(given)},
                {"deployment", deploymentText},
                {"system", system->name},
                {"engine", std::move(engine)},
                {"serving", getServingJSON(summary, *result)},
                {"metrics", getServingMetricsJSON(summary)},
                {"metric_units", getServingMetricUnitsJSON()}};
            os << llvm::formatv("{0:2}", llvm::json::Value(std::move(report)))
               << "\n";
          },
          sideFiles, diags)) ||
      failed(createSideFile(
          "--timeline", options.timeline, TimelineMarker,
          [&](llvm::raw_ostream &os) {
            llvm::json::Value timeline = getServingTimeline(*result);
            (*timeline.getAsObject())["kind"] = "stagec-timeline";
            os << timeline << "\n";
          },
          sideFiles, diags)))
    return 1;
  // `bases`: the decode pool's, then the prefill pool's if there is one.
  if (!options.outputDir.empty())
    if (int status = writeServeTraces(
            options, deployment, *result, *system, bases.back(),
            prefillSpec ? &bases.front() : nullptr, diags))
      return status;
  for (const std::unique_ptr<OutputFile> &file : sideFiles)
    if (llvm::Error err = file->commit()) {
      diags.error({}, llvm::toString(std::move(err)));
      return 1;
    }
  return 0;
}
