//===- Timeline.cpp - The estimated step as Chrome trace events -----------===//
//
// Events go out stage by stage in time order, streamed through
// llvm::json::OStream: a timeline of a large plan holds a million nodes,
// and a JSON value of them all would hold several times that in memory.
//
//===----------------------------------------------------------------------===//

#include "stg/Emit/Timeline.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/JSON.h"

#include <map>
#include <tuple>

using namespace stg;

namespace {

constexpr unsigned NumThreads = 5;

unsigned getThread(ReplayStream stream) {
  return stream == ReplayStream::None ? NumThreads - 1 : unsigned(stream);
}

const char *getThreadName(unsigned thread) {
  static const char *const Names[NumThreads] = {
      "compute", "collectives (forward, backward)",
      "collectives (gradients, optimizer)", "sends", "receives"};
  return Names[thread];
}

const char *getCategory(ProgramNodeKind kind) {
  switch (kind) {
  case ProgramNodeKind::Compute:
    return "compute";
  case ProgramNodeKind::Collective:
    return "collective";
  case ProgramNodeKind::Send:
    return "send";
  case ProgramNodeKind::Recv:
    return "recv";
  }
  return "compute";
}

const char *getPhaseName(Phase phase) {
  switch (phase) {
  case Phase::Forward:
    return "forward";
  case Phase::Backward:
    return "backward";
  case Phase::GradientSync:
    return "gradient_sync";
  case Phase::Optimizer:
    return "optimizer";
  }
  return "forward";
}

/// A message: sending stage, receiving stage, tag.
using MessageKey = std::tuple<unsigned, unsigned, int32_t>;

class TimelineWriter {
public:
  TimelineWriter(llvm::raw_ostream &os, const ProgramSet &programs)
      : json(os), programs(programs) {}

  void writeMetadata(unsigned stage);
  void writeRun(const TimelineEvent &run);
  void writeFlow(const TimelineEvent &run, bool start, unsigned id);
  llvm::json::OStream json;

private:
  const ProgramSet &programs;
};

} // namespace

void TimelineWriter::writeMetadata(unsigned stage) {
  unsigned rank = programs.getPeerRank(0, stage);
  std::string name = "stage " + std::to_string(stage) + " (rank " +
                     std::to_string(rank);
  const Mesh &mesh = programs.mesh;
  for (unsigned axis = 0; axis < mesh.getAxes().size(); ++axis)
    name += (axis ? " " : ": ") + mesh.getAxes()[axis].name + "=" +
            std::to_string(mesh.getCoordinate(rank, axis));
  name += ")";
  auto metadata = [&](llvm::StringRef key, std::optional<unsigned> thread,
                      auto value) {
    json.object([&] {
      json.attribute("name", key);
      json.attribute("ph", "M");
      json.attribute("pid", stage);
      if (thread)
        json.attribute("tid", *thread);
      json.attributeObject("args", [&] {
        json.attribute(key.endswith("_name") ? "name" : "sort_index", value);
      });
    });
  };
  metadata("process_name", std::nullopt, name);
  metadata("process_sort_index", std::nullopt, stage);
  for (unsigned thread = 0; thread < NumThreads; ++thread) {
    metadata("thread_name", thread, getThreadName(thread));
    metadata("thread_sort_index", thread, thread);
  }
}

