//===- StepEstimate.cpp - The step time of a plan on a system -------------===//
//
// A replay step by step: within a step, a discrete-event simulation of its
// nodes on the stage's streams; across steps and stages, the messages.
//
//===----------------------------------------------------------------------===//

#include "stg/Perf/StepEstimate.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/Hashing.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <map>
#include <queue>
#include <set>
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

double stg::getMessageMicros(double bytes, bool acrossNodes,
                             const SystemSpec &system) {
  const NetworkTier &tier = acrossNodes ? system.scaleOut : system.scaleUp;
  return (bytes / tier.getEffectiveBandwidth() + tier.latency) * 1e6;
}

namespace {

/// Where a node runs; None for a receive, which only waits.
using Stream = ReplayStream;
constexpr unsigned NumStreams = 4;

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

/// A step's dependency structure and node times, derived once per node
/// range: edges from earlier steps are left out, as those nodes are done
/// when the step starts. It is all a simulation reads, so steps of equal
/// shapes (a stage's first and last micro-batch, the middle stages of a
/// pipeline) share one, and their outcomes.
///
/// Its nodes are the step's in the order they run, folded layers unfolded
/// (LayerFold): an offset is a place in that order, and `stored` maps it to
/// the node's offset in the program's step (a copy's: its template's).
struct StepShape {
  std::vector<uint32_t> initialPending;
  std::vector<Stream> streams;
  std::vector<double> micros; ///< Per node: its time on its stream.
  /// The children of offset i are children[childBegin[i], childBegin[i+1]).
  std::vector<uint32_t> childBegin, children;
  std::vector<uint32_t> recvs, sends; ///< Offsets, in id order.
  /// Empty when the step folds no layers: the offsets are then the stored.
  std::vector<uint32_t> stored;

  uint32_t getStored(uint32_t offset) const {
    return stored.empty() ? offset : stored[offset];
  }

