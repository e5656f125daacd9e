//===- StepEstimateTest.cpp - Replaying programs for a step time ----------===//

#include "stg/Perf/StepEstimate.h"

#include "gtest/gtest.h"

using namespace stg;

namespace {

ProgramNode compute(uint64_t micros, llvm::SmallVector<uint32_t, 4> deps) {
  ProgramNode node;
  node.durationMicros = micros;
  node.dataDeps = deps;
  return node;
}

ProgramNode message(ProgramNodeKind kind, unsigned peer, int64_t bytes,
                    llvm::SmallVector<uint32_t, 4> deps) {
  ProgramNode node;
  node.kind = kind;
  node.peerStage = peer;
  node.commBytes = bytes;
  node.tag = 7;
  node.dataDeps = deps;
  return node;
}

// Links of 1 GB/s: 1000 bytes per microsecond.
const DeviceSpec Device{"test", 1e12, 1e12, 1e9, 1.0, 1.0};

TEST(StepEstimateTest, CollectiveTimesFollowTheRingAlgorithm) {
  ProgramNode node;
  node.kind = ProgramNodeKind::Collective;
  node.commBytes = 4000;
  node.commType = CollectiveKind::AllReduce;
  EXPECT_DOUBLE_EQ(getCommunicationMicros(node, 4, Device), 6.0); // 2*3/4
  node.commType = CollectiveKind::ReduceScatter;
  EXPECT_DOUBLE_EQ(getCommunicationMicros(node, 4, Device), 3.0); // 3/4
  node.commType = CollectiveKind::AllGather;
  EXPECT_DOUBLE_EQ(getCommunicationMicros(node, 4, Device), 12.0); // 3
  node.kind = ProgramNodeKind::Send;
  EXPECT_DOUBLE_EQ(getCommunicationMicros(node, 2, Device), 4.0);
}

TEST(StepEstimateTest, StagesWaitForTheirMessages) {
  // Stage 0: a 10 us kernel, then a 5 us send. Stage 1: the receive, a
  // 20 us kernel, then a 3 us AllReduce over two ranks.
  ProgramSet programs;
  programs.mesh = Mesh({{"tp", 2}, {"pp", 2}});
  programs.pipelineAxis = 1;
  programs.stages.resize(2);
  programs.stages[0].nodes = {
      compute(10, {}), message(ProgramNodeKind::Send, 1, 5000, {0})};
  ProgramNode reduce;
  reduce.kind = ProgramNodeKind::Collective;
  reduce.commType = CollectiveKind::AllReduce;
  reduce.commBytes = 3000;
  reduce.group = 1;
  reduce.dataDeps = {1};
  programs.stages[1].nodes = {message(ProgramNodeKind::Recv, 0, 5000, {}),
                              compute(20, {0}), reduce};
  llvm::Expected<StepEstimate> estimate = estimateStep(programs, Device);
  if (!estimate)
    FAIL() << llvm::toString(estimate.takeError());
  EXPECT_DOUBLE_EQ(estimate->stepMicros, 38.0);
  EXPECT_DOUBLE_EQ(estimate->stages[0].finishMicros, 15.0);
  EXPECT_DOUBLE_EQ(estimate->stages[0].computeMicros, 10.0);
  EXPECT_DOUBLE_EQ(estimate->stages[0].communicationMicros, 5.0);
  EXPECT_DOUBLE_EQ(estimate->stages[1].computeMicros, 20.0);
  EXPECT_DOUBLE_EQ(estimate->stages[1].communicationMicros, 3.0);
}

TEST(StepEstimateTest, OneKernelAtATimeLowestIdFirst) {
  // Two independent kernels share the compute stream; the communication
  // stream runs beside them.
  ProgramSet programs;
  programs.mesh = Mesh({{"tp", 2}});
  programs.stages.resize(1);
  ProgramNode reduce;
  reduce.kind = ProgramNodeKind::Collective;
  reduce.commType = CollectiveKind::AllReduce;
  reduce.commBytes = 8000;
  reduce.group = 1;
  programs.stages[0].nodes = {compute(4, {}), compute(6, {}), reduce};
  llvm::Expected<StepEstimate> estimate = estimateStep(programs, Device);
  if (!estimate)
    FAIL() << llvm::toString(estimate.takeError());
  EXPECT_DOUBLE_EQ(estimate->stepMicros, 10.0); // 4 + 6; the 8 us overlaps
  EXPECT_DOUBLE_EQ(estimate->stages[0].communicationMicros, 8.0);
}

TEST(StepEstimateTest, AReceiveWithoutItsSendNeverCompletes) {
  ProgramSet programs;
  programs.mesh = Mesh({{"pp", 2}});
  programs.pipelineAxis = 0;
  programs.stages.resize(2);
  programs.stages[1].nodes = {message(ProgramNodeKind::Recv, 0, 10, {})};
  programs.stages[1].nodes[0].name = "lonely.recv";
  llvm::Expected<StepEstimate> estimate = estimateStep(programs, Device);
  if (estimate)
    FAIL() << "a receive without its send completed";
  EXPECT_EQ(llvm::toString(estimate.takeError()),
            "the step cannot complete: 1 of 1 nodes never become ready; "
            "stage 1 waits in 'lonely.recv' for a send that never comes (the "
            "trace set would deadlock a simulator too)");
}

} // namespace
