//===- Compile.cpp - From a .stg file to per-stage programs ---------------===//

#include "stg/Driver/Compile.h"

#include "stg/Import/HFImport.h"

#include "stg/Parse/Parser.h"
#include "stg/Passes/Pass.h"
#include "stg/Passes/Passes.h"

#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/ErrorHandling.h"

using namespace stg;

std::string stg::getPassPipeline(const CompileOptions &options) {
  llvm::StringRef mode = options.mode;
  if (mode == "decode")
    return "shape-infer,precision,distribute,kv-cache,match-collectives,"
           "check-divisibility";
  if (mode != "train")
    return "shape-infer,precision,distribute,match-collectives,"
           "check-divisibility";
  std::string pipeline = "shape-infer,precision,autodiff,";
  if (options.recompute != "none")
    pipeline += "recompute-" + options.recompute + ",";
  pipeline += "distribute,match-collectives,optimizer,";
  if (options.distributedOptimizer)
    pipeline += "shard-optimizer,";
  return pipeline + "check-divisibility";
}

std::optional<std::string> stg::foldDualPipe(CompileOptions &options) {
  if (options.schedule != PipelineSchedule::DualPipe)
    return std::nullopt;
  InstantiateOptions defaults;
  unsigned *stages = nullptr, *replicas = nullptr;
  for (auto &[name, degree] : options.degrees) {
    if (name == defaults.pipelineAxis)
      stages = &degree;
    else if (name == "dp")
      replicas = &degree;
  }
  unsigned numStages = stages ? *stages : 1;
  unsigned microbatches =
      options.microbatches ? options.microbatches : numStages;
  if (std::optional<DualPipeProblem> problem =
          checkDualPipe(numStages, options.virtualStages, microbatches)) {
    switch (*problem) {
    case DualPipeProblem::Stages:
      return "dualpipe feeds a pipeline from both ends, half its stages a "
             "direction: it needs an even pp of at least 4 (" +
             std::to_string(numStages) + " given)";
    case DualPipeProblem::Chunks:
      return "dualpipe runs one stage of each of its two model copies a "
             "rank; --virtual-stages " +
             std::to_string(options.virtualStages) + " does not apply";
    case DualPipeProblem::OddMicrobatches:
    case DualPipeProblem::FewMicrobatches:
      return "dualpipe over " + std::to_string(numStages) +
             " stages needs an even micro-batch count of at least " +
             std::to_string(2 * numStages) +
             ", twice the stages, half of them fed from each end (" +
             std::to_string(microbatches) + " given)";
    }
  }
  DualPipeFold fold =
      foldDualPipeDegrees(numStages, replicas ? *replicas : 1, microbatches);
  *stages = fold.numStages;
  if (replicas)
    *replicas = fold.dataParallel;
  else
    options.degrees.push_back({"dp", fold.dataParallel});
  options.microbatches = fold.numMicrobatches;
  options.virtualStages = fold.numChunks;
  return std::nullopt;
}

/// Sets the degrees on the module's axes, so that the passes see them.
static LogicalResult applyMesh(Module &module, const CompileOptions &options,
                               DiagnosticEngine &diags) {
  InstantiateOptions defaults;
  for (const auto &[name, degree] : options.degrees) {
    Axis *axis = module.lookupAxis(name);
    if (!axis) {
      // No tensor is partitioned over the pipeline axis: the model need
      // not declare it.
      if (degree > 1 && name != defaults.pipelineAxis)
        diags.error({}, "--" + name + " " + llvm::Twine(degree) +
                            ": the model declares no axis '" + name + "'");
      continue;
    }
    if (axis->alias) {
      diags.error({}, "--" + name + ": axis '" + name + "' is an alias of '" +
                          axis->alias->name + "'");
      continue;
    }
    axis->size = degree;
  }
  return failure(diags.hasErrors());
}

/// Sets option `name` of `module`, declaring it if the model does not.
static void setOption(Module &module, llvm::StringRef name,
                      Option::Value value) {
  if (Option *option = module.lookupOption(name))
    option->value = std::move(value);
  else
    module.addOption(name, std::move(value), module.getModelLoc());
}

/// A served model runs as its published checkpoint (the importer's
/// `checkpoint_format`, from the config's quantization_config) unless the
/// flags or the model say otherwise: FP8 weights and activations as the
/// fp8 recipe, MXFP4 experts as their weight-only format.
static void applyCheckpointFormat(Module &module,
                                  const CompileOptions &options) {
  const Option *option = module.lookupOption("checkpoint_format");
  const auto *format =
      option ? std::get_if<std::string>(&option->value) : nullptr;
  if (!format)
    return;
  if (*format == "fp8" && !options.precision &&
      !module.lookupOption("precision"))
    setOption(module, "precision", std::string("fp8"));
  if (*format == "mxfp4" && !options.weightPrecision &&
      !module.lookupOption("weight_precision")) {
    setOption(module, "weight_precision", std::string("mxfp4"));
    setOption(module, "weight_precision_scope", std::string("experts"));
  }
}