  llvm::ArrayRef<uint32_t> getChildren(uint32_t offset) const {
    return llvm::makeArrayRef(children).slice(
        childBegin[offset], childBegin[offset + 1] - childBegin[offset]);
  }
  void clear() {
    for (auto *list :
         {&initialPending, &childBegin, &children, &recvs, &sends, &stored})
      list->clear();
    streams.clear();
    micros.clear();
  }
  /// Equal streams, times (bit for bit) and edges: recvs and sends follow
  /// from the streams.
  bool operator==(const StepShape &other) const {
    return streams == other.streams && initialPending == other.initialPending &&
           childBegin == other.childBegin && children == other.children &&
           stored == other.stored && micros.size() == other.micros.size() &&
           std::memcmp(micros.data(), other.micros.data(),
                       micros.size() * sizeof(double)) == 0;
  }
  /// A hash, never DenseMap's empty or tombstone key.
  uint64_t hash() const {
    uint64_t value = llvm::hash_combine(
        llvm::hash_combine_range(streams.begin(), streams.end()),
        llvm::hash_combine_range(children.begin(), children.end()),
        llvm::hash_combine_range(childBegin.begin(), childBegin.end()),
        llvm::hash_combine_range(stored.begin(), stored.end()),
        llvm::hash_combine_range(
            reinterpret_cast<const char *>(micros.data()),
            reinterpret_cast<const char *>(micros.data() + micros.size())));
    return value >= ~uint64_t(0) - 1 ? 0 : value;
  }
};

/// How a step runs from its start, given when its receives' messages
/// arrive (also from its start).
struct StepOutcome {
  double finish = 0;
  double computeMicros = 0, communicationMicros = 0;
  std::vector<double> sendDone; ///< Per send of the shape.
  /// Per node of the step, when it started and ended (a receive: when it
  /// was ready to wait, and when its message was there); only when a
  /// timeline is recorded.
  std::vector<double> starts, ends;
};

/// Receive arrivals after the step's start, in whole nanoseconds, so that
/// the periodic steps of a pipeline's steady state find their outcome again
/// despite rounding in the absolute times.
using ArrivalPattern = std::vector<int64_t>;

struct OutcomeKeyHash {
  size_t operator()(const ArrivalPattern &key) const {
    return llvm::hash_combine_range(key.begin(), key.end());
  }
};

/// A message: sending stage, receiving stage, tag.
using MessageKey = std::tuple<unsigned, unsigned, int32_t>;

/// When each message's send completed. A program set numbers its edges
/// globally, so a tag names one message in practice: the message lives in
/// the slot of its tag, and one whose slot another message took first, or
/// whose tag is out of the slots' range, lives in a map. Either way the
/// lookups answer the same; the slots spare the replay a hash lookup per
/// send and receive (a plan has thousands of steps).
class MessageTimes {
public:
  /// When `key`'s send completed, or null if it has not been sent.
  const double *find(const MessageKey &key) const {
    auto [from, to, tag] = key;
    if (tag >= 0 && size_t(tag) < slots.size()) {
      const Slot &slot = slots[tag];
      if (slot.from == from && slot.to == to)
        return &slot.time;
    }
    auto found = overflow.find(key);
    return found == overflow.end() ? nullptr : &found->second;
  }
  void set(const MessageKey &key, double time) {
    auto [from, to, tag] = key;
    if (tag >= 0 && size_t(tag) < MaxSlots) {
      if (size_t(tag) >= slots.size())
        slots.resize(
            std::min(MaxSlots, std::max<size_t>(tag + 1, 2 * slots.size())));
      Slot &slot = slots[tag];
      if (slot.from == NoStage || (slot.from == from && slot.to == to)) {
        slot = {from, to, time};
        return;
      }
    }
    overflow[key] = time;
  }

private:
  static constexpr unsigned NoStage = ~0u;
  static constexpr size_t MaxSlots = size_t(1) << 20;
  struct Slot {
    unsigned from = NoStage, to = NoStage;
    double time = 0;
  };
  std::vector<Slot> slots;
  llvm::DenseMap<MessageKey, double> overflow;
};

/// The outcomes of one step shape, by arrival pattern. A step has one
/// receive or none almost always (a pipeline stage's input): those are
/// keyed by the one arrival, without building a pattern.
struct ShapeOutcomes {
  llvm::DenseMap<int64_t, uint32_t> byArrival;
  std::unordered_map<ArrivalPattern, uint32_t, OutcomeKeyHash> byPattern;
};

struct StageState {
  unsigned rank = 0; ///< The rank that stands for the stage.
  std::vector<double> micros; ///< Per node: its time on its stream.
  /// The index of a step's shape in Replay::shapes, by the first node.
  llvm::DenseMap<uint32_t, uint32_t> shapeIndex;
  std::vector<ProgramStep> steps;
  size_t next = 0; ///< The next step to run.
  double now = 0;  ///< When the previous step finished.
};

/// The buffers of one step's simulation, kept for the next.
struct SimulationScratch {
  using Event = std::pair<double, uint32_t>; ///< Completion time, offset.
  std::vector<Event> events;                 ///< A min-heap.
  std::array<std::vector<uint32_t>, NumStreams> ready; ///< Min-heaps.
  std::vector<uint32_t> pending;
  std::vector<double> arrival, done;
};

class Replay {
public:
  Replay(const ProgramSet &programs, const SystemSpec &system,
         StepTimeline *timeline)
      : programs(programs), system(system), timeline(timeline),
        states(programs.stages.size()), waiting(programs.stages.size()) {}

  llvm::Expected<StepEstimate> run();

private:
  const ProgramNode &node(unsigned stage, uint32_t id) const {
    return programs.stages[stage].nodes[id];
  }
  void initialize(unsigned stage);
  double getMicros(unsigned stage, const ProgramNode &node,
                   std::map<AxisMask, GroupSpan> &spans);
  /// The index of `step`'s shape in `shapes`.
  uint32_t getShape(unsigned stage, const ProgramStep &step);
  /// Lists the step's nodes in the order they run, folded layers unfolded,
  /// into `stored` (left empty if it folds none), and returns their count.
  unsigned unfoldStep(unsigned stage, const ProgramStep &step,
                      std::vector<uint32_t> &stored);
  /// The unfolded offset of `dep`, a dependency of the node at unfolded
  /// `offset` (stored at `id`), after unfoldStep.
  uint32_t getUnfoldedDep(unsigned stage, const ProgramStep &step,
                          uint32_t offset, uint32_t id, uint32_t dep) const;
  /// A step of `shape` from its start: it depends on nothing else.
  StepOutcome simulate(const StepShape &shape,
                       llvm::ArrayRef<int64_t> arrivals);
  /// Runs the stage's steps until one waits for a message not yet sent.
  void advance(unsigned stage);
  llvm::Error describeDeadlock() const;

