//===- stage-search.cpp - The best parallel plan for a model on a cluster -===//
//
// The driver of the plan search: reads the flags, enumerates and prunes the
// plans, evaluates them on every core, ranks those that fit, prints the
// best, and writes plans.json, plans.csv and the traces of the best plans
// into -o. `stage-search merge` ranks the union of shards. The work is in
// lib/Search; this file maps flags to it.
//
//===----------------------------------------------------------------------===//

#include "CommandLine.h"
#include "PrecisionFlags.h"
#include "ProgressBar.h"
#include "ServeSearch.h"
#include "VerifyTop.h"

#include "stg/Emit/Manifest.h"
#include "stg/Emit/OutputDirectory.h"
#include "stg/Emit/TraceEmitter.h"
#include "stg/Perf/DeviceModel.h"
#include "stg/Search/BoundPruning.h"
#include "stg/Search/PlanWorkers.h"
#include "stg/Search/SearchResults.h"
#include "stg/Support/InputFile.h"
#include "stg/Support/Version.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/Signals.h"
#include "llvm/Support/Threading.h"
#include "llvm/Support/Timer.h"
#include "llvm/Support/raw_ostream.h"

#include <atomic>
#include <optional>
#include <string>
#include <thread>

using namespace stg;

static std::atomic<bool> interrupted{false};

static const char *const Examples = R"(Examples:
  stage-search templates/llama3-70b.stg --gpus 1024 --system dgx-h100 \
      --global-batch 1024 -o plans/
      every plan of Llama-3-70B on 1024 H100s; the best 10 printed,
      plans/plans.json and plans/plans.csv written
  stage-search templates/gpt3-175b.stg --gpus 1024 --system dgx-a100 \
      --global-batch 1536 --tp 4,8 --pp 8,16 --no-fsdp --emit-top 2 -o out/
      a narrowed space; the traces of the best two plans in out/rank-1, -2
  stage-search model.stg ... --shard 3/16 -o shard3/    (one of 16 jobs)
  stage-search merge shard*/plans.json -o all/           (their union)
  stage-search MODEL --serve --gpus 64 --system dgx-h100 --isl 1024 \
      --osl 1024 --concurrency 16,64,256 ...              (serving; --serve --help)

Then draw the plans: stage-plot pareto plans/plans.json)";

struct SearchOptions {
  CompileOptions compile;
  std::string system;
  unsigned gpus = 0, globalBatch = 0;
  std::string maxMemory;
  double memoryMargin = 0.1;
  std::array<std::vector<unsigned>, 5> degrees;
  std::vector<unsigned> microBatchSizes, virtualStages;
  std::vector<std::string> recompute{"none", "selective", "full"};
  std::vector<std::string> precisions{"bf16"};
  std::vector<std::string> cpExchanges{"p2p"};
  std::vector<std::string> schedules{"1f1b"};
  std::vector<std::string> sharding{"none", "distributed-optimizer", "fsdp"};
  std::vector<std::string> sequenceParallel{"off", "on"};
  std::vector<std::string> tpPlacement{"node", "outer"};
  std::string pipelineSplit = "auto";
  bool noFSDP = false;
  unsigned top = 10, jobs = 0;
  TopFlags best;
  std::string shard, outputDir;
  bool quiet = false;
  /// --prune-bounds: skip the plans whose bounds rule them out.
  bool pruneBounds = true;
  unsigned pruneBatch = 4096;
  bool timePhases = false;
  unsigned shardIndex = 0, shardCount = 1;
};

/// Parses `80GB`, `141 GB`, `80e9` (bytes) into bytes.
static std::optional<uint64_t> parseBytes(llvm::StringRef text) {
  text = text.trim();
  double scale = 1;
  for (auto [suffix, factor] :
       {std::pair{"TB", 1e12}, {"GB", 1e9}, {"MB", 1e6}, {"B", 1.0}})
    if (text.endswith_insensitive(suffix)) {
      text = text.drop_back(strlen(suffix)).rtrim();
      scale = factor;
      break;
    }
  double value = 0;
  if (text.getAsDouble(value) || !std::isfinite(value) || value <= 0 ||
      value * scale > 1e15)
    return std::nullopt;
  return uint64_t(value * scale);
}

