//===- StepEstimate.cpp - A first estimate of the step time ---------------===//
//
// A discrete-event replay: events are node completions, ordered by time and
// then by stage and id so the result does not depend on container order.
//
//===----------------------------------------------------------------------===//

#include "stg/Perf/StepEstimate.h"

#include <map>
#include <queue>
#include <tuple>

using namespace stg;

double stg::getCommunicationMicros(const ProgramNode &node, unsigned groupSize,
                                   const DeviceSpec &device) {
  double bytes = double(node.commBytes);
  double n = groupSize;
  double factor = 1;
  if (node.kind == ProgramNodeKind::Collective) {
    switch (node.commType) {
    case CollectiveKind::AllReduce:
      factor = 2 * (n - 1) / n;
      break;
    case CollectiveKind::AllGather:
      factor = n - 1;
      break;
    default: // ReduceScatter, AllToAll.
      factor = (n - 1) / n;
      break;
    }
  }
  return factor * bytes / device.linkBandwidth * 1e6;
}

namespace {

enum class Stream : uint8_t { None, Compute, Communication };

struct Event {
  double time;
  unsigned stage;
  uint32_t id;
  Stream stream;

  bool operator>(const Event &other) const {
    return std::tie(time, stage, id) > std::tie(other.time, other.stage,
                                                other.id);
  }
};

using MinHeap = std::priority_queue<uint32_t, std::vector<uint32_t>,
                                    std::greater<uint32_t>>;

struct StageState {
  std::vector<unsigned> pending;
  std::vector<std::vector<uint32_t>> children;
  MinHeap readyCompute, readyCommunication;
  bool computeBusy = false, communicationBusy = false;
};

class Replay {
public:
  Replay(const ProgramSet &programs, const DeviceSpec &device)
      : programs(programs), device(device), states(programs.stages.size()) {}

  llvm::Expected<StepEstimate> run();

private:
  using MessageKey = std::tuple<unsigned, unsigned, int32_t>;

  const ProgramNode &node(unsigned stage, uint32_t id) const {
    return programs.stages[stage].nodes[id];
  }
  void makeReady(unsigned stage, uint32_t id, double now);
  void issue(unsigned stage, double now);
  void complete(const Event &event);

  const ProgramSet &programs;
  const DeviceSpec &device;
  std::vector<StageState> states;
  StepEstimate estimate;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events;
  std::map<MessageKey, double> sent;
  /// Receives whose dependencies are done, waiting for their send.
  std::map<MessageKey, std::pair<unsigned, uint32_t>> waiting;
  std::map<MessageKey, double> waitingSince;
  size_t completed = 0;
};

} // namespace

void Replay::makeReady(unsigned stage, uint32_t id, double now) {
  const ProgramNode &ready = node(stage, id);
  switch (ready.kind) {
  case ProgramNodeKind::Compute:
    states[stage].readyCompute.push(id);
    return;
  case ProgramNodeKind::Collective:
  case ProgramNodeKind::Send:
    states[stage].readyCommunication.push(id);
    return;
  case ProgramNodeKind::Recv: {
    MessageKey key{ready.peerStage, stage, ready.tag};
    auto done = sent.find(key);
    if (done != sent.end()) {
      events.push({std::max(now, done->second), stage, id, Stream::None});
      return;
    }
    waiting[key] = {stage, id};
    waitingSince[key] = now;
    return;
  }
  }
}

void Replay::issue(unsigned stage, double now) {
  StageState &state = states[stage];
  StageTime &time = estimate.stages[stage];
  if (!state.computeBusy && !state.readyCompute.empty()) {
    uint32_t id = state.readyCompute.top();
    state.readyCompute.pop();
    double micros = double(node(stage, id).durationMicros);
    time.computeMicros += micros;
    state.computeBusy = true;
    events.push({now + micros, stage, id, Stream::Compute});
  }
  if (!state.communicationBusy && !state.readyCommunication.empty()) {
    uint32_t id = state.readyCommunication.top();
    state.readyCommunication.pop();
    const ProgramNode &comm = node(stage, id);
    unsigned groupSize = comm.kind == ProgramNodeKind::Collective
                             ? programs.mesh.getGroupSize(comm.group)
                             : 2;
    double micros = getCommunicationMicros(comm, groupSize, device);
    time.communicationMicros += micros;
    state.communicationBusy = true;
    events.push({now + micros, stage, id, Stream::Communication});
  }
}

void Replay::complete(const Event &event) {
  StageState &state = states[event.stage];
  if (event.stream == Stream::Compute)
    state.computeBusy = false;
  else if (event.stream == Stream::Communication)
    state.communicationBusy = false;
  ++completed;
  StageTime &time = estimate.stages[event.stage];
  time.finishMicros = std::max(time.finishMicros, event.time);
  for (uint32_t child : state.children[event.id])
    if (--state.pending[child] == 0)
      makeReady(event.stage, child, event.time);

  const ProgramNode &done = node(event.stage, event.id);
  if (done.kind == ProgramNodeKind::Send) {
    MessageKey key{event.stage, done.peerStage, done.tag};
    sent[key] = event.time;
    auto receiver = waiting.find(key);
    if (receiver != waiting.end()) {
      auto [stage, id] = receiver->second;
      events.push({std::max(event.time, waitingSince[key]), stage, id,
                   Stream::None});
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
                                               const DeviceSpec &device) {
  return Replay(programs, device).run();
}