  const ProgramSet &programs;
  const SystemSpec &system;
  StepTimeline *timeline; ///< Null unless recording.
  std::vector<StageState> states;
  StepEstimate estimate;
  /// The distinct step shapes of all stages, with their outcomes.
  std::vector<StepShape> shapes;
  std::vector<ShapeOutcomes> outcomeIndex; ///< Per shape.
  std::vector<StepOutcome> outcomes;
  /// Shapes by their hash, to find an equal one.
  llvm::DenseMap<uint64_t, llvm::SmallVector<uint32_t, 1>> shapesByHash;
  StepShape candidate; ///< getShape's buffers, reused.
  /// unfoldStep's: per unfolded offset, the copy of a folded layer it is
  /// (0: a stored node) and its fold; per stored offset, its unfolded one.
  std::vector<uint32_t> unfoldedCopy, unfoldedFold, unfoldedOffset;
  std::vector<std::pair<uint32_t, uint32_t>> edges;
  MessageTimes sentAt;
  SimulationScratch scratch;
  /// Per stage, the message it waits for (a stage waits for one at a
  /// time), and the stages to advance.
  std::vector<std::optional<MessageKey>> waiting;
  std::set<unsigned> runnable;
  ArrivalPattern arrivals; ///< The current step's, reused.
};

} // namespace

double Replay::getMicros(unsigned stage, const ProgramNode &work,
                         std::map<AxisMask, GroupSpan> &spans) {
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
  std::map<AxisMask, GroupSpan> spans;
  state.micros.reserve(program.nodes.size());
  for (const ProgramNode &work : program.nodes)
    state.micros.push_back(getMicros(stage, work, spans));
  state.steps = program.steps;
  if (state.steps.empty() && !program.nodes.empty())
    state.steps.push_back({0, uint32_t(program.nodes.size()), 0, {}});
}

uint32_t Replay::getShape(unsigned stage, const ProgramStep &step) {
  StageState &state = states[stage];
  auto [it, inserted] = state.shapeIndex.try_emplace(step.begin, 0);
  if (!inserted)
    return it->second;
  StepShape &shape = candidate;
  shape.clear();
  unsigned size = unfoldStep(stage, step, shape.stored);
  shape.initialPending.assign(size, 0);
  shape.streams.reserve(size);
  if (step.folds.empty())
    shape.micros.assign(state.micros.begin() + step.begin,
                        state.micros.begin() + step.end);
  else
    for (uint32_t stored : shape.stored)
      shape.micros.push_back(state.micros[step.begin + stored]);
  // Edges inside the step as (parent, child), then grouped by parent.
  edges.clear();
  for (uint32_t offset = 0; offset < size; ++offset) {
    const ProgramNode &work = node(stage, step.begin + shape.getStored(offset));
    shape.streams.push_back(getStream(work));
    llvm::SmallVector<uint32_t, 8> deps;
    for (auto list : {llvm::ArrayRef<uint32_t>(work.dataDeps),
                      llvm::ArrayRef<uint32_t>(work.ctrlDeps)})
      for (uint32_t dep : list)
        if (dep >= step.begin)
          deps.push_back(
              step.folds.empty()
                  ? dep - step.begin
                  : getUnfoldedDep(stage, step, offset,
                                   step.begin + shape.getStored(offset), dep));
    std::sort(deps.begin(), deps.end()); // Not qsort: a few ids.
    deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
    shape.initialPending[offset] = deps.size();
    for (uint32_t dep : deps)
      edges.push_back({dep, offset});
    if (work.kind == ProgramNodeKind::Recv)
      shape.recvs.push_back(offset);
    else if (work.kind == ProgramNodeKind::Send)
      shape.sends.push_back(offset);
  }
  // Stable by parent, so each parent's children stay in offset order.
  shape.childBegin.assign(size + 1, 0);
  for (const auto &edge : edges)
    ++shape.childBegin[edge.first + 1];
  for (unsigned offset = 0; offset < size; ++offset)
    shape.childBegin[offset + 1] += shape.childBegin[offset];
  shape.children.resize(edges.size());
  std::vector<uint32_t> filled(shape.childBegin.begin(),
                               shape.childBegin.end() - 1);
  for (const auto &edge : edges)
    shape.children[filled[edge.first]++] = edge.second;
  llvm::SmallVector<uint32_t, 1> &equalHash = shapesByHash[shape.hash()];
  for (uint32_t index : equalHash)
    if (shapes[index] == shape)
      return it->second = index;
  uint32_t index = shapes.size();
  equalHash.push_back(index);
  shapes.push_back(std::move(shape));
  outcomeIndex.emplace_back();
  return it->second = index;
}

