//===- TimelineTest.cpp - The replay's record of when each node ran -------===//
//
// `stagec --timeline` draws the estimated step from the replay's record.
// The promise is that the picture is the estimate: for shipped models under
// each schedule shape, every node runs once, on its stream, one at a time
// per stream, after its dependencies and, for a receive, after its send;
// and the last node ends at the step time.
//
//===----------------------------------------------------------------------===//

#include "stg/Driver/Compile.h"
#include "stg/Perf/DeviceModel.h"
#include "stg/Perf/StepEstimate.h"

#include "CompileForTest.h"
#include "TemplatePlan.h"

#include "gtest/gtest.h"

#include <functional>
#include <map>

using namespace stg;

namespace {

/// Four layers: a timeline records every node.
TemplatePlan makePlan(const char *model,
                      std::vector<std::pair<std::string, unsigned>> degrees,
                      unsigned microbatches,
                      std::function<void(TemplatePlan &)> change = {}) {
  TemplatePlan plan{model, std::move(degrees), microbatches};
  plan.layers = 4;
  if (change)
    change(plan);
  return plan;
}

ReplayStream getExpectedStream(const ProgramNode &node) {
  switch (node.kind) {
  case ProgramNodeKind::Compute:
    return ReplayStream::Compute;
  case ProgramNodeKind::Send:
    return ReplayStream::Pipeline;
  case ProgramNodeKind::Recv:
    return ReplayStream::None;
  case ProgramNodeKind::Collective:
    return node.phase == Phase::GradientSync || node.phase == Phase::Optimizer
               ? ReplayStream::Gradient
               : ReplayStream::Activation;
  }
  return ReplayStream::None;
}

class TimelineTest : public ::testing::TestWithParam<TemplatePlan> {};

TEST_P(TimelineTest, TheTimelineIsTheEstimate) {
  std::optional<CompiledModel> compiled =
      compileForTest(getCompileOptions(GetParam()));
  ASSERT_TRUE(compiled);
  ProgramSet &programs = compiled->programs;
  llvm::Expected<SystemSpec> system = loadSystem("dgx-h100");
  ASSERT_TRUE(bool(system)) << llvm::toString(system.takeError());
  applyDeviceModel(programs, system->device, nullptr);

  StepTimeline timeline;
  llvm::Expected<StepEstimate> recorded =
      estimateStep(programs, *system, &timeline);
  ASSERT_TRUE(bool(recorded)) << llvm::toString(recorded.takeError());
  // Recording changes nothing.
  llvm::Expected<StepEstimate> plain = estimateStep(programs, *system);
  ASSERT_TRUE(bool(plain));
  EXPECT_EQ(recorded->stepMicros, plain->stepMicros);

  // Every node once.
  std::map<std::pair<unsigned, uint32_t>, const TimelineEvent *> runs;
  double lastEnd = 0;
  for (const TimelineEvent &event : timeline.events) {
    EXPECT_TRUE(runs.insert({{event.stage, event.node}, &event}).second)
        << "stage " << event.stage << " node " << event.node << " twice";
    EXPECT_LE(event.startMicros, event.endMicros);
    lastEnd = std::max(lastEnd, event.endMicros);
  }
  size_t nodes = 0;
  for (const StageProgram &stage : programs.stages)
    nodes += stage.nodes.size();
  EXPECT_EQ(runs.size(), nodes);
  EXPECT_NEAR(lastEnd, recorded->stepMicros, 1e-6 * recorded->stepMicros);

  // On its stream, after its dependencies; a receive after its send.
  std::map<std::tuple<unsigned, unsigned, int32_t>, double> sendEnds;
  for (const auto &[key, event] : runs) {
    const ProgramNode &node = programs.stages[key.first].nodes[key.second];
    EXPECT_EQ(event->stream, getExpectedStream(node));
    for (auto deps : {llvm::ArrayRef<uint32_t>(node.dataDeps),
                      llvm::ArrayRef<uint32_t>(node.ctrlDeps)})
      for (uint32_t dep : deps) {
        auto found = runs.find({key.first, dep});
        ASSERT_NE(found, runs.end());
        EXPECT_GE(event->startMicros, found->second->endMicros - 1e-9)
            << "stage " << key.first << ": node " << key.second
            << " starts before its dependency " << dep << " ends";
      }
    if (node.kind == ProgramNodeKind::Send)
      sendEnds[{key.first, node.peerStage, node.tag}] = event->endMicros;
  }
  for (const auto &[key, event] : runs) {
    const ProgramNode &node = programs.stages[key.first].nodes[key.second];
    if (node.kind != ProgramNodeKind::Recv)
      continue;
    auto send = sendEnds.find({node.peerStage, key.first, node.tag});
    ASSERT_NE(send, sendEnds.end());
    // Arrivals are matched to the nanosecond.
    EXPECT_GE(event->endMicros, send->second - 1e-3);
  }

  // One node at a time on each stream of a stage.
  std::map<std::pair<unsigned, ReplayStream>,
           std::vector<std::pair<double, double>>>
      busy;
  for (const TimelineEvent &event : timeline.events)
    if (event.stream != ReplayStream::None)
      busy[{event.stage, event.stream}].push_back(
          {event.startMicros, event.endMicros});
  for (auto &[stream, intervals] : busy) {
    llvm::sort(intervals);
    for (size_t i = 1; i < intervals.size(); ++i)
      EXPECT_GE(intervals[i].first, intervals[i - 1].second - 1e-9);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Plans, TimelineTest,
    ::testing::Values(
        makePlan("llama3-8b.stg", {{"dp", 2}, {"tp", 2}, {"pp", 2}}, 4),
        makePlan("llama3-8b.stg", {{"tp", 2}, {"pp", 2}}, 4,
                 [](TemplatePlan &plan) { plan.virtualStages = 2; }),
        makePlan("llama3-8b.stg", {{"pp", 4}}, 6,
                 [](TemplatePlan &plan) {
                   plan.schedule = PipelineSchedule::GPipe;
                 }),
        makePlan("llama3-8b.stg", {{"tp", 4}, {"pp", 2}}, 2,
                 [](TemplatePlan &plan) { plan.mode = "prefill"; }),
        makePlan("mixtral-8x7b.stg", {{"ep", 4}, {"pp", 2}}, 2)));

} // namespace
