//===- Instantiate.cpp - Symbolic IR to numeric stage programs ------------===//
//
// The cross-stage edges are found first, for all stages at once, so that a
// producing stage knows to whom it must send before the consuming stage is
// built (StageBuilder.cpp); each edge gets a number from which both ends
// derive the same message tag.
//
//===----------------------------------------------------------------------===//

#include "stg/Instantiate/Instantiate.h"

#include "BackwardSplit.h"
#include "StageBuilder.h"
#include "StageMemory.h"

#include "stg/Instantiate/Limits.h"
#include "stg/Support/LogicalResult.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringExtras.h"

using namespace stg;

std::optional<Mesh> stg::buildMesh(const Module &module,
                                   llvm::StringRef rankOrder,
                                   const llvm::StringMap<unsigned> &degrees,
                                   DiagnosticEngine &diags) {
  std::vector<Mesh::AxisInfo> axes;
  llvm::SmallVector<llvm::StringRef, 8> names;
  rankOrder.split(names, ',');
  for (llvm::StringRef name : names) {
    name = name.trim();
    if (name.empty() || llvm::any_of(axes, [&](const Mesh::AxisInfo &axis) {
          return axis.name == name;
        })) {
      diags.error({}, "--rank-order must name each axis once, found '" +
                          rankOrder + "'");
      return std::nullopt;
    }
    unsigned degree = 1;
    if (degrees.count(name))
      degree = degrees.lookup(name);
    else if (const Axis *axis = module.lookupAxis(name); axis && axis->size)
      degree = *axis->size;
    axes.push_back({name.str(), degree});
  }
  if (axes.size() > 32) {
    diags.error({}, "a mesh has at most 32 axes");
    return std::nullopt;
  }
  // Checked before the Mesh multiplies its degrees in 32 bits.
  uint64_t numRanks = 1;
  std::string product;
  for (const Mesh::AxisInfo &axis : axes) {
    if (axis.degree == 0) {
      diags.error({}, "axis '" + axis.name + "' has degree 0");
      return std::nullopt;
    }
    numRanks = std::min<uint64_t>(numRanks * axis.degree, MaxRanks + 1);
    if (axis.degree > 1)
      product += (product.empty() ? "" : " x ") + axis.name + " " +
                 std::to_string(axis.degree);
  }
  if (numRanks > MaxRanks) {
    diags.error({}, "the mesh (" + product + ") has more than " +
                        llvm::Twine(MaxRanks) +
                        " ranks, the most stagec instantiates");
    return std::nullopt;
  }
  Mesh mesh(std::move(axes));
  for (const std::unique_ptr<Axis> &axis : module.getAxes()) {
    const Axis *base = axis->resolve();
    if (base && base->size.value_or(1) > 1 && mesh.findAxis(base->name) < 0) {
      diags.error(axis->loc, "axis '" + base->name + "' has degree " +
                                 llvm::Twine(*base->size) +
                                 " but is not in the rank order '" +
                                 rankOrder + "'");
      return std::nullopt;
    }
  }
  return mesh;
}

std::optional<MemoryAccounting>
stg::parseMemoryAccounting(llvm::StringRef name) {
  if (name == "megatron")
    return MemoryAccounting::Megatron;
  if (name == "zero")
    return MemoryAccounting::ZeRO;
  return std::nullopt;
}

llvm::StringRef stg::getCollectiveName(CollectiveKind kind) {
  switch (kind) {
  case CollectiveKind::AllReduce:
    return "ALL_REDUCE";
  case CollectiveKind::AllGather:
    return "ALL_GATHER";
  case CollectiveKind::ReduceScatter:
    return "REDUCE_SCATTER";
  case CollectiveKind::AllToAll:
    return "ALL_TO_ALL";
  }
  llvm_unreachable("unknown collective kind");
}

void stg::forEachExecutedNode(
    const StageProgram &program,
    llvm::function_ref<void(const ProgramNode &)> visit) {
  auto run = [&](size_t begin, size_t end) {
    for (size_t id = begin; id < std::min(end, program.nodes.size()); ++id)
      visit(program.nodes[id]);
  };
  if (program.steps.empty())
    run(0, program.nodes.size());
  for (const ProgramStep &step : program.steps) {
    run(step.begin, step.end);
    if (step.fold >= 0) // A folded layer's copies.
      for (uint32_t copy = 0; copy < program.folds[step.fold].copies; ++copy)
        run(program.folds[step.fold].begin, program.folds[step.fold].end);
  }
}