/// Refuses an -o that could not be replaced before the work, not after.
static llvm::Error checkOutput(const SearchOptions &options) {
  return options.outputDir.empty()
             ? llvm::Error::success()
             : OutputDirectory::checkTarget(options.outputDir);
}

/// What `names` parse to (their flags' checks accepted each), each value
/// once, in the order first given.
template <typename Parse>
static auto parseEachOnce(llvm::ArrayRef<std::string> names, Parse parse) {
  std::vector<std::decay_t<decltype(*parse(llvm::StringRef()))>> values;
  for (const std::string &name : names)
    if (!llvm::is_contained(values, *parse(name)))
      values.push_back(*parse(name));
  return values;
}

static int fail(const llvm::Twine &message) {
  llvm::errs() << "stage-search: error: " << message << "\n";
  return 1;
}

/// The flags of a search; an exit status when the program should stop.
static std::optional<int> parseOptions(int argc, char **argv,
                                       SearchOptions &options) {
  CLI::App app{"stage-search: the fastest parallel plans of an STG model on "
               "a cluster"};
  app.footer(Examples);
  std::vector<std::string> sets;
  std::string dtype;
  app.add_option("input", options.compile.input, "the model (.stg)")
      ->required();
  bool serve = false;
  app.add_flag("--serve", serve,
               "search serving deployments instead of training plans: "
               "stage-search --serve --help has its flags");
  app.add_option("-I", options.compile.includeDirs, "import search path");
  app.add_option("--set", sets, "set a dim or option: NAME=VALUE");
  app.add_option("--dtype", dtype, "element type (bf16, fp16, fp32)");
  app.add_option("--gpus", options.gpus, "GPUs to spread the model over")
      ->required()
      ->check(wholeNumber(1, 1u << 20));
  app.add_option("--system", options.system,
                 "the cluster: " + getBuiltinSystemNames() + " or a .yaml file")
      ->required();
  app.add_option("--global-batch", options.globalBatch,
                 "sequences per training step")
      ->required()
      ->check(wholeNumber(1, 1u << 24));
  app.add_option("--max-memory", options.maxMemory,
                 "memory of a GPU, e.g. 80GB (default: the accelerator's)");
  app.add_option("--memory-margin", options.memoryMargin,
                 "share of the memory kept free for the CUDA context, "
                 "communication buffers and fragmentation (default 0.1)")
      ->check(finiteNumber(0, 0.9));
  std::string gradReduce = "overlap", memoryAccounting = "megatron";
  std::string tpCommOverlap = "on";
  std::string overlapParamGather = "on";
  app.add_option("--tp-comm-overlap", tpCommOverlap,
                 "on (default) or off, as for stagec")
      ->check(CLI::IsMember({"on", "off"}));
  std::string deepEpMode = "off";
  addDeepEpModeOption(app, deepEpMode,
                      "the experts' all-to-alls: off (default), normal, "
                      "low-latency or auto, as for stagec");
  addDeepEpUnitsOption(app, options.compile.deepEpUnits);
  app.add_option("--cp-comm-type", options.cpExchanges,
                 "context parallelism's exchanges to try for plans with "
                 "cp > 1: p2p (default), all_gather, a2a, as for stagec")
      ->delimiter(',')
      ->check(CLI::IsMember({"p2p", "all_gather", "a2a"}));
  app.add_option("--schedule", options.schedules,
                 "pipeline schedules to try for plans with pp > 1: 1f1b "
                 "(default; interleaved with virtual stages), zb-h1 (zero "
                 "bubble, one model chunk a stage), zb-v (zero bubble, two "
                 "model chunks a stage in a V), dualpipev (DualPipeV over "
                 "that V, at least 2 x pp micro-batches), dualpipe "
                 "(bidirectional DualPipe: an even pp of at least 4, an "
                 "even count of at least 2 x pp micro-batches), "
                 "combined-1f1b (Megatron-Core's EP A2A overlap, for plans "
                 "with ep > 1, also without pipelining; with pp > 1 "
                 "interleaved), as for stagec")
      ->delimiter(',')
      ->check(CLI::IsMember(
          {"1f1b", "zb-h1", "zb-v", "dualpipev", "dualpipe", "combined-1f1b"}));
  app.add_option("--overlap-param-gather", overlapParamGather,
                 "on (default) or off, as for stagec")
      ->check(CLI::IsMember({"on", "off"}));
  app.add_option("--grad-reduce", gradReduce,
                 "data-parallel gradient reductions: overlap the backward "
                 "(default) or after-backward")
      ->check(CLI::IsMember({"overlap", "after-backward"}));
  app.add_option("--memory-accounting", memoryAccounting,
                 "megatron (fp32 main gradients, default) or zero")
      ->check(CLI::IsMember({"megatron", "zero"}));
  const char *narrow = "Narrowing the space (comma-separated lists)";
  for (size_t index = 0; index < PlanAxes.size(); ++index)
    app.add_option(std::string("--") + PlanAxes[index], options.degrees[index],
                   std::string(PlanAxes[index]) + " degrees to try")
        ->delimiter(',')
        ->check(wholeNumber(1, 1u << 20))
        ->group(narrow);
  app.add_option("--micro-batch", options.microBatchSizes,
                 "micro-batch sizes (sequences per replica)")
      ->delimiter(',')
      ->check(wholeNumber(1, 1u << 24))
      ->group(narrow);
  app.add_option("--virtual-stages", options.virtualStages,
                 "model chunks per pipeline stage")
      ->delimiter(',')
      ->check(wholeNumber(1, 1024))
      ->group(narrow);
  app.add_option("--pipeline-split", options.pipelineSplit,
                 "auto (even, and where the layers do not split evenly over "
                 "pp x virtual stages but the layers + 1 or + 2 do, also with "
                 "Megatron's embedding and/or loss counted as a layer), even, "
                 "or accounted (only those counted splits)")
      ->check(CLI::IsMember({"auto", "even", "accounted"}))
      ->group(narrow);
  app.add_option("--precision", options.precisions,
                 "recipes to try: " + getRecipeNames() +
                     " (default bf16; each needs the accelerator's unit)")
      ->delimiter(',')
      ->check(recipeName())
      ->group(narrow);
  app.add_option("--recompute", options.recompute, "none, selective, full")
      ->delimiter(',')
      ->check(CLI::IsMember({"none", "selective", "full"}))
      ->group(narrow);
  app.add_option("--weight-sharding", options.sharding,
                 "none, distributed-optimizer, fsdp")
      ->delimiter(',')
      ->check(CLI::IsMember({"none", "distributed-optimizer", "fsdp"}))
      ->group(narrow);
  app.add_flag("--no-fsdp", options.noFSDP, "leave FSDP out")->group(narrow);
  app.add_option("--sequence-parallel", options.sequenceParallel, "off, on")
      ->delimiter(',')
      ->check(CLI::IsMember({"off", "on"}))
      ->group(narrow);
  app.add_option("--tp-placement", options.tpPlacement,
                 "node (tp on the fastest ranks), outer (dp, cp, ep inside)")
      ->delimiter(',')
      ->check(CLI::IsMember({"node", "outer"}))
      ->group(narrow);
  const char *output = "Output";
  app.add_option("--top", options.top,
                 "plans to print (default 10), ranked as an exhaustive "
                 "search ranks them")
      ->check(wholeNumber(0, 1000000))
      ->group(output);
  app.add_option("-o", options.outputDir,
                 "write plans.json, plans.csv (and --emit-top traces) here")
      ->group(output);
  addTopFlags(app, options.best, "traces", output);
  app.add_option("--shard", options.shard,
                 "evaluate slice I of N (0-based), for a batch job array")
      ->group(output);
  app.add_option("-j,--jobs", options.jobs,
                 "worker processes (default: one per core)")
      ->check(wholeNumber(0, 1024))
      ->group(output);
  std::string pruneBounds = "on";
  app.add_option("--prune-bounds", pruneBounds,
                 "on (default): do not compile the plans whose memory lower "
                 "bound exceeds the limit or whose step lower bound exceeds "
                 "the best step found; off: compile every plan")
      ->check(CLI::IsMember({"on", "off"}))
      ->group(output);
  app.add_option("--prune-batch", options.pruneBatch,
                 "plans per batch of --prune-bounds (default 4096, the first "
                 "batch a quarter of it): the best step prunes the next "
                 "batches; any -j gives the same plans")
      ->check(wholeNumber(1, 1u << 24))
      ->group(output);
  app.add_flag("-q,--quiet", options.quiet, "no progress bar")->group(output);
  app.add_flag("--time-phases", options.timePhases,
               "print to stderr the time each phase of the search took "
               "(reading the model and its bounds, enumerating, bounding, "
               "evaluating, writing)")
      ->group(output);
  addVersionFlag(app, "stage-search");
  if (std::optional<int> status =
          parseCommandLine(app, "stage-search", argc, argv))
    return *status;
  options.pruneBounds = pruneBounds == "on";
  options.compile.overlapGradientReduction = gradReduce == "overlap";
  options.compile.tensorParallelOverlap = tpCommOverlap == "on";
  options.compile.overlapParamGather = overlapParamGather == "on";
  options.compile.deepEpMode = *parseDeepEpMode(deepEpMode);
  if (std::optional<std::string> error =
          checkDeepEpUnitsOption(app, deepEpMode))
    return fail(*error);
  options.compile.memoryAccounting = *parseMemoryAccounting(memoryAccounting);
  if (std::optional<std::string> error =
          appendAssignments(sets, options.compile.overrides))
    return fail(*error);
  if (std::optional<std::string> error =
          applyPrecisionFlags(dtype, "", options.compile))
    return fail(*error);
  if (!options.shard.empty()) {
    auto [index, count] = llvm::StringRef(options.shard).split('/');
    if (index.getAsInteger(10, options.shardIndex) ||
        count.getAsInteger(10, options.shardCount) || options.shardCount == 0 ||
        options.shardCount > 1000000 ||
        options.shardIndex >= options.shardCount)
      return fail("--shard expects I/N with 0 <= I < N <= 1000000, found '" +
                  options.shard + "'");
  }
  if (std::optional<std::string> error =
          checkTopFlags(options.best, !options.outputDir.empty()))
    return fail(*error);
  if (options.best.verifyTop && options.shardCount > 1)
    return fail("--verify-top ranks the whole search: run it on the "
                "merge's best plans, not on a shard");
  if (options.best.emitTop && options.shardCount > 1)
    return fail("--emit-top ranks the whole search: run it on the merge's "
                "best plans, not on a shard");
  return std::nullopt;
}

