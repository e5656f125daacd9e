//===- StagecOptions.cpp - stagec's command line --------------------------===//

#include "StagecOptions.h"

#include "CommandLine.h"
#include "PrecisionFlags.h"
#include "ServeCommand.h"
#include "ServingFlags.h"

#include "stg/Instantiate/Instantiate.h"
#include "stg/Instantiate/Limits.h"

#include "CLI/CLI.hpp"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringRef.h"

#include <climits>

using namespace stg;

static const char *const Examples = R"(Examples:
  stagec templates/llama70b.stg --dp 8 --tp 4 -o out/
      32 ranks of Llama-3-70B training, one Chakra trace per rank in out/
  stagec templates/llama70b.stg --dp 16 --tp 8 --pp 8 --microbatches 8 -o out/
      1024 ranks, 8 pipeline stages with the 1F1B schedule
  stagec model.stg --tp 2 --set B=4 --set S=2048 --report
      print the per-rank FLOPs, communication and memory, write nothing
  stagec templates/llama3-8b.stg --tp 8 --dp 4 --system dgx-h100 --report-json r.json
      the estimated step and its CCL-Bench metrics (MFU, exposed
      communication, bandwidth utilities) as JSON
  stagec templates/llama3-70b.stg --tp 8 --pp 4 --dp 32 --microbatches 16 \
      --system dgx-h100 --perturb stragglers.yaml --variants 1000 --report
      the step-time distribution of 1000 variants with stragglers (min,
      median, p90, p99, max, GPU time wasted), writing nothing
  stagec model.stg --tp 2 --format json --ranks 0-1 -o readable/
      the first two ranks as JSON, to read

Then run ASTRA-sim with --workload-configuration=out/PREFIX and
--comm-group-configuration=out/PREFIX.json, and check a trace set with
`stage-et verify out/`.)";

/// Parses `0-7,12` into ranks.
static bool parseRanks(const std::string &text, std::vector<unsigned> &ranks) {
  llvm::SmallVector<llvm::StringRef, 8> parts;
  llvm::StringRef(text).split(parts, ',');
  for (llvm::StringRef part : parts) {
    auto [first, last] = part.trim().split('-');
    uint64_t low, high;
    if (first.getAsInteger(10, low))
      return false;
    high = low;
    if (!last.empty() && last.getAsInteger(10, high))
      return false;
    // Every rank is below MaxRanks, so the list stays bounded.
    if (high < low || high >= MaxRanks)
      return false;
    for (uint64_t rank = low; rank <= high; ++rank)
      ranks.push_back(unsigned(rank));
  }
  llvm::sort(ranks);
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  return true;
}

