//===- StepMetricsTest.cpp - CCL-Bench's metrics of an estimated step -----===//
//
// Hand-built programs whose every metric can be worked out on paper, then
// shipped templates for what depends on the compiler: the model FLOPs do
// not depend on the plan, and folded programs give the metrics of the
// programs written as traces.
//
//===----------------------------------------------------------------------===//

#include "stg/Perf/StepMetrics.h"

#include "stg/Driver/Compile.h"
#include "stg/Driver/ModelFlops.h"
#include "stg/Perf/DeviceModel.h"

#include "HandBuiltPrograms.h"

#include "CompileForTest.h"

#include "gtest/gtest.h"

using namespace stg;

namespace {

ProgramNode collective(CollectiveKind kind, int64_t bytes, AxisMask group,
                       Phase phase, llvm::SmallVector<uint32_t, 4> deps) {
  ProgramNode node;
  node.kind = ProgramNodeKind::Collective;
  node.commType = kind;
  node.commBytes = bytes;
  node.group = group;
  node.phase = phase;
  node.dataDeps = deps;
  return node;
}

TEST(StepMetricsTest, ComputeOnlyStepSpendsNothingOnCommunication) {
  ProgramSet programs;
  programs.mesh = Mesh({{"dp", 1}});
  programs.stages.resize(1);
  programs.stages[0].nodes = {makeCompute(10, {}, 4'000'000),
                              makeCompute(20, {0}, 11'000'000)};
  SystemSpec system = makeSingleDomainSystem(TestDevice, 1);
  StepEstimate step = estimate(programs, system);
  ASSERT_DOUBLE_EQ(step.stepMicros, 30.0);
  StepWork work;
  work.modelFlops = 15e6;
  work.tokens = 300;
  StepMetrics metrics = computeStepMetrics(programs, step, system, work);
  EXPECT_EQ(metrics.gpus, 1u);
  EXPECT_DOUBLE_EQ(metrics.communicationFraction, 0.0);
  EXPECT_DOUBLE_EQ(metrics.exposedCommunicationMicros, 0.0);
  EXPECT_FALSE(metrics.computeCommOverlap); // No communication to hide.
  EXPECT_DOUBLE_EQ(metrics.bubbleFraction, 0.0);
  EXPECT_EQ(metrics.loadImbalanceRatio, std::optional<double>(1.0));
  // 15 MFLOP in 30 us of a 1 TFLOP/s GPU.
  EXPECT_DOUBLE_EQ(metrics.hardwareFlops, 15e6);
  EXPECT_DOUBLE_EQ(metrics.mfu, 0.5);
  EXPECT_DOUBLE_EQ(metrics.hfu, 0.5);
  EXPECT_EQ(metrics.tokensPerSecondPerGPU, std::optional<double>(1e7));
  for (const CollectiveTraffic &traffic : metrics.collectives) {
    EXPECT_EQ(traffic.count, 0u);
    EXPECT_FALSE(traffic.getBusBandwidth());
  }
  EXPECT_FALSE(metrics.ttftMicros);
  EXPECT_FALSE(metrics.tpotMicros);
}

TEST(StepMetricsTest, ACollectiveOnTheCriticalPathIsExposed) {
  // 10 us of compute, an all-reduce of 4000 bytes over four ranks (6 us
  // at 1 GB/s), 10 us of compute.
  ProgramSet programs;
  programs.mesh = Mesh({{"tp", 4}});
  programs.stages.resize(1);
  programs.stages[0].nodes = {
      makeCompute(10, {}, 0),
      collective(CollectiveKind::AllReduce, 4000, 1, Phase::Forward, {0}),
      makeCompute(10, {1}, 0)};
  SystemSpec system = makeSingleDomainSystem(TestDevice, 4);
  StepEstimate step = estimate(programs, system);
  ASSERT_DOUBLE_EQ(step.stepMicros, 26.0);
  StepMetrics metrics = computeStepMetrics(programs, step, system, {});
  EXPECT_DOUBLE_EQ(metrics.exposedCommunicationMicros, 6.0);
  EXPECT_EQ(metrics.computeCommOverlap, std::optional<double>(0.0));
  EXPECT_DOUBLE_EQ(metrics.communicationFraction, 6.0 / 26.0);
  // NCCL's bus bytes, 2 x 3/4 x 4000, in 6 us: the link's bandwidth.
  const CollectiveTraffic &reduce =
      metrics.collectives[unsigned(CollectiveKind::AllReduce)];
  EXPECT_EQ(reduce.count, 1u);
  EXPECT_DOUBLE_EQ(reduce.busBytes, 6000.0);
  EXPECT_DOUBLE_EQ(reduce.micros, 6.0);
  EXPECT_DOUBLE_EQ(reduce.getBusBandwidth().value(), 1e9);
}

TEST(StepMetricsTest, EveryKindReachesTheLinkBandwidthWithoutLatency) {
  ProgramSet programs;
  programs.mesh = Mesh({{"tp", 4}});
  programs.stages.resize(1);
  llvm::SmallVector<uint32_t, 4> none;
  for (CollectiveKind kind :
       {CollectiveKind::AllReduce, CollectiveKind::AllGather,
        CollectiveKind::ReduceScatter, CollectiveKind::AllToAll})
    programs.stages[0].nodes.push_back(
        collective(kind, 8000, 1, Phase::Forward, none));
  SystemSpec system = makeSingleDomainSystem(TestDevice, 4);
  StepMetrics metrics =
      computeStepMetrics(programs, estimate(programs, system), system, {});
  for (const CollectiveTraffic &traffic : metrics.collectives)
    EXPECT_DOUBLE_EQ(traffic.getBusBandwidth().value(), 1e9);
}

TEST(StepMetricsTest, AGradientReductionUnderComputeIsHidden) {
  // The gradient all-reduce (6 us) runs on its own stream beside 10 us of
  // compute that does not wait for it.
  ProgramSet programs;
  programs.mesh = Mesh({{"dp", 4}});
  programs.stages.resize(1);
  programs.stages[0].nodes = {
      makeCompute(10, {}, 0),
      collective(CollectiveKind::AllReduce, 4000, 1, Phase::GradientSync, {0}),
      makeCompute(10, {0}, 0)};
  SystemSpec system = makeSingleDomainSystem(TestDevice, 4);
  StepEstimate step = estimate(programs, system);
  ASSERT_DOUBLE_EQ(step.stepMicros, 20.0);
  StepMetrics metrics = computeStepMetrics(programs, step, system, {});
  EXPECT_DOUBLE_EQ(metrics.exposedCommunicationMicros, 0.0);
  EXPECT_EQ(metrics.computeCommOverlap, std::optional<double>(1.0));
  EXPECT_DOUBLE_EQ(metrics.communicationFraction, 6.0 / 26.0);
}

TEST(StepMetricsTest, StagesThatWaitMakeTheBubble) {
  // Stage 0: 10 us of compute, a 5 us send, then idle until the step ends
  // at 35. Stage 1: waits 15 us for the message, then 20 us of compute.
  ProgramSet programs;
  programs.mesh = Mesh({{"pp", 2}});
  programs.pipelineAxis = 0;
  programs.stages.resize(2);
  programs.stages[0].nodes = {makeCompute(10, {}, 0),
                              makeMessage(ProgramNodeKind::Send, 1, 5000, {0})};
  programs.stages[1].nodes = {makeMessage(ProgramNodeKind::Recv, 0, 5000, {}),
                              makeCompute(20, {0}, 0)};
  SystemSpec system = makeSingleDomainSystem(TestDevice, 2);
  StepEstimate step = estimate(programs, system);
  ASSERT_DOUBLE_EQ(step.stepMicros, 35.0);
  StepMetrics metrics = computeStepMetrics(programs, step, system, {});
  EXPECT_DOUBLE_EQ(metrics.bubbleFraction, (20.0 / 35 + 15.0 / 35) / 2);
  // Stage 0's compute waited on its send; stage 1 waited on stage 0 only.
  EXPECT_DOUBLE_EQ(metrics.exposedCommunicationMicros, 5.0 / 2);
  // Active: 10 + 5 us on stage 0, 20 us on stage 1.
  EXPECT_DOUBLE_EQ(metrics.loadImbalanceRatio.value(), 20.0 / 15.0);
}

TEST(StepMetricsTest, InferencePhasesNameTheirStep) {
  ProgramSet programs;
  programs.mesh = Mesh({{"tp", 1}});
  programs.stages.resize(1);
  programs.stages[0].nodes = {makeCompute(8, {}, 0)};
  SystemSpec system = makeSingleDomainSystem(TestDevice, 1);
  StepEstimate step = estimate(programs, system);
  StepWork work;
  work.phase = StepPhase::Prefill;
  EXPECT_EQ(computeStepMetrics(programs, step, system, work).ttftMicros,
            std::optional<double>(8.0));
  work.phase = StepPhase::Decode;
  StepMetrics decode = computeStepMetrics(programs, step, system, work);
  EXPECT_EQ(decode.tpotMicros, std::optional<double>(8.0));
  EXPECT_FALSE(decode.ttftMicros);
}

/// 10 us of compute, an all-reduce of 1 MB over dp, 10 us of compute, on
/// two nodes of two GPUs: tp inside a node, dp across the two.
ProgramSet makeCommunicationBound() {
  ProgramSet programs;
  programs.mesh = Mesh({{"tp", 2}, {"dp", 2}});
  programs.stages.resize(1);
  programs.stages[0].nodes = {
      makeCompute(10, {}, 0),
      collective(CollectiveKind::AllReduce, 1'000'000, 2, Phase::Forward, {0}),
      makeCompute(10, {1}, 0)};
  return programs;
}

TEST(StepMetricsTest, DoublingTheTierACollectiveCrossesPaysOff) {
  ProgramSet programs = makeCommunicationBound();
  SystemSpec system = makeTwoTierSystem();
  StepEstimate step = estimate(programs, system);
  // Across nodes: 1 MB at 0.1 GB/s, 2 steps of 10 us.
  ASSERT_DOUBLE_EQ(step.stepMicros, 10 + 10000 + 20 + 10);
  llvm::Expected<ResourceUtility> utility =
      estimateResourceUtility(programs, system, step.stepMicros);
  ASSERT_TRUE(bool(utility)) << llvm::toString(utility.takeError());
  // Nothing crosses the node's own links.
  EXPECT_DOUBLE_EQ(utility->scaleUpBandwidth, 0.0);
  EXPECT_DOUBLE_EQ(utility->scaleOutBandwidthMicros, 10 + 5000 + 20 + 10);
  EXPECT_DOUBLE_EQ(utility->scaleOutBandwidth, 5000.0 / 10040);
  // Four GPUs a node: the all-reduce stays inside, at 1 GB/s, 1 us steps.
  EXPECT_DOUBLE_EQ(utility->scaleUpDomainMicros, 10 + 1000 + 2 + 10);
  EXPECT_DOUBLE_EQ(utility->scaleUpDomain, (10040.0 - 1022) / 10040);
}

TEST(StepMetricsTest, DoublingAResourceChangesOnlyIt) {
  SystemSpec system = makeTwoTierSystem();
  SystemSpec up = doubleResource(system, ClusterResource::ScaleUpBandwidth);
  EXPECT_DOUBLE_EQ(up.scaleUp.bandwidth, 2e9);
  EXPECT_DOUBLE_EQ(up.scaleOut.bandwidth, 1e8);
  SystemSpec out = doubleResource(system, ClusterResource::ScaleOutBandwidth);
  EXPECT_DOUBLE_EQ(out.scaleOut.bandwidth, 2e8);
  EXPECT_DOUBLE_EQ(out.scaleUp.bandwidth, 1e9);
  SystemSpec domain = doubleResource(system, ClusterResource::ScaleUpDomain);
  EXPECT_EQ(domain.gpusPerNode, 4u);
  EXPECT_DOUBLE_EQ(domain.scaleUp.latency, system.scaleUp.latency);
}

// Shipped templates, small: the compiler's side of the metrics.

CompileOptions
llamaOptions(std::vector<std::pair<std::string, unsigned>> degrees,
             unsigned microbatches = 1) {
  CompileOptions options;
  options.input = std::string(STG_SOURCE_TEMPLATES_DIR) + "/llama3-8b.stg";
  options.overrides = {{"L", "4"}, {"S", "512"}};
  options.degrees = std::move(degrees);
  options.microbatches = microbatches;
  return options;
}

double modelFlops(const CompileOptions &options) {
  std::optional<CompiledModel> compiled = compileForTest(options);
  if (!compiled)
    return 0;
  llvm::Expected<double> flops = countModelFlops(options, *compiled);
  if (!flops) {
    ADD_FAILURE() << llvm::toString(flops.takeError());
    return 0;
  }
  return *flops;
}

TEST(StepMetricsTest, ModelFlopsDoNotDependOnThePlan) {
  double one = modelFlops(llamaOptions({}));
  ASSERT_GT(one, 0);
  // Split over tensor and pipeline parallelism: the same work.
  EXPECT_DOUBLE_EQ(modelFlops(llamaOptions({{"tp", 4}, {"pp", 2}}, 1)), one);
  // Recomputation is the plan's cost, not the model's.
  CompileOptions recompute = llamaOptions({{"tp", 2}});
  recompute.recompute = "full";
  EXPECT_DOUBLE_EQ(modelFlops(recompute), one);
  // B = MB x dp: two replicas do twice the work, and so do two
  // micro-batches.
  EXPECT_DOUBLE_EQ(modelFlops(llamaOptions({{"dp", 2}})), 2 * one);
  EXPECT_DOUBLE_EQ(modelFlops(llamaOptions({{"pp", 2}}, 2)), 2 * one);
}

TEST(StepMetricsTest, RecomputationRaisesHardwareUtilisationOnly) {
  llvm::Expected<SystemSpec> system = loadSystem("dgx-h100");
  ASSERT_TRUE(bool(system)) << llvm::toString(system.takeError());
  auto measure = [&](const std::string &recompute) {
    CompileOptions options = llamaOptions({{"tp", 2}});
    options.recompute = recompute;
    std::optional<CompiledModel> compiled = compileForTest(options);
    if (!compiled)
      return StepMetrics();
    applyDeviceModel(compiled->programs, system->device, nullptr);
    StepWork work;
    work.modelFlops = modelFlops(options);
    return computeStepMetrics(compiled->programs,
                              estimate(compiled->programs, *system), *system,
                              work);
  };
  StepMetrics none = measure("none"), full = measure("full");
  EXPECT_DOUBLE_EQ(none.modelFlops, full.modelFlops);
  EXPECT_GT(full.hardwareFlops, none.hardwareFlops * 1.2);
  EXPECT_GT(full.hfu, full.mfu);
  EXPECT_LT(full.mfu, none.mfu); // The same work took longer.
}

TEST(StepMetricsTest, FoldedProgramsGiveTheSameCounts) {
  // The plan search prices folded programs: the middle micro-batches'
  // steps replay the first's nodes, and count each time they run.
  llvm::Expected<SystemSpec> system = loadSystem("dgx-h100");
  ASSERT_TRUE(bool(system)) << llvm::toString(system.takeError());
  auto measure = [&](bool fold) {
    CompileOptions options = llamaOptions({{"tp", 2}, {"dp", 2}, {"pp", 2}}, 6);
    options.foldMicrobatches = fold;
    std::optional<CompiledModel> compiled = compileForTest(options);
    if (!compiled)
      return StepMetrics();
    applyDeviceModel(compiled->programs, system->device, nullptr);
    EXPECT_EQ(compiled->programs.folded, fold);
    return computeStepMetrics(
        compiled->programs, estimate(compiled->programs, *system), *system, {});
  };
  StepMetrics flat = measure(false), folded = measure(true);
  ASSERT_GT(flat.hardwareFlops, 0);
  EXPECT_DOUBLE_EQ(folded.hardwareFlops, flat.hardwareFlops);
  for (unsigned kind = 0; kind < NumCollectiveKinds; ++kind) {
    EXPECT_EQ(folded.collectives[kind].count, flat.collectives[kind].count);
    EXPECT_DOUBLE_EQ(folded.collectives[kind].busBytes,
                     flat.collectives[kind].busBytes);
  }
  EXPECT_NEAR(folded.bubbleFraction, flat.bubbleFraction, 1e-9);
}

} // namespace