std::unique_ptr<Module> stg::loadModel(const CompileOptions &options,
                                       DiagnosticEngine &diags) {
  ParseOptions parseOptions;
  parseOptions.includeDirs = options.includeDirs;
  parseOptions.templateDirs = getDefaultTemplateDirs();
  parseOptions.overrides = options.overrides;
  parseOptions.elementType = options.elementType;
  // FSDP shards the weights the model partitions over its `fsdp` alias.
  if (options.fsdp)
    parseOptions.switches.push_back({"weight_sharded", true});
  // One new token cannot be split over the sequence: decode turns the
  // shipped templates' sequence parallelism off.
  // A model may build its decode step otherwise where it declares
  // `option decode` (MLA runs absorbed, nn/mla.stg).
  if (options.mode == "decode") {
    parseOptions.switches.push_back({"sequence_parallel", false});
    parseOptions.switches.push_back({"decode", true});
  }
  std::unique_ptr<Module> module;
  if (isModelConfigPath(options.input)) {
    // A Hugging Face config: the importer's STG text goes through the
    // same front end as a file, named after the config so that errors
    // in it show where they came from.
    std::optional<ImportedModel> imported =
        importModelConfig(options.input, diags);
    if (!imported)
      return nullptr;
    module = parseSource(imported->source, options.input + ".stg",
                         parseOptions, diags);
  } else {
    module = parseFile(options.input, parseOptions, diags);
  }
  if (!module)
    return nullptr;
  const Option *sharded = module->lookupOption("weight_sharded");
  if (options.fsdp && (!sharded || !sharded->isBool())) {
    diags.error(module->getModelLoc(),
                "--fsdp sets the option 'weight_sharded', which the model "
                "does not declare; declare `option weight_sharded = false;` "
                "and `axis fsdp = dp if weight_sharded;`, and split weights "
                "over fsdp");
    return nullptr;
  }
  if (!module->getModel()) {
    diags.error({}, options.input + " declares no model");
    return nullptr;
  }
  // The recipe and FP8 attention are options the precision pass reads, so
  // that a model file may set them too.
  if (options.precision)
    setOption(*module, "precision",
              getPrecisionName(*options.precision).str());
  if (options.lowPrecisionAttention)
    setOption(*module, "low_precision_attention", true);
  if (options.mode != "train")
    applyCheckpointFormat(*module, options);
  if (options.weightPrecision && *options.weightPrecision != Precision::BF16)
    setOption(*module, "weight_precision",
              getPrecisionName(*options.weightPrecision).str());
  if (const Option *weights = module->lookupOption("weight_precision");
      weights && options.mode == "train") {
    diags.error(weights->loc, "weight-only quantization ('weight_precision') "
                              "is for a served model: --mode prefill, decode "
                              "or serve");
    return nullptr;
  }
  if (options.weightPrecisionExpertsOnly)
    setOption(*module, "weight_precision_scope", std::string("experts"));
  if (options.fusedLinearKernels)
    setOption(*module, "linear_kernels", std::string("fused"));
  if (const Option *kernels = module->lookupOption("linear_kernels")) {
    const auto *text = std::get_if<std::string>(&kernels->value);
    if (!text || (*text != "fused" && *text != "separate")) {
      diags.error(kernels->loc, "option 'linear_kernels' is \"separate\" or "
                                "\"fused\"");
      return nullptr;
    }
    if (*text == "fused" && options.mode == "train") {
      diags.error(kernels->loc, "fused linear kernels ('linear_kernels') "
                                "are priced for a served model: --mode "
                                "prefill, decode or serve");
      return nullptr;
    }
  }
  if (options.contextParallelAllToAll)
    setOption(*module, "cp_comm_type", std::string("a2a"));
  if (options.kvCacheType)
    setOption(*module, "kv_cache_dtype",
              getElementTypeName(*options.kvCacheType).str());
  if (options.wholeWindowCaches)
    setOption(*module, "kv_window_cache", std::string("whole"));
  return module;
}

PreparedModel stg::prepareModel(const CompileOptions &options,
                                llvm::StringRef programName) {
  PreparedModel prepared;
  prepared.logText = std::make_unique<std::string>();
  prepared.log = std::make_unique<llvm::raw_string_ostream>(*prepared.logText);
  prepared.sources = std::make_unique<DiagnosticEngine>(*prepared.log);
  prepared.sources->setProgramName(programName);
  DiagnosticEngine &sources = *prepared.sources;
  prepared.module = loadModel(options, sources);
  if (!prepared.module)
    return prepared;
  std::string pipeline = getPassPipeline(options);
  llvm::StringRef passesForAnyDegrees =
      llvm::StringRef(pipeline).rsplit(',').first;
  bool sharded = passesForAnyDegrees.consume_back(",shard-optimizer");
  PassManager passes;
  bool added = succeeded(passes.addPipeline(passesForAnyDegrees, sources));
  if (added && sharded)
    passes.addPass(createShardOptimizerPassForAnyDegrees());
  if (!added || failed(passes.run(*prepared.module, sources)))
    prepared.module.reset();
  return prepared;
}

