//===- HeldUnitsTest.cpp - Compute beside kernels that hold SMs -----------===//
//
// The step clock's held units (lib/Perf/HeldUnits.cpp): while a
// communication node that holds some of the device's compute units runs,
// the compute beside it runs on the rest. Times are worked out by hand on
// the test device given four units (one held: compute at 3/4 of its rate)
// and links of 1 GB/s (1000 bytes a microsecond); the replay's shortcuts
// (a folded layer's period jumped over, outcomes reused for other
// arrivals) are compared with simulating every step and copy afresh.
//
//===----------------------------------------------------------------------===//

#include "stg/Perf/StepEstimate.h"

#include "HandBuiltPrograms.h"

#include "gtest/gtest.h"

#include <random>

using namespace stg;

namespace {

/// The test device with four compute units, in one domain of four ranks.
SystemSpec makeFourUnitSystem() {
  DeviceSpec device = TestDevice;
  device.computeUnits = 4;
  return makeSingleDomainSystem(device, 4);
}

/// An all-reduce over tp (two ranks: bytes / 1000 us) on the forward and
/// backward stream that holds `held` units.
ProgramNode makeExchange(int64_t bytes, uint16_t held,
                         llvm::SmallVector<uint32_t, 4> deps = {}) {
  ProgramNode exchange = makeAllReduce(bytes, 1, false, std::move(deps));
  exchange.heldUnits = held;
  return exchange;
}

ProgramSet makeStage(std::vector<ProgramNode> nodes) {
  ProgramSet programs;
  programs.mesh = Mesh({{"tp", 2}, {"dp", 2}});
  programs.stages.resize(1);
  programs.stages[0].nodes = std::move(nodes);
  return programs;
}

TEST(HeldUnitsTest, ComputeBesideAHoldingExchangeRunsOnTheRest) {
  // A 12 us kernel and an 8 us exchange holding one of four units, from the
  // start: 6 us of the kernel's work by 8 us, the other 6 alone: 14 us.
  SystemSpec system = makeFourUnitSystem();
  StepTimeline timeline;
  StepEstimate step =
      estimate(makeStage({makeCompute(12, {}), makeExchange(8000, 1)}), system,
               &timeline);
  EXPECT_DOUBLE_EQ(getEnd(timeline, 0), 14.0);
  EXPECT_DOUBLE_EQ(getEnd(timeline, 1), 8.0);
  EXPECT_DOUBLE_EQ(step.stepMicros, 14.0);
  EXPECT_DOUBLE_EQ(step.stages[0].computeMicros, 14.0);
  // An exchange that holds none, or a device that counts no units: 12 us.
  EXPECT_DOUBLE_EQ(
      estimate(makeStage({makeCompute(12, {}), makeExchange(8000, 0)}), system)
          .stepMicros,
      12.0);
  EXPECT_DOUBLE_EQ(
      estimate(makeStage({makeCompute(12, {}), makeExchange(8000, 1)}),
               makeSingleDomainSystem(TestDevice, 4))
          .stepMicros,
      12.0);
}

TEST(HeldUnitsTest, OnlyWhatTheUnitsBoundSlows) {
  // A 12 us kernel beside a 14 us exchange that holds `held` of the four
  // units: when the kernel ends.
  SystemSpec system = makeFourUnitSystem();
  auto getKernelEnd = [&](UnitUse use, uint16_t held) {
    ProgramNode kernel = makeCompute(12, {});
    kernel.unitUse = use;
    StepTimeline timeline;
    estimate(makeStage({kernel, makeExchange(14000, held)}), system, &timeline);
    return getEnd(timeline, 0);
  };
  // Bound by memory, its FLOPs keeping two units busy: three left are
  // enough, so are two; one left halves its rate (7 us of work in 14).
  EXPECT_DOUBLE_EQ(getKernelEnd({2, 0}, 1), 12.0);
  EXPECT_DOUBLE_EQ(getKernelEnd({2, 0}, 2), 12.0);
  EXPECT_DOUBLE_EQ(getKernelEnd({2, 0}, 3), 19.0);
  // Bound by its FLOPs over half of its time (a GEMM and its casts): that
  // half stretches by 4/3, so it runs at 6/7 of its rate, 12 us of work
  // in the exchange's 14; over all of it, 4/3: 10.5 us of work, 1.5 left.
  EXPECT_DOUBLE_EQ(getKernelEnd({4, UnitUse::Scale / 2}, 1), 14.0);
  EXPECT_DOUBLE_EQ(getKernelEnd({4, 0}, 1), 15.5);
  EXPECT_DOUBLE_EQ(getKernelEnd(UnitUse(), 1), 15.5);
  // Two pipeline stages whose steps differ only in that use are not one.
  ProgramSet programs;
  programs.mesh = Mesh({{"tp", 2}, {"pp", 2}});
  programs.pipelineAxis = 1;
  programs.stages.resize(2);
  for (StageProgram &stage : programs.stages)
    stage.nodes = {makeCompute(12, {}), makeExchange(14000, 1)};
  programs.stages[1].nodes[0].unitUse = {2, 0};
  StepEstimate step = estimate(programs, system);
  EXPECT_DOUBLE_EQ(step.stages[0].computeMicros, 15.5);
  EXPECT_DOUBLE_EQ(step.stages[1].computeMicros, 12.0);
}

TEST(HeldUnitsTest, AnExchangeThatStartsMidKernelSlowsTheRest) {
  // The exchange waits for a 4 us gradient reduction (on another stream,
  // holding nothing), so it holds its unit from 4 to 8 us: the 12 us kernel
  // does 4 us of work, then 3, then the last 5 alone: 13 us. The kernel
  // after it starts at 13 us with nothing held.
  SystemSpec system = makeFourUnitSystem();
  StepTimeline timeline;
  StepEstimate step =
      estimate(makeStage({makeCompute(12, {}), makeAllReduce(4000, 2, true),
                          makeExchange(4000, 1, {1}), makeCompute(2, {0})}),
               system, &timeline);
  EXPECT_DOUBLE_EQ(getEnd(timeline, 2), 8.0);
  EXPECT_DOUBLE_EQ(getEnd(timeline, 0), 13.0);
  EXPECT_DOUBLE_EQ(step.stepMicros, 15.0);
}

TEST(HeldUnitsTest, ComputeKeepsAUnitWhateverIsHeld) {
  // Ten units held of four: the kernel runs on one, a quarter of its
  // rate, for the exchange's 8 us (2 us of work), then 1 us alone.
  SystemSpec system = makeFourUnitSystem();
  StepEstimate step =
      estimate(makeStage({makeCompute(3, {}), makeExchange(8000, 10)}), system);
  EXPECT_DOUBLE_EQ(step.stepMicros, 9.0);
}

TEST(HeldUnitsTest, AFoldedLayerThatHoldsUnitsJumpsOverItsPeriod) {
  // A 5 us kernel; 23 layers of a 10 us kernel (after the layer before's)
  // and a 4 us exchange holding one unit after it, which the next layer's
  // kernel overlaps (4 us at 3/4: 1 us later); a 5 us kernel at the end.
  SystemSpec system = makeFourUnitSystem();
  ProgramSet programs = makeStage({makeCompute(5, {})});
  StageProgram &stage = programs.stages[0];
  for (uint32_t first : {1u, 3u, 5u}) {
    stage.nodes.push_back(makeCompute(10, {first == 1 ? 0 : first - 2}));
    stage.nodes.push_back(makeExchange(4000, 1, {first}));
  }
  stage.nodes.push_back(makeCompute(5, {5, 6}));
  LayerFold fold;
  fold.begin = 3;
  fold.end = 5;
  fold.copies = 20;
  fold.carried = {{3, 1, 3}};
  stage.folds = {fold};
  stage.steps = {{0, 8, 0, 0}};
  StepTimeline timeline;
  StepEstimate fresh = estimate(programs, system, &timeline);
  StepEstimate jumped = estimate(programs, system);
  EXPECT_GT(jumped.jumpedCopies, 10u);
  EXPECT_EQ(fresh.jumpedCopies, 0u);
  // Each layer after the first is 1 us later; the last exchange runs
  // alone, and the final kernel waits for it.
  EXPECT_DOUBLE_EQ(fresh.stepMicros, 5 + 23 * 10 + 22 * 1 + 4 + 5);
  EXPECT_EQ(jumped.stepMicros, fresh.stepMicros);
  EXPECT_EQ(jumped.stages[0].computeMicros, fresh.stages[0].computeMicros);
}

TEST(HeldUnitsTest, ReusedOutcomesAreTheSimulatedOnes) {
  // Messages that come at many times into steps whose kernels overlap an
  // all-reduce holding one unit (LinkSharingTest's pipeline): an outcome
  // reused for another arrival must be the simulated one, whatever the
  // kernels' use of the units.
  SystemSpec system = makeFourUnitSystem();
  std::mt19937 random(2026);
  uint64_t ranged = 0;
  for (int trial = 0; trial < 150; ++trial) {
    auto draw = [&](uint64_t low, uint64_t high) {
      return std::uniform_int_distribution<uint64_t>(low, high)(random);
    };
    std::vector<uint64_t> durations;
    for (int index = 0; index < 24; ++index)
      durations.push_back(draw(1, 30));
    ProgramSet programs =
        makeForwardingPipeline(durations, int64_t(draw(2, 30)), draw(1, 12),
                               draw(1, 6), trial % 2 == 0, 1);
    // A third of the trials' kernels use the units as memory-bound kernels
    // or GEMMs with casts do.
    if (trial % 3 == 0)
      for (uint32_t kernel : {2u, 3u})
        programs.stages[1].nodes[kernel].unitUse = {
            uint32_t(draw(1, 4)), uint16_t(draw(0, UnitUse::Scale))};
    ranged += expectReusedAsSimulated(programs, system,
                                      "trial " + std::to_string(trial));
    if (HasFailure())
      return;
  }
  // The shortcut was taken: the test compares something.
  EXPECT_GT(ranged, 300u);
}

} // namespace
