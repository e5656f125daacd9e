//===- StepEstimate.cpp - The step time of a plan on a system -------------===//
//
// A replay step by step: within a step, a discrete-event simulation of its
// nodes on the stage's streams; across steps and stages, the messages.
//
//===----------------------------------------------------------------------===//

#include "stg/Perf/StepEstimate.h"

#include "StepShape.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/Hashing.h"

#include <algorithm>
#include <cmath>
#include <tuple>
#include <unordered_map>

using namespace stg;

/// Algorithm steps of one phase (a reduce-scatter or an all-gather) over
/// `n` ranks: each step costs the tier's latency once.
static double getSteps(const NetworkTier &tier, unsigned n) {
  if (n <= 1)
    return 0;
  switch (tier.algorithm) {
  case CollectiveAlgorithm::Ring:
    return n - 1;
  case CollectiveAlgorithm::Direct:
    return 1;
  case CollectiveAlgorithm::HalvingDoubling:
    return std::ceil(std::log2(double(n)));
  }
  return n - 1;
}

/// Seconds of a collective over `n` ranks of one tier; `bytes` is the
/// per-rank input buffer (an all-gather's output is n times it).
static double getFlatSeconds(CollectiveKind kind, double bytes, unsigned n,
                             const NetworkTier &tier) {
  if (n <= 1)
    return 0;
  double share = double(n - 1) / n;
  double steps = getSteps(tier, n);
  double bandwidth = tier.getEffectiveBandwidth();
  switch (kind) {
  case CollectiveKind::AllReduce:
    return 2 * share * bytes / bandwidth + 2 * steps * tier.latency;
  case CollectiveKind::AllGather:
    return (n - 1) * bytes / bandwidth + steps * tier.latency;
  case CollectiveKind::ReduceScatter:
  case CollectiveKind::AllToAll:
    return share * bytes / bandwidth + steps * tier.latency;
  }
  return 0;
}

double stg::getCollectiveMicros(CollectiveKind kind, double bytes,
                                const GroupSpan &span,
                                const SystemSpec &system) {
  const NetworkTier &up = system.scaleUp, &out = system.scaleOut;
  unsigned m = span.perNode, k = span.nodes;
  double seconds = 0;
  if (k <= 1) {
    seconds = getFlatSeconds(kind, bytes, span.members, up);
  } else if (m <= 1) {
    seconds = getFlatSeconds(kind, bytes, span.members, out);
  } else {
    // Hierarchical: NCCL's tree of rings, a phase per tier.
    switch (kind) {
    case CollectiveKind::AllReduce:
      seconds = getFlatSeconds(CollectiveKind::ReduceScatter, bytes, m, up) +
                getFlatSeconds(CollectiveKind::AllReduce, bytes / m, k, out) +
                getFlatSeconds(CollectiveKind::AllGather, bytes / m, m, up);
      break;
    case CollectiveKind::ReduceScatter:
      seconds =
          getFlatSeconds(CollectiveKind::ReduceScatter, bytes, m, up) +
          getFlatSeconds(CollectiveKind::ReduceScatter, bytes / m, k, out);
      break;
    case CollectiveKind::AllGather:
      seconds = getFlatSeconds(CollectiveKind::AllGather, bytes, k, out) +
                getFlatSeconds(CollectiveKind::AllGather, bytes * k, m, up);
      break;
    case CollectiveKind::AllToAll: {
      // Each rank's share for ranks of its node goes over scale-up, the
      // rest over its NIC, at the same time.
      double n = span.members;
      double inside = bytes * (m - 1) / n / up.getEffectiveBandwidth() +
                      getSteps(up, m) * up.latency;
      double across = bytes * (n - m) / n / out.getEffectiveBandwidth() +
                      getSteps(out, k) * out.latency;
      seconds = std::max(inside, across);
      break;
    }
    }
  }
  return seconds * 1e6;
}

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

double stg::getMessageMicros(double bytes, bool acrossNodes,
                             const SystemSpec &system) {
  const NetworkTier &tier = acrossNodes ? system.scaleOut : system.scaleUp;
  return (bytes / tier.getEffectiveBandwidth() + tier.latency) * 1e6;
}

