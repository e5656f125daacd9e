//===- StageBuilder.cpp - One pipeline stage's program, node by node ------===//

#include "StageBuilder.h"

#include "CommOverlap.h"

#include "stg/Instantiate/Limits.h"

#include "stg/IR/GradOp.h"

#include <algorithm>
#include <map>

using namespace stg;

namespace {

/// `layer.decoder.h` in repetition 12 of `layer`, micro-batch 3:
/// `layer.12.decoder.h.mb3`.
std::string instanceName(llvm::StringRef name, llvm::StringRef loop,
                         int index, int microbatch) {
  std::string text;
  if (index >= 0) {
    if (name.startswith(loop) && name.substr(loop.size()).startswith("."))
      text = (loop + "." + llvm::Twine(index) + name.substr(loop.size())).str();
    else
      text = (loop + "." + llvm::Twine(index) + "." + name).str();
  } else {
    text = name.str();
  }
  if (microbatch >= 0)
    text += ".mb" + std::to_string(microbatch);
  return text;
}

std::string getOpType(const Op &op) {
  OpKind kind = op.getKind();
  const char *suffix = "";
  if (kind == OpKind::Grad) {
    kind = getGradForwardKind(op);
    suffix = "_backward";
  }
  if (kind == OpKind::Adam)
    return "optimizer";
  // Unfused attention is several kernels, priced apart (DeviceModel.h).
  if (kind == OpKind::Attention && op.getAttr("kernel")->text == "unfused")
    return std::string("attention_unfused") + suffix;
  if (getOpInfo(kind).has(Elementwise))
    return std::string("elementwise") + suffix;
  return (getOpInfo(kind).name + suffix).str();
}

std::optional<CollectiveKind> getCommType(OpKind kind) {
  switch (kind) {
  case OpKind::AllReduce:
    return CollectiveKind::AllReduce;
  case OpKind::AllGather:
    return CollectiveKind::AllGather;
  case OpKind::ReduceScatter:
    return CollectiveKind::ReduceScatter;
  case OpKind::AllToAll:
    return CollectiveKind::AllToAll;
  default:
    return std::nullopt;
  }
}

} // namespace

bool StageBuilder::isExpertExchange(const Op &op) const {
  return op.getInfo().has(Collective) &&
         getCommType(op.getKind()) == CollectiveKind::AllToAll &&
         isOverExpertAxis(op) && getGroupMask(op);
}

bool StageBuilder::stagesByExpertExchanges() const {
  int axis = shared.mesh.findAxis(shared.options.expertAxis);
  return !shared.training && axis >= 0 && shared.mesh.getDegree(axis) > 1 &&
         shared.options.expertExchange != ExpertExchange::LowLatency;
}

std::string StageBuilder::getInstanceName(const Op &op,
                                          llvm::StringRef valueName, int layer,
                                          int microbatch) const {
  // Folded programs are priced, never written: names would only cost.
  if (shared.options.foldMicrobatches || shared.options.foldLayers)
    return std::string();
  if (layer < 0)
    return instanceName(valueName, "", -1, microbatch);
  // Layers are numbered within their repeat statement in names.
  const Graph &body = *op.getParent();
  int start = placement.getRepeat(body.getParentOp()).loopStart;
  return instanceName(valueName, body.getName(),
                      placement.getLayer(&op, layer) - start, microbatch);
}

uint32_t StageBuilder::recordQuery(const Op *op, const Value *value) {
  if (!sources)
    return ProgramSources::NoQuery;
  std::vector<ProgramSources::Query> &all = shared.sources->queries;
  auto [it, inserted] = shared.queryIndex.try_emplace({op, value}, all.size());
  if (inserted) {
    all.push_back({op, value});
    shared.queryAskedBy.push_back(stage);
    sources->queries.push_back(it->second);
  } else if (shared.queryAskedBy[it->second] != stage) {
    shared.queryAskedBy[it->second] = stage;
    sources->queries.push_back(it->second);
  }
  return it->second;
}