const StageProgram *ProgramSet::getLargestMemoryStage() const {
  const StageProgram *largest = nullptr;
  for (const StageProgram &stage : stages)
    if (!largest || stage.memory.total() > largest->memory.total())
      largest = &stage;
  return largest;
}

std::vector<AxisMask> ProgramSet::getUsedMasks() const {
  llvm::DenseSet<AxisMask> seen;
  std::vector<AxisMask> masks;
  for (const StageProgram &program : stages)
    for (const ProgramNode &node : program.nodes)
      if (node.kind == ProgramNodeKind::Collective &&
          seen.insert(node.group).second)
        masks.push_back(node.group);
  llvm::sort(masks);
  return masks;
}

/// The axis whose upper half mirrors the lower in a folded dualpipe: the
/// data-parallel one foldDualPipe doubled; -1 for another schedule, or
/// where the mesh has no such axis.
static int findMirrorAxis(const Mesh &mesh, PipelineSchedule schedule) {
  if (schedule != PipelineSchedule::DualPipe)
    return -1;
  int axis = mesh.findAxis("dp");
  return axis >= 0 && mesh.getDegree(axis) % 2 == 0 ? axis : -1;
}

/// Finds every data edge whose ends run on different stages (or, in a
/// folded dualpipe, on the two halves) and numbers the edges in program
/// order. Fails if the tags would not fit an int32.
static LogicalResult findStageEdges(SharedState &shared) {
  const Placement &placement = shared.placement;
  unsigned next = 0;
  auto visit = [&](const Op &op, int layer, unsigned consumerStage) {
    for (const Value *operand : op.getOperands()) {
      ValueInstance source = placement.resolve(operand, layer);
      const Op *def = source.value->getDefiningOp();
      if (!def || placement.isFloating(def))
        continue;
      bool acrossHalves = shared.crossesHalves(*def, source.layer, op, layer);
      if (placement.getStage(def, source.layer) == consumerStage &&
          !acrossHalves)
        continue;
      auto &edges = shared.edges[{source.value, source.layer}];
      auto edge = llvm::find_if(edges, [&](const StageEdge &candidate) {
        return candidate.stage == consumerStage &&
               candidate.acrossHalves == acrossHalves;
      });
      if (edge == edges.end())
        edges.push_back(
            {consumerStage, next++, isOncePerStep(op), acrossHalves});
      else // Any per-micro-batch consumer needs every micro-batch's value.
        edge->once &= isOncePerStep(op);
    }
  };
  forEachInstance(shared.module, placement, [&](const Op &op, int layer) {
    visit(op, layer, placement.getStage(&op, layer));
  });
  shared.numEdges = next;
  if (uint64_t(next) * shared.options.numMicrobatches > INT32_MAX) {
    shared.diags.error(shared.module.getModelLoc(),
                       llvm::Twine(next) + " values cross stages in " +
                           llvm::Twine(shared.options.numMicrobatches) +
                           " micro-batches: too many for int32 message tags");
    return failure();
  }
  return success();
}

/// The memory of `stage` of `set`, whose placement is `placement`.
static std::optional<StageMemory>
computeMemory(const Module &module, const ProgramSet &set,
              const Placement &placement, const InstantiateOptions &options,
              OpNumberCache &numbers, unsigned stage) {
  unsigned numStages = set.stages.size();
  // Inference holds one micro-batch's working set, or a pair's when they
  // overlap.
  double inFlight =
      set.training ? getMaxInFlightMicrobatches(options.schedule, stage,
                                                numStages, set.numMicrobatches,
                                                set.numVirtualStages)
      : options.twoBatchOverlap ? std::min(set.numMicrobatches, 2u)
                                : 1;
  std::vector<unsigned> placementName = {numStages, set.numVirtualStages,
                                         stage};
  // An even split is named by its stages and chunks.
  if (!options.pipelineSplit.isEven())
    llvm::append_range(placementName, placement.getChunkSizes());
  return computeStageMemory(module, placement, numbers, stage, inFlight,
                            set.numMicrobatches, set.training,
                            options.memoryAccounting, placementName);
}