namespace {

/// Where a node runs; None for a receive, which only waits.
using Stream = ReplayStream;

Stream getStream(const ProgramNode &node) {
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

/// Receive arrivals after the step's start, in whole nanoseconds, so that
/// the periodic steps of a pipeline's steady state find their outcome again
/// despite rounding in the absolute times.
using ArrivalPattern = std::vector<int64_t>;

struct OutcomeKeyHash {
  size_t operator()(const ArrivalPattern &key) const {
    return llvm::hash_combine_range(key.begin(), key.end());
  }
};

/// The spans of a rank's groups, by mask: a few, looked up per node.
using GroupSpans = llvm::SmallDenseMap<AxisMask, GroupSpan, 8>;

/// A message: sending stage, receiving stage, tag.
using MessageKey = std::tuple<unsigned, unsigned, int32_t>;

/// Outcomes a shape keeps to match by arrival ranges: a steady state
/// drifting by a little each micro-batch asks for the last few again, and
/// stages that take turns waiting for some more. (Shard 0/64 of Llama-3-70B
/// on 1024 GPUs: 8 kept, 80,441 step simulations; 16, 67,592; 32, 61,364;
/// 64, 59,097, no faster.)
constexpr unsigned MaxRangedOutcomes = 32;

/// The outcomes of one step shape, by arrival pattern. A step has one
/// receive or none almost always (a pipeline stage's input): those are
/// keyed by the one arrival, without building a pattern.
struct ShapeOutcomes {
  llvm::DenseMap<int64_t, uint32_t> byArrival;
  std::unordered_map<ArrivalPattern, uint32_t, OutcomeKeyHash> byPattern;
  /// Recent outcomes that hold for ranges of arrivals (StepOutcome::sameFor),
  /// the oldest replaced first, with the first receive's range at hand: the
  /// search reads no outcome that the first arrival rules out.
  struct Ranged {
    int64_t first, second;
    uint32_t index;
  };
  llvm::SmallVector<Ranged, 8> ranged;
  uint32_t nextReplaced = 0;
};

constexpr uint32_t NoShape = ~0u;

/// What the replay reads of a shape at every step, apart from the rest:
/// most steps find their outcome here.
struct ShapeSummary {
  uint32_t numRecvs = 0, numSends = 0;
  /// The outcome of the single arrival looked up last, if it did not move:
  /// in a steady state the next step of the shape asks for it again.
  uint32_t lastOutcome = ~0u;
  int64_t lastArrival = 0;
  /// The ranged outcome a single receive found last, and the arrivals it
  /// holds for: a steady state that moves with its receive asks for it
  /// again, at another arrival.
  uint32_t rangedOutcome = ~0u;
  int64_t rangedFirst = 0, rangedSecond = 0;
};

} // namespace

/// What a stage's steps share in every plan of a structure: the step of
/// each distinct first node (folded micro-batches repeat a few), the
/// streams and edges of its shape, with no times, and each step's messages.
struct StageSteps {
  /// Per step, read together: its index in `structures`; and where its
  /// messages begin: step i receives messages[messageBegin + r] in its
  /// shape's r-th receive, and sends the ones after those in the order of
  /// its sends.
  struct Step {
    uint32_t distinct, messageBegin;
  };
  std::vector<Step> steps;
  std::vector<std::shared_ptr<const StepStructure>> structures;
  std::vector<uint32_t> firstNodes; ///< Per structure.
  std::vector<uint32_t> messages;
};

/// The steps of a program set, whatever its numbers, with its messages
/// numbered: the replay keeps when each was sent in a vector by number,
/// rather than by key in a map (a plan has thousands of steps).
struct ProgramSteps {
  std::vector<StageSteps> stages;
  std::vector<MessageKey> messages; ///< By number.
  bool ready = false;
};

/// A stage's step structures by their first node.
using StructuresByNode =
    llvm::DenseMap<uint32_t, std::shared_ptr<const StepStructure>>;

struct StepShapeCache::Shapes {
  ProgramSteps steps;
  /// Per stage, the structures of steps numbered before forgetSteps.
  std::vector<StructuresByNode> kept;
};

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

namespace {

struct StageState {
  unsigned rank = 0;          ///< The rank that stands for the stage.
  std::vector<double> micros; ///< Per node: its time on its stream.
  /// The program's steps, or the whole program as one step when it has
  /// none (a hand-built program).
  llvm::ArrayRef<ProgramStep> steps;
  ProgramStep wholeProgram;
  /// Per distinct step: the index of its shape in Replay::shapes, once
  /// known.
  std::vector<uint32_t> shapes;
  size_t next = 0; ///< The next step to run.
  // Whole picoseconds, as the steps': the sums are exact.
  int64_t now = 0; ///< When the previous step finished.
  int64_t computePicos = 0, communicationPicos = 0, waitPicos = 0;
};

class Replay {
public:
  Replay(const ProgramSet &programs, const SystemSpec &system,
         StepTimeline *timeline, StepShapeCache::Shapes *cache)
      : programs(programs), system(system), timeline(timeline),
        steps(cache ? cache->steps : ownSteps),
        keptStructures(cache ? &cache->kept : nullptr),
        states(programs.stages.size()),
        waiting(programs.stages.size(), NoMessage) {}