/// `dimension N of '%wte' is V = N, ...`: a reason with its numbers
/// replaced, so that plans pruned for one reason count together.
static std::string getReasonKind(llvm::StringRef reason) {
  std::string kind;
  for (size_t i = 0; i < reason.size(); ++i) {
    if (!llvm::isDigit(reason[i])) {
      kind += reason[i];
      continue;
    }
    kind += 'N';
    while (i + 1 < reason.size() && llvm::isDigit(reason[i + 1]))
      ++i;
  }
  return kind;
}

/// Writes the traces of the best `count` plans into DIR/rank-K/, as stagec
/// would write each plan (with its ASTRA-sim configs), and says what it
/// wrote in `emitted`.
static llvm::Error emitTopPlans(const SearchTable &table,
                                const PlanEvaluator &evaluator,
                                const SystemSpec &system,
                                llvm::StringRef directory,
                                llvm::StringRef target, unsigned count,
                                std::vector<EmittedPlan> &emitted) {
  for (const PlanResult &result : table.plans) {
    if (!result.rank || result.rank > count)
      break;
    CompileOptions options = evaluator.getCompileOptions(result.plan);
    std::string errors;
    llvm::raw_string_ostream os(errors);
    DiagnosticEngine diags(os);
    std::optional<CompiledModel> compiled = compileModel(options, diags);
    if (!compiled)
      return llvm::createStringError(std::errc::invalid_argument, "%s",
                                     os.str().c_str());
    applyDeviceModel(compiled->programs, system.device, nullptr);
    const ProgramSet &programs = compiled->programs;
    EmitOptions emitOptions;
    emitOptions.prefix = compiled->module->getModel()->getName().str();
    emitOptions.cancel = &interrupted;
    ManifestInputs inputs = getEmittedInputs(options.input, emitOptions.prefix,
                                             {{"plan", result.plan.getLabel()},
                                              {"rank_order", options.rankOrder},
                                              {"system", table.header.system}});
    llvm::Expected<StepEstimate> estimate = estimateStep(programs, system);
    if (!estimate)
      return estimate.takeError();
    llvm::json::Value manifest = buildManifest(
        *compiled->module, programs, summarize(programs), inputs, &*estimate);
    (*manifest.getAsObject())["system"] = describeSystem(system);
    if (llvm::Error err = writeEmittedSet(
            directory, target,
            {result.rank, result.plan.getLabel(), "", "", 0,
             estimate->stepMicros},
            programs, system, emitOptions, std::move(manifest),
            "emit fewer plans (--emit-top) or choose another -o", emitted))
      return err;
  }
  return llvm::Error::success();
}

