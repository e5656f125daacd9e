//===- StepEstimate.cpp - The step time of a plan on a system -------------===//
//
// A replay step by step: within a step, a discrete-event simulation of its
// nodes on the stage's streams; across steps and stages, the messages.
//
//===----------------------------------------------------------------------===//

#include "stg/Perf/StepEstimate.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/Hashing.h"

#include <array>
#include <cmath>
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

/// A step's dependency structure, derived once per node range: edges from
/// earlier steps are left out, as those nodes are done when the step
/// starts.
struct StepShape {
  std::vector<uint32_t> initialPending;
  std::vector<Stream> streams;
  /// The children of offset i are children[childBegin[i], childBegin[i+1]).
  std::vector<uint32_t> childBegin, children;
  std::vector<uint32_t> recvs, sends; ///< Offsets, in id order.

  llvm::ArrayRef<uint32_t> getChildren(uint32_t offset) const {
    return llvm::makeArrayRef(children).slice(
        childBegin[offset], childBegin[offset + 1] - childBegin[offset]);
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
  size_t operator()(const std::pair<uint32_t, ArrivalPattern> &key) const {
    return llvm::hash_combine(
        key.first, llvm::hash_combine_range(key.second.begin(),
                                            key.second.end()));
  }
};

/// A message: sending stage, receiving stage, tag.
using MessageKey = std::tuple<unsigned, unsigned, int32_t>;

struct StageState {
  unsigned rank = 0; ///< The rank that stands for the stage.
  std::vector<double> micros; ///< Per node: its time on its stream.
  std::unordered_map<uint32_t, StepShape> shapes; ///< By the first node.
  std::unordered_map<std::pair<uint32_t, ArrivalPattern>, StepOutcome,
                     OutcomeKeyHash>
      outcomes;
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
        states(programs.stages.size()) {}

  llvm::Expected<StepEstimate> run();

private:
  const ProgramNode &node(unsigned stage, uint32_t id) const {
    return programs.stages[stage].nodes[id];
  }
  void initialize(unsigned stage);
  double getMicros(unsigned stage, const ProgramNode &node,
                   std::map<AxisMask, GroupSpan> &spans);
  const StepShape &getShape(unsigned stage, const ProgramStep &step);
  StepOutcome simulate(unsigned stage, const ProgramStep &step,
                       const StepShape &shape,
                       const ArrivalPattern &arrivals);
  /// Runs the stage's steps until one waits for a message not yet sent.
  void advance(unsigned stage);
  llvm::Error describeDeadlock() const;

  const ProgramSet &programs;
  const SystemSpec &system;
  StepTimeline *timeline; ///< Null unless recording.
  std::vector<StageState> states;
  StepEstimate estimate;
  /// When each message's send completed.
  llvm::DenseMap<MessageKey, double> sentAt;
  SimulationScratch scratch;
  /// The stage waiting for a message, and the stages to advance.
  std::map<MessageKey, unsigned> waiting;
  std::set<unsigned> runnable;
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
    state.steps.push_back({0, uint32_t(program.nodes.size()), 0});
}

const StepShape &Replay::getShape(unsigned stage, const ProgramStep &step) {
  auto [it, inserted] = states[stage].shapes.try_emplace(step.begin);
  StepShape &shape = it->second;
  if (!inserted)
    return shape;
  unsigned size = step.end - step.begin;
  shape.initialPending.assign(size, 0);
  shape.streams.reserve(size);
  // Edges inside the step as (parent, child), then grouped by parent.
  std::vector<std::pair<uint32_t, uint32_t>> edges;
  for (uint32_t offset = 0; offset < size; ++offset) {
    const ProgramNode &work = node(stage, step.begin + offset);
    shape.streams.push_back(getStream(work));
    llvm::SmallVector<uint32_t, 8> deps;
    for (auto list : {llvm::ArrayRef<uint32_t>(work.dataDeps),
                      llvm::ArrayRef<uint32_t>(work.ctrlDeps)})
      for (uint32_t dep : list)
        if (dep >= step.begin)
          deps.push_back(dep - step.begin);
    llvm::sort(deps);
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
  return shape;
}

StepOutcome Replay::simulate(unsigned stage, const ProgramStep &step,
                             const StepShape &shape,
                             const ArrivalPattern &arrivals) {
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
  const std::vector<double> &micros = states[stage].micros;
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
      double duration = micros[step.begin + offset];
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
    const StepShape &shape = getShape(stage, step);
    ArrivalPattern arrivals;
    int64_t latest = 0;
    for (uint32_t offset : shape.recvs) {
      const ProgramNode &recv = node(stage, step.begin + offset);
      MessageKey key{recv.peerStage, stage, recv.tag + step.tagOffset};
      auto sent = sentAt.find(key);
      if (sent == sentAt.end()) {
        waiting[key] = stage;
        return;
      }
      arrivals.push_back(std::max<int64_t>(
          0, std::llround((sent->second - state.now) * 1e3)));
      latest = std::max(latest, arrivals.back());
    }
    auto [it, inserted] =
        state.outcomes.try_emplace({step.begin, std::move(arrivals)});
    if (inserted)
      it->second = simulate(stage, step, shape, it->first.second);
    const StepOutcome &outcome = it->second;
    for (size_t i = 0; i < shape.sends.size(); ++i) {
      const ProgramNode &send = node(stage, step.begin + shape.sends[i]);
      MessageKey key{stage, send.peerStage, send.tag + step.tagOffset};
      sentAt[key] = state.now + outcome.sendDone[i];
      auto receiver = waiting.find(key);
      if (receiver != waiting.end()) {
        runnable.insert(receiver->second);
        waiting.erase(receiver);
      }
    }
    if (timeline)
      for (uint32_t offset = 0; offset < shape.streams.size(); ++offset)
        timeline->events.push_back({stage, step.begin + offset, state.next,
                                    shape.streams[offset],
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
    auto waits = llvm::find_if(waiting, [&](const auto &entry) {
      return entry.second == stage;
    });
    const ProgramStep &step = state.steps[state.next];
    for (uint32_t id = step.begin; id < step.end; ++id) {
      const ProgramNode &recv = node(stage, id);
      if (waits != waiting.end() && recv.kind == ProgramNodeKind::Recv &&
          MessageKey{recv.peerStage, stage, recv.tag + step.tagOffset} ==
              waits->first) {
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