unsigned Replay::unfoldStep(unsigned stage, const ProgramStep &step,
                            std::vector<uint32_t> &stored) {
  unsigned size = step.end - step.begin;
  if (step.folds.empty())
    return size;
  const StageProgram &program = programs.stages[stage];
  unfoldedCopy.clear();
  unfoldedFold.clear();
  unfoldedOffset.assign(size, 0);
  auto next = step.folds.begin();
  auto addCopies = [&] {
    const LayerFold &fold = program.folds[*next];
    for (uint32_t copy = 1; copy <= fold.copies; ++copy)
      for (uint32_t id = fold.begin; id < fold.end; ++id) {
        stored.push_back(id - step.begin);
        unfoldedCopy.push_back(copy);
        unfoldedFold.push_back(*next);
      }
    ++next;
  };
  for (uint32_t offset = 0; offset < size; ++offset) {
    while (next != step.folds.end() &&
           program.folds[*next].end == step.begin + offset)
      addCopies();
    unfoldedOffset[offset] = stored.size();
    stored.push_back(offset);
    unfoldedCopy.push_back(0);
    unfoldedFold.push_back(0);
  }
  while (next != step.folds.end())
    addCopies();
  return stored.size();
}

uint32_t Replay::getUnfoldedDep(unsigned stage, const ProgramStep &step,
                                uint32_t offset, uint32_t id,
                                uint32_t dep) const {
  const StageProgram &program = programs.stages[stage];
  uint32_t place = unfoldedOffset[dep - step.begin];
  if (uint32_t copy = unfoldedCopy[offset]) {
    const LayerFold &fold = program.folds[unfoldedFold[offset]];
    uint32_t size = fold.end - fold.begin;
    if (dep >= fold.begin && dep < fold.end)
      return place + copy * size; // In the same copy.
    LayerFold::CarriedDep key{id, dep, 0};
    auto carried = llvm::lower_bound(fold.carried, key);
    if (carried != fold.carried.end() && carried->node == id &&
        carried->dep == dep) // In the copy before.
      return unfoldedOffset[carried->same - step.begin] + (copy - 1) * size;
    return place;
  }
  // After a fold, its template stands for its last copy.
  for (uint32_t index : step.folds) {
    const LayerFold &fold = program.folds[index];
    if (id >= fold.end && dep >= fold.begin && dep < fold.end)
      return place + fold.copies * (fold.end - fold.begin);
  }
  return place;
}

StepOutcome Replay::simulate(const StepShape &shape,
                             llvm::ArrayRef<int64_t> arrivals) {
  // Events are node completions, ordered by time and then by id; each
  // stream runs its ready node with the lowest id. The heaps live in
  // `scratch`, reused from step to step.
  using Event = SimulationScratch::Event;
  std::vector<Event> &events = scratch.events;
  auto &ready = scratch.ready;
  std::array<bool, NumStreams> busy{};
  std::vector<uint32_t> &pending = scratch.pending;
  pending = shape.initialPending;
  std::vector<double> &arrival = scratch.arrival;
  arrival.assign(pending.size(), 0);
  for (size_t i = 0; i < shape.recvs.size(); ++i)
    arrival[shape.recvs[i]] = arrivals[i] / 1e3;
  std::vector<double> &done = scratch.done;
  done.assign(pending.size(), 0);
  StepOutcome outcome;
  if (timeline) {
    outcome.starts.assign(pending.size(), 0);
    outcome.ends.assign(pending.size(), 0);
  }
  auto later = std::greater<>();

  auto pushEvent = [&](double time, uint32_t offset) {
    events.push_back({time, offset});
    std::push_heap(events.begin(), events.end(), later);
  };
  auto makeReady = [&](uint32_t offset, double now) {
    Stream stream = shape.streams[offset];
    if (stream == Stream::None) {
      if (timeline)
        outcome.starts[offset] = now;
      return pushEvent(std::max(now, arrival[offset]), offset);
    }
    std::vector<uint32_t> &queue = ready[unsigned(stream)];
    queue.push_back(offset);
    std::push_heap(queue.begin(), queue.end(), later);
  };
  auto issue = [&](double now) {
    for (unsigned stream = 0; stream < NumStreams; ++stream) {
      std::vector<uint32_t> &queue = ready[stream];
      if (busy[stream] || queue.empty())
        continue;
      std::pop_heap(queue.begin(), queue.end(), later);
      uint32_t offset = queue.back();
      queue.pop_back();
      double duration = shape.micros[offset];
      (Stream(stream) == Stream::Compute ? outcome.computeMicros
                                         : outcome.communicationMicros) +=
          duration;
      busy[stream] = true;
      if (timeline)
        outcome.starts[offset] = now;
      pushEvent(now + duration, offset);
    }
  };
  for (uint32_t offset = 0; offset < pending.size(); ++offset)
    if (!pending[offset])
      makeReady(offset, 0);
  issue(0);
  while (!events.empty()) {
    std::pop_heap(events.begin(), events.end(), later);
    auto [now, offset] = events.back();
    events.pop_back();
    Stream stream = shape.streams[offset];
    if (stream != Stream::None)
      busy[unsigned(stream)] = false;
    done[offset] = now;
    outcome.finish = std::max(outcome.finish, now);
    for (uint32_t child : shape.getChildren(offset))
      if (--pending[child] == 0)
        makeReady(child, now);
    issue(now);
  }
  for (uint32_t offset : shape.sends)
    outcome.sendDone.push_back(done[offset]);
  if (timeline)
    outcome.ends = done;
  return outcome;
}