/// Writes plans.json, plans.csv and the best plans' traces into -o.
static int writeOutputs(const SearchTable &table, const SearchOptions &options,
                        const PlanEvaluator *evaluator,
                        const SystemSpec *system) {
  llvm::sys::SetInterruptFunction([] { interrupted = true; });
  auto output = OutputDirectory::create(options.outputDir);
  if (!output)
    return fail(llvm::toString(output.takeError()));
  auto discard = [&](llvm::Error err) {
    (*output)->discard();
    fail(llvm::toString(std::move(err)));
    return interrupted ? 130 : 1;
  };
  // The two tables are independent: the CSV is written beside the JSON,
  // on another core, so that it adds no time of its own.
  std::optional<std::string> csvFailure;
  std::thread csvWriter([&] {
    if (llvm::Error err =
            writeTextFile((*output)->getPath(), "plans.csv",
                          [&](llvm::raw_ostream &os) { writeCSV(os, table); }))
      csvFailure = llvm::toString(std::move(err));
  });
  llvm::Error jsonError =
      writeTextFile((*output)->getPath(), "plans.json",
                    [&](llvm::raw_ostream &os) { writeJSON(os, table); });
  csvWriter.join();
  if (jsonError)
    return discard(std::move(jsonError));
  if (csvFailure)
    return discard(llvm::createStringError(std::errc::io_error, "%s",
                                           csvFailure->c_str()));
  std::vector<EmittedPlan> emitted;
  if (options.best.emitTop && evaluator)
    if (llvm::Error err =
            emitTopPlans(table, *evaluator, *system, (*output)->getPath(),
                         (*output)->getTarget(), options.best.emitTop, emitted))
      return discard(std::move(err));
  if (options.best.verifyTop && !interrupted) {
    llvm::ArrayRef<EmittedPlan> best(emitted);
    if (llvm::Error err = verifyTopPlans(
            best.take_front(options.best.verifyTop), options.best.astraSim,
            (*output)->getPath(), options.best.astraSimTimeout, llvm::outs()))
      return discard(std::move(err));
  }
  if (interrupted)
    return discard(
        llvm::createStringError(std::errc::interrupted, "interrupted"));
  if (llvm::Error err = (*output)->commit())
    return discard(std::move(err));
  return 0;
}