uint32_t StageBuilder::addNode(ProgramNode &&node, const Op *op,
                               uint32_t query) {
  if (nodes->size() >= MaxStageNodes) {
    if (!failed)
      shared.diags.error(shared.module.getModelLoc(),
                         "stage " + llvm::Twine(stage) + " needs more than " +
                             llvm::Twine(MaxStageNodes) +
                             " nodes, the most a stage program may have; use "
                             "fewer micro-batches or layers per stage");
    failed = true;
    return 0;
  }
  uint32_t id = nodes->size();
  std::sort(node.dataDeps.begin(), node.dataDeps.end()); // Not qsort: a few.
  node.dataDeps.erase(std::unique(node.dataDeps.begin(), node.dataDeps.end()),
                      node.dataDeps.end());
  if (node.kind == ProgramNodeKind::Collective) {
    // One communicator stream per group: every member issues the group's
    // collectives in this program's order.
    auto [it, first] = lastCollective.try_emplace(node.group, id);
    if (!first) {
      if (!llvm::is_contained(node.dataDeps, it->second))
        node.ctrlDeps.push_back(it->second);
      it->second = id;
    }
  }
  nodes->push_back(std::move(node));
  nodeOps.push_back(op);
  if (sources)
    sources->nodeQueries.push_back(query);
  return id;
}

bool StageBuilder::isReplayed(const Op &op, int microbatch) const {
  if (!shared.options.foldMicrobatches || microbatch <= 0 ||
      (op.getPhase() != Phase::Forward && op.getPhase() != Phase::Backward))
    return false;
  ScheduleStep step{op.getPhase() == Phase::Backward, unsigned(microbatch)};
  if (step.backward && !shared.weightGradientOps.empty())
    step.part = shared.weightGradientOps.count(&op) ? BackwardPart::Weight
                                                    : BackwardPart::Input;
  return replaysFirstMicrobatch(step, shared.options.numMicrobatches,
                                shared.training);
}

void StageBuilder::collectOperand(const Op &consumer, const Value *operand,
                                  int layer, int microbatch,
                                  bool allMicrobatches,
                                  llvm::SmallVectorImpl<uint32_t> &deps) {
  ValueInstance source = placement.resolve(operand, layer);
  const Op *def = source.value->getDefiningOp();
  if (!def || placement.isFloating(def))
    return;
  if (redirect.repeat && source.layer >= redirect.first &&
      source.layer <= redirect.last &&
      def->getParent()->getParentOp() == redirect.repeat)
    source.layer = redirect.templateLayer;
  int first = microbatch, last = microbatch;
  if (isOncePerStep(*def)) {
    first = last = -1;
  } else if (allMicrobatches) {
    first = 0;
    last = shared.options.numMicrobatches - 1;
  }
  unsigned sourceStage = placement.getStage(def, source.layer);
  InstanceKey key{source.value, source.layer};
  bool acrossHalves = shared.crossesHalves(*def, source.layer, consumer, layer);
  const StageEdge *edge = nullptr;
  if (sourceStage != stage || acrossHalves) {
    auto edges = shared.edges.find(key);
    if (edges != shared.edges.end())
      for (const StageEdge &candidate : edges->second)
        if (candidate.stage == stage && candidate.acrossHalves == acrossHalves)
          edge = &candidate;
    if (!edge) {
      shared.diags.error(def->getLoc(),
                         "internal error: '%" + source.value->getName() +
                             "' crosses stages without a numbered edge");
      failed = true;
      return;
    }
    // Once-per-step work receives the accumulated value once, after the
    // last micro-batch.
    if (edge->once)
      first = last;
  }
  for (int mb = first; mb <= last; ++mb) {
    if (!isBuilt(mb))
      continue; // A folded micro-batch's value: an earlier step made it.
    if (llvm::is_contained(bucket.members, std::make_pair(key, mb)))
      flushBucket();
    // A replayed step's values are held by micro-batch 0's nodes, which
    // stand for them as its step stands for the replay.
    int held = isReplayed(*def, mb) ? 0 : mb;
    if (acrossHalves) {
      auto received = mirrorHolders.find({key, mb});
      if (received != mirrorHolders.end()) {
        deps.push_back(received->second);
        continue;
      }
    }
    auto found = acrossHalves ? holders.end() : holders.find({key, held});
    if (found != holders.end()) {
      deps.append(found->second.begin(), found->second.end());
      continue;
    }
    if (!edge && source.layer >= 0 && foldedAway[source.layer])
      continue; // Made by a folded layer of an earlier step.
    if (edge && replayedReceives.count({key, held}))
      continue; // Received by a replayed step of an earlier chunk.
    if (!edge) {
      // Produced on this stage by a step not run yet: a schedule error.
      shared.diags.error(def->getLoc(),
                         "internal error: '%" + source.value->getName() +
                             "' used before the step that computes it");
      failed = true;
      return;
    }
    uint32_t query = recordQuery(def, source.value);
    std::optional<int64_t> bytes =
        shared.numbers.getLocalBytes(*source.value, def->getLoc());
    if (!bytes) {
      failed = true;
      return;
    }
    ProgramNode recv;
    recv.kind = ProgramNodeKind::Recv;
    recv.name = getInstanceName(*source.value, source.layer, mb) + ".recv";
    recv.commBytes = *bytes;
    recv.peerStage = sourceStage;
    recv.acrossHalves = acrossHalves;
    recv.tag = getTag(edge->number, mb);
    recv.phase = def->getPhase();
    recv.layer = getModelLayer(*def, source.layer);
    recv.microbatch = mb;
    uint32_t id = addNode(std::move(recv), nullptr, query);
    if (acrossHalves)
      mirrorHolders[{key, mb}] = id;
    else
      holders[{key, mb}] = {id};
    deps.push_back(id);
    stepMessages.push_back({key, edge->number, stage, edge->once});
  }
}

