//===- StepStructures.cpp - A plan's steps, their shapes and messages -----===//
//
// What the replay finds before it runs a step: each node's time on its
// stream (priced by CommunicationCost.cpp for the rank that stands for the
// stage), the structure of each distinct schedule step (streams, the edges
// inside the step, a folded layer's template) with its messages numbered,
// and the shape of a step in a plan: its structure and its slots' times in
// picoseconds. Structures depend only on the nodes and steps, so the plan
// search keeps them in a StepShapeCache for every plan of one structure;
// shapes depend on the numbers and are found again per plan.
//
//===----------------------------------------------------------------------===//

#include "StepReplay.h"

#include <algorithm>
#include <array>
#include <numeric>

using namespace stg;

/// std::llround of a finite `value` under 2^63 in magnitude, inline: the
/// library call was 1.5 % of a search. The fraction is exact (Sterbenz).
static int64_t roundToInteger(double value) {
  int64_t truncated = int64_t(value);
  double fraction = value - double(truncated);
  if (fraction >= 0.5)
    return truncated + 1;
  if (fraction <= -0.5)
    return truncated - 1;
  return truncated;
}

/// Where a node runs; None for a receive, which only waits.
using Stream = ReplayStream;

static Stream getStream(const ProgramNode &node) {
  switch (node.kind) {
  case ProgramNodeKind::Compute:
    return Stream::Compute;
  case ProgramNodeKind::Send:
    return Stream::Pipeline;
  case ProgramNodeKind::Recv:
    return Stream::None;
  case ProgramNodeKind::Collective:
    return node.phase == Phase::GradientSync || node.phase == Phase::Optimizer
               ? Stream::Gradient
               : Stream::Activation;
  }
  return Stream::None;
}

void StepShapeCache::forgetSteps() {
  ProgramSteps &steps = shapes->steps;
  if (!steps.ready)
    return;
  shapes->kept.resize(steps.stages.size());
  for (size_t stage = 0; stage < steps.stages.size(); ++stage) {
    const StageSteps &found = steps.stages[stage];
    for (size_t index = 0; index < found.structures.size(); ++index)
      shapes->kept[stage].try_emplace(found.firstNodes[index],
                                      found.structures[index]);
  }
  steps = ProgramSteps();
}

StepShapeCache::StepShapeCache() : shapes(std::make_unique<Shapes>()) {}
StepShapeCache::~StepShapeCache() = default;
StepShapeCache::StepShapeCache(StepShapeCache &&) noexcept = default;
StepShapeCache &StepShapeCache::operator=(StepShapeCache &&) noexcept = default;

double Replay::getMicros(unsigned stage, const ProgramNode &work,
                         GroupSpans &spans, uint8_t &tiers) {
  unsigned rank = states[stage].rank;
  switch (work.kind) {
  case ProgramNodeKind::Compute:
    return double(work.durationMicros);
  case ProgramNodeKind::Collective: {
    auto [it, inserted] = spans.try_emplace(work.group);
    if (inserted)
      it->second = getGroupSpan(programs.mesh, system, rank, work.group);
    const GroupSpan &span = it->second;
    // The tiers it may use (an all-to-all across nodes uses one of the
    // two: CommunicationCost.cpp).
    tiers = span.nodes <= 1     ? 1u << ScaleUpTier
            : span.perNode <= 1 ? 1u << ScaleOutTier
                                : 1u << ScaleUpTier | 1u << ScaleOutTier;
    return getCollectiveMicros(work, span, system);
  }
  case ProgramNodeKind::Send:
  case ProgramNodeKind::Recv: {
    // The sender's links carry a message: a receive only waits.
    unsigned peer = programs.getPeerRank(rank, work);
    bool across = system.getNode(peer) != system.getNode(rank);
    if (work.kind == ProgramNodeKind::Send)
      tiers = 1u << (across ? ScaleOutTier : ScaleUpTier);
    return getMessageMicros(double(work.commBytes), across, system);
  }
  }
  return 0;
}