/// `stage-search merge A.json B.json ... [-o DIR] [--top N]`.
static int runMerge(int argc, char **argv) {
  CLI::App app{"stage-search merge: rank the union of the shards of a "
               "search"};
  std::vector<std::string> files;
  SearchOptions options;
  app.add_option("files", files, "the shards' plans.json")->required();
  app.add_option("-o", options.outputDir, "write plans.json and plans.csv");
  app.add_option("--top", options.top, "plans to print (default 10)")
      ->check(wholeNumber(0, 1000000));
  if (std::optional<int> status =
          parseCommandLine(app, "stage-search merge", argc, argv))
    return *status;
  if (llvm::Error err = checkOutput(options))
    return fail(llvm::toString(std::move(err)));
  std::vector<SearchTable> shards;
  for (const std::string &file : files) {
    auto text = readInputFile(file, MaxTableBytes, "plans file");
    if (!text)
      return fail(llvm::toString(text.takeError()));
    llvm::Expected<SearchTable> table =
        parseSearchTable((*text)->getBuffer(), file);
    if (!table)
      return fail(llvm::toString(table.takeError()));
    shards.push_back(std::move(*table));
  }
  llvm::Expected<SearchTable> merged = mergeTables(std::move(shards));
  if (!merged)
    return fail(llvm::toString(merged.takeError()));
  printSearchSummary(llvm::outs(), *merged, options.top);
  if (options.outputDir.empty())
    return 0;
  return writeOutputs(*merged, options, nullptr, nullptr);
}