std::optional<int> stg::parseStagecOptions(int argc, char **argv,
                                           StagecOptions &options) {
  CLI::App app{"stagec: compile an STG model into per-rank Chakra execution "
               "traces"};
  app.footer(Examples);
  std::vector<std::string> sets;
  std::string ranks;
  std::string kvCacheType;
  unsigned dp = 1, tp = 1, pp = 1, cp = 1, ep = 1;

  const char *model = "Model";
  app.add_option("file", options.compile.input,
                 "the model to compile: a .stg file, or a Hugging Face "
                 "config.json (docs/models.md)")
      ->required()
      ->group(model);
  app.add_option("-I", options.compile.includeDirs,
                 "add a directory to the import search path")
      ->group(model);
  app.add_option("--set", sets,
                 "set a dim, option or axis degree: NAME=VALUE (repeatable)")
      ->group(model);

  const char *plan = "Parallel plan";
  CLI::Validator degree = wholeNumber(1, MaxRanks);
  app.add_option("--dp", dp, "data-parallel degree")->check(degree)->group(plan);
  app.add_option("--tp", tp, "tensor-parallel degree (with sequence "
                             "parallelism when the model enables it)")
      ->check(degree)
      ->group(plan);
  app.add_option("--pp", pp, "pipeline-parallel stages")
      ->check(degree)
      ->group(plan);
  app.add_option("--cp", cp, "context-parallel degree")
      ->check(degree)
      ->group(plan);
  app.add_option("--ep", ep, "expert-parallel degree")
      ->check(degree)
      ->group(plan);
  app.add_flag("--fsdp", options.compile.fsdp,
               "shard weights, gradients and optimizer state over dp "
               "(sets the model's option weight_sharded)")
      ->group(plan);
  app.add_flag("--distributed-optimizer", options.compile.distributedOptimizer,
               "ZeRO-1 (Megatron's distributed optimizer): reduce-scatter "
               "gradients over dp, step a shard, all-gather the weights")
      ->group(plan);
  app.add_option("--rank-order", options.compile.rankOrder,
                 "mesh axes, fastest-varying first")
      ->default_val(DefaultRankOrder)
      ->group(plan);

  const char *step = "Training step";
  app.add_option("--mode", options.compile.mode,
                 "train (default), prefill (a forward pass), decode (one "
                 "new token per sequence against a KV cache) or serve "
                 "(requests through continuous batching)")
      ->check(CLI::IsMember({"train", "prefill", "decode", "serve"}))
      ->group(step);
  app.add_option("--context", options.compile.context,
                 "decode: tokens already in the KV cache (default: the "
                 "model's CTX, else its sequence length)")
      ->check(wholeNumber(1, INT32_MAX))
      ->group(step);
  app.add_option("--kv-cache-dtype", kvCacheType,
                 "decode and serve: the KV cache's element type (bf16, fp16, "
                 "fp8; default the model's), as vLLM's --kv-cache-dtype")
      ->check(CLI::IsMember({"bf16", "fp16", "fp8", "fp32"}))
      ->group(step);
  app.add_option("--microbatches", options.compile.microbatches,
                 "micro-batches per step (default: the pipeline stages)")
      ->check(wholeNumber(1, MaxMicrobatches))
      ->group(step);
  app.add_option("--schedule", options.schedule,
                 "pipeline schedule: 1f1b (default; interleaved with "
                 "--virtual-stages), gpipe, zb-h1 (zero bubble: the "
                 "backward split into input- and weight-gradient steps, "
                 "weight gradients delayed into the cool-down), zb-v "
                 "(zero bubble over two model chunks a stage placed in a V), "
                 "or dualpipev (DeepSeek's DualPipeV over that V: a forward "
                 "and a backward of two micro-batches overlapped in each "
                 "steady step; at least 2 x pp micro-batches), the V "
                 "schedules implying --virtual-stages 2; dualpipe "
                 "(DeepSeek's bidirectional DualPipe: two copies of the "
                 "model, fed from both ends; an even pp of at least 4, an "
                 "even count of at least 2 x pp micro-batches); or "
                 "combined-1f1b (Megatron-Core's EP A2A overlap: 1F1B, "
                 "plain or interleaved, its steady forward and backward of "
                 "two micro-batches overlapped)")
      ->check(CLI::IsMember({"1f1b", "gpipe", "zb-h1", "zb-v", "dualpipev",
                             "dualpipe", "combined-1f1b"}))
      ->group(step);
  app.add_option("--grad-bucket-mb", options.compile.gradientBucketMB,
                 "issue data-parallel gradient reductions in buckets of this "
                 "many MB, as DDP and Megatron do (default 0: one per weight)")
      ->check(finiteNumber(0, 1e6))
      ->group(step);
  app.add_option("--virtual-stages", options.compile.virtualStages,
                 "model chunks per pipeline stage: Megatron's interleaved "
                 "1F1B (micro-batches a multiple of pp)")
      ->check(wholeNumber(1, 1024))
      ->group(step);
  PipelineSplit &split = options.compile.pipelineSplit;
  app.add_option("--pp-layers", split.chunkLayers,
                 "layers of each model chunk, stage by stage (with "
                 "--virtual-stages, chunk c on stage c mod pp), e.g. "
                 "18,20,20,22: fewer on the stages that also hold the "
                 "embedding and the head; the first and the last may be 0 "
                 "(default: an even split)")
      ->delimiter(',')
      ->check(wholeNumber(0, 65536))
      ->group(step);
  app.add_flag("--account-for-embedding-in-pipeline-split",
               split.accountForEmbedding,
               "Megatron-LM's: the embedding counts as a layer of the first "
               "model chunk, which holds one decoder layer fewer (maybe "
               "none); the layers + 1 must split evenly over the chunks")
      ->group(step);
  app.add_flag("--account-for-loss-in-pipeline-split", split.accountForLoss,
               "Megatron-LM's: the loss (with the output layer) counts as a "
               "layer of the last model chunk, which holds one decoder layer "
               "fewer (maybe none)")
      ->group(step);
  app.add_option("--decoder-first-pipeline-num-layers", split.firstStageLayers,
                 "Megatron-LM's: decoder layers of the first pipeline stage "
                 "(split evenly over its model chunks); the other stages "
                 "share the rest evenly")
      ->check(wholeNumber(1, 65536))
      ->group(step);
  app.add_option("--decoder-last-pipeline-num-layers", split.lastStageLayers,
                 "Megatron-LM's: decoder layers of the last pipeline stage")
      ->check(wholeNumber(1, 65536))
      ->group(step);
  app.add_option("--recompute", options.compile.recompute,
                 "activation recomputation: none, full or selective "
                 "(attention core only)")
      ->check(CLI::IsMember({"none", "full", "selective"}))
      ->group(step);
  app.add_option("--grad-reduce", options.gradReduce,
                 "when data-parallel gradient reductions run: overlap (with "
                 "the last micro-batch's backward; default) or after-backward "
                 "(all after the last step, Megatron-LM's default)")
      ->check(CLI::IsMember({"overlap", "after-backward"}))
      ->group(step);
  app.add_option("--tp-comm-overlap", options.tpCommOverlap,
                 "on (training's default, as NVIDIA's recipes): "
                 "tensor-parallel all-gathers and reduce-scatters run beside "
                 "the GEMMs they feed or reduce; off (inference's default, "
                 "as serving engines run them): before and after them")
      ->check(CLI::IsMember({"on", "off"}))
      ->group(step);
  app.add_option("--overlap-param-gather", options.overlapParamGather,
                 "with --distributed-optimizer: on (default; NVIDIA's "
                 "recipes) gathers the updated weights beside the next "
                 "step's forward, each before its first use; off gathers "
                 "them after the optimizer")
      ->check(CLI::IsMember({"on", "off"}))
      ->group(step);
  app.add_option("--cp-comm-type", options.cpCommType,
                 "context parallelism's exchange of keys and values: p2p "
                 "(default, Megatron's: a ring beside attention), "
                 "all_gather (gathered before it) or a2a (Ulysses: "
                 "all-to-alls trade the sequence split for a head split)")
      ->check(CLI::IsMember({"p2p", "all_gather", "a2a"}))
      ->group(step);
  addDeepEpModeOption(
      app, options.deepEpMode,
      "the experts' all-to-alls as DeepEP runs them: normal (a token "
      "crosses once to each node that needs it, then NVLink forwards it), "
      "low-latency (each copy straight to its expert's rank), auto "
      "(low-latency for decode, normal otherwise, as SGLang's) or off "
      "(default: NCCL's all-to-all)")
      ->group(step);
  addDeepEpUnitsOption(app, options.compile.deepEpUnits)->group(step);
  app.add_flag("--two-batch-overlap", options.compile.twoBatchOverlap,
               "prefill, decode and serve: split each step's batch into two "
               "micro-batches that run overlapped, each one's expert "
               "all-to-alls and tensor-parallel reductions beside the "
               "other's compute (SGLang's --enable-two-batch-overlap)")
      ->group(step);
  app.add_option("--memory-accounting", options.memoryAccounting,
                 "model state of mixed-precision training: megatron (fp32 "
                 "main gradients, 18 bytes a parameter; default) or zero "
                 "(16-bit gradients, 16 bytes)")
      ->check(CLI::IsMember({"megatron", "zero"}))
      ->group(step);
  app.add_option("--dtype", options.dtype,
                 "element type of activations and weights (bf16, fp16, fp32)")
      ->group(step);
  app.add_option("--precision", options.precision,
                 "the recipe: " + getRecipeNames(" or ") +
                     " (the linear layers' GEMMs in it, the rest in bf16)")
      ->group(step);
  app.add_flag("--low-precision-attention",
               options.compile.lowPrecisionAttention,
               "the attention core in the recipe's precision too (FP8 "
               "dot-product attention)")
      ->group(step);
  addWeightPrecisionOptions(app, options.weightPrecision, step);
  addLinearKernelsOption(app, options.linearKernels, step);

  const char *timing = "Time (kernel durations, step estimate)";
  app.add_option("--system", options.system,
                 "the cluster: " + getBuiltinSystemNames(" or ") +
                     " or a system .yaml file (accelerator, GPUs per node, "
                     "scale-up and scale-out networks)")
      ->group(timing);
  app.add_option("--device", options.device,
                 "one scale-up domain of this GPU: A100, H100, H200, B200, "
                 "GB200, B300, GB300, MI300X, MI355X or a device .yaml file "
                 "(kernel durations by a roofline; every link at the "
                 "device's link bandwidth)")
      ->group(timing);
  app.add_option("--measured", options.measured,
                 "CSV of measured kernels (op_type,num_ops,tensor_size,micros) "
                 "that override the roofline")
      ->group(timing);

  const char *whatIf = "Perturbed variants";
  app.add_option("--perturb", options.perturb,
                 "YAML spec of stragglers and slow links; writes variant-K/ "
                 "directories beside the clean traces (-o), and with "
                 "--system or --device, --report and --report-json give the "
                 "variants' step-time distribution")
      ->group(whatIf);
  app.add_option("--seed", options.seed,
                 "overrides the spec's seed; with --mode serve, seeds the "
                 "arrivals of --request-rate (default 0)")
      ->check(wholeNumber(0, UINT64_MAX))
      ->group(whatIf);
  app.add_option("--variants", options.variants,
                 "number of perturbed variants (default 1)")
      ->check(wholeNumber(1, 100000))
      ->group(whatIf);

  const char *output = "Output";
  app.add_option("-o,--output", options.outputDir,
                 "directory to write (replaced atomically when complete)")
      ->group(output);
  app.add_option("--prefix", options.prefix,
                 "file prefix P of P.{rank}.et (default: the model's name)")
      ->group(output);
  app.add_option("--format", options.format, "chakra, json or dot")
      ->check(CLI::IsMember({"chakra", "json", "dot"}))
      ->group(output);
  app.add_flag("--gzip", options.gzip, "write P.{rank}.et.gz")->group(output);
  app.add_option("--ordering-deps", options.orderingDeps,
                 "where schedule and collective-order edges go: data "
                 "(default; ASTRA-sim's feeder reads only data_deps) or ctrl")
      ->check(CLI::IsMember({"data", "ctrl"}))
      ->group(output);
  app.add_option("--ranks", ranks, "write only these ranks, e.g. 0-7,12")
      ->group(output);
  app.add_option("-j,--jobs", options.jobs,
                 "threads writing traces or estimating variants (default: "
                 "one per core)")
      ->check(wholeNumber(0, 1024))
      ->group(output);
  app.add_flag("--print-dims", options.printDims,
               "list the model's dims, options and axes with their values "
               "(after --set and the degrees), comments and locations, and "
               "exit")
      ->group(output);
  app.add_option("--emit-stg", options.emitStg,
                 "write the STG program a config.json imports to (the same "
                 "model, to read or edit; - for standard output), and exit")
      ->type_name("FILE")
      ->group(output);
  app.add_flag("--report", options.report,
               "print FLOPs, communication and memory per rank class (and, "
               "with --system or --device, the step estimate and its "
               "CCL-Bench metrics)")
      ->group(output);
  app.add_option("--report-json", options.reportJson,
                 "write the report (and, with --system or --device, the step "
                 "estimate and its CCL-Bench metrics) as JSON to this file, "
                 "with or without -o")
      ->type_name("FILE")
      ->group(output);
  app.add_option("--timeline", options.timeline,
                 "write the estimated step as Chrome trace events (Perfetto, "
                 "chrome://tracing; stage-plot timeline draws it) to this "
                 "file; needs --system or --device")
      ->type_name("FILE")
      ->group(output);
  app.add_flag("-q,--quiet", options.quiet, "no progress or summary on stderr")
      ->group(output);

  addServeFlags(app, options.serve);
  addVersionFlag(app, "stagec");
  if (std::optional<int> status = parseCommandLine(app, "stagec", argc, argv))
    return *status;
  if (options.outputDir.empty() && !options.report && !options.printDims &&
      options.emitStg.empty() &&
      options.reportJson.empty() && options.timeline.empty()) {
    std::fprintf(stderr, "stagec: error: give -o DIR to write traces, "
                         "--report to print a summary, --report-json FILE "
                         "to write it or --timeline FILE to write the "
                         "estimated step\n");
    return 1;
  }
  if (!options.timeline.empty() && options.system.empty() &&
      options.device.empty()) {
    std::fprintf(stderr, "stagec: error: --timeline needs --system or "
                         "--device: it draws the estimated step\n");
    return 1;
  }
  // A prefix names files inside -o: no path separators, no dot files, so
  // nothing can be written beside or above the output directory.
  if (!options.prefix.empty() &&
      (options.prefix.front() == '.' || options.prefix.size() > 200 ||
       !llvm::all_of(options.prefix, [](char c) {
         return llvm::isAlnum(c) || c == '_' || c == '-' || c == '.';
       }))) {
    std::fprintf(stderr, "stagec: error: --prefix %s: a prefix is a file name "
                         "of letters, digits, '_', '-' and '.' that does not "
                         "start with '.' (files go inside -o)\n",
                 options.prefix.c_str());
    return 1;
  }
  if (!ranks.empty() && !parseRanks(ranks, options.ranks)) {
    std::fprintf(stderr, "stagec: error: --ranks expects a list like 0-7,12 "
                         "of ranks below %llu, found '%s'\n",
                 (unsigned long long)MaxRanks, ranks.c_str());
    return 1;
  }
  if (std::optional<std::string> error =
          appendAssignments(sets, options.compile.overrides)) {
    std::fprintf(stderr, "stagec: error: %s\n", error->c_str());
    return 1;
  }
  if (std::optional<std::string> error = applyPrecisionFlags(
          options.dtype, options.precision, options.compile)) {
    std::fprintf(stderr, "stagec: error: %s\n", error->c_str());
    return 1;
  }
  for (auto [name, degree] : {std::pair{"tp", tp}, {"cp", cp}, {"ep", ep},
                              {"dp", dp}, {"pp", pp}}) {
    if (degree == 0) {
      std::fprintf(stderr, "stagec: error: --%s must be at least 1\n", name);
      return 1;
    }
    if (degree > 1)
      options.compile.degrees.push_back({name, degree});
  }
  std::string conflict = findPipelineSplitConflict(split);
  if (!conflict.empty()) {
    std::fprintf(stderr, "stagec: error: %s\n", conflict.c_str());
    return 1;
  }
  if (options.compile.distributedOptimizer &&
      options.compile.mode != "train") {
    std::fprintf(stderr, "stagec: error: --distributed-optimizer needs "
                         "--mode train\n");
    return 1;
  }
  if (options.linearKernels == "fused" && options.compile.mode == "train") {
    std::fprintf(stderr, "stagec: error: --linear-kernels fused prices a "
                         "served model's steps; --mode prefill, decode or "
                         "serve\n");
    return 1;
  }
  if (std::optional<std::string> error =
          applyWeightPrecisionFlags(options.weightPrecision, options.compile)) {
    std::fprintf(stderr, "stagec: error: %s\n", error->c_str());
    return 1;
  }
  if (!kvCacheType.empty()) {
    if (options.compile.mode != "decode" && options.compile.mode != "serve") {
      std::fprintf(stderr, "stagec: error: --kv-cache-dtype needs --mode "
                           "decode or serve\n");
      return 1;
    }
    options.compile.kvCacheType = parseElementType(kvCacheType);
  }
  if (options.compile.twoBatchOverlap) {
    if (options.compile.mode == "train") {
      std::fprintf(stderr,
                   "stagec: error: --two-batch-overlap overlaps the forwards "
                   "of inference; in training, --schedule combined-1f1b "
                   "overlaps a forward with another micro-batch's backward\n");
      return 1;
    }
    // The step's batch in two.
    if (!options.compile.microbatches)
      options.compile.microbatches = 2 * pp;
  }
  if (options.compile.context && options.compile.mode != "decode") {
    std::fprintf(stderr, "stagec: error: --context needs --mode decode\n");
    return 1;
  }
  bool seedsArrivals = options.compile.mode == "serve";
  if (options.perturb.empty() &&
      ((options.seed && !seedsArrivals) || app.count("--variants"))) {
    std::fprintf(stderr, "stagec: error: --seed and --variants need "
                         "--perturb SPEC.yaml (--seed also seeds --mode "
                         "serve's arrivals)\n");
    return 1;
  }
  // Without -o nothing is written: the variants are only estimated, which
  // needs a system.
  if (!options.perturb.empty() && options.outputDir.empty() &&
      options.device.empty() && options.system.empty()) {
    std::fprintf(stderr, "stagec: error: --perturb needs -o DIR to write the "
                         "variants, or --system or --device to estimate "
                         "them with --report or --report-json\n");
    return 1;
  }
  if (!options.measured.empty() && options.device.empty() &&
      options.system.empty()) {
    std::fprintf(stderr, "stagec: error: --measured needs --device or "
                         "--system for the kernels the table does not have\n");
    return 1;
  }
  if (!options.device.empty() && !options.system.empty()) {
    std::fprintf(stderr, "stagec: error: give --system (which names its "
                         "accelerator) or --device (one scale-up domain of "
                         "that GPU), not both\n");
    return 1;
  }
  if (std::optional<std::string> error = checkServeFlags(app, options)) {
    std::fprintf(stderr, "stagec: error: %s\n", error->c_str());
    return 1;
  }
  if (std::optional<std::string> error =
          checkDeepEpUnitsOption(app, options.deepEpMode)) {
    std::fprintf(stderr, "stagec: error: %s\n", error->c_str());
    return 1;
  }
  options.compile.schedule = *parsePipelineSchedule(options.schedule);
  // dualpipe's two chunks a rank are its two copies' (foldDualPipe).
  if (getChunkPlacement(options.compile.schedule) == ChunkPlacement::VShape &&
      options.compile.schedule != PipelineSchedule::DualPipe &&
      !app.count("--virtual-stages"))
    options.compile.virtualStages = 2;
  options.compile.memoryAccounting =
      *parseMemoryAccounting(options.memoryAccounting);
  options.compile.overlapGradientReduction = options.gradReduce == "overlap";
  options.compile.fusedLinearKernels = options.linearKernels == "fused";
  if (!options.tpCommOverlap.empty())
    options.compile.tensorParallelOverlap = options.tpCommOverlap == "on";
  options.compile.contextParallelRing = options.cpCommType == "p2p";
  options.compile.contextParallelAllToAll = options.cpCommType == "a2a";
  options.compile.overlapParamGather = options.overlapParamGather == "on";
  options.compile.deepEpMode = *parseDeepEpMode(options.deepEpMode);
  return std::nullopt;
}