void Replay::getTransfers(unsigned stage, const ProgramNode &work,
                          llvm::SmallVectorImpl<TierTransfer> &transfers) {
  const StageState &state = states[stage];
  if (work.kind == ProgramNodeKind::Collective) {
    // Priced before: the span is known.
    getCollectiveTransfers(work, state.spans->find(work.group)->second, system,
                           transfers);
  } else if (work.kind == ProgramNodeKind::Send) {
    unsigned peer = programs.getPeerRank(state.rank, work);
    getMessageTransfers(double(work.commBytes),
                        system.getNode(peer) != system.getNode(state.rank),
                        system, transfers);
  }
}

void Replay::initialize(unsigned stage) {
  const StageProgram &program = programs.stages[stage];
  StageState &state = states[stage];
  state.rank = programs.getPeerRank(0, stage);
  // A stage whose ranks are the first stage's moved by whole nodes has its
  // groups laid out alike.
  unsigned offset = std::max(state.rank, states[0].rank) -
                    std::min(state.rank, states[0].rank);
  state.spans =
      offset % system.gpusPerNode ? &state.ownSpans : &firstStageSpans;
  state.micros.reserve(program.nodes.size());
  state.tierMasks.resize(program.nodes.size());
  for (size_t id = 0; id < program.nodes.size(); ++id)
    state.micros.push_back(
        getMicros(stage, program.nodes[id], *state.spans, state.tierMasks[id]));
  state.steps = program.steps;
  if (state.steps.empty() && !program.nodes.empty()) {
    state.wholeProgram = {0, uint32_t(program.nodes.size()), 0, -1};
    state.steps = state.wholeProgram;
  }
}

void Replay::findSteps() {
  steps.stages.assign(states.size(), StageSteps());
  // A program set numbers its edges globally, so a tag names one message
  // in practice: a message is found by its tag, and one whose tag another
  // message took first, or is out of range, by its whole key.
  constexpr uint32_t NoNumber = ~0u;
  constexpr size_t MaxTagSlots = size_t(1) << 22;
  std::vector<uint32_t> byTag;
  llvm::DenseMap<MessageKey, uint32_t> byKey;
  auto getNumber = [&](const MessageKey &key) {
    uint32_t fresh = steps.messages.size();
    int32_t tag = std::get<2>(key);
    if (tag >= 0 && size_t(tag) < MaxTagSlots) {
      if (size_t(tag) >= byTag.size())
        byTag.resize(
            std::min(MaxTagSlots, std::max<size_t>(tag + 1, 2 * byTag.size())),
            NoNumber);
      uint32_t &slot = byTag[tag];
      if (slot == NoNumber) {
        steps.messages.push_back(key);
        return slot = fresh;
      }
      if (steps.messages[slot] == key)
        return slot;
    }
    auto [it, inserted] = byKey.try_emplace(key, fresh);
    if (inserted)
      steps.messages.push_back(key);
    return it->second;
  };
  for (unsigned stage = 0; stage < states.size(); ++stage) {
    llvm::ArrayRef<ProgramStep> stageSteps = states[stage].steps;
    StageSteps &found = steps.stages[stage];
    llvm::DenseMap<uint32_t, uint32_t> byFirstNode;
    for (const ProgramStep &step : stageSteps) {
      auto [it, inserted] =
          byFirstNode.try_emplace(step.begin, found.structures.size());
      if (inserted) {
        std::shared_ptr<const StepStructure> structure;
        if (keptStructures && stage < keptStructures->size())
          structure = (*keptStructures)[stage].lookup(step.begin);
        found.structures.push_back(structure ? std::move(structure)
                                             : buildStructure(stage, step));
        found.firstNodes.push_back(step.begin);
      }
      found.steps.push_back({it->second, uint32_t(found.messages.size())});
      const StepStructure &structure = *found.structures[it->second];
      for (uint32_t slot : structure.recvs) {
        const ProgramNode &recv = node(stage, step.begin + slot);
        found.messages.push_back(
            getNumber({recv.peerStage, stage, recv.tag + step.tagOffset}));
      }
      for (uint32_t slot : structure.sends) {
        const ProgramNode &send = node(stage, step.begin + slot);
        found.messages.push_back(
            getNumber({stage, send.peerStage, send.tag + step.tagOffset}));
      }
    }
  }
  steps.ready = true;
}