/// --time-phases: a timer a phase of the search, reported on stderr as
/// LLVM's -time-passes reports its passes, when the search ends.
struct PhaseTimers {
  llvm::TimerGroup group{"stage-search", "The search's phases"};
  llvm::Timer model{"model", "Reading the model", group};
  llvm::Timer enumerate{"enumerate", "Enumerating the plans", group};
  llvm::Timer bounds{"bounds", "Reading the bounds (the model's splits)",
                     group};
  llvm::Timer bounding{"bounding", "Bounding each plan", group};
  llvm::Timer evaluate{"evaluate", "Evaluating the plans (workers' wall time)",
                       group};
  llvm::Timer write{"write", "Ranking and writing", group};
};

int main(int argc, char **argv) {
  if (argc > 1 && llvm::StringRef(argv[1]) == "merge")
    return runMerge(argc - 1, argv + 1);
  if (isServeSearch(argc, argv))
    return runServeSearch(argc, argv);
  SearchOptions options;
  if (std::optional<int> exit = parseOptions(argc, argv, options))
    return *exit;
  if (llvm::Error err = checkOutput(options))
    return fail(llvm::toString(std::move(err)));

  llvm::Expected<SystemSpec> system = loadSystem(options.system);
  if (!system)
    return fail("--system: " + llvm::toString(system.takeError()));
  uint64_t memory = system->device.memoryBytes;
  if (!options.maxMemory.empty()) {
    std::optional<uint64_t> bytes = parseBytes(options.maxMemory);
    if (!bytes)
      return fail("--max-memory expects a size like 80GB, found '" +
                  options.maxMemory + "'");
    memory = *bytes;
  }
  if (!memory)
    return fail("the accelerator '" + system->device.name +
                "' does not say its memory: give --max-memory");
  std::optional<PhaseTimers> timers;
  if (options.timePhases)
    timers.emplace();
  auto timer = [&](llvm::Timer PhaseTimers::*phase) {
    return timers ? &(*timers.*phase) : nullptr;
  };
  std::optional<llvm::TimeRegion> phase;
  phase.emplace(timer(&PhaseTimers::model));
  llvm::Expected<ModelFacts> facts = readModelFacts(options.compile);
  phase.reset();
  if (!facts) {
    llvm::errs() << llvm::toString(facts.takeError());
    return 1;
  }

  PlanSpaceOptions space;
  space.gpus = options.gpus;
  space.globalBatch = options.globalBatch;
  space.gpusPerNode = system->gpusPerNode;
  space.degrees = options.degrees;
  space.microBatchSizes = options.microBatchSizes;
  space.virtualStages = options.virtualStages;
  space.splits = options.pipelineSplit == "even"        ? SplitChoice::Even
                 : options.pipelineSplit == "accounted" ? SplitChoice::Accounted
                                                        : SplitChoice::Auto;
  space.recompute = options.recompute;
  space.precisions.clear();
  for (const std::string &name : options.precisions) {
    Precision precision = *parsePrecision(name);
    if (isLowPrecision(precision) && !system->device.supports(precision))
      return fail("--precision " + name + ": the " + system->device.name +
                  " has no " + name + " unit");
    if (!llvm::is_contained(space.precisions, precision))
      space.precisions.push_back(precision);
  }
  space.cpExchanges = parseEachOnce(options.cpExchanges, parseCpExchange);
  space.schedules = parseEachOnce(options.schedules, parsePipelineSchedule);
  space.sharding.clear();
  for (const std::string &name : options.sharding)
    if (!(options.noFSDP && name == "fsdp"))
      space.sharding.push_back(*parseWeightSharding(name));
  space.sequenceParallel.clear();
  for (const std::string &value : options.sequenceParallel)
    space.sequenceParallel.push_back(value == "on");
  space.tpInNode.clear();
  for (const std::string &value : options.tpPlacement)
    space.tpInNode.push_back(value == "node");
  space.shardIndex = options.shardIndex;
  space.shardCount = options.shardCount;
  phase.emplace(timer(&PhaseTimers::enumerate));
  PlanSpace plans = enumeratePlans(space, facts->shape);
  phase.reset();
  if (plans.truncated)
    return fail("the search has " + llvm::Twine(plans.kept) +
                " plans to compile, more than " + llvm::Twine(space.maxPlans) +
                " a run takes: narrow it (--tp, --micro-batch, ...) or "
                "split it with --shard");

  SearchTable table;
  SearchHeader &header = table.header;
  header.generatorVersion = getToolVersion().str();
  header.input = options.compile.input;
  header.model = facts->modelName;
  header.gpus = options.gpus;
  header.globalBatch = options.globalBatch;
  header.sequenceLength = facts->sequenceLength;
  header.system = system->name;
  header.accelerator = system->device.name;
  header.gpusPerNode = system->gpusPerNode;
  header.deviceMemoryBytes = memory;
  header.memoryMargin = options.memoryMargin;
  header.memoryLimitBytes = uint64_t(memory * (1 - options.memoryMargin));
  header.shardIndex = options.shardIndex;
  header.shardCount = options.shardCount;
  header.pruneBounds = options.pruneBounds;
  table.pruned = plans.pruned;

  PlanEvaluator evaluator(options.compile, *system, *facts, options.globalBatch,
                          header.memoryLimitBytes);
  unsigned jobs = options.jobs
                      ? options.jobs
                      : llvm::hardware_concurrency().compute_thread_count();
  ProgressBar bar("plans");
  SearchProgress progress;
  if (!options.quiet && llvm::sys::Process::StandardErrIsDisplayed())
    progress = [&bar](size_t done, size_t total) { bar.update(done, total); };
  llvm::Expected<std::vector<PlanResult>> results = std::vector<PlanResult>();
  if (options.pruneBounds) {
    phase.emplace(timer(&PhaseTimers::bounds));
    llvm::Expected<ModelBounds> bounds = readModelBounds(
        options.compile, space.recompute, facts->shape, space.precisions);
    phase.reset();
    if (!bounds)
      return fail(llvm::toString(bounds.takeError()));
    BoundPruningOptions pruning;
    pruning.memoryLimitBytes = header.memoryLimitBytes;
    pruning.accounting = options.compile.memoryAccounting;
    pruning.system = *system;
    pruning.batchSize = options.pruneBatch;
    pruning.keep = std::max({1u, options.top, options.best.emitTop});
    pruning.boundTimer = timer(&PhaseTimers::bounding);
    pruning.evaluationTimer = timer(&PhaseTimers::evaluate);
    llvm::Expected<BoundedResults> bounded = evaluatePlansWithinBounds(
        evaluator, plans.plans, *bounds, pruning, jobs, progress);
    if (!bounded)
      return fail(llvm::toString(bounded.takeError()));
    // Both reasons, counted or not, so that the files say what was tried.
    table.prunedByBounds = {{MemoryBoundReason, 0}, {StepBoundReason, 0}};
    for (const auto &[reason, count] : bounded->pruned)
      table.prunedByBounds[reason] += count;
    *results = std::move(bounded->results);
  } else {
    llvm::TimeRegion evaluating(timer(&PhaseTimers::evaluate));
    results = evaluatePlans(evaluator, plans.plans, jobs, progress);
  }
  if (!results)
    return fail(llvm::toString(results.takeError()));
  for (PlanResult &result : *results) {
    if (result.prunedByModel)
      ++table.prunedByModel[getReasonKind(result.reason)];
    else
      table.plans.push_back(std::move(result));
  }
  rankPlans(table);
  printSearchSummary(llvm::outs(), table, options.top);
  if (options.outputDir.empty())
    return 0;
  llvm::TimeRegion writing(timer(&PhaseTimers::write));
  return writeOutputs(table, options, &evaluator, &*system);
}
