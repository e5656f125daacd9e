//===- LinkSharingTest.cpp - Streams that share a tier's bandwidth --------===//
//
// The step clock's link sharing (lib/Perf/LinkSharing.cpp): transfers of a
// rank's streams in flight on one tier at once divide its bandwidth; on
// other tiers they do not slow each other; latency is not shared. Times
// are worked out by hand on the test device (links of 1 GB/s: 1000 bytes a
// microsecond), and the replay's shortcuts (outcomes reused for other
// arrivals, a folded layer's period jumped over) are compared with
// simulating every step and copy afresh.
//
//===----------------------------------------------------------------------===//

#include "stg/Perf/StepEstimate.h"

#include "HandBuiltPrograms.h"

#include "gtest/gtest.h"

#include <random>

using namespace stg;

namespace {

const SystemSpec OneDomain = makeSingleDomainSystem(TestDevice, 4);

/// A stage of tp 2 x dp 2 on `system` that runs `nodes`.
ProgramSet makeStage(std::vector<ProgramNode> nodes) {
  ProgramSet programs;
  programs.mesh = Mesh({{"tp", 2}, {"dp", 2}});
  programs.stages.resize(1);
  programs.stages[0].nodes = std::move(nodes);
  return programs;
}

TEST(LinkSharingTest, TwoStreamsOnOneTierTakeTwiceAsLong) {
  // Two 8 us all-reduces, one a stream, from the start: each gets half
  // the link, and both end at 16 us; alone, either takes 8 us.
  StepEstimate both = estimate(
      makeStage({makeAllReduce(8000, 1, false), makeAllReduce(8000, 2, true)}),
      OneDomain);
  EXPECT_DOUBLE_EQ(both.stepMicros, 16.0);
  // Each stream was busy for 16 us.
  EXPECT_DOUBLE_EQ(both.stages[0].communicationMicros, 32.0);
  StepEstimate alone =
      estimate(makeStage({makeAllReduce(8000, 1, false)}), OneDomain);
  EXPECT_DOUBLE_EQ(alone.stepMicros, 8.0);
}

TEST(LinkSharingTest, StreamsOnOtherTiersDoNotSlowEachOther) {
  // Two GPUs a node: tp in the node (8 us + 2 steps of 1 us), dp across
  // nodes (80 us + 2 steps of 10 us), at once.
  SystemSpec system = makeTwoTierSystem();
  StepEstimate both = estimate(
      makeStage({makeAllReduce(8000, 1, false), makeAllReduce(8000, 2, true)}),
      system);
  EXPECT_DOUBLE_EQ(both.stepMicros, 100.0);
  EXPECT_DOUBLE_EQ(both.stages[0].communicationMicros, 110.0);
}

TEST(LinkSharingTest, PartialOverlapIsExact) {
  // An 8 us all-reduce from 0; a 16 us one from 4 us, after a kernel. The
  // first is half done at 4 us and ends 8 us later at half rate (12 us),
  // when the second has done 4 us of its 16: it ends at 24 us.
  StepTimeline timeline;
  StepEstimate step =
      estimate(makeStage({makeCompute(4, {}), makeAllReduce(8000, 1, false),
                          makeAllReduce(16000, 2, true, {0})}),
               OneDomain, &timeline);
  EXPECT_DOUBLE_EQ(getEnd(timeline, 1), 12.0);
  EXPECT_DOUBLE_EQ(getEnd(timeline, 2), 24.0);
  EXPECT_DOUBLE_EQ(step.stepMicros, 24.0);
  EXPECT_DOUBLE_EQ(step.stages[0].communicationMicros, 12.0 + 20.0);
}

TEST(LinkSharingTest, ThreeStreamsShareByThirds) {
  // Works of 3, 6 and 9 us from the start: a third each until 9 us, when
  // the first is done; halves until 15 us; the last alone until 18 us.
  // (Thirds of a picosecond are whole sixths: the clock stays exact.)
  ProgramSet programs;
  programs.mesh = Mesh({{"tp", 2}, {"pp", 2}});
  programs.pipelineAxis = 1;
  programs.stages.resize(2);
  programs.stages[0].nodes = {makeAllReduce(3000, 1, false),
                              makeAllReduce(6000, 1, true),
                              makeMessage(ProgramNodeKind::Send, 1, 9000, {})};
  programs.stages[1].nodes = {makeMessage(ProgramNodeKind::Recv, 0, 9000, {})};
  StepTimeline timeline;
  StepEstimate step = estimate(programs, OneDomain, &timeline);
  EXPECT_DOUBLE_EQ(getEnd(timeline, 0), 9.0);
  EXPECT_DOUBLE_EQ(getEnd(timeline, 1), 15.0);
  EXPECT_DOUBLE_EQ(getEnd(timeline, 2), 18.0);
  EXPECT_DOUBLE_EQ(step.stepMicros, 18.0);
}

TEST(LinkSharingTest, LatencyIsNotShared) {
  // Two all-reduces in a node of 1 us of bandwidth and 2 steps of 1 us
  // each: they share the link for 2 us, then wait out their latency.
  SystemSpec system = makeTwoTierSystem();
  StepEstimate step = estimate(
      makeStage({makeAllReduce(1000, 1, false), makeAllReduce(1000, 1, true)}),
      system);
  EXPECT_DOUBLE_EQ(step.stepMicros, 4.0);
}

TEST(LinkSharingTest, AHierarchicalCollectiveSharesEachTierInTurn) {
  // Over tp x dp (two ranks on each of two nodes): reduce-scatter in the
  // node (1 us), all-reduce across (10 us), all-gather in the node (1 us),
  // then 22 us of latency. Beside it, a tensor-parallel all-reduce (8 us,
  // then 2 us of latency) shares the node's links during the first phase
  // only: it ends at 2 + 7 + 2 = 11 us, and the other's last phase runs
  // alone from 12 us: 13 + 22 us.
  SystemSpec system = makeTwoTierSystem();
  StepTimeline timeline;
  StepEstimate step = estimate(
      makeStage({makeAllReduce(8000, 1, false), makeAllReduce(2000, 3, true)}),
      system, &timeline);
  EXPECT_DOUBLE_EQ(getEnd(timeline, 0), 11.0);
  EXPECT_DOUBLE_EQ(getEnd(timeline, 1), 35.0);
  EXPECT_DOUBLE_EQ(step.stepMicros, 35.0);
}

TEST(LinkSharingTest, AFoldedLayerThatSharesJumpsOverItsPeriod) {
  // A 5 us kernel, 23 layers of a 10 us kernel (after the layer before's)
  // and two 4 us all-reduces after it, one a stream (8 us, shared), and a
  // 5 us kernel after the last layer's.
  ProgramSet programs;
  programs.mesh = Mesh({{"tp", 2}, {"dp", 2}});
  programs.stages.resize(1);
  StageProgram &stage = programs.stages[0];
  stage.nodes = {makeCompute(5, {})};
  for (uint32_t first : {1u, 4u, 7u}) {
    stage.nodes.push_back(makeCompute(10, {first == 1 ? 0 : first - 3}));
    stage.nodes.push_back(makeAllReduce(4000, 1, false, {first}));
    stage.nodes.push_back(makeAllReduce(4000, 2, true, {first}));
  }
  stage.nodes.push_back(makeCompute(5, {8, 9}));
  LayerFold fold;
  fold.begin = 4;
  fold.end = 7;
  fold.copies = 20;
  fold.carried = {{4, 1, 4}};
  stage.folds = {fold};
  stage.steps = {{0, 11, 0, 0}};
  StepTimeline timeline;
  StepEstimate fresh = estimate(programs, OneDomain, &timeline);
  StepEstimate jumped = estimate(programs, OneDomain);
  EXPECT_GT(jumped.jumpedCopies, 10u);
  EXPECT_EQ(fresh.jumpedCopies, 0u);
  EXPECT_DOUBLE_EQ(jumped.stepMicros, 5 + 23 * 10 + 8 + 5);
  EXPECT_EQ(jumped.stepMicros, fresh.stepMicros);
  EXPECT_DOUBLE_EQ(jumped.stages[0].communicationMicros, 23 * 2 * 8);
  EXPECT_EQ(jumped.stages[0].communicationMicros,
            fresh.stages[0].communicationMicros);
}

TEST(LinkSharingTest, ReusedOutcomesAreTheSimulatedOnes) {
  // Messages that come at many times into steps whose send shares a link
  // with an all-reduce, or does not. In one domain, and on two tiers,
  // where the send crosses nodes beside a hierarchical all-reduce (its
  // second phase on the NICs) and both have latency.
  SystemSpec twoTiers = makeTwoTierSystem();
  for (const SystemSpec *system :
       {&OneDomain, static_cast<const SystemSpec *>(&twoTiers)}) {
    std::mt19937 random(2024);
    uint64_t ranged = 0;
    for (int trial = 0; trial < 150; ++trial) {
      std::vector<uint64_t> durations;
      std::uniform_int_distribution<uint64_t> duration(1, 30);
      for (int index = 0; index < 24; ++index)
        durations.push_back(duration(random));
      int64_t reduce = std::uniform_int_distribution<int64_t>(2, 30)(random);
      uint64_t first = std::uniform_int_distribution<uint64_t>(1, 12)(random);
      uint64_t reading = std::uniform_int_distribution<uint64_t>(1, 6)(random);
      ranged += expectReusedAsSimulated(
          makeForwardingPipeline(durations, reduce, first, reading,
                                 trial % 2 == 0),
          *system, "trial " + std::to_string(trial));
      if (HasFailure())
        return;
    }
    // The shortcut was taken: the test compares something.
    EXPECT_GT(ranged, 300u);
  }
}

} // namespace