void StageBuilder::sendResult(ValueInstance producer, int microbatch,
                              llvm::ArrayRef<uint32_t> deps) {
  auto found = shared.edges.find({producer.value, producer.layer});
  if (found == shared.edges.end())
    return;
  const Op &def = *producer.value->getDefiningOp();
  uint32_t query = recordQuery(&def, producer.value);
  std::optional<int64_t> bytes =
      shared.numbers.getLocalBytes(*producer.value, def.getLoc());
  if (!bytes) {
    failed = true;
    return;
  }
  int lastMicrobatch = int(shared.options.numMicrobatches) - 1;
  for (const StageEdge &edge : found->second) {
    if (edge.once && microbatch >= 0 && microbatch != lastMicrobatch)
      continue;
    ProgramNode send;
    send.kind = ProgramNodeKind::Send;
    send.name = getInstanceName(*producer.value, producer.layer, microbatch) +
                ".send";
    send.commBytes = *bytes;
    send.peerStage = edge.stage;
    send.acrossHalves = edge.acrossHalves;
    send.tag = getTag(edge.number, microbatch);
    send.phase = def.getPhase();
    send.layer = getModelLayer(def, producer.layer);
    send.microbatch = microbatch;
    send.dataDeps.assign(deps.begin(), deps.end());
    addNode(std::move(send), nullptr, query);
    stepMessages.push_back(
        {{producer.value, producer.layer}, edge.number, edge.stage, edge.once});
  }
}

void StageBuilder::addToBucket(ProgramNode node, const Op &op, int layer) {
  if (bucket.node && (bucket.node->commType != node.commType ||
                      bucket.node->group != node.group))
    flushBucket();
  if (!bucket.node) {
    bucket.node = std::move(node);
    bucket.node->name += ".bucket";
  } else {
    bucket.node->commBytes += node.commBytes;
    bucket.node->dataDeps.append(node.dataDeps.begin(), node.dataDeps.end());
  }
  ++bucket.size;
  bucket.members.push_back({{op.getResult(), layer}, -1});
  if (uint64_t(bucket.node->commBytes) >= shared.options.gradientBucketBytes)
    flushBucket();
}

void StageBuilder::flushBucket() {
  if (!bucket.node)
    return;
  bucket.node->name += std::to_string(bucket.size);
  uint32_t id = addNode(std::move(*bucket.node));
  for (const auto &member : bucket.members)
    holders[member] = {id};
  bucket = Bucket();
}

