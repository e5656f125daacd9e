//===- ServeSearch.cpp - `stage-search --serve` ---------------------------===//
//
// Reads the flags of a serving search, checks them before any work, runs
// searchDeployments (lib/Serve), prints the best runs and the Pareto front
// and writes deployments.json and deployments.csv into -o, atomically, with
// the best runs' windows as traces (ServeEmit.h) where asked.
//
//===----------------------------------------------------------------------===//

#include "ServeSearch.h"

#include "ServeEmit.h"

#include "CommandLine.h"
#include "PrecisionFlags.h"
#include "ProgressBar.h"
#include "ServingFlags.h"

#include "stg/Emit/OutputDirectory.h"
#include "stg/Serve/DeploymentSearch.h"
#include "stg/Serve/RequestLengths.h"
#include "stg/Serve/ServingWindow.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/Signals.h"
#include "llvm/Support/Threading.h"
#include "llvm/Support/raw_ostream.h"

#include <atomic>
#include <cmath>
#include <optional>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <string>

using namespace stg;

static const char *const Examples = R"(Examples:
  stage-search templates/llama3-70b.stg --serve --gpus 64 --system dgx-h100 \
      --isl 1024 --osl 1024 --concurrency 16,32,64,128,256,512,1024 \
      --max-ttft-ms 2000 --max-tpot-ms 50 -o serving/
      every aggregated and disaggregated deployment of Llama-3-70B on 64
      H100s at seven concurrencies; the best 10 that meet the SLOs and the
      Pareto front printed, serving/deployments.json and .csv written
  stage-search templates/mixtral-8x7b.stg --serve --gpus 16 \
      --system dgx-h100 --isl 2048 --osl 256 --request-rate 5,10,20 \
      --precision bf16,fp8 --deployments aggregated
  stage-search templates/llama3-8b.stg --serve --gpus 8 --system dgx-h100 \
      --isl 512 --osl 64 --concurrency 16,64 --verify-top 3 \
      --astra-sim ../shared/astra-sim -o best/
      the best three runs' windows as traces in best/rank-1 .. rank-3, each
      run through ASTRA-sim beside stagec's estimate

Then draw the front: stage-plot serving serving/deployments.json)";

