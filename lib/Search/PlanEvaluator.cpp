//===- PlanEvaluator.cpp - Compile and price one plan ---------------------===//

#include "stg/Search/PlanEvaluator.h"

#include "stg/Passes/DivisibilityCheck.h"
#include "stg/Passes/Pass.h"
#include "stg/Passes/Passes.h"
#include "stg/Perf/DeviceModel.h"
#include "stg/Perf/StepEstimate.h"

#include "llvm/ADT/StringExtras.h"

#include <algorithm>

using namespace stg;

llvm::StringRef stg::getPlanStatusName(PlanStatus status) {
  switch (status) {
  case PlanStatus::Fits:
    return "fits";
  case PlanStatus::OverMemory:
    return "over-memory";
  case PlanStatus::Failed:
    return "failed";
  }
  return "failed";
}

/// The message of the first error in `output`, without its location and
/// source excerpt: a plan's reason fits one line.
static std::string getFirstError(llvm::StringRef output) {
  llvm::StringRef line = output.split('\n').first;
  size_t at = line.find("error: ");
  return (at == llvm::StringRef::npos ? line : line.substr(at + 7)).str();
}

/// Sets every plan axis and the micro-batch size, so that a module reused
/// from the previous plan keeps nothing of it.
static std::vector<std::pair<std::string, unsigned>>
getDegrees(const Plan &plan) {
  std::vector<std::pair<std::string, unsigned>> degrees;
  for (size_t index = 0; index < PlanAxes.size(); ++index)
    degrees.push_back({PlanAxes[index], plan.degrees[index]});
  return degrees;
}

llvm::Expected<ModelFacts> stg::readModelFacts(const CompileOptions &base) {
  CompileOptions options = base;
  options.degrees = getDegrees(Plan());
  options.microbatches = 1;
  std::string errors;
  llvm::raw_string_ostream os(errors);
  DiagnosticEngine diags(os);
  diags.setProgramName("stage-search");
  std::optional<CompiledModel> compiled = compileModel(options, diags);
  if (!compiled)
    return llvm::createStringError(std::errc::invalid_argument, "%s",
                                   os.str().c_str());
  const Module &module = *compiled->module;
  if (!module.lookupDim("MB"))
    return llvm::createStringError(
        std::errc::invalid_argument,
        "%s declares no `dim MB`, the micro-batch per data-parallel replica "
        "that the search sets (the shipped templates declare it)",
        base.input.c_str());
  ModelFacts facts;
  facts.modelName = module.getModel()->getName().str();
  facts.shape.layers = std::max(1u, compiled->programs.numLayers);
  // An axis is worth searching if the model splits something over it; ep
  // only if it splits weights (experts): over data alone, as the dense
  // templates use it, it repeats dp.
  module.getModel()->walkValues([&](const Value *value) {
    const Distribution &layout = value->getType().getDistribution();
    bool weight = value->isParam();
    for (unsigned dim = 0; dim < value->getType().getRank(); ++dim)
      for (const Axis *axis : layout.getPartition(dim))
        if (const Axis *ranks = axis->resolve())
          for (size_t index = 0; index < PlanAxes.size(); ++index)
            if (ranks->name == PlanAxes[index] &&
                (weight || llvm::StringRef(PlanAxes[index]) != "ep"))
              facts.shape.splits[index] = true;
  });
  facts.shape.splits[2] = facts.shape.layers > 1; // pp splits the layers.
  auto isSwitch = [&](llvm::StringRef name) {
    const Option *option = compiled->module->lookupOption(name);
    return option && option->isBool();
  };
  facts.shape.hasSequenceParallel = isSwitch("sequence_parallel");
  facts.shape.hasWeightSharding = isSwitch("weight_sharded");
  for (const StageProgram &stage : compiled->programs.stages)
    for (const ProgramNode &node : stage.nodes)
      if (node.kind == ProgramNodeKind::Compute &&
          node.phase != Phase::Optimizer)
        facts.flopsPerSequence += double(node.numOps);
  // On one GPU the micro-batch is the model's default MB sequences.
  std::optional<long long> sequences = module.getDimValue("MB");
  facts.flopsPerSequence /= double(std::max(1LL, sequences.value_or(1)));
  if (std::optional<long long> length = module.getDimValue("S"))
    facts.sequenceLength = uint64_t(std::max(0LL, *length));
  return facts;
}