  llvm::Expected<StepEstimate> run();

private:
  const ProgramNode &node(unsigned stage, uint32_t id) const {
    return programs.stages[stage].nodes[id];
  }
  void initialize(unsigned stage);
  double getMicros(unsigned stage, const ProgramNode &node, GroupSpans &spans);
  /// The index of the shape of the stage's step `stepIndex` in `shapes`.
  uint32_t getShape(unsigned stage, size_t stepIndex);
  /// Finds the steps' structures and numbers their messages.
  void findSteps();
  /// The streams and edges of the stage's `step`.
  std::shared_ptr<const StepStructure> buildStructure(unsigned stage,
                                                      const ProgramStep &step);
  /// The outcome `byKey` holds for `key`, else one kept for ranges that
  /// hold the current arrivals (`ranged`), and by how much it moves; else
  /// the index the next outcome gets, recorded for `key`.
  template <typename Map, typename Key>
  uint32_t findOutcome(Map &byKey, const Key &key, const ShapeOutcomes &known,
                       int64_t &movedPicos,
                       const ShapeOutcomes::Ranged *&ranged) {
    if (auto found = byKey.find(key); found != byKey.end())
      return found->second;
    if ((ranged = findRanged(known, movedPicos)))
      return ranged->index;
    uint32_t fresh = outcomes.size();
    byKey.try_emplace(key, fresh);
    return fresh;
  }
  /// A kept outcome whose ranges hold the current arrivals, and by how
  /// much it moves.
  const ShapeOutcomes::Ranged *findRanged(const ShapeOutcomes &known,
                                          int64_t &movedPicos);
  /// How much ranged outcome `index` moves with the current arrivals
  /// (`single`: the one receive's, else the pattern's).
  int64_t getMovedPicos(uint32_t index, std::optional<int64_t> single = {}) {
    const StepOutcome &outcome = outcomes[index];
    ++estimate.rangedSteps;
    if (outcome.movingRecv < 0)
      return 0;
    int64_t arrival = single ? *single : arrivals[outcome.movingRecv];
    return (arrival - outcome.movingFrom) * 1000;
  }
  /// The outcome of shape `shapeIndex` at `arrivals`, which its summary
  /// did not have: found among those kept, else simulated.
  uint32_t lookUpOutcome(uint32_t shapeIndex, int64_t &movedPicos);
  void keepRanged(ShapeOutcomes &known, uint32_t index);
  /// Runs the stage's steps until one waits for a message not yet sent.
  void advance(unsigned stage);
  llvm::Error describeDeadlock() const;