void StageBuilder::buildOp(const Op &op, int layer, int microbatch) {
  if (failed)
    return; // One error, not its cascade through every consumer.
  bool once = isOncePerStep(op);
  int mb = once ? -1 : microbatch;
  llvm::SmallVector<uint32_t, 4> deps;
  for (const Value *operand : op.getOperands())
    collectOperand(op, operand, layer, mb, once, deps);
  if (failed)
    return;
  if (!stepParamGathers.empty() && op.getPhase() == Phase::Forward)
    addParamGatherDeps(op, layer, deps);

  llvm::SmallVector<uint32_t, 4> held;
  if (isElided(op)) {
    held.assign(deps.begin(), deps.end());
  } else {
    uint32_t query = 0;
    const OpNumbers *numbers = getNumbers(op, query);
    if (!numbers)
      return;
    ProgramNode node;
    llvm::StringRef valueName =
        op.getResults().empty() ? op.getKindName() : op.getResult()->getName();
    node.name = getInstanceName(op, valueName, layer, mb);
    node.phase = op.getPhase();
    node.weightGradient = shared.weightGradientOps.count(&op) > 0;
    node.layer = getModelLayer(op, layer);
    node.microbatch = mb;
    if (op.getInfo().has(Collective)) {
      node.dataDeps = deps;
      node.kind = ProgramNodeKind::Collective;
      node.commBytes = numbers->commBytes;
      AxisMask mask = getGroupMask(op);
      std::optional<CollectiveKind> type =
          getCommType(op.getKind());
      if (!type) {
        shared.diags.error(op.getLoc(),
                           "'" + op.getKindName() +
                               "' has no Chakra collective that ASTRA-sim "
                               "simulates; use allreduce, allgather, "
                               "reducescatter or alltoall");
        failed = true;
        return;
      }
      node.commType = *type;
      node.group = mask;
      if (shared.experts && node.commType == CollectiveKind::AllToAll &&
          isOverExpertAxis(op)) {
        node.expertExchange = shared.options.expertExchange;
        node.tokenCopies = shared.tokenCopies;
        node.experts = shared.experts;
        if (node.expertExchange == ExpertExchange::Normal)
          node.heldUnits = shared.options.expertExchangeUnits;
      }
      bool bucketed = shared.options.gradientBucketBytes && mask &&
                      node.phase == Phase::GradientSync &&
                      (node.commType == CollectiveKind::AllReduce ||
                       node.commType == CollectiveKind::ReduceScatter) &&
                      !shared.edges.count({op.getResult(), layer});
      if (bucketed) {
        addToBucket(std::move(node), op, layer);
        return;
      }
      if (mask && isWeightGather(op, layer))
        boundPrefetch(node);
      if (gathersAfter && paramGatherOps.count(&op))
        node.ctrlDeps.push_back(*gathersAfter);
      std::optional<uint32_t> beside;
      if (node.commType == CollectiveKind::ReduceScatter)
        for (const OverlapAxes &overlap : overlaps)
          if (isOverlappableCollective(node, overlap.axes))
            beside = overlapReduceScatter(*nodes, overlap.partner,
                                          node.dataDeps);
      // A collective over one rank does nothing.
      if (!mask)
        held.assign(deps.begin(), deps.end());
      else
        held = {addNode(std::move(node), &op, query)};
      if (beside)
        held.push_back(*beside);
    } else {
      node.dataDeps = std::move(deps);
      node.kind = ProgramNodeKind::Compute;
      node.opType = getOpType(op);
      node.numOps = numbers->flops;
      node.tensorBytes = numbers->bytesAccessed;
      node.gemm = numbers->gemm;
      node.attentionRows = numbers->attentionRows;
      node.attentionExps = numbers->attentionExps;
      node.castBytes = numbers->castBytes;
      node.kernel = numbers->kernel;
      node.precision = numbers->precision;
      int32_t nodeLayer = node.layer;
      bool perMicrobatch =
          node.phase == Phase::Forward || node.phase == Phase::Backward;
      if (node.phase == Phase::Backward)
        boundReplay(node);
      llvm::SmallVector<uint32_t, 2> beside;
      for (const OverlapAxes &overlap : overlaps) {
        if (!isOverlapPartner(node, overlap.partner))
          continue;
        beside = overlapGathers(*nodes, overlap.axes, node.dataDeps);
        // The ring runs a kernel over the rank's queries per step (an
        // all-to-all context parallelism gathers nothing: one kernel).
        if (overlap.partner == OverlapPartner::Attention && !beside.empty())
          node.attentionRing = overlap.axes;
      }
      held = {addNode(std::move(node), &op, query)};
      held.append(beside.begin(), beside.end());
      if (perMicrobatch)
        noteLayerCompute(nodeLayer, held.front());
    }
  }
  for (const Value *result : op.getResults()) {
    holders[{{result, layer}, mb}].assign(held.begin(), held.end());
    sendResult({result, layer}, mb, held);
  }
}