CompileOptions PlanEvaluator::getCompileOptions(const Plan &plan) const {
  CompileOptions options = base;
  options.degrees = getDegrees(plan);
  options.rankOrder = plan.getRankOrder();
  options.microbatches = plan.microbatches;
  options.virtualStages = plan.virtualStages;
  options.pipelineSplit = getPipelineSplit(plan, facts.shape.layers);
  options.recompute = plan.recompute;
  options.contextParallelRing = plan.cpExchange == CpExchange::Ring;
  options.contextParallelAllToAll = plan.cpExchange == CpExchange::AllToAll;
  if (plan.precision != Precision::BF16)
    options.precision = plan.precision;
  if (plan.precision == Precision::FP16 && !base.elementType)
    options.elementType = ElementType::FP16;
  options.schedule = plan.schedule;
  options.distributedOptimizer =
      plan.sharding == WeightSharding::DistributedOptimizer;
  options.fsdp = plan.sharding == WeightSharding::FSDP;
  options.overrides.push_back({"MB", std::to_string(plan.microBatchSize)});
  if (facts.shape.hasSequenceParallel)
    options.overrides.push_back(
        {"sequence_parallel", plan.sequenceParallel ? "true" : "false"});
  return options;
}

PlanEvaluator::CachedModule *
PlanEvaluator::getModule(const Plan &plan, const CompileOptions &options,
                         DiagnosticEngine &diags) {
  std::string key = plan.getModuleKey();
  auto found = modules.find(key);
  if (found != modules.end())
    return &found->second;
  // The module's messages go to the plan's engine.
  CachedModule loaded;
  loaded.prepared = prepareModel(options, "stage-search");
  if (!loaded.prepared.module) {
    diags.error({}, getFirstError(loaded.prepared.log->str()));
    return nullptr;
  }
  return &(modules[key] = std::move(loaded));
}

PlanEvaluator::CachedStructure *
PlanEvaluator::getPrograms(const Plan &plan, CachedModule &cached,
                           const Mesh &mesh, const CompileOptions &options,
                           llvm::StringRef replicated,
                           DiagnosticEngine &diags) {
  // Replicated extents change the programs (KV heads fewer than tp get
  // other collectives): plans share programs only where they agree.
  std::string key = plan.getStructureKey(), familyKey = plan.getFamilyKey();
  if (!replicated.empty()) {
    key += " replicated " + replicated.str();
    familyKey += " replicated " + replicated.str();
  }
  CachedStructure *structure = findStructure(familyKey);
  bool reusable = structure && !structure->sources.stages.empty();
  if (reusable && structure->key != key) {
    // Another micro-batch count of the family: its steps and tags move,
    // its nodes stay (else it is built below).
    reusable = succeeded(retargetMicrobatches(
        structure->programs, structure->sources, plan.microbatches));
    if (reusable) {
      structure->key = key;
      structure->pricedFor.clear();
      structure->shapes.forgetSteps();
    }
  }
  InstantiateOptions instantiateOptions = getInstantiateOptions(mesh, options);
  if (reusable && !cached.bound.empty() &&
      structure->pricedFor == cached.bound) {
    // The last plan's numbers, in another rank order (tp in the node or
    // not: half of a space's plans): only the collectives' groups move.
    if (failed(moveProgramSetToMesh(structure->programs, mesh,
                                    instantiateOptions.pipelineAxis, diags)))
      return nullptr;
    return structure;
  }
  if (reusable) {
    structure->pricedFor.clear();
    if (failed(repriceProgramSet(structure->programs, structure->sources,
                                 *cached.prepared.module, mesh,
                                 instantiateOptions, *cached.numbers, diags))) {
      // The cache keeps a failed op as null without its message: the next
      // plan evaluates afresh, so that it reports why.
      cached.bound.clear();
      return nullptr;
    }
  } else {
    if (structure) // Its family's, at the front, which failed to retarget.
      structures.erase(structures.begin());
    auto built = std::make_unique<CachedStructure>();
    std::optional<ProgramSet> programs =
        instantiateModel(*cached.prepared.module, mesh, options, diags,
                         cached.numbers.get(), &built->sources);
    if (!programs) {
      cached.bound.clear();
      return nullptr;
    }
    built->key = std::move(key);
    built->familyKey = std::move(familyKey);
    built->programs = std::move(*programs);
    structures.insert(structures.begin(), std::move(built));
    if (structures.size() > MaxCachedStructures)
      structures.pop_back();
    structure = structures.front().get();
  }
  applyDeviceModel(structure->programs, system.device, nullptr,
                   structure->sources);
  structure->pricedFor = cached.bound;
  return structure;
}

