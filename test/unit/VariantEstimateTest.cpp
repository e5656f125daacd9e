//===- VariantEstimateTest.cpp - Step times of perturbed variants ---------===//
//
// The what-if estimate: hand-built programs whose variant steps are worked
// out by hand (a uniform slowdown scales a compute-bound step, one slow
// rank slows its stage, slow ranks of different replicas do not add up, a
// delay waits on the compute stream), and shipped templates (one perturbed
// rank gives the step of its written variant, folded programs give the
// variants of written ones, results do not depend on threads and follow
// the seed).
//
//===----------------------------------------------------------------------===//

#include "stg/Perturb/VariantEstimate.h"

#include "stg/Driver/Compile.h"
#include "stg/Perf/DeviceModel.h"

#include "HandBuiltPrograms.h"

#include "CompileForTest.h"

#include "gtest/gtest.h"

using namespace stg;

namespace {

ProgramNode compute(uint64_t micros, int layer,
                    llvm::SmallVector<uint32_t, 4> deps) {
  ProgramNode node;
  node.name = "compute";
  node.numOps = int64_t(micros) * 1000;
  node.durationMicros = micros;
  node.layer = layer;
  node.microbatch = 0;
  node.dataDeps = deps;
  return node;
}

/// An all-reduce over tp of `bytes` (2 (n-1)/n bytes / 1 GB/s on tp = 2).
ProgramNode tensorAllReduce(int64_t bytes, int layer,
                            llvm::SmallVector<uint32_t, 4> deps) {
  ProgramNode node;
  node.kind = ProgramNodeKind::Collective;
  node.name = "allreduce";
  node.commBytes = bytes;
  node.group = 1; // tp, the mesh's first axis.
  node.layer = layer;
  node.microbatch = 0;
  node.dataDeps = deps;
  return node;
}

/// tp = 2, dp = 2, one stage: layer 0's kernel (1000 us), an all-reduce
/// over tp, layer 1's kernel (1000 us); two schedule steps.
ProgramSet makeTwoLayers(int64_t allReduceBytes = 1000) {
  ProgramSet programs;
  programs.mesh = Mesh({{"tp", 2}, {"dp", 2}});
  programs.stages.resize(1);
  StageProgram &stage = programs.stages[0];
  stage.layers = {0, 1};
  stage.nodes = {compute(1000, 0, {}), tensorAllReduce(allReduceBytes, 0, {0}),
                 compute(1000, 1, {1})};
  stage.steps = {{0, 2, 0, -1}, {2, 3, 0, -1}};
  return programs;
}

PerturbationRule gpuRule(double slowdown) {
  PerturbationRule rule;
  rule.slowdown.value = slowdown;
  return rule;
}

PerturbationSpec makeSpec(std::vector<PerturbationRule> rules,
                          uint64_t seed = 1) {
  PerturbationSpec spec;
  spec.path = "test.yaml";
  spec.seed = seed;
  spec.rules = std::move(rules);
  return spec;
}

VariantSteps estimate(const PerturbationSpec &spec, const ProgramSet &programs,
                      const SystemSpec &system, unsigned count,
                      unsigned jobs = 1) {
  VariantEstimateOptions options;
  options.jobs = jobs;
  llvm::Expected<VariantSteps> steps =
      estimateVariants(spec, programs, system, count, options);
  if (!steps) {
    ADD_FAILURE() << llvm::toString(steps.takeError());
    return {};
  }
  return *steps;
}

TEST(VariantEstimateTest, UniformSlowdownScalesAComputeBoundStep) {
  ProgramSet programs;
  programs.mesh = Mesh({{"tp", 2}});
  programs.stages.resize(1);
  programs.stages[0].layers = {0};
  programs.stages[0].nodes = {compute(1000, 0, {}), compute(1000, 0, {0}),
                              compute(1000, 0, {1})};
  SystemSpec system = makeSingleDomainSystem(TestDevice, 2);
  VariantSteps steps = estimate(makeSpec({gpuRule(0.10)}), programs, system, 3);
  EXPECT_DOUBLE_EQ(steps.cleanMicros, 3000);
  ASSERT_EQ(steps.variantMicros.size(), 3u);
  for (double micros : steps.variantMicros)
    EXPECT_DOUBLE_EQ(micros, 3300); // 10 % slower, exactly.
  EXPECT_EQ(steps.gpus, 2u);
  // Without a collective the two ranks never meet: two replicas.
  EXPECT_EQ(steps.replicas, 2u);
}

TEST(VariantEstimateTest, ASlowerLinkStretchesItsCollectiveOnly) {
  // The all-reduce (1000 bytes over tp = 2: 1 us) sits between the two
  // kernels: at a quarter of the bandwidth it takes 4 us, the step 3 us
  // more. A nic_slowdown of the same size waits before it instead.
  SystemSpec system = makeSingleDomainSystem(TestDevice, 4);
  ProgramSet programs = makeTwoLayers();
  PerturbationRule link;
  link.kind = PerturbationRule::Kind::LinkSlowdown;
  link.slowdown.value = 3.0;
  VariantSteps slower = estimate(makeSpec({link}), programs, system, 1);
  ASSERT_EQ(slower.variantMicros.size(), 1u);
  EXPECT_NEAR(slower.variantMicros[0] - slower.cleanMicros, 3.0, 1e-6);
}

TEST(VariantEstimateTest, RanksMeetingAtCollectivesFormAReplica) {
  ProgramSet programs = makeTwoLayers();
  SystemSpec system = makeSingleDomainSystem(TestDevice, 4);
  VariantEstimator estimator(makeSpec({}), programs, system);
  EXPECT_EQ(estimator.getLockstepAxes(), AxisMask(1)); // tp
  EXPECT_EQ(estimator.getNumReplicas(), 2u);           // dp
  EXPECT_EQ(estimator.getReplica(0), estimator.getReplica(1));
  EXPECT_EQ(estimator.getReplica(2), estimator.getReplica(3));
  EXPECT_NE(estimator.getReplica(0), estimator.getReplica(2));
}

TEST(VariantEstimateTest, OneSlowRankSlowsItsStage) {
  ProgramSet programs = makeTwoLayers();
  SystemSpec system = makeSingleDomainSystem(TestDevice, 4);
  PerturbationRule rule = gpuRule(0.5);
  rule.ranks = std::set<unsigned>{1};
  rule.layers = std::set<int>{0};
  PerturbationSpec spec = makeSpec({rule});

  VariantEstimator estimator(spec, programs, system);
  std::vector<ReplicaChanges> replicas = estimator.drawReplicas(0);
  ASSERT_EQ(replicas.size(), 1u);
  EXPECT_EQ(replicas[0].replica, estimator.getReplica(1));
  ASSERT_EQ(replicas[0].stages.size(), 1u);
  ASSERT_EQ(replicas[0].stages[0].nodes.size(), 1u);
  EXPECT_EQ(replicas[0].stages[0].nodes[0].node, 0u);
  EXPECT_DOUBLE_EQ(replicas[0].stages[0].nodes[0].factor, 1.5);
  ProgramSet replayed = estimator.getReplicaPrograms(replicas[0]);
  EXPECT_EQ(replayed.stages[0].nodes[0].durationMicros, 1500u);
  EXPECT_EQ(replayed.stages[0].steps.size(), 2u);

  // Its tensor-parallel partner waits at the all-reduce (1 us): 1500 + 1 +
  // 1000 instead of 1000 + 1 + 1000.
  VariantSteps steps = estimate(spec, programs, system, 2);
  EXPECT_DOUBLE_EQ(steps.cleanMicros, 2001);
  EXPECT_DOUBLE_EQ(steps.variantMicros[0], 2501);
  EXPECT_DOUBLE_EQ(steps.variantMicros[1], 2501);
}

TEST(VariantEstimateTest, SlowRanksOfOneReplicaAddUpAndOfTwoDoNot) {
  ProgramSet programs = makeTwoLayers();
  SystemSpec system = makeSingleDomainSystem(TestDevice, 4);
  auto slowLayer = [](unsigned rank, int layer) {
    PerturbationRule rule = gpuRule(0.5);
    rule.ranks = std::set<unsigned>{rank};
    rule.layers = std::set<int>{layer};
    return rule;
  };
  // Ranks 0 and 1 are one tensor-parallel group: layer 0 waits for rank 0,
  // layer 1 for rank 1.
  VariantSteps together = estimate(makeSpec({slowLayer(0, 0), slowLayer(1, 1)}),
                                   programs, system, 1);
  EXPECT_DOUBLE_EQ(together.variantMicros[0], 1500 + 1 + 1500);
  // Ranks 0 and 2 are different replicas (dp): each is slow once, and the
  // step waits for the slower.
  VariantSteps apart = estimate(makeSpec({slowLayer(0, 0), slowLayer(2, 1)}),
                                programs, system, 1);
  EXPECT_DOUBLE_EQ(apart.variantMicros[0], 1500 + 1 + 1000);
}

TEST(VariantEstimateTest, ZeroChanceGivesTheCleanStep) {
  ProgramSet programs = makeTwoLayers();
  SystemSpec system = makeSingleDomainSystem(TestDevice, 4);
  PerturbationRule rule = gpuRule(5.0);
  rule.chance = 0;
  PerturbationSpec spec = makeSpec({rule});
  VariantEstimator estimator(spec, programs, system);
  EXPECT_TRUE(estimator.drawReplicas(0).empty());
  VariantSteps steps = estimate(spec, programs, system, 4);
  for (double micros : steps.variantMicros)
    EXPECT_DOUBLE_EQ(micros, steps.cleanMicros);
}

TEST(VariantEstimateTest, ADelayRunsBeforeItsCollectiveInTheSameStep) {
  // An all-reduce of 100 KB takes 100 us on tp = 2; a nic_slowdown of 2
  // puts 2 x 100 KB / 1 GB/s = 200 us on the compute stream before it.
  ProgramSet programs = makeTwoLayers(100'000);
  SystemSpec system = makeSingleDomainSystem(TestDevice, 4);
  PerturbationRule rule = gpuRule(2.0);
  rule.kind = PerturbationRule::Kind::NicSlowdown;
  rule.ranks = std::set<unsigned>{3};
  PerturbationSpec spec = makeSpec({rule});

  VariantEstimator estimator(spec, programs, system);
  std::vector<ReplicaChanges> replicas = estimator.drawReplicas(0);
  ASSERT_EQ(replicas.size(), 1u);
  ProgramSet replayed = estimator.getReplicaPrograms(replicas[0]);
  const StageProgram &stage = replayed.stages[0];
  ASSERT_EQ(stage.nodes.size(), 4u);
  EXPECT_EQ(stage.nodes[1].opType, "delay");
  EXPECT_EQ(stage.nodes[1].durationMicros, 200u);
  ASSERT_EQ(stage.steps.size(), 2u);
  EXPECT_EQ(stage.steps[0].begin, 0u);
  EXPECT_EQ(stage.steps[0].end, 3u); // The delay and its all-reduce.
  EXPECT_EQ(stage.steps[1].begin, 3u);
  EXPECT_EQ(stage.steps[1].end, 4u);

  VariantSteps steps = estimate(spec, programs, system, 1);
  EXPECT_DOUBLE_EQ(steps.cleanMicros, 1000 + 100 + 1000);
  EXPECT_DOUBLE_EQ(steps.variantMicros[0], 1000 + 200 + 100 + 1000);
}

TEST(VariantEstimateTest, PercentilesAreNearestRank) {
  std::vector<double> hundred;
  for (int i = 100; i >= 1; --i)
    hundred.push_back(i);
  Percentiles p = getPercentiles(hundred);
  EXPECT_EQ(p.min, 1);
  EXPECT_EQ(p.median, 50);
  EXPECT_EQ(p.p90, 90);
  EXPECT_EQ(p.p99, 99);
  EXPECT_EQ(p.max, 100);
  EXPECT_DOUBLE_EQ(p.mean, 50.5);

  Percentiles three = getPercentiles({3, 1, 2});
  EXPECT_EQ(three.median, 2); // ceil(1.5) = the 2nd.
  EXPECT_EQ(three.p90, 3);
  Percentiles one = getPercentiles({7});
  EXPECT_EQ(one.min, 7);
  EXPECT_EQ(one.p99, 7);
}

/// A shipped template, small: Llama-3-8B cut to 4 layers, tp 2, pp 2, dp 2,
/// 4 micro-batches, with DGX H100 durations.
struct Shipped {
  ProgramSet programs;
  SystemSpec system;
};

Shipped compileShipped(bool fold) {
  CompileOptions options;
  options.input = std::string(STG_SOURCE_TEMPLATES_DIR) + "/llama3-8b.stg";
  options.degrees = {{"tp", 2}, {"pp", 2}, {"dp", 2}};
  options.microbatches = 4;
  options.overrides = {{"L", "4"}, {"S", "1024"}};
  options.foldMicrobatches = fold;
  std::optional<CompiledModel> compiled = compileForTest(options);
  llvm::Expected<SystemSpec> system = loadSystem("dgx-h100");
  EXPECT_TRUE(bool(system));
  if (!compiled || !system) {
    llvm::consumeError(system.takeError());
    return {};
  }
  applyDeviceModel(compiled->programs, system->device, nullptr);
  return {std::move(compiled->programs), std::move(*system)};
}

/// Random stragglers and slow links on every rank.
PerturbationSpec makeRandomSpec(uint64_t seed) {
  PerturbationRule gpu;
  gpu.chance = 0.2;
  gpu.slowdown.kind = SlowdownDistribution::Kind::LogNormal;
  gpu.slowdown.mean = -2;
  gpu.slowdown.std = 0.5;
  PerturbationRule nic;
  nic.kind = PerturbationRule::Kind::NicSlowdown;
  nic.chance = 0.3;
  nic.slowdown.kind = SlowdownDistribution::Kind::Uniform;
  nic.slowdown.low = 0.5;
  nic.slowdown.high = 2;
  return makeSpec({gpu, nic}, seed);
}

TEST(VariantEstimateTest, OnePerturbedRankGivesItsWrittenVariantsStep) {
  Shipped shipped = compileShipped(false);
  ASSERT_FALSE(shipped.programs.stages.empty());
  PerturbationSpec spec = makeRandomSpec(3);
  for (PerturbationRule &rule : spec.rules) {
    rule.ranks = std::set<unsigned>{5};
    rule.chance = 0.5;
  }
  VariantSteps steps = estimate(spec, shipped.programs, shipped.system, 4);
  unsigned stage = shipped.programs.getStageOfRank(5);
  bool someChange = false;
  for (unsigned variant = 0; variant < 4; ++variant) {
    Perturber perturber(spec, shipped.programs, variant,
                        &shipped.system.device);
    std::vector<PerturbationRecord> records;
    std::optional<StageProgram> written = perturber.perturb(5, records);
    if (!written) {
      EXPECT_DOUBLE_EQ(steps.variantMicros[variant], steps.cleanMicros);
      continue;
    }
    someChange = true;
    ProgramSet programs = shipped.programs;
    programs.stages[stage] = std::move(*written);
    llvm::Expected<StepEstimate> step = estimateStep(programs, shipped.system);
    ASSERT_TRUE(bool(step)) << llvm::toString(step.takeError());
    // The other replica runs clean.
    EXPECT_DOUBLE_EQ(steps.variantMicros[variant],
                     std::max(step->stepMicros, steps.cleanMicros));
  }
  EXPECT_TRUE(someChange);
}

TEST(VariantEstimateTest, FoldedProgramsGiveTheVariantsOfWrittenOnes) {
  Shipped flat = compileShipped(false), folded = compileShipped(true);
  ASSERT_TRUE(folded.programs.folded);
  PerturbationSpec spec = makeRandomSpec(11);
  VariantSteps flatSteps = estimate(spec, flat.programs, flat.system, 6);
  VariantSteps foldedSteps = estimate(spec, folded.programs, folded.system, 6);
  ASSERT_EQ(flatSteps.variantMicros.size(), 6u);
  ASSERT_EQ(foldedSteps.variantMicros.size(), 6u);
  // Arrivals are matched to the nanosecond, as in FoldedEstimateTest.
  EXPECT_NEAR(foldedSteps.cleanMicros, flatSteps.cleanMicros, 1e-3 * 512);
  for (unsigned variant = 0; variant < 6; ++variant) {
    EXPECT_GT(flatSteps.variantMicros[variant], flatSteps.cleanMicros);
    EXPECT_NEAR(foldedSteps.variantMicros[variant],
                flatSteps.variantMicros[variant], 1e-3 * 512);
  }
}

TEST(VariantEstimateTest, ResultsFollowTheSeedAndNotTheThreads) {
  Shipped shipped = compileShipped(true);
  PerturbationSpec spec = makeRandomSpec(42);
  VariantSteps one = estimate(spec, shipped.programs, shipped.system, 12, 1);
  VariantSteps three = estimate(spec, shipped.programs, shipped.system, 12, 3);
  VariantSteps again = estimate(spec, shipped.programs, shipped.system, 12, 2);
  EXPECT_EQ(one.variantMicros, three.variantMicros);
  EXPECT_EQ(one.variantMicros, again.variantMicros);
  // Variants differ from each other, and another seed draws others.
  EXPECT_NE(one.variantMicros[0], one.variantMicros[1]);
  VariantSteps other =
      estimate(makeRandomSpec(43), shipped.programs, shipped.system, 12, 2);
  EXPECT_NE(one.variantMicros, other.variantMicros);
}

} // namespace