bool StageBuilder::isWeightGather(const Op &op, int layer) const {
  if ((op.getPhase() != Phase::Forward && op.getPhase() != Phase::Backward) ||
      layer < 0)
    return false;
  return llvm::all_of(op.getOperands(), [&](const Value *operand) {
    const Op *def = placement.resolve(operand, layer).value->getDefiningOp();
    return !def || placement.isFloating(def);
  });
}

bool StageBuilder::build(StageProgram &program) {
  nodes = &program.nodes;
  folds = &program.folds;
  auto addOverlap = [&](bool on, llvm::StringRef axis,
                        OverlapPartner partner) {
    int index = shared.mesh.findAxis(axis);
    if (on && index >= 0 && shared.mesh.getDegree(index) > 1)
      overlaps.push_back({AxisMask(1) << index, partner});
  };
  addOverlap(shared.options.tensorParallelOverlap, "tp", OverlapPartner::Gemm);
  addOverlap(shared.options.contextParallelRing, "cp",
             OverlapPartner::Attention);
  if (shared.sources)
    sources = &shared.sources->stages[stage];
  program.stage = stage;
  foldedAway.assign(placement.getNumLayers(), false);
  for (const auto &edge : shared.edges)
    if (edge.first.second >= 0)
      sendingRepetitions.insert(
          {edge.first.first->getDefiningOp()->getParent()->getParentOp(),
           edge.first.second});
  // Fail in milliseconds, not after minutes of building: the nodes the
  // stage's op instances make, per micro-batch and once per step.
  uint64_t perMicrobatch = 0, perStep = 0;
  forEachInstanceOnStage(shared.module, placement, stage,
                         [&](const Op &op, int layer) {
                           if (!isElided(op))
                             ++(isOncePerStep(op) ? perStep : perMicrobatch);
                         });
  uint64_t builtMicrobatches = shared.options.numMicrobatches;
  if (shared.options.foldMicrobatches)
    builtMicrobatches = std::min<uint64_t>(builtMicrobatches, 2);
  uint64_t expected = perMicrobatch * builtMicrobatches + perStep;
  if (expected > MaxStageNodes) {
    shared.diags.error(shared.module.getModelLoc(),
                       "stage " + llvm::Twine(stage) + " needs about " +
                           llvm::Twine(expected) + " nodes, more than the " +
                           llvm::Twine(MaxStageNodes) +
                           " a stage program may have; use fewer "
                           "micro-batches or layers per stage");
    return false;
  }
  // Folded layers need a few repetitions' nodes of a chunk, not all. A
  // node is large: moving them as the list grows costs more than the room.
  uint64_t reserved =
      shared.options.foldLayers ? std::min<uint64_t>(expected, 4096) : expected;
  nodes->reserve(reserved);
  holders.reserve(reserved);
  findDeferredSync();
  findParamGathers();
  program.layers = placement.getLayersOf(stage);
  chunkLayers.assign(std::max(1u, shared.options.numVirtualStages), {});
  for (unsigned layer : program.layers)
    chunkLayers[placement.getChunkOfLayer(layer)].push_back(layer);
  program.schedule = getStageSchedule(
      shared.options.schedule, stage, placement.getNumStages(),
      shared.options.numMicrobatches, shared.training,
      shared.options.numVirtualStages);
  if (!shared.training && shared.options.twoBatchOverlap)
    overlapForwardPairs(program.schedule);
  // Each step's first nodes wait for the previous step's last ones, through
  // one barrier node when both are several: linear in the step sizes.
  size_t previousBegin = 0;
  bool firstStep = true;
  // A step that starts with its weights' gathers builds them before its
  // barrier: they wait for nothing of the step before.
  auto runStep = [&](llvm::StringRef stepName, int microbatch,
                     llvm::function_ref<void()> buildNodes,
                     std::optional<unsigned> gathersOf = std::nullopt) {
    size_t begin = nodes->size();
    llvm::SmallVector<uint32_t, 8> exits;
    if (!firstStep)
      exits = findExitNodes(*nodes, previousBegin, begin);
    stepParamGathers.clear();
    if (gathersOf)
      buildParamGathers(*gathersOf);
    if (failed)
      return false;
    stepPreamble = uint32_t(nodes->size() - begin);
    if (exits.size() > 1)
      exits = {addStepBarrier(exits, stepName, microbatch)};
    stepBegin = nodes->size();
    stepFold = -1;
    layerStarts = LayerStarts();
    buildNodes();
    flushBucket();
    if (failed)
      return false;
    if (nodes->size() == stepBegin) {
      nodes->resize(begin); // An empty step: no barrier either.
      stepPreamble = 0;
      nodeOps.resize(begin);
      if (sources)
        sources->nodeQueries.resize(begin);
      return true;
    }
    chainEntries(stepBegin, exits);
    program.steps.push_back(
        {uint32_t(begin), uint32_t(nodes->size()), 0, stepFold});
    previousBegin = begin;
    firstStep = false;
    return true;
  };
  for (const std::unique_ptr<Op> &op : shared.module.getModel()->getOps())
    if (op->getKind() != OpKind::Repeat && !placement.isFloating(op.get()) &&
        placement.getStage(op.get(), -1) == stage)
      chunksWithTopLevelOps.insert(placement.getChunk(op.get(), -1));
  // Folded: the first micro-batch's step of each kind, or none if it was
  // empty, stands for the middle micro-batches' steps of that kind.
  std::map<std::tuple<unsigned, bool, BackwardPart>, std::optional<ProgramStep>>
      firstOfKind;
  for (size_t index = 0; index < program.schedule.size(); ++index) {
    ScheduleStep step = program.schedule[index];
    if (index + 1 < program.schedule.size() &&
        program.schedule[index + 1].overlapsPrevious) {
      // An F&B step's backward leads (DualPipe's order); of two forwards,
      // the earlier micro-batch.
      ScheduleStep leading = step, trailing = program.schedule[++index];
      if (trailing.backward && !leading.backward)
        std::swap(leading, trailing);
      stepMessages.clear();
      if (!runStep("step" + std::to_string(index - 1), step.microbatch,
                   [&] { buildOverlappedSteps(leading, trailing); }))
        return false;
      continue;
    }
    auto kind = step.getKind();
    if (shared.options.foldMicrobatches &&
        replaysFirstMicrobatch(step, shared.options.numMicrobatches,
                               shared.training)) {
      // The schedule runs micro-batch 0 of a kind before any other.
      if (std::optional<ProgramStep> first = firstOfKind.at(kind)) {
        first->tagOffset += int32_t(step.microbatch);
        program.steps.push_back(*first);
      }
      continue;
    }
    // Folded: a chunk like one built before replays its step.
    int64_t edgeShift = 0;
    uint32_t preamble = 0;
    std::optional<ProgramStep> built =
        findChunkReplay(step, edgeShift, preamble);
    bool replayed = built.has_value();
    if (built) {
      if (built->end > built->begin)
        program.steps.push_back(*built);
      else
        built.reset(); // The other chunk's step was empty.
    } else {
      size_t stepsBefore = program.steps.size();
      std::string name = "step" + std::to_string(index);
      stepMessages.clear();
      std::optional<unsigned> gathers;
      if (startsWithParamGathers(step))
        gathers = step.chunk;
      if (!runStep(
              name, step.microbatch, [&] { buildStep(step); }, gathers))
        return false;
      if (program.steps.size() > stepsBefore) {
        built = program.steps.back();
        preamble = stepPreamble;
      }
      if (!chunksWithTopLevelOps.count(step.chunk))
        builtSteps.push_back({step.chunk, int(step.microbatch), step.backward,
                              step.part, built, stepMessages, preamble});
    }
    // The other micro-batches replay the step without its weight gathers.
    if (step.microbatch == 0) {
      firstOfKind[kind] = built;
      if (built)
        firstOfKind[kind]->begin += preamble;
    }
    if (sources && shared.options.foldMicrobatches) {
      std::optional<ProgramStep> added = built;
      if (added && replayed)
        added->tagOffset = 0;
      sources->scheduleSources.push_back(
          {step.chunk, step.backward, step.part, step.microbatch != 0, added,
           replayed ? edgeShift : 0, built ? preamble : 0});
    }
  }
  // The optimizer steps once all gradients are reduced, after the last
  // backward, as frameworks do; the reductions themselves overlap the
  // backward of the layers below.
  if (!shared.training)
    return true;
  size_t stepsBefore = program.steps.size();
  if (!runStep("optimizer", int(shared.options.numMicrobatches) - 1,
               [&] { buildOptimizerStep(); }))
    return false;
  if (sources && program.steps.size() > stepsBefore)
    sources->optimizerStep = program.steps.back();
  return true;
}