namespace {

struct ServeSearchFlags {
  DeploymentSearchOptions search;
  std::string system, outputDir;
  uint64_t inputTokens = 0, outputTokens = 0;
  std::vector<std::string> requestRates;
  std::vector<std::string> precisions{"bf16"};
  std::vector<std::string> twoBatchOverlap{"off"};
  std::vector<std::string> routers{"load"};
  std::vector<std::string> deployments{"aggregated", "disaggregated"};
  std::string sloStatistic = "p50";
  unsigned top = 10, jobs = 0;
  bool quiet = false;
  TopFlags best;
  unsigned window = 8; ///< Iterations of each window --emit-top writes.
  PrefixCachingFlags prefixCaching;
  /// `--trace-block-tokens`: what a trace's hash id stands for.
  std::optional<uint64_t> traceBlockTokens;
};

/// Set by an interrupt while -o is written: what was written is removed.
std::atomic<bool> interrupted{false};

int fail(const llvm::Twine &message) {
  llvm::errs() << "stage-search: error: " << message << "\n";
  return 1;
}

/// The flags of a training search, which a serving search does not take.
const char *const TrainingFlags[] = {"--global-batch",
                                     "--max-memory",
                                     "--memory-margin",
                                     "--tp-comm-overlap",
                                     "--cp-comm-type",
                                     "--grad-reduce",
                                     "--memory-accounting",
                                     "--dp",
                                     "--cp",
                                     "--micro-batch",
                                     "--virtual-stages",
                                     "--pipeline-split",
                                     "--recompute",
                                     "--weight-sharding",
                                     "--no-fsdp",
                                     "--sequence-parallel",
                                     "--tp-placement",
                                     "--shard",
                                     "--overlap-param-gather"};

/// What --emit-top and --verify-top need.
std::optional<std::string> checkTraceFlags(const CLI::App &app,
                                           ServeSearchFlags &flags) {
  if (std::optional<std::string> error =
          checkTopFlags(flags.best, !flags.outputDir.empty()))
    return error;
  if (app.count("--window") && !flags.best.emitTop)
    return std::string("--window needs --emit-top K: it sizes the windows "
                       "written");
  if (flags.best.emitTop && flags.search.engine.speculation.draftTokens)
    return std::string("--emit-top: the serving window's traces run plain "
                       "decode steps; speculative decoding is estimated "
                       "only");
  return std::nullopt;
}

/// The flags; an exit status when the program should stop.
std::optional<int> parseFlags(int argc, char **argv, ServeSearchFlags &flags) {
  for (int index = 1; index < argc; ++index) {
    llvm::StringRef flag = llvm::StringRef(argv[index]).split('=').first;
    if (llvm::is_contained(TrainingFlags, flag))
      return fail(flag + " is a flag of the training search; --serve "
                         "searches serving deployments (--serve --help)");
  }
  DeploymentSearchOptions &search = flags.search;
  CLI::App app{"stage-search --serve: the best serving deployments of an "
               "STG model on a GPU budget, aggregated and disaggregated"};
  app.footer(Examples);
  std::vector<std::string> sets;
  std::string dtype;
  bool serve = false;
  app.add_flag("--serve", serve, "search serving deployments")->required();
  app.add_option("input", search.base.input, "the model (.stg)")->required();
  app.add_option("-I", search.base.includeDirs, "import search path");
  app.add_option("--set", sets, "set a dim or option: NAME=VALUE");
  app.add_option("--dtype", dtype, "element type (bf16, fp16, fp32)");
  app.add_option("--gpus", search.gpus,
                 "the GPU budget: a deployment uses at most this many")
      ->required()
      ->check(wholeNumber(1, 1u << 20));
  app.add_option("--system", flags.system,
                 "the cluster: " + getBuiltinSystemNames() + " or a .yaml file")
      ->required();

  const char *workload = "Workload (as stagec --mode serve)";
  app.add_option("--isl", flags.inputTokens, "input tokens of each request")
      ->check(wholeNumber(1, MaxRequestTokens))
      ->group(workload);
  app.add_option("--osl", flags.outputTokens, "output tokens of each request")
      ->check(wholeNumber(1, MaxRequestTokens))
      ->group(workload);
  app.add_option("--lengths", search.lengthsFile,
                 "CSV of the requests' `input,output` tokens, used in turn "
                 "(instead of --isl and --osl), or JSON lines whose prompts "
                 "name their blocks (Mooncake's hash_ids) without timestamps")
      ->type_name("FILE")
      ->group(workload);
  addTraceBlockOption(app, flags.traceBlockTokens, workload);
  app.add_option("--concurrency", search.concurrencies,
                 "clients of the whole deployment, one run each: 16,64,256")
      ->delimiter(',')
      ->check(wholeNumber(1, 1'000'000))
      ->group(workload);
  app.add_option("--request-rate", flags.requestRates,
                 "requests per second (Poisson arrivals; inf: all at once), "
                 "one run each")
      ->delimiter(',')
      ->check(requestRate())
      ->group(workload);
  app.add_option("--requests", search.requests,
                 "requests a run (default: 10 x the concurrency, at least "
                 "100; 1000 at a request rate)")
      ->check(wholeNumber(1, 10'000'000))
      ->group(workload);
  app.add_option("--warmup-requests", search.warmupRequests,
                 "the first N requests of a run run but are not measured "
                 "(default 0)")
      ->check(wholeNumber(0, 10'000'000))
      ->group(workload);
  addBurstinessOption(app, search.burstiness, workload);
  app.add_option("--seed", search.seed,
                 "seeds the arrivals at a request rate (default 0)")
      ->check(wholeNumber(0, UINT64_MAX))
      ->group(workload);

  const char *space = "The deployments (comma-separated lists)";
  app.add_option("--tp", search.tp,
                 "tp degrees of an instance (default: powers of two up to a "
                 "node)")
      ->delimiter(',')
      ->check(wholeNumber(1, 1u << 20))
      ->group(space);
  app.add_option("--pp", search.pp,
                 "pp degrees (default: the least power of two at which an "
                 "instance holds a request)")
      ->delimiter(',')
      ->check(wholeNumber(1, 1u << 20))
      ->group(space);
  app.add_option("--ep", search.ep,
                 "ep degrees (default: 1, or powers of two up to the budget "
                 "for a model with experts)")
      ->delimiter(',')
      ->check(wholeNumber(1, 1u << 20))
      ->group(space);
  app.add_option("--precision", flags.precisions,
                 "recipes: " + getRecipeNames() + " (default bf16)")
      ->delimiter(',')
      ->check(recipeName())
      ->group(space);
  app.add_option("--two-batch-overlap", flags.twoBatchOverlap,
                 "off (default), on, or off,on: instances whose iterations "
                 "run in two overlapped halves (stagec's "
                 "--two-batch-overlap), tried on plans with ep > 1")
      ->delimiter(',')
      ->check(CLI::IsMember({"off", "on"}))
      ->group(space);
  app.add_option("--max-batch", search.maxBatches,
                 "caps on the sequences an attention replica runs at once "
                 "(max_num_seqs; default 256, as stagec)")
      ->delimiter(',')
      ->check(wholeNumber(1, 1'000'000))
      ->group(space);
  bool allSplits = false;
  app.add_flag("--all-splits", allSplits,
               "run every split of a disaggregated pair, not only until the "
               "runs stop improving (docs/search.md)")
      ->group(space);
  app.add_option("--deployments", flags.deployments,
                 "aggregated, disaggregated (default: both)")
      ->delimiter(',')
      ->check(CLI::IsMember({"aggregated", "disaggregated"}))
      ->group(space);

  const char *engine = "The engine (as stagec --mode serve)";
  ServingEngineSettings &settings = search.engine;
  // stagec --mode serve's default (tools/stagec/StagecOptions.h), fitted
  // to measured runs (docs/serving.md).
  settings.iterationOverheadMicros = DefaultIterationOverheadMicros;
  app.add_option("--max-batched-tokens", settings.limits.maxBatchedTokens,
                 "decode and prefill tokens of one iteration on a replica "
                 "(default 8192)")
      ->check(wholeNumber(1, MaxRequestTokens))
      ->group(engine);
  addKVMemoryOptions(app, settings.limits.memoryFraction,
                     settings.limits.freeMemoryFraction, engine);
  app.add_option("--kv-block-tokens", settings.blockTokens,
                 "tokens of a KV cache page (default 16)")
      ->check(wholeNumber(1, 65536))
      ->group(engine);
  WeightPrecisionFlags weightPrecision;
  addWeightPrecisionOptions(app, weightPrecision, engine);
  std::string kvCacheType;
  app.add_option("--kv-cache-dtype", kvCacheType,
                 "the KV cache's element type (bf16, fp16, fp8; default the "
                 "model's)")
      ->check(CLI::IsMember({"bf16", "fp16", "fp8", "fp32"}))
      ->group(engine);
  std::string deepEpMode = "off";
  addDeepEpModeOption(app, deepEpMode,
                      "the experts' all-to-alls: off (default), normal, "
                      "low-latency or auto, as for stagec")
      ->group(engine);
  addDeepEpUnitsOption(app, search.base.deepEpUnits)->group(engine);
  app.add_option("--iteration-overhead-us", settings.iterationOverheadMicros,
                 "the engine's own time per iteration (default 1500, as "
                 "stagec)")
      ->check(finiteNumber(0, 1e6))
      ->group(engine);
  std::string kvAllocation = "reserve";
  addKVAllocationOption(app, kvAllocation, engine);
  addChunkedPrefillOption(app, settings.chunkedPrefill, engine);
  addMixedBatchesOption(app, settings.mixedBatches, engine);
  addWindowCacheOption(app, settings.limits.wholeWindowCaches, engine);
  addRouterOptions(app, flags.routers, true, settings.kvOverlapWeight,
                   settings.cacheAware, engine);
  std::string linearKernels = "separate";
  addLinearKernelsOption(app, linearKernels, engine);
  PrefixCachingFlags &prefixCaching = flags.prefixCaching;
  addPrefixCachingOptions(app, prefixCaching, engine);
  addSpeculationOptions(app, settings.speculation, engine);

  const char *slo = "Service-level objectives";
  std::optional<double> ttft, tpot;
  app.add_option("--max-ttft-ms", ttft, "time to first token, at most")
      ->check(finiteNumber(0, 1e9))
      ->group(slo);
  app.add_option("--max-tpot-ms", tpot, "time per output token, at most")
      ->check(finiteNumber(0, 1e9))
      ->group(slo);
  app.add_option("--slo-statistic", flags.sloStatistic,
                 "which figure of the requests the SLOs bound: mean, p50 "
                 "(default), p90, p99")
      ->check(CLI::IsMember({"mean", "p50", "p90", "p99"}))
      ->group(slo);
  app.add_option("--slo-attainment", search.sloAttainment,
                 "per-request SLOs instead (DistServe's): a run meets them "
                 "when at least this share of its requests is within every "
                 "bound, as 0.9")
      ->check(finiteNumber(1e-3, 1))
      ->group(slo);

  const char *output = "Output";
  app.add_option("--top", flags.top, "runs to print (default 10)")
      ->check(wholeNumber(0, 1000000))
      ->group(output);
  app.add_option("-o", flags.outputDir,
                 "write deployments.json and deployments.csv here")
      ->group(output);
  app.add_option("-j,--jobs", flags.jobs,
                 "threads for the runs (default: one per core)")
      ->check(wholeNumber(0, 1024))
      ->group(output);
  app.add_flag("-q,--quiet", flags.quiet, "no progress bar")->group(output);
  addTopFlags(app, flags.best, "window", output);
  app.add_option("--window", flags.window,
                 "iterations of each window --emit-top writes (default 8)")
      ->check(wholeNumber(1, MaxWindowIterations))
      ->group(output);
  addVersionFlag(app, "stage-search");
  if (std::optional<int> status =
          parseCommandLine(app, "stage-search", argc, argv))
    return *status;

  search.splitPatience = allSplits ? 0 : search.splitPatience;
  // Each sample sets its own mode; the model is read as a served one.
  search.base.mode = "serve";
  if (!kvCacheType.empty())
    search.base.kvCacheType = parseElementType(kvCacheType);
  settings.kvAllocation = *parseKVAllocation(kvAllocation);
  search.base.fusedLinearKernels = linearKernels == "fused";
  if (std::optional<std::string> error =
          applyWeightPrecisionFlags(weightPrecision, search.base))
    return fail(*error);
  search.base.deepEpMode = *parseDeepEpMode(deepEpMode);
  if (std::optional<std::string> error =
          checkDeepEpUnitsOption(app, deepEpMode))
    return fail(*error);
  search.maxTTFTMillis = ttft;
  search.maxTPOTMillis = tpot;
  search.sloStatistic = *parseSLOStatistic(flags.sloStatistic);
  if (search.sloAttainment && !ttft && !tpot)
    return fail("--slo-attainment needs a bound: --max-ttft-ms or "
                "--max-tpot-ms");
  if (search.sloAttainment && app.count("--slo-statistic"))
    return fail("--slo-attainment bounds each request, --slo-statistic a "
                "figure of them all: give one");
  if (std::optional<std::string> error =
          appendAssignments(sets, search.base.overrides))
    return fail(*error);
  if (std::optional<std::string> error =
          applyPrecisionFlags(dtype, "", search.base))
    return fail(*error);

  if (std::optional<std::string> error =
          checkSpeculationOptions(app, settings.speculation))
    return fail(*error);
  search.routers = parseRouters(flags.routers);
  if (std::optional<std::string> error =
          checkRouterOptions(app, search.routers))
    return fail(*error);
  if (std::optional<std::string> error =
          checkPrefixCachingOptions(app, prefixCaching))
    return fail(*error);
  applyPrefixCachingOptions(prefixCaching, search.sharedPrefix,
                            search.prefixGroups, search.turns,
                            search.thinkMicros, settings);
  bool fixed = app.count("--isl") || app.count("--osl");
  if (fixed == !search.lengthsFile.empty())
    return fail("--serve needs the requests' lengths: --isl and --osl, or "
                "--lengths FILE.csv");
  if (fixed && !(app.count("--isl") && app.count("--osl")))
    return fail("--isl and --osl go together");
  if (fixed && flags.traceBlockTokens)
    return fail("--trace-block-tokens needs a --lengths trace whose prompts "
                "name their blocks (hash_ids)");
  if (search.concurrencies.empty() == flags.requestRates.empty())
    return fail("--serve needs one of --concurrency N,... (clients) and "
                "--request-rate R,... (requests/s)");
  for (const std::string &text : flags.requestRates)
    search.requestRates.push_back(parseRequestRate(text));
  for (std::vector<unsigned> *degrees : {&search.tp, &search.pp, &search.ep}) {
    llvm::sort(*degrees);
    degrees->erase(std::unique(degrees->begin(), degrees->end()),
                   degrees->end());
  }
  for (const auto &[axis, degree] : search.base.overrides)
    if (axis == "tp" || axis == "pp" || axis == "ep" || axis == "dp" ||
        axis == "cp")
      return fail("--set " + axis +
                  "=...: the search sets the degrees; "
                  "narrow them with --tp, --pp, --ep");
  search.aggregated = llvm::is_contained(flags.deployments, "aggregated");
  search.disaggregated = llvm::is_contained(flags.deployments, "disaggregated");
  if (fixed)
    search.lengths = {{flags.inputTokens, flags.outputTokens}};
  if (app.count("--seed") && search.requestRates.empty())
    return fail("--seed seeds the arrivals of --request-rate; with "
                "--concurrency there are none");
  if (app.count("--burstiness") && search.requestRates.empty())
    return fail("--burstiness shapes the gaps of --request-rate; with "
                "--concurrency there are none");
  if (std::optional<std::string> error = checkTraceFlags(app, flags))
    return fail(*error);
  uint64_t fewest = getFewestRequests(search);
  if (search.warmupRequests >= fewest)
    return fail("--warmup-requests must leave some of each run's requests "
                "to measure: a run sends " +
                llvm::Twine(fewest) + " at the least");
  return std::nullopt;
}

} // namespace

