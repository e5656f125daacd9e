//===- PerturbationTest.cpp - Reproducible perturbations ------------------===//
//
// The library side of --perturb: distributions from uniforms, scale-down,
// and a perturber that changes exactly the selected nodes, the same way on
// every call.
//
//===----------------------------------------------------------------------===//

#include "stg/Perturb/Perturbation.h"
#include "stg/Perturb/SeedSequence.h"

#include "gtest/gtest.h"

#include <cmath>
#include <random>

using namespace stg;

namespace {

TEST(PerturbationTest, DistributionsFromUniforms) {
  SlowdownDistribution constant;
  constant.value = 0.25;
  EXPECT_DOUBLE_EQ(constant.sample(0.9, 0.1), 0.25);

  SlowdownDistribution uniform;
  uniform.kind = SlowdownDistribution::Kind::Uniform;
  uniform.low = 0.1;
  uniform.high = 0.3;
  EXPECT_DOUBLE_EQ(uniform.sample(0.5, 0.0), 0.2);

  // Box-Muller: u1 = 1 - e^-0.5, u2 = 0 gives exactly one std above mean.
  SlowdownDistribution normal;
  normal.kind = SlowdownDistribution::Kind::Normal;
  normal.mean = 0.5;
  normal.std = 0.1;
  double u1 = 1 - std::exp(-0.5);
  EXPECT_NEAR(normal.sample(u1, 0.0), 0.6, 1e-12);
  SlowdownDistribution lognormal = normal;
  lognormal.kind = SlowdownDistribution::Kind::LogNormal;
  EXPECT_NEAR(lognormal.sample(u1, 0.0), std::exp(0.6), 1e-12);

  // Never a speed-up.
  SlowdownDistribution negative;
  negative.value = -0.5;
  EXPECT_DOUBLE_EQ(negative.sample(0.5, 0.5), 0.0);
}

TEST(PerturbationTest, SeedSequenceGivesTheStandardsWords) {
  // Every branch of the algorithm's lag t, fewer and more words than
  // values, and the engine the draws use.
  for (size_t n : {0, 1, 2, 6, 7, 38, 39, 67, 68, 622, 623, 624, 1000})
    for (uint32_t r : {0u, 1u, 0xffffffffu}) {
      std::seed_seq standard{r, 0xffffffffu, 7u, r >> 3, 12345u};
      SeedSequence ours{r, 0xffffffffu, 7u, r >> 3, 12345u};
      std::vector<uint32_t> expected(n), words(n);
      standard.generate(expected.begin(), expected.end());
      ours.generate(words.begin(), words.end());
      EXPECT_EQ(words, expected) << n << " words";
    }
  std::seed_seq standard{42u, 0u, 3u, 1u, 17u};
  SeedSequence ours{42u, 0u, 3u, 1u, 17u};
  std::mt19937_64 expected(standard), engine(ours);
  for (int i = 0; i < 1000; ++i)
    ASSERT_EQ(engine(), expected());
}

/// One stage of two ranks (tp=2): a forward and a backward kernel in
/// layer 0, an all-reduce in layer 0.
ProgramSet makePrograms() {
  ProgramSet programs;
  programs.mesh = Mesh({{"tp", 2}});
  programs.stages.resize(1);
  StageProgram &stage = programs.stages[0];
  stage.layers = {0};
  ProgramNode forward, backward, reduce;
  forward.name = "fwd";
  forward.numOps = 1000;
  forward.tensorBytes = 100;
  forward.layer = 0;
  forward.microbatch = 0;
  backward = forward;
  backward.name = "bwd";
  backward.phase = Phase::Backward;
  reduce.kind = ProgramNodeKind::Collective;
  reduce.name = "ar";
  reduce.commBytes = 450'000; // 1 us on a 450 GB/s link
  reduce.group = 1;
  reduce.layer = 0;
  reduce.microbatch = 0;
  reduce.dataDeps = {0};
  stage.nodes = {forward, backward, reduce};
  return programs;
}

TEST(PerturbationTest, GpuSlowdownChangesOnlyMatchedNodes) {
  ProgramSet programs = makePrograms();
  PerturbationSpec spec;
  PerturbationRule rule;
  rule.ranks = std::set<unsigned>{1};
  rule.pass = PerturbationRule::Pass::Forward;
  rule.slowdown.value = 0.1;
  spec.rules.push_back(rule);
  Perturber perturber(spec, programs, 0, nullptr);
  std::vector<PerturbationRecord> records;
  EXPECT_FALSE(perturber.perturb(0, records)); // Rank 0 is not selected.
  std::optional<StageProgram> rank1 = perturber.perturb(1, records);
  ASSERT_TRUE(rank1);
  EXPECT_EQ(rank1->nodes[0].numOps, 1100);
  EXPECT_EQ(rank1->nodes[1].numOps, 1000); // Backward: not matched.
  EXPECT_EQ(rank1->nodes[2].commBytes, 450'000);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].node, 0u);
  EXPECT_DOUBLE_EQ(records[0].factor, 1.1);
}

TEST(PerturbationTest, NicSlowdownInsertsADelayTheCollectiveWaitsFor) {
  ProgramSet programs = makePrograms();
  PerturbationSpec spec;
  PerturbationRule rule;
  rule.kind = PerturbationRule::Kind::NicSlowdown;
  rule.slowdown.value = 3.0; // three times the 1 us link time
  spec.rules.push_back(rule);
  DeviceSpec device = *lookupBuiltinDevice("H100");
  Perturber perturber(spec, programs, 0, &device);
  std::vector<PerturbationRecord> records;
  std::optional<StageProgram> program = perturber.perturb(0, records);
  ASSERT_TRUE(program);
  ASSERT_EQ(program->nodes.size(), 4u);
  const ProgramNode &delay = program->nodes[2];
  EXPECT_EQ(delay.name, "ar.delay");
  EXPECT_EQ(delay.durationMicros, 3u);
  EXPECT_EQ(delay.numOps, int64_t(3e-6 * device.peakFlops));
  EXPECT_EQ(delay.dataDeps, (llvm::SmallVector<uint32_t, 4>{0}));
  const ProgramNode &reduce = program->nodes[3];
  EXPECT_TRUE(llvm::is_contained(reduce.ctrlDeps, 2u));
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].node, 3u);
  EXPECT_EQ(records[0].delayNode, 2u);
}