uint32_t Replay::getShape(unsigned stage, size_t stepIndex) {
  StageState &state = states[stage];
  const StageSteps &stageSteps = steps.stages[stage];
  uint32_t distinct = stageSteps.steps[stepIndex].distinct;
  uint32_t &known = state.shapes[distinct];
  if (known != NoShape)
    return known;
  const ProgramStep &step = state.steps[stepIndex];
  StepShape &shape = candidate;
  shape.structure = stageSteps.structures[distinct];
  shape.picos.clear();
  shape.transferBegin.clear();
  shape.transfers.clear();
  shape.heldUnits.clear();
  shape.computeUnits = 0;
  shape.unitUse.clear();
  // A bit per stream and tier (2 * stream + tier) its nodes move bytes over.
  uint32_t streamTiers = 0;
  // The clock counts whole picoseconds in an int64: the step's times may
  // add up to MaxStepMicros.
  double sum = 0;
  for (uint32_t id = step.begin; id < step.end; ++id) {
    double copies =
        shape->isTemplate(id - step.begin) ? 1 + shape->foldCopies : 1;
    sum += copies * state.micros[id];
    if (!(sum <= MaxStepMicros)) {
      failure = "stage " + std::to_string(stage) +
                " has a schedule step longer than " +
                std::to_string(int64_t(MaxStepMicros)) + " us";
      return NoShape;
    }
    shape.picos.push_back(roundToInteger(state.micros[id] * 1e6));
    streamTiers |= uint32_t(state.tierMasks[id])
                   << 2 * unsigned(shape->streams[id - step.begin]);
  }
  // Nodes that hold compute units, on a device that counts them: the step
  // keeps what each holds. A stream runs one node at a time, so compute is
  // slowest beside each stream's largest; the step must fit the clock at
  // that rate.
  if (unsigned units = system.device.computeUnits) {
    std::array<uint32_t, NumReplayStreams> mostHeld{};
    for (uint32_t id = step.begin; id < step.end; ++id)
      if (uint16_t held = node(stage, id).heldUnits) {
        shape.heldUnits.resize(step.end - step.begin);
        shape.heldUnits[id - step.begin] = held;
        uint32_t &most = mostHeld[unsigned(shape->streams[id - step.begin])];
        most = std::max<uint32_t>(most, held);
      }
    uint32_t held = std::accumulate(mostHeld.begin(), mostHeld.end(), 0u);
    if (held) {
      shape.computeUnits = units;
      shape.unitUse.resize(step.end - step.begin);
      for (uint32_t id = step.begin; id < step.end; ++id)
        if (shape->streams[id - step.begin] == ReplayStream::Compute)
          shape.unitUse[id - step.begin] = node(stage, id).unitUse;
      double slowest =
          double(units) / double(units - std::min(held, units - 1));
      if (!(sum * slowest <= MaxStepMicros)) {
        failure = "stage " + std::to_string(stage) +
                  " has a schedule step longer than " +
                  std::to_string(int64_t(MaxStepMicros)) +
                  " us at the compute rate its communication leaves";
        return NoShape;
      }
    }
  }
  // Two streams on one tier that may run at once: the step keeps its
  // transfers.
  shape.sharesLinks = shape->mayShareLinks(streamTiers);
  if (shape.sharesLinks) {
    // In picoseconds that add up to no more than the node's, which then has
    // its latency after them.
    shape.transferBegin.resize(step.end - step.begin + 1);
    shape.transferBegin[0] = 0;
    llvm::SmallVector<TierTransfer, 3> found;
    for (uint32_t id = step.begin; id < step.end; ++id) {
      uint32_t slot = id - step.begin;
      if (state.tierMasks[id]) {
        found.clear();
        getTransfers(stage, node(stage, id), found);
        int64_t left = shape.picos[slot];
        for (const TierTransfer &transfer : found) {
          int64_t picos = std::min(left, roundToInteger(transfer.micros * 1e6));
          if (picos <= 0)
            continue;
          left -= picos;
          shape.transfers.push_back({picos, transfer.tier});
        }
      }
      shape.transferBegin[slot + 1] = shape.transfers.size();
    }
  }
  llvm::SmallVector<uint32_t, 1> &equalHash = shapesByHash[shape.hash()];
  for (uint32_t index : equalHash)
    if (shapes[index] == shape)
      return known = index;
  uint32_t index = shapes.size();
  equalHash.push_back(index);
  shapes.push_back(std::move(shape));
  outcomeIndex.emplace_back();
  summaries.push_back({uint32_t(shapes.back()->recvs.size()),
                       uint32_t(shapes.back()->sends.size())});
  return known = index;
}