  const ProgramSet &programs;
  const SystemSpec &system;
  StepTimeline *timeline; ///< Null unless recording.
  /// The steps' structures and numbered messages: the cache's, if there is
  /// one (it serves program sets of these steps), else ownSteps.
  ProgramSteps ownSteps;
  ProgramSteps &steps;
  /// The cache's structures of steps numbered before, if any.
  std::vector<StructuresByNode> *keptStructures;
  std::vector<StageState> states;
  StepEstimate estimate;
  /// The distinct step shapes of all stages, with their outcomes.
  std::vector<StepShape> shapes;
  std::vector<ShapeOutcomes> outcomeIndex; ///< Per shape.
  std::vector<ShapeSummary> summaries;     ///< Per shape.
  std::vector<StepOutcome> outcomes;
  /// Shapes by their hash, to find an equal one.
  llvm::DenseMap<uint64_t, llvm::SmallVector<uint32_t, 1>> shapesByHash;
  StepShape candidate; ///< getShape's buffer, reused.
  std::vector<std::pair<uint32_t, ShapeChild>> edges;
  /// Per message, read together: when its send completed (NotSent
  /// before), and the stage that waits for it, if one does.
  static constexpr int64_t NotSent = -1;
  static constexpr uint32_t NoStage = ~0u;
  struct MessageState {
    int64_t sentAt = NotSent;
    uint32_t waiter = NoStage;
  };
  std::vector<MessageState> messageStates;
  SimulationScratch scratch;
  /// The groups' spans of the first stage's rank, by mask.
  GroupSpans firstStageSpans;
  /// Per stage, the message it waits for (a stage waits for one at a
  /// time), and the stages to advance.
  static constexpr uint32_t NoMessage = ~0u;
  std::vector<uint32_t> waiting;
  std::vector<unsigned> runnable;
  std::string failure;     ///< Why the replay stopped early, if it did.
  ArrivalPattern arrivals; ///< The current step's, reused.
};

} // namespace

double Replay::getMicros(unsigned stage, const ProgramNode &work,
                         GroupSpans &spans) {
  unsigned rank = states[stage].rank;
  switch (work.kind) {
  case ProgramNodeKind::Compute:
    return double(work.durationMicros);
  case ProgramNodeKind::Collective: {
    auto [it, inserted] = spans.try_emplace(work.group);
    if (inserted)
      it->second = getGroupSpan(programs.mesh, system, rank, work.group);
    return getCollectiveMicros(work.commType, double(work.commBytes),
                               it->second, system);
  }
  case ProgramNodeKind::Send:
  case ProgramNodeKind::Recv: {
    unsigned peer = programs.getPeerRank(rank, work.peerStage);
    return getMessageMicros(double(work.commBytes),
                            system.getNode(peer) != system.getNode(rank),
                            system);
  }
  }
  return 0;
}

void Replay::initialize(unsigned stage) {
  const StageProgram &program = programs.stages[stage];
  StageState &state = states[stage];
  state.rank = programs.getPeerRank(0, stage);
  // A stage whose ranks are the first stage's moved by whole nodes has its
  // groups laid out alike.
  GroupSpans ownSpans;
  unsigned offset = std::max(state.rank, states[0].rank) -
                    std::min(state.rank, states[0].rank);
  GroupSpans &spans = offset % system.gpusPerNode ? ownSpans : firstStageSpans;
  state.micros.reserve(program.nodes.size());
  for (const ProgramNode &work : program.nodes)
    state.micros.push_back(getMicros(stage, work, spans));
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

const ShapeOutcomes::Ranged *Replay::findRanged(const ShapeOutcomes &known,
                                                int64_t &movedPicos) {
  int64_t firstArrival = arrivals.empty() ? 0 : arrivals[0];
  for (const ShapeOutcomes::Ranged &kept : known.ranged) {
    if (kept.first > firstArrival || firstArrival >= kept.second)
      continue;
    uint32_t index = kept.index;
    const StepOutcome &outcome = outcomes[index];
    bool holds = true;
    for (size_t recv = 1; recv < arrivals.size() && holds; ++recv)
      holds = outcome.sameFor[recv].first <= arrivals[recv] &&
              arrivals[recv] < outcome.sameFor[recv].second;
    if (!holds)
      continue;
    movedPicos = getMovedPicos(index);
    return &kept;
  }
  return nullptr;
}

void Replay::keepRanged(ShapeOutcomes &known, uint32_t index) {
  // Recorded times need every node's own; ranges only give the step's.
  const StepOutcome &outcome = outcomes[index];
  if (timeline || llvm::all_of(outcome.sameFor, [](const auto &range) {
        return range.second - range.first == 1;
      }))
    return;
  // A shape with no receives keeps no ranges (all_of holds): one has a first.
  ShapeOutcomes::Ranged kept{outcome.sameFor[0].first,
                             outcome.sameFor[0].second, index};
  if (known.ranged.size() < MaxRangedOutcomes) {
    known.ranged.push_back(kept);
    return;
  }
  known.ranged[known.nextReplaced] = kept;
  known.nextReplaced = (known.nextReplaced + 1) % MaxRangedOutcomes;
}

uint32_t Replay::lookUpOutcome(uint32_t shapeIndex, int64_t &movedPicos) {
  ShapeSummary &summary = summaries[shapeIndex];
  ShapeOutcomes &known = outcomeIndex[shapeIndex];
  uint32_t fresh = outcomes.size();
  // Arrivals are at most MaxStepPicos: a single one is never a DenseMap
  // sentinel.
  bool single = arrivals.size() <= 1;
  int64_t arrival = single && !arrivals.empty() ? arrivals[0] : 0;
  const ShapeOutcomes::Ranged *ranged = nullptr;
  uint32_t index =
      single
          ? findOutcome(known.byArrival, arrival, known, movedPicos, ranged)
          : findOutcome(known.byPattern, arrivals, known, movedPicos, ranged);
  if (single && !movedPicos) {
    summary.lastOutcome = index;
    summary.lastArrival = arrival;
  }
  if (ranged && arrivals.size() == 1) {
    summary.rangedOutcome = ranged->index;
    summary.rangedFirst = ranged->first;
    summary.rangedSecond = ranged->second;
  }
  if (index == fresh) {
    outcomes.push_back(
        simulateStep(shapes[shapeIndex], arrivals, timeline, scratch));
    estimate.jumpedCopies += outcomes.back().jumpedCopies;
    ++estimate.simulatedSteps;
    keepRanged(known, index);
  }
  return index;
}

void Replay::advance(unsigned stage) {
  StageState &state = states[stage];
  const StageSteps &stageSteps = steps.stages[stage];
  for (; state.next < state.steps.size(); ++state.next) {
    uint32_t shapeIndex = getShape(stage, state.next);
    if (shapeIndex == NoShape) {
      runnable.clear();
      return;
    }
    ShapeSummary &summary = summaries[shapeIndex];
    const uint32_t *messages =
        &stageSteps.messages[stageSteps.steps[state.next].messageBegin];
    uint32_t numRecvs = summary.numRecvs;
    // Each message's arrival after the step's start, to the nearest
    // nanosecond, halves away from zero. A step has one receive or none
    // almost always: the pattern is filled only when the summary misses.
    int64_t arrival = 0, latest = 0;
    if (numRecvs > 1)
      arrivals.clear();
    for (uint32_t recv = 0; recv < numRecvs; ++recv) {
      MessageState &message = messageStates[messages[recv]];
      int64_t sent = message.sentAt;
      if (sent == NotSent) {
        message.waiter = stage;
        waiting[stage] = messages[recv];
        return;
      }
      int64_t wait = sent - state.now;
      if (wait > MaxStepPicos) {
        failure = "stage " + std::to_string(stage) + " waits more than " +
                  std::to_string(int64_t(MaxStepMicros)) +
                  " us for a message in one schedule step";
        runnable.clear();
        return;
      }
      arrival = std::max<int64_t>(0, (wait + 500) / 1000);
      latest = std::max(latest, arrival);
      if (numRecvs > 1)
        arrivals.push_back(arrival);
    }
    // The outcome of the same nodes with the same arrivals, else a new one.
    uint32_t index;
    int64_t movedPicos = 0; // When a ranged outcome moves with an arrival.
    if (numRecvs <= 1 && summary.lastOutcome != ~0u &&
        summary.lastArrival == arrival) {
      index = summary.lastOutcome;
    } else if (numRecvs == 1 && summary.rangedOutcome != ~0u &&
               summary.rangedFirst <= arrival &&
               arrival < summary.rangedSecond) {
      index = summary.rangedOutcome;
      movedPicos = getMovedPicos(index, arrival);
    } else {
      if (numRecvs <= 1)
        arrivals.assign(numRecvs, arrival);
      index = lookUpOutcome(shapeIndex, movedPicos);
    }
    const StepOutcome &outcome = outcomes[index];
    for (size_t i = 0; i < summary.numSends; ++i) {
      uint32_t message = messages[numRecvs + i];
      int64_t done = outcome.sendDonePicos[i];
      if (movedPicos && outcome.sendMoves[i])
        done += movedPicos;
      MessageState &sent = messageStates[message];
      sent.sentAt = state.now + done;
      if (sent.waiter != NoStage) {
        runnable.push_back(sent.waiter);
        waiting[sent.waiter] = NoMessage;
        sent.waiter = NoStage;
      }
    }
    if (timeline) { // A folded layer's copies: as their template's nodes.
      const ProgramStep &step = state.steps[state.next];
      const StepShape &shape = shapes[shapeIndex];
      for (uint32_t id = 0; id < shape->getNumNodes(); ++id) {
        uint32_t slot = shape->getSlot(id).first;
        timeline->events.push_back(
            {stage, step.begin + slot, state.next, shape->streams[slot],
             double(state.now) / 1e6 + outcome.starts[id],
             double(state.now) / 1e6 + outcome.ends[id]});
      }
    }
    state.computePicos += outcome.computePicos;
    state.communicationPicos += outcome.communicationPicos;
    int64_t finish =
        outcome.finishPicos + (outcome.finishMoves ? movedPicos : 0);
    state.waitPicos += std::min(latest * 1000, finish);
    state.now += finish;
    // Each step is at most MaxStepPicos: the sums stay far from overflow.
    if (state.now > MaxStepPicos) {
      failure = "stage " + std::to_string(stage) + " runs longer than " +
                std::to_string(int64_t(MaxStepMicros)) + " us";
      runnable.clear();
      return;
    }
  }
}

llvm::Error Replay::describeDeadlock() const {
  size_t total = 0, left = 0;
  std::string stuck;
  for (unsigned stage = 0; stage < states.size(); ++stage) {
    const StageState &state = states[stage];
    for (size_t index = 0; index < state.steps.size(); ++index) {
      const ProgramStep &step = state.steps[index];
      total += step.end - step.begin;
      if (index >= state.next)
        left += step.end - step.begin;
    }
    if (state.next == state.steps.size())
      continue;
    std::optional<MessageKey> waits;
    if (waiting[stage] != NoMessage)
      waits = steps.messages[waiting[stage]];
    const ProgramStep &step = state.steps[state.next];
    for (uint32_t id = step.begin; id < step.end; ++id) {
      const ProgramNode &recv = node(stage, id);
      if (waits && recv.kind == ProgramNodeKind::Recv &&
          MessageKey{recv.peerStage, stage, recv.tag + step.tagOffset} ==
              *waits) {
        std::string name =
            !recv.name.empty()
                ? recv.name
                : "a receive from stage " + std::to_string(recv.peerStage);
        stuck += "; stage " + std::to_string(stage) + " waits in '" + name +
                 "' for a send that never comes";
        break;
      }
    }
  }
  return llvm::createStringError(
      std::errc::resource_deadlock_would_occur,
      "the step cannot complete: %zu of %zu nodes never become ready%s "
      "(the trace set would deadlock a simulator too)",
      left, total, stuck.c_str());
}

llvm::Expected<StepEstimate> Replay::run() {
  estimate.stages.resize(programs.stages.size());
  for (unsigned stage = 0; stage < programs.stages.size(); ++stage) {
    initialize(stage);
    runnable.push_back(stage);
  }
  if (!steps.ready)
    findSteps();
  messageStates.assign(steps.messages.size(), MessageState());
  for (unsigned stage = 0; stage < states.size(); ++stage)
    states[stage].shapes.assign(steps.stages[stage].structures.size(), NoShape);
  // A step's outcome depends only on its start and its messages, so the
  // order in which stages advance does not change the result. A stage is
  // runnable once: when it waits, it waits for one message.
  while (!runnable.empty()) {
    unsigned stage = runnable.back();
    runnable.pop_back();
    advance(stage);
  }
  if (!failure.empty())
    return llvm::createStringError(std::errc::value_too_large, "%s",
                                   failure.c_str());
  for (const StageState &state : states)
    if (state.next < state.steps.size())
      return describeDeadlock();
  auto micros = [](int64_t picos) { return double(picos) / 1e6; };
  for (unsigned stage = 0; stage < states.size(); ++stage) {
    const StageState &state = states[stage];
    StageTime &time = estimate.stages[stage];
    time.computeMicros = micros(state.computePicos);
    time.communicationMicros = micros(state.communicationPicos);
    time.pipelineWaitMicros = micros(state.waitPicos);
    time.finishMicros = micros(state.now);
  }
  for (const StageTime &stage : estimate.stages)
    estimate.stepMicros = std::max(estimate.stepMicros, stage.finishMicros);
  for (StageTime &stage : estimate.stages)
    stage.pipelineWaitMicros += estimate.stepMicros - stage.finishMicros;
  return estimate;
}

llvm::Expected<StepEstimate> stg::estimateStep(const ProgramSet &programs,
                                               const SystemSpec &system,
                                               StepTimeline *timeline,
                                               StepShapeCache *cache) {
  return Replay(programs, system, timeline,
                cache ? cache->shapes.get() : nullptr)
      .run();
}