void Replay::advance(unsigned stage) {
  StageState &state = states[stage];
  StageTime &time = estimate.stages[stage];
  for (; state.next < state.steps.size(); ++state.next) {
    const ProgramStep &step = state.steps[state.next];
    uint32_t shapeIndex = getShape(stage, step);
    const StepShape &shape = shapes[shapeIndex];
    arrivals.clear();
    int64_t latest = 0;
    for (uint32_t offset : shape.recvs) {
      const ProgramNode &recv =
          node(stage, step.begin + shape.getStored(offset));
      MessageKey key{recv.peerStage, stage, recv.tag + step.tagOffset};
      const double *sent = sentAt.find(key);
      if (!sent) {
        waiting[stage] = key;
        return;
      }
      arrivals.push_back(
          std::max<int64_t>(0, std::llround((*sent - state.now) * 1e3)));
      latest = std::max(latest, arrivals.back());
    }
    // The outcome of the same nodes with the same arrivals, else a new one.
    ShapeOutcomes &known = outcomeIndex[shapeIndex];
    uint32_t fresh = outcomes.size();
    bool single = arrivals.size() <= 1 &&
                  (arrivals.empty() || arrivals[0] < INT64_MAX - 1);
    uint32_t index = fresh;
    if (single) {
      auto found = known.byArrival.try_emplace(
          arrivals.empty() ? 0 : arrivals[0], fresh);
      index = found.first->second;
    } else {
      index = known.byPattern.try_emplace(arrivals, fresh).first->second;
    }
    if (index == fresh)
      outcomes.push_back(simulate(shape, arrivals));
    const StepOutcome &outcome = outcomes[index];
    for (size_t i = 0; i < shape.sends.size(); ++i) {
      const ProgramNode &send =
          node(stage, step.begin + shape.getStored(shape.sends[i]));
      MessageKey key{stage, send.peerStage, send.tag + step.tagOffset};
      sentAt.set(key, state.now + outcome.sendDone[i]);
      if (send.peerStage < waiting.size() && waiting[send.peerStage] == key) {
        runnable.insert(send.peerStage);
        waiting[send.peerStage].reset();
      }
    }
    if (timeline)
      for (uint32_t offset = 0; offset < shape.streams.size(); ++offset)
        timeline->events.push_back({stage, step.begin + shape.getStored(offset),
                                    state.next, shape.streams[offset],
                                    state.now + outcome.starts[offset],
                                    state.now + outcome.ends[offset]});
    time.computeMicros += outcome.computeMicros;
    time.communicationMicros += outcome.communicationMicros;
    time.pipelineWaitMicros += std::min(latest / 1e3, outcome.finish);
    state.now += outcome.finish;
  }
  time.finishMicros = state.now;
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
    const std::optional<MessageKey> &waits = waiting[stage];
    const ProgramStep &step = state.steps[state.next];
    for (uint32_t id = step.begin; id < step.end; ++id) {
      const ProgramNode &recv = node(stage, id);
      if (waits && recv.kind == ProgramNodeKind::Recv &&
          MessageKey{recv.peerStage, stage, recv.tag + step.tagOffset} ==
              *waits) {
        std::string name = !recv.name.empty()
                               ? recv.name
                               : "a receive from stage " +
                                     std::to_string(recv.peerStage);
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
    runnable.insert(stage);
  }
  // A step's outcome depends only on its start and its messages, so the
  // order in which stages advance does not change the result.
  while (!runnable.empty()) {
    unsigned stage = *runnable.begin();
    runnable.erase(runnable.begin());
    advance(stage);
  }
  for (const StageState &state : states)
    if (state.next < state.steps.size())
      return describeDeadlock();
  for (const StageTime &stage : estimate.stages)
    estimate.stepMicros = std::max(estimate.stepMicros, stage.finishMicros);
  for (StageTime &stage : estimate.stages)
    stage.pipelineWaitMicros += estimate.stepMicros - stage.finishMicros;
  return estimate;
}

llvm::Expected<StepEstimate> stg::estimateStep(const ProgramSet &programs,
                                               const SystemSpec &system,
                                               StepTimeline *timeline) {
  return Replay(programs, system, timeline).run();
}