PlanEvaluator::CachedStructure *
PlanEvaluator::findStructure(llvm::StringRef familyKey) {
  auto found = llvm::find_if(structures, [&](const auto &structure) {
    return structure->familyKey == familyKey;
  });
  if (found == structures.end())
    return nullptr;
  std::rotate(structures.begin(), found, std::next(found));
  return structures.front().get();
}

PlanResult PlanEvaluator::evaluate(const Plan &given) {
  PlanResult result;
  result.plan = given;
  // The plan as it runs (foldDualPipePlan); its row is the one given.
  Plan plan = foldDualPipePlan(given);
  CompileOptions options = getCompileOptions(plan);
  options.foldMicrobatches = true;
  options.foldLayers = true;
  std::string errors;
  llvm::raw_string_ostream os(errors);
  DiagnosticEngine diags(os);
  diags.setProgramName("stage-search");
  auto fail = [&] {
    result.reason = getFirstError(os.str());
    return result;
  };
  CachedModule *cached = getModule(plan, options, diags);
  if (!cached)
    return fail();
  Module *module = cached->prepared.module.get();
  module->lookupDim("MB")->value = Expr(plan.microBatchSize);
  std::optional<Mesh> mesh = bindPlan(*module, options, diags);
  if (!mesh)
    return fail();
  std::string bound = "mb" + std::to_string(plan.microBatchSize);
  for (unsigned degree : plan.degrees)
    bound += " " + std::to_string(degree);
  if (bound != cached->bound) {
    cached->bound = bound;
    if (cached->numbers)
      cached->numbers->forgetNumbers();
    else
      cached->numbers = std::make_unique<OpNumberCache>(*module, diags);
    cached->numbers->setDiagnostics(diags);
  }
  auto [checked, fresh] = cached->checks.try_emplace(bound);
  if (fresh) {
    if (!cached->divisibility)
      cached->divisibility = std::make_unique<DivisibilityCheck>(*module);
    if (failed(cached->divisibility->check(diags)))
      checked->second.failure = getFirstError(os.str());
    else
      checked->second.replicated = cached->divisibility->getReplicatedExtents();
  }
  if (!checked->second.failure.empty()) {
    result.reason = checked->second.failure;
    result.prunedByModel = true;
    return result;
  }
  // The plan's micro-batches must add up to the global batch: the search
  // takes the model's B to be MB over the data replicas.
  if (module->lookupDim("B")) {
    std::optional<long long> sequences = module->getDimValue("B");
    if (!sequences || uint64_t(*sequences) * plan.microbatches != globalBatch) {
      result.reason = "the model's B is not MB x dp x ep: the micro-batches "
                      "would not add up to the global batch";
      return result;
    }
  }
  CachedStructure *structure = getPrograms(plan, *cached, *mesh, options,
                                           checked->second.replicated, diags);
  if (!structure)
    return fail();
  // The plan's programs are those of its structure, re-priced.
  const ProgramSet *programs = &structure->programs;
  llvm::Expected<StepEstimate> estimate =
      estimateStep(*programs, system, nullptr, &structure->shapes);
  if (!estimate) {
    result.reason = llvm::toString(estimate.takeError());
    return result;
  }

  if (const StageProgram *largest = programs->getLargestMemoryStage();
      largest && largest->memory.total() > 0)
    result.memory = largest->memory;
  result.stepMicros = estimate->stepMicros;
  double step = std::max(estimate->stepMicros, 1e-9);
  double stages = double(estimate->stages.size());
  double waiting = 0;
  for (const StageTime &stage : estimate->stages) {
    result.computeMicros += stage.computeMicros / stages;
    waiting += stage.pipelineWaitMicros / stages;
    result.exposedCommunicationMicros +=
        std::max(0.0, step - stage.computeMicros - stage.pipelineWaitMicros) /
        stages;
  }
  result.bubbleFraction = std::min(1.0, waiting / step);
  double seconds = step / 1e6, gpus = plan.getGPUs();
  result.mfu = facts.flopsPerSequence * globalBatch /
               (system.device.peakFlops * gpus * seconds);
  result.tokensPerSecondPerGPU =
      double(globalBatch) * facts.sequenceLength / (seconds * gpus);
  result.status = result.memory.total() <= memoryLimitBytes
                      ? PlanStatus::Fits
                      : PlanStatus::OverMemory;
  if (result.status == PlanStatus::OverMemory)
    result.reason = "needs " +
                    llvm::utostr(result.memory.total() / 1000000) +
                    " MB a rank, over the limit of " +
                    llvm::utostr(memoryLimitBytes / 1000000) + " MB";
  return result;
}