TEST(PerturbationTest, LinkSlowdownScalesOnlyTheTransfer) {
  ProgramSet programs = makePrograms();
  PerturbationSpec spec;
  PerturbationRule rule;
  rule.kind = PerturbationRule::Kind::LinkSlowdown;
  rule.collectives = std::set<std::string>{"ALL_REDUCE"};
  rule.slowdown.value = 1.0; // half the bandwidth
  spec.rules.push_back(rule);
  Perturber perturber(spec, programs, 0, nullptr);
  std::vector<PerturbationRecord> records;
  std::optional<StageProgram> program = perturber.perturb(0, records);
  ASSERT_TRUE(program);
  ASSERT_EQ(program->nodes.size(), 3u); // No delay node.
  EXPECT_EQ(program->nodes[0].numOps, 1000);
  EXPECT_EQ(program->nodes[2].commBytes, 900'000);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_DOUBLE_EQ(records[0].factor, 2.0);
  EXPECT_EQ(getRuleKindName(spec.rules[records[0].rule].kind),
            "link_slowdown");
}

TEST(PerturbationTest, DrawsAreReproducibleAndSeeded) {
  ProgramSet programs = makePrograms();
  PerturbationSpec spec;
  PerturbationRule rule;
  rule.chance = 0.5;
  rule.slowdown.kind = SlowdownDistribution::Kind::Uniform;
  rule.slowdown.low = 0.1;
  rule.slowdown.high = 0.9;
  spec.rules.push_back(rule);
  auto factorsOf = [&](uint64_t seed, unsigned variant, unsigned rank) {
    spec.seed = seed;
    Perturber perturber(spec, programs, variant, nullptr);
    std::vector<PerturbationRecord> records;
    perturber.perturb(rank, records);
    std::vector<double> factors;
    for (const PerturbationRecord &record : records)
      factors.push_back(record.factor);
    return factors;
  };
  EXPECT_EQ(factorsOf(42, 0, 1), factorsOf(42, 0, 1));
  // Over many seeds, the draws differ somewhere.
  bool differs = false;
  for (uint64_t seed = 1; seed < 20 && !differs; ++seed)
    differs = factorsOf(seed, 0, 1) != factorsOf(42, 0, 1);
  EXPECT_TRUE(differs);
}

TEST(PerturbationTest, ScaleDownKeepsNonzeroSizesPositive) {
  ProgramSet scaled = scalePrograms(makePrograms(), 0.01);
  EXPECT_EQ(scaled.stages[0].nodes[0].numOps, 10);
  EXPECT_EQ(scaled.stages[0].nodes[0].tensorBytes, 1u);
  EXPECT_EQ(scaled.stages[0].nodes[2].commBytes, 4500);
  ProgramSet tiny = scalePrograms(makePrograms(), 1e-9);
  EXPECT_EQ(tiny.stages[0].nodes[0].numOps, 1);
}

} // namespace