/// The top-k and expert count of the model's routers, which DeepEP's
/// exchanges are priced by; one routing for all of a model's MoE layers.
static LogicalResult findExpertRouting(SharedState &shared) {
  bool found = false;
  LogicalResult result = success();
  shared.module.getModel()->walk([&](Op &op) {
    if (op.getKind() != OpKind::Route || failed(result))
      return;
    std::optional<Expr> topk = shared.module.bindAll(op.getAttr("topk")->expr);
    std::optional<Expr> experts =
        shared.module.bindAll(op.getAttr("experts")->expr);
    std::optional<long long> k = topk ? getIntegerValue(*topk) : std::nullopt;
    std::optional<long long> e =
        experts ? getIntegerValue(*experts) : std::nullopt;
    if (!k || !e || *k < 1 || *k > UINT16_MAX || *e < *k || *e > UINT32_MAX) {
      shared.diags.error(op.getLoc(),
                         "--deepep-mode needs the router's top-k and expert "
                         "count as integers, top-k at most the experts");
      result = failure();
      return;
    }
    if (found && (*k != shared.tokenCopies || *e != shared.experts)) {
      shared.diags.error(op.getLoc(),
                         "--deepep-mode prices one routing for all MoE "
                         "layers; this router picks " +
                             llvm::Twine(*k) + " of " + llvm::Twine(*e) +
                             " experts, an earlier one " +
                             llvm::Twine(shared.tokenCopies) + " of " +
                             llvm::Twine(shared.experts));
      result = failure();
      return;
    }
    found = true;
    shared.tokenCopies = uint16_t(*k);
    shared.experts = uint32_t(*e);
  });
  return result;
}

