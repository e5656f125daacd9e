//===- StepEstimate.cpp - The step time of a plan on a system -------------===//
//
// A discrete-event replay: events are node completions, ordered by time and
// then by stage and id so the result does not depend on container order.
//
//===----------------------------------------------------------------------===//

#include "stg/Perf/StepEstimate.h"

#include <array>
#include <cmath>
#include <map>
#include <queue>
#include <set>
#include <tuple>

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
enum class Stream : uint8_t {
  Compute,
  Activation, ///< Forward and backward collectives (tp, cp, ep).
  Gradient,   ///< Gradient synchronization and optimizer collectives (dp).
  Pipeline,   ///< Sends to other stages.
  None
};
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

struct Event {
  double time;
  unsigned stage;
  uint32_t id;
  Stream stream;

  bool operator>(const Event &other) const {
    return std::tie(time, stage, id) >
           std::tie(other.time, other.stage, other.id);
  }
};

using MinHeap = std::priority_queue<uint32_t, std::vector<uint32_t>,
                                    std::greater<uint32_t>>;

struct StageState {
  std::vector<unsigned> pending;
  std::vector<std::vector<uint32_t>> children;
  std::array<MinHeap, NumStreams> ready;
  std::array<bool, NumStreams> busy{};
  unsigned rank = 0; ///< The rank that stands for the stage.
  /// Group mask -> how its group sits on the nodes, for this stage's rank.
  std::map<AxisMask, GroupSpan> spans;
};

class Replay {
public:
  Replay(const ProgramSet &programs, const SystemSpec &system)
      : programs(programs), system(system), states(programs.stages.size()) {}

  llvm::Expected<StepEstimate> run();

private:
  using MessageKey = std::tuple<unsigned, unsigned, int32_t>;

  const ProgramNode &node(unsigned stage, uint32_t id) const {
    return programs.stages[stage].nodes[id];
  }
  void makeReady(unsigned stage, uint32_t id, double now);
  void issue(unsigned stage, double now);
  void complete(const Event &event);
  double getMicros(unsigned stage, const ProgramNode &node);

  const ProgramSet &programs;
  const SystemSpec &system;
  std::vector<StageState> states;
  StepEstimate estimate;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events;
  /// Events pop in time order, so a receive that finds its send done, or
  /// a send that finds its receive waiting, completes at the current time.
  std::set<MessageKey> sent;
  /// Receives whose dependencies are done, waiting for their send.
  std::map<MessageKey, std::pair<unsigned, uint32_t>> waiting;
  size_t completed = 0;
};

} // namespace

void Replay::makeReady(unsigned stage, uint32_t id, double now) {
  const ProgramNode &ready = node(stage, id);
  switch (ready.kind) {
  case ProgramNodeKind::Compute:
  case ProgramNodeKind::Collective:
  case ProgramNodeKind::Send:
    states[stage].ready[unsigned(getStream(ready))].push(id);
    return;
  case ProgramNodeKind::Recv: {
    MessageKey key{ready.peerStage, stage, ready.tag};
    if (sent.count(key)) {
      events.push({now, stage, id, Stream::None});
      return;
    }
    waiting[key] = {stage, id};
    return;
  }
  }
}

double Replay::getMicros(unsigned stage, const ProgramNode &work) {
  StageState &state = states[stage];
  switch (work.kind) {
  case ProgramNodeKind::Compute:
    return double(work.durationMicros);
  case ProgramNodeKind::Collective: {
    auto [it, inserted] = state.spans.try_emplace(work.group);
    if (inserted)
      it->second = getGroupSpan(programs.mesh, system, state.rank, work.group);
    return getCollectiveMicros(work.commType, double(work.commBytes),
                               it->second, system);
  }
  case ProgramNodeKind::Send:
  case ProgramNodeKind::Recv: {
    unsigned peer = programs.getPeerRank(state.rank, work.peerStage);
    return getMessageMicros(double(work.commBytes),
                            system.getNode(peer) != system.getNode(state.rank),
                            system);
  }
  }
  return 0;
}