std::optional<Mesh> stg::bindPlan(Module &module,
                                  const CompileOptions &options,
                                  DiagnosticEngine &diags) {
  if (failed(applyMesh(module, options, diags)))
    return std::nullopt;
  if (options.context) {
    // The decode step's context length; kv-cache reads it from `dim CTX`.
    Dim *context = module.lookupDim("CTX");
    if (!context)
      context = module.addDim("CTX", module.getModelLoc());
    context->value = Expr(*options.context);
  }
  llvm::StringMap<unsigned> degrees;
  for (const auto &[name, degree] : options.degrees)
    degrees[name] = degree;
  return buildMesh(module, options.rankOrder, degrees, diags);
}

std::optional<CompileOptions::DeepEpMode>
stg::parseDeepEpMode(llvm::StringRef name) {
  using DeepEpMode = CompileOptions::DeepEpMode;
  return llvm::StringSwitch<std::optional<DeepEpMode>>(name)
      .Case("off", DeepEpMode::Off)
      .Case("normal", DeepEpMode::Normal)
      .Case("low-latency", DeepEpMode::LowLatency)
      .Case("auto", DeepEpMode::Auto)
      .Default(std::nullopt);
}

llvm::StringRef stg::getDeepEpModeName(CompileOptions::DeepEpMode mode) {
  using DeepEpMode = CompileOptions::DeepEpMode;
  switch (mode) {
  case DeepEpMode::Off:
    return "off";
  case DeepEpMode::Normal:
    return "normal";
  case DeepEpMode::LowLatency:
    return "low-latency";
  case DeepEpMode::Auto:
    return "auto";
  }
  llvm_unreachable("unknown DeepEP mode");
}

InstantiateOptions stg::getInstantiateOptions(const Mesh &mesh,
                                              const CompileOptions &options) {
  InstantiateOptions instantiateOptions;
  int pipelineAxis = mesh.findAxis(instantiateOptions.pipelineAxis);
  unsigned numStages = pipelineAxis < 0 ? 1 : mesh.getDegree(pipelineAxis);
  instantiateOptions.numMicrobatches =
      options.microbatches ? options.microbatches : numStages;
  instantiateOptions.schedule = options.schedule;
  instantiateOptions.numVirtualStages = options.virtualStages;
  instantiateOptions.pipelineSplit = options.pipelineSplit;
  instantiateOptions.gradientBucketBytes =
      uint64_t(options.gradientBucketMB * 1e6);
  instantiateOptions.memoryAccounting = options.memoryAccounting;
  instantiateOptions.overlapGradientReduction =
      options.overlapGradientReduction;
  instantiateOptions.tensorParallelOverlap =
      options.tensorParallelOverlap.value_or(options.mode == "train");
  instantiateOptions.contextParallelRing = options.contextParallelRing;
  instantiateOptions.overlapParamGather = options.overlapParamGather;
  instantiateOptions.twoBatchOverlap = options.twoBatchOverlap;
  instantiateOptions.foldMicrobatches = options.foldMicrobatches;
  instantiateOptions.foldLayers = options.foldLayers;
  instantiateOptions.expertExchangeUnits = options.deepEpUnits;
  using DeepEpMode = CompileOptions::DeepEpMode;
  switch (options.deepEpMode) {
  case DeepEpMode::Off:
    break;
  case DeepEpMode::Normal:
    instantiateOptions.expertExchange = ExpertExchange::Normal;
    break;
  case DeepEpMode::LowLatency:
    instantiateOptions.expertExchange = ExpertExchange::LowLatency;
    break;
  case DeepEpMode::Auto:
    instantiateOptions.expertExchange = options.mode == "decode"
                                            ? ExpertExchange::LowLatency
                                            : ExpertExchange::Normal;
    break;
  }
  return instantiateOptions;
}

std::optional<ProgramSet>
stg::instantiateModel(const Module &module, const Mesh &mesh,
                      const CompileOptions &options, DiagnosticEngine &diags,
                      OpNumberCache *numbers, ProgramSources *sources) {
  return instantiate(module, mesh, getInstantiateOptions(mesh, options), diags,
                     numbers, sources);
}

std::optional<CompiledModel>
stg::compileModel(const CompileOptions &givenOptions, DiagnosticEngine &diags) {
  CompileOptions options = givenOptions;
  if (std::optional<std::string> error = foldDualPipe(options)) {
    diags.error({}, *error);
    return std::nullopt;
  }
  std::unique_ptr<Module> module = loadModel(options, diags);
  if (!module)
    return std::nullopt;
  // The mesh first: a plan too large to instantiate fails before the passes.
  std::optional<Mesh> mesh = bindPlan(*module, options, diags);
  if (!mesh)
    return std::nullopt;
  PassManager passes;
  if (failed(passes.addPipeline(getPassPipeline(options), diags)) ||
      failed(passes.run(*module, diags)))
    return std::nullopt;
  std::optional<ProgramSet> programs =
      instantiateModel(*module, *mesh, options, diags);
  if (!programs)
    return std::nullopt;
  return CompiledModel{std::move(module), std::move(*programs)};
}