std::vector<std::pair<std::string, std::string>>
StagecOptions::describe() const {
  std::vector<std::pair<std::string, std::string>> given;
  for (const auto &[name, degree] : compile.degrees)
    given.push_back({name, std::to_string(degree)});
  for (const auto &[name, value] : compile.overrides)
    given.push_back({"set " + name, value});
  if (compile.fsdp)
    given.push_back({"fsdp", "true"});
  given.push_back({"mode", compile.mode});
  if (compile.context)
    given.push_back({"context", std::to_string(*compile.context)});
  if (compile.kvCacheType)
    given.push_back(
        {"kv_cache_dtype", getElementTypeName(*compile.kvCacheType).str()});
  given.push_back({"microbatches", compile.microbatches
                                       ? std::to_string(compile.microbatches)
                                       : "stages"});
  given.push_back({"schedule", schedule});
  if (compile.gradientBucketMB > 0)
    given.push_back({"grad_bucket_mb", std::to_string(compile.gradientBucketMB)});
  if (compile.virtualStages > 1)
    given.push_back({"virtual_stages", std::to_string(compile.virtualStages)});
  const PipelineSplit &split = compile.pipelineSplit;
  if (!split.chunkLayers.empty())
    given.push_back({"pp_layers",
                     llvm::join(llvm::map_range(split.chunkLayers,
                                                [](unsigned layers) {
                                                  return std::to_string(layers);
                                                }),
                                ",")});
  if (split.accountForEmbedding)
    given.push_back({"account_for_embedding_in_pipeline_split", "true"});
  if (split.accountForLoss)
    given.push_back({"account_for_loss_in_pipeline_split", "true"});
  if (split.firstStageLayers)
    given.push_back({"decoder_first_pipeline_num_layers",
                     std::to_string(*split.firstStageLayers)});
  if (split.lastStageLayers)
    given.push_back({"decoder_last_pipeline_num_layers",
                     std::to_string(*split.lastStageLayers)});
  given.push_back({"recompute", compile.recompute});
  given.push_back({"memory_accounting", memoryAccounting});
  given.push_back({"grad_reduce", gradReduce});
  given.push_back({"tp_comm_overlap", compile.tensorParallelOverlap.value_or(
                                          compile.mode == "train")
                                          ? "on"
                                          : "off"});
  given.push_back({"cp_comm_type", cpCommType});
  if (deepEpMode != "off") {
    given.push_back({"deepep_mode", deepEpMode});
    given.push_back({"deepep_sms", std::to_string(compile.deepEpUnits)});
  }
  if (compile.twoBatchOverlap)
    given.push_back({"two_batch_overlap", "true"});
  if (compile.distributedOptimizer)
    given.push_back({"overlap_param_gather", overlapParamGather});
  if (compile.distributedOptimizer)
    given.push_back({"distributed_optimizer", "true"});
  if (!dtype.empty())
    given.push_back({"dtype", dtype});
  if (!precision.empty())
    given.push_back({"precision", precision});
  if (compile.lowPrecisionAttention)
    given.push_back({"low_precision_attention", "true"});
  if (compile.weightPrecision)
    given.push_back(
        {"weight_precision", getPrecisionName(*compile.weightPrecision).str()});
  if (compile.fusedLinearKernels)
    given.push_back({"linear_kernels", "fused"});
  if (compile.weightPrecisionExpertsOnly)
    given.push_back({"weight_precision_scope", "experts"});
  given.push_back({"rank_order", compile.rankOrder});
  given.push_back({"format", format});
  given.push_back({"ordering_deps", orderingDeps});
  if (!device.empty())
    given.push_back({"device", device});
  if (!system.empty())
    given.push_back({"system", system});
  if (!measured.empty())
    given.push_back({"measured", measured});
  if (!perturb.empty()) {
    given.push_back({"perturb", perturb});
    given.push_back({"variants", std::to_string(variants)});
    if (seed)
      given.push_back({"seed", std::to_string(*seed)});
  }
  return given;
}