void Replay::issue(unsigned stage, double now) {
  StageState &state = states[stage];
  StageTime &time = estimate.stages[stage];
  for (unsigned stream = 0; stream < NumStreams; ++stream) {
    if (state.busy[stream] || state.ready[stream].empty())
      continue;
    uint32_t id = state.ready[stream].top();
    state.ready[stream].pop();
    double micros = getMicros(stage, node(stage, id));
    (Stream(stream) == Stream::Compute ? time.computeMicros
                                       : time.communicationMicros) += micros;
    state.busy[stream] = true;
    events.push({now + micros, stage, id, Stream(stream)});
  }
}

void Replay::complete(const Event &event) {
  StageState &state = states[event.stage];
  if (event.stream != Stream::None)
    state.busy[unsigned(event.stream)] = false;
  ++completed;
  StageTime &time = estimate.stages[event.stage];
  time.finishMicros = std::max(time.finishMicros, event.time);
  for (uint32_t child : state.children[event.id])
    if (--state.pending[child] == 0)
      makeReady(event.stage, child, event.time);

  const ProgramNode &done = node(event.stage, event.id);
  if (done.kind == ProgramNodeKind::Send) {
    MessageKey key{event.stage, done.peerStage, done.tag};
    sent.insert(key);
    auto receiver = waiting.find(key);
    if (receiver != waiting.end()) {
      auto [stage, id] = receiver->second;
      events.push({event.time, stage, id, Stream::None});
      waiting.erase(receiver);
    }
  }
  issue(event.stage, event.time);
}

llvm::Expected<StepEstimate> Replay::run() {
  estimate.stages.resize(programs.stages.size());
  size_t total = 0;
  for (unsigned stage = 0; stage < programs.stages.size(); ++stage) {
    const std::vector<ProgramNode> &nodes = programs.stages[stage].nodes;
    StageState &state = states[stage];
    state.rank = programs.getPeerRank(0, stage);
    state.pending.assign(nodes.size(), 0);
    state.children.resize(nodes.size());
    total += nodes.size();
    for (uint32_t id = 0; id < nodes.size(); ++id) {
      llvm::SmallVector<uint32_t, 8> deps(nodes[id].dataDeps.begin(),
                                          nodes[id].dataDeps.end());
      deps.append(nodes[id].ctrlDeps.begin(), nodes[id].ctrlDeps.end());
      llvm::sort(deps);
      deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
      state.pending[id] = deps.size();
      for (uint32_t dep : deps)
        state.children[dep].push_back(id);
    }
    for (uint32_t id = 0; id < nodes.size(); ++id)
      if (!state.pending[id])
        makeReady(stage, id, 0);
    issue(stage, 0);
  }
  while (!events.empty()) {
    Event event = events.top();
    events.pop();
    complete(event);
  }
  if (completed != total) {
    std::string stuck;
    for (unsigned stage = 0; stage < states.size(); ++stage) {
      const std::vector<uint32_t> &pending = states[stage].pending;
      auto first = llvm::find_if(pending, [](uint32_t n) { return n > 0; });
      auto waitingRecv = llvm::find_if(waiting, [&](const auto &entry) {
        return entry.second.first == stage;
      });
      if (waitingRecv != waiting.end())
        stuck += "; stage " + std::to_string(stage) + " waits in '" +
                 node(stage, waitingRecv->second.second).name +
                 "' for a send that never comes";
      else if (first != pending.end())
        stuck += "; stage " + std::to_string(stage) + " waits before '" +
                 node(stage, first - pending.begin()).name + "'";
    }
    return llvm::createStringError(
        std::errc::resource_deadlock_would_occur,
        "the step cannot complete: %zu of %zu nodes never become ready%s "
        "(the trace set would deadlock a simulator too)",
        total - completed, total, stuck.c_str());
  }
  for (const StageTime &stage : estimate.stages)
    estimate.stepMicros = std::max(estimate.stepMicros, stage.finishMicros);
  return estimate;
}

llvm::Expected<StepEstimate> stg::estimateStep(const ProgramSet &programs,
                                               const SystemSpec &system) {
  return Replay(programs, system).run();
}