std::optional<ProgramSet>
stg::instantiate(const Module &module, const Mesh &mesh,
                 const InstantiateOptions &options, DiagnosticEngine &diags,
                 OpNumberCache *cachedNumbers, ProgramSources *sources) {
  if (!module.getModel()) {
    diags.error({}, "the input declares no model to instantiate");
    return std::nullopt;
  }
  ProgramSet set;
  set.mesh = mesh;
  set.pipelineAxis = mesh.findAxis(options.pipelineAxis);
  set.numMicrobatches = std::max(1u, options.numMicrobatches);
  if (set.numMicrobatches > MaxMicrobatches) {
    // Folded programs have nodes for two, but a schedule step for each.
    diags.error(module.getModelLoc(),
                llvm::Twine(set.numMicrobatches) +
                    " micro-batches: more than the " +
                    llvm::Twine(MaxMicrobatches) + " a step may have");
    return std::nullopt;
  }
  set.schedule = options.schedule;
  set.mirrorAxis = findMirrorAxis(mesh, options.schedule);
  if (options.schedule == PipelineSchedule::DualPipe && set.mirrorAxis < 0) {
    diags.error(module.getModelLoc(),
                "dualpipe runs as its two mirrored halves (foldDualPipe): it "
                "needs the mesh's dp axis at an even degree (" +
                    mesh.describe() + ")");
    return std::nullopt;
  }
  unsigned numStages =
      set.pipelineAxis < 0 ? 1 : mesh.getDegree(set.pipelineAxis);
  unsigned numChunks = std::max(1u, options.numVirtualStages);
  llvm::StringRef scheduleName = getPipelineScheduleName(options.schedule);
  if (getChunkPlacement(options.schedule) == ChunkPlacement::VShape &&
      (numStages < 2 || numChunks != 2)) {
    diags.error(module.getModelLoc(),
                scheduleName +
                    " runs two model chunks a stage in a V: it needs pp > 1 "
                    "and --virtual-stages 2 (" +
                    llvm::Twine(numStages) + " stages, " +
                    llvm::Twine(numChunks) + " chunks a stage)");
    return std::nullopt;
  }
  // An F&B step's forward finishes with its backward: with one chunk a
  // stage, each hand-off would wait for a whole step.
  if (options.schedule == PipelineSchedule::Combined1F1B && numStages > 1 &&
      numChunks == 1) {
    diags.error(module.getModelLoc(),
                "combined-1f1b over " + llvm::Twine(numStages) +
                    " stages needs --virtual-stages above 1, as "
                    "Megatron-Core requires: a steady step's forward ends "
                    "with its backward, so one chunk a stage would hand "
                    "each micro-batch on a whole step late");
    return std::nullopt;
  }
  if (isInterleaved(options.schedule, numChunks) &&
      (numStages < 2 || !isOneFOneB(options.schedule) ||
       set.numMicrobatches % numStages)) {
    diags.error(module.getModelLoc(),
                "virtual stages interleave the 1F1B schedule of a pipeline: "
                "they need pp > 1, --schedule 1f1b (or combined-1f1b) and a "
                "micro-batch count "
                "that is a multiple of pp (" +
                    llvm::Twine(set.numMicrobatches) + " over " +
                    llvm::Twine(numStages) + " stages)");
    return std::nullopt;
  }
  set.numVirtualStages = numChunks;
  std::optional<Placement> placement =
      Placement::create(module, numStages, numChunks, options.pipelineSplit,
                        getChunkPlacement(options.schedule), diags);
  if (!placement)
    return std::nullopt;
  set.numLayers = placement->getNumLayers();
  set.pipelineSplit = options.pipelineSplit;
  set.chunkLayers.assign(placement->getChunkSizes().begin(),
                         placement->getChunkSizes().end());
  bool training = false;
  module.getModel()->walk(
      [&](Op &op) { training |= op.getPhase() != Phase::Forward; });
  set.training = training;
  unsigned fewest = getMinMicrobatches(options.schedule, numStages);
  if (training && set.numMicrobatches < fewest) {
    diags.error(module.getModelLoc(),
                scheduleName + " needs at least " + llvm::Twine(fewest) +
                    " micro-batches, twice the stages (" +
                    llvm::Twine(set.numMicrobatches) + " given)");
    return std::nullopt;
  }

  InstantiateOptions stepOptions = options;
  stepOptions.numMicrobatches = set.numMicrobatches;
  // Folding replays one micro-batch's step for another's; an overlapped
  // step runs two, whose distance changes along the schedule.
  if (training ? overlapsSteps(options.schedule) : options.twoBatchOverlap)
    stepOptions.foldMicrobatches = stepOptions.foldLayers = false;
  set.folded = stepOptions.foldMicrobatches || stepOptions.foldLayers;
  std::optional<OpNumberCache> ownNumbers;
  if (cachedNumbers)
    cachedNumbers->setDiagnostics(diags);
  else
    ownNumbers.emplace(module, diags);
  OpNumberCache &numbers = cachedNumbers ? *cachedNumbers : *ownNumbers;
  if (sources) {
    sources->queries.clear();
    sources->stages.clear();
    if (!options.gradientBucketBytes)
      sources->stages.resize(numStages);
  }
  SharedState shared(module, mesh, *placement, stepOptions, numbers, diags,
                     training,
                     sources && !sources->stages.empty() ? sources : nullptr);
  if (training && splitsBackward(options.schedule))
    shared.weightGradientOps = findWeightGradientOps(module);
  if (options.expertExchange != ExpertExchange::AllToAll &&
      failed(findExpertRouting(shared)))
    return std::nullopt;
  if (failed(findStageEdges(shared)))
    return std::nullopt;
  if (sources) {
    sources->foldedMicrobatches = stepOptions.foldMicrobatches;
    sources->numEdges = shared.numEdges;
  }
  set.stages.resize(numStages);
  for (unsigned stage = 0; stage < numStages; ++stage) {
    StageBuilder builder(shared, stage);
    if (!builder.build(set.stages[stage]))
      return std::nullopt;
    std::optional<StageMemory> memory =
        computeMemory(module, set, *placement, stepOptions, numbers, stage);
    if (!memory)
      return std::nullopt;
    set.stages[stage].memory = *memory;
  }
  return set;
}