void TimelineWriter::writeRun(const TimelineEvent &run) {
  const ProgramNode &node = programs.stages[run.stage].nodes[run.node];
  unsigned rank = programs.getPeerRank(0, run.stage);
  json.object([&] {
    json.attribute("name", node.name.empty() ? getCategory(node.kind)
                                             : llvm::StringRef(node.name));
    json.attribute("cat", getCategory(node.kind));
    json.attribute("ph", "X");
    json.attribute("ts", run.startMicros);
    json.attribute("dur", run.endMicros - run.startMicros);
    json.attribute("pid", run.stage);
    json.attribute("tid", getThread(run.stream));
    json.attributeObject("args", [&] {
      json.attribute("node", run.node);
      json.attribute("schedule_step", int64_t(run.step));
      json.attribute("phase", node.weightGradient
                                  ? "weight_gradient"
                                  : getPhaseName(node.phase));
      if (node.layer >= 0)
        json.attribute("layer", node.layer);
      if (node.microbatch >= 0)
        json.attribute("microbatch", node.microbatch);
      switch (node.kind) {
      case ProgramNodeKind::Compute:
        json.attribute("flops", node.numOps);
        json.attribute("bytes", int64_t(node.tensorBytes));
        break;
      case ProgramNodeKind::Collective:
        json.attribute("collective", getCollectiveName(node.commType));
        json.attribute("bytes", node.commBytes);
        json.attribute("group", programs.mesh.describeMask(node.group));
        break;
      case ProgramNodeKind::Send:
      case ProgramNodeKind::Recv:
        json.attribute("bytes", node.commBytes);
        json.attribute("peer", programs.getPeerRank(rank, node));
        json.attribute("peer_stage", node.peerStage);
        json.attribute("tag", node.tag);
        break;
      }
    });
  });
}

void TimelineWriter::writeFlow(const TimelineEvent &run, bool start,
                               unsigned id) {
  json.object([&] {
    json.attribute("name", "message");
    json.attribute("cat", "message");
    json.attribute("ph", start ? "s" : "f");
    if (!start)
      json.attribute("bp", "e"); // Ends on the receive's slice.
    json.attribute("id", id);
    json.attribute("ts", start ? run.startMicros : run.endMicros);
    json.attribute("pid", run.stage);
    json.attribute("tid", getThread(run.stream));
  });
}

void stg::writeChromeTimeline(llvm::raw_ostream &os,
                              const ProgramSet &programs,
                              const StepTimeline &timeline, double stepMicros,
                              llvm::StringRef model) {
  // Stage by stage, in time order.
  std::vector<const TimelineEvent *> runs;
  runs.reserve(timeline.events.size());
  for (const TimelineEvent &event : timeline.events)
    runs.push_back(&event);
  llvm::sort(runs, [](const TimelineEvent *a, const TimelineEvent *b) {
    return std::tie(a->stage, a->startMicros, a->node) <
           std::tie(b->stage, b->startMicros, b->node);
  });
  // Each receive, by its message, for the flow arrows.
  std::map<MessageKey, const TimelineEvent *> receives;
  for (const TimelineEvent *run : runs) {
    const ProgramNode &node = programs.stages[run->stage].nodes[run->node];
    if (node.kind == ProgramNodeKind::Recv)
      receives[{node.peerStage, run->stage, node.tag}] = run;
  }

  TimelineWriter writer(os, programs);
  llvm::json::OStream &json = writer.json;
  json.object([&] {
    json.attributeObject("otherData", [&] {
      json.attribute("kind", "stagec-timeline");
      json.attribute("generator", "stagec");
      json.attribute("model", model);
      json.attribute("stages", unsigned(programs.stages.size()));
      json.attribute("ranks", programs.mesh.getNumRanks());
      json.attribute("step_micros", stepMicros);
    });
    json.attribute("displayTimeUnit", "ms");
    json.attributeArray("traceEvents", [&] {
      for (unsigned stage = 0; stage < programs.stages.size(); ++stage)
        writer.writeMetadata(stage);
      unsigned flows = 0;
      for (const TimelineEvent *run : runs) {
        writer.writeRun(*run);
        const ProgramNode &node =
            programs.stages[run->stage].nodes[run->node];
        if (node.kind != ProgramNodeKind::Send)
          continue;
        auto receive = receives.find({run->stage, node.peerStage, node.tag});
        if (receive == receives.end())
          continue;
        writer.writeFlow(*run, true, flows);
        writer.writeFlow(*receive->second, false, flows);
        ++flows;
      }
    });
  });
  os << "\n";
}