std::shared_ptr<const StepStructure>
Replay::buildStructure(unsigned stage, const ProgramStep &step) {
  auto built = std::make_shared<StepStructure>();
  StepStructure &shape = *built;
  unsigned size = step.end - step.begin;
  const LayerFold *fold = nullptr;
  if (step.fold >= 0) {
    fold = &programs.stages[stage].folds[step.fold];
    shape.foldBegin = fold->begin - step.begin;
    shape.foldEnd = fold->end - step.begin;
    shape.foldCopies = fold->copies;
  }
  shape.initialPending.assign(size, 0);
  shape.streams.reserve(size);
  // Edges inside the step as (parent, child), then grouped by parent.
  edges.clear();
  for (uint32_t slot = 0; slot < size; ++slot) {
    uint32_t id = step.begin + slot;
    const ProgramNode &work = node(stage, id);
    shape.streams.push_back(getStream(work));
    llvm::SmallVector<uint32_t, 8> deps;
    for (auto list : {llvm::ArrayRef<uint32_t>(work.dataDeps),
                      llvm::ArrayRef<uint32_t>(work.ctrlDeps)})
      for (uint32_t dep : list)
        if (dep >= step.begin)
          deps.push_back(dep);
    std::sort(deps.begin(), deps.end()); // Not qsort: a few ids.
    deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
    shape.initialPending[slot] = deps.size();
    for (uint32_t dep : deps) {
      uint32_t parent = dep - step.begin;
      if (!fold) {
        edges.push_back({parent, {slot, ShapeChild::Plain}});
      } else if (shape.isTemplate(slot) && shape.isTemplate(parent)) {
        edges.push_back({parent, {slot, ShapeChild::Plain}});
      } else if (shape.isTemplate(slot)) {
        // The template's copies depend on the copy before where it depends
        // on the repetition before it, and alike elsewhere.
        auto carried =
            llvm::lower_bound(fold->carried, LayerFold::CarriedDep{id, dep, 0});
        if (carried != fold->carried.end() && carried->node == id &&
            carried->dep == dep) {
          edges.push_back({parent, {slot, ShapeChild::Plain}});
          edges.push_back(
              {carried->same - step.begin, {slot, ShapeChild::NextCopy}});
        } else {
          edges.push_back({parent, {slot, ShapeChild::AllCopies}});
        }
      } else {
        edges.push_back(
            {parent,
             {slot, shape.isTemplate(parent) ? ShapeChild::LastCopyOnly
                                             : ShapeChild::Plain}});
      }
    }
    if (work.kind == ProgramNodeKind::Recv)
      shape.recvs.push_back(slot);
    else if (work.kind == ProgramNodeKind::Send)
      shape.sends.push_back(slot);
  }
  // Stable by parent, so each parent's children stay in slot order.
  shape.childBegin.assign(size + 1, 0);
  for (const auto &edge : edges)
    ++shape.childBegin[edge.first + 1];
  for (unsigned slot = 0; slot < size; ++slot)
    shape.childBegin[slot + 1] += shape.childBegin[slot];
  shape.children.resize(edges.size());
  std::vector<uint32_t> filled(shape.childBegin.begin(),
                               shape.childBegin.end() - 1);
  for (const auto &edge : edges)
    shape.children[filled[edge.first]++] = edge.second;
  shape.finish();
  return built;
}