bool stg::isServeSearch(int argc, char **argv) {
  for (int index = 1; index < argc; ++index)
    if (llvm::StringRef(argv[index]) == "--serve")
      return true;
  return false;
}

int stg::runServeSearch(int argc, char **argv) {
  ServeSearchFlags flags;
  if (std::optional<int> exit = parseFlags(argc, argv, flags))
    return *exit;
  DeploymentSearchOptions &search = flags.search;
  if (!flags.outputDir.empty())
    if (llvm::Error err = OutputDirectory::checkTarget(flags.outputDir))
      return fail(llvm::toString(std::move(err)));

  DiagnosticEngine diags;
  diags.setProgramName("stage-search");
  if (!search.lengthsFile.empty()) {
    std::optional<RequestTrace> trace = loadRequestTrace(
        search.lengthsFile, diags,
        flags.traceBlockTokens.value_or(DefaultTraceBlockTokens));
    if (!trace)
      return 1;
    if (std::optional<std::string> error = checkPromptBlocks(
            trace->blocks, search.lengthsFile, flags.traceBlockTokens,
            flags.prefixCaching, search.engine.blockTokens))
      return fail(*error);
    if (!trace->arrivals.empty())
      return fail("--lengths " + search.lengthsFile +
                  ": the search runs each deployment at the --concurrency "
                  "or --request-rate points; a trace's arrival times are "
                  "for stagec --mode serve");
    search.lengths = std::move(trace->lengths);
    search.promptBlocks = std::move(trace->blocks);
  }
  llvm::Expected<SystemSpec> system = loadSystem(flags.system);
  if (!system)
    return fail("--system: " + llvm::toString(system.takeError()));
  if (std::optional<std::string> error =
          checkOffloadLink(search.engine.offloadBytes > 0, *system))
    return fail(*error);
  search.precisions.clear();
  for (const std::string &name : flags.precisions) {
    Precision precision = *parseRecipe(name);
    if (isLowPrecision(precision) && !system->device.supports(precision))
      return fail("--precision " + name + ": the " + system->device.name +
                  " has no " + name + " unit");
    if (!llvm::is_contained(search.precisions, precision))
      search.precisions.push_back(precision);
  }
  search.twoBatchOverlap.clear();
  for (bool overlap : {false, true})
    if (llvm::is_contained(flags.twoBatchOverlap, overlap ? "on" : "off"))
      search.twoBatchOverlap.push_back(overlap);
  search.jobs = flags.jobs
                    ? flags.jobs
                    : llvm::hardware_concurrency().compute_thread_count();

#if defined(__GLIBC__)
  // A run's records (an iteration each: 10 to 40 MB for a thousand
  // clients) are allocated and freed by the thousand. Kept in the heap
  // rather than mapped and unmapped each time, they cost no page faults,
  // which took a third of the time (a glibc that refuses a threshold this
  // high keeps its own; docs/performance.md).
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
  ProgressBar bar("runs");
  DeploymentProgress progress;
  if (!flags.quiet && llvm::sys::Process::StandardErrIsDisplayed())
    progress = [&bar](size_t done, size_t total) { bar.update(done, total); };
  std::optional<DeploymentTable> table =
      searchDeployments(search, *system, diags, progress);
  if (!table)
    return 1;
  printDeploymentSummary(llvm::outs(), *table, search, flags.top);
  if (flags.outputDir.empty())
    return 0;

  llvm::sys::SetInterruptFunction([] { interrupted = true; });
  auto output = OutputDirectory::create(flags.outputDir);
  if (!output)
    return fail(llvm::toString(output.takeError()));
  for (llvm::StringRef name : {"deployments.json", "deployments.csv"})
    if (llvm::Error err = writeTextFile(
            (*output)->getPath(), name, [&](llvm::raw_ostream &os) {
              if (name.endswith(".json"))
                writeDeploymentsJSON(os, *table, search);
              else
                writeDeploymentsCSV(os, *table);
            })) {
      (*output)->discard();
      return fail(llvm::toString(std::move(err)));
    }
  std::vector<EmittedPlan> emitted;
  if (flags.best.emitTop)
    if (llvm::Error err =
            emitTopWindows(*table, search, *system, flags.best.emitTop,
                           flags.window, (*output)->getPath(),
                           (*output)->getTarget(), &interrupted, emitted)) {
      (*output)->discard();
      return fail(llvm::toString(std::move(err)));
    }
  if (flags.best.verifyTop && !interrupted)
    if (llvm::Error err =
            verifyTopWindows(llvm::ArrayRef<EmittedPlan>(emitted).take_front(
                                 flags.best.verifyTop),
                             flags.best.astraSim, (*output)->getPath(),
                             flags.best.astraSimTimeout, llvm::outs())) {
      (*output)->discard();
      return fail(llvm::toString(std::move(err)));
    }
  if (interrupted) {
    (*output)->discard();
    fail("interrupted");
    return 130;
  }
  if (llvm::Error err = (*output)->commit()) {
    (*output)->discard();
    return fail(llvm::toString(std::move(err)));
  }
  return 0;
}