LogicalResult stg::moveProgramSetToMesh(ProgramSet &set, const Mesh &mesh,
                                        llvm::StringRef pipelineAxis,
                                        DiagnosticEngine &diags) {
  auto countSplit = [](const Mesh &mesh) {
    return llvm::count_if(mesh.getAxes(), [](const Mesh::AxisInfo &axis) {
      return axis.degree > 1;
    });
  };
  bool same = countSplit(set.mesh) == countSplit(mesh);
  llvm::SmallVector<int, 8> newIndex;
  for (const Mesh::AxisInfo &axis : set.mesh.getAxes()) {
    int index = mesh.findAxis(axis.name);
    same &= (axis.degree > 1) == (index >= 0 && mesh.getDegree(index) > 1);
    newIndex.push_back(index);
  }
  if (!same) {
    diags.error({}, "internal error: a program set re-priced for a mesh "
                    "that splits other axes");
    return failure();
  }
  // Masks name axes by their index in the mesh: a collective's group, and
  // the context-parallel ring an attention's kernels run around.
  auto move = [&](AxisMask old) {
    AxisMask mask = 0;
    for (unsigned index = 0; index < newIndex.size(); ++index)
      if (old & (AxisMask(1) << index))
        mask |= AxisMask(1) << newIndex[index];
    return mask;
  };
  for (StageProgram &stage : set.stages)
    for (ProgramNode &node : stage.nodes) {
      if (node.kind == ProgramNodeKind::Collective)
        node.group = move(node.group);
      else if (node.attentionRing)
        node.attentionRing = move(node.attentionRing);
    }
  set.mesh = mesh;
  set.pipelineAxis = mesh.findAxis(pipelineAxis);
  set.mirrorAxis = findMirrorAxis(mesh, set.schedule);
  return success();
}

LogicalResult stg::repriceProgramSet(ProgramSet &set,
                                     const ProgramSources &sources,
                                     const Module &module, const Mesh &mesh,
                                     const InstantiateOptions &options,
                                     OpNumberCache &numbers,
                                     DiagnosticEngine &diags) {
  unsigned numStages = set.stages.size();
  if (sources.stages.size() != numStages) {
    diags.error({}, "internal error: re-pricing a program set whose sources "
                    "were not recorded");
    return failure();
  }
  if (failed(moveProgramSetToMesh(set, mesh, options.pipelineAxis, diags)))
    return failure();
  std::optional<Placement> placement = Placement::create(
      module, numStages, set.numVirtualStages, options.pipelineSplit,
      getChunkPlacement(set.schedule), diags);
  if (!placement)
    return failure();
  numbers.setDiagnostics(diags);
  InstantiateOptions stepOptions = options;
  stepOptions.numMicrobatches = set.numMicrobatches;
  // As the builder asked, stage by stage, each stage's memory after its
  // nodes: the first error is the one a build would report. A query asked
  // again gives what it gave.
  std::vector<OpNumbers> priced(sources.queries.size());
  std::vector<bool> isPriced(sources.queries.size());
  for (unsigned stage = 0; stage < numStages; ++stage) {
    const ProgramSources::Stage &recorded = sources.stages[stage];
    for (uint32_t query : recorded.queries) {
      if (isPriced[query])
        continue;
      auto [op, value] = sources.queries[query];
      if (value) {
        std::optional<int64_t> bytes =
            numbers.getLocalBytes(*value, op->getLoc());
        if (!bytes)
          return failure();
        priced[query].commBytes = *bytes;
      } else if (const OpNumbers *found = numbers.get(*op)) {
        priced[query] = *found;
      } else {
        return failure();
      }
      isPriced[query] = true;
    }
    std::vector<ProgramNode> &nodes = set.stages[stage].nodes;
    for (size_t id = 0; id < nodes.size(); ++id) {
      uint32_t query = recorded.nodeQueries[id];
      if (query == ProgramSources::NoQuery)
        continue;
      ProgramNode &node = nodes[id];
      const OpNumbers &from = priced[query];
      if (node.kind == ProgramNodeKind::Compute) {
        node.numOps = from.flops;
        node.tensorBytes = from.bytesAccessed;
        node.gemm = from.gemm;
        node.attentionRows = from.attentionRows;
        node.attentionExps = from.attentionExps;
        node.castBytes = from.castBytes;
        node.kernel = from.kernel;
        node.precision = from.precision;
      } else {
        node.commBytes = from.commBytes;
      }
    }
    std::optional<StageMemory> memory =
        computeMemory(module, set, *placement, stepOptions, numbers, stage);
    if (!memory)
      return failure();
    set.stages[stage].memory = *memory;
  }
  return success();
}
