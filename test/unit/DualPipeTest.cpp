//===- DualPipeTest.cpp - DualPipe runs as DualPipeV's mirrored halves ----===//
//
// DualPipe over 2P stages places on rank s the layers of stages s and
// 2P-1-s, one copy of the model each, and so does rank 2P-1-s for the other
// direction: instantiation runs the pair as DualPipeV's stage min(s,
// 2P-1-s), data parallelism doubled, each hand-off between a rank's two
// copies a message to its mirror (foldDualPipe). These tests hold it to
// that: DualPipeV's nodes but for those messages, each between mirrors,
// each copy's weights, and a step no shorter than DualPipeV's.
//
//===----------------------------------------------------------------------===//

#include "stg/Driver/Compile.h"
#include "stg/Perf/DeviceModel.h"
#include "stg/Perf/StepEstimate.h"

#include "CompileForTest.h"
#include "TemplatePlan.h"

#include "gtest/gtest.h"

#include <map>
#include <tuple>
#include <utility>

using namespace stg;

namespace {

/// Llama-3-8B, 8 layers, tp 2, on `pipeline` stages with `replicas` data
/// replicas and `microbatches` micro-batches.
std::optional<CompiledModel> compile(PipelineSchedule schedule,
                                     unsigned pipeline, unsigned replicas,
                                     unsigned microbatches) {
  TemplatePlan plan{"llama3-8b.stg",
                    {{"tp", 2}, {"pp", pipeline}, {"dp", replicas}},
                    microbatches};
  plan.schedule = schedule;
  plan.virtualStages = schedule == PipelineSchedule::DualPipeV ? 2 : 1;
  return compileForTest(getCompileOptions(plan));
}

/// DualPipe over 4 stages, 8 micro-batches, and the DualPipeV plan it
/// folds into: 2 stages, data parallelism 2, 4 micro-batches.
std::pair<std::optional<CompiledModel>, std::optional<CompiledModel>>
compileDualPipeAndItsHalves() {
  return {compile(PipelineSchedule::DualPipe, 4, 1, 8),
          compile(PipelineSchedule::DualPipeV, 2, 2, 4)};
}

bool isMessage(const ProgramNode &node) {
  return node.kind == ProgramNodeKind::Send ||
         node.kind == ProgramNodeKind::Recv;
}

TEST(DualPipeTest, RunsDualPipeVsNodesButForTheMirrorMessages) {
  auto [dual, halves] = compileDualPipeAndItsHalves();
  ASSERT_TRUE(dual && halves);
  const ProgramSet &folded = dual->programs, &plain = halves->programs;
  EXPECT_EQ(folded.mesh.describe(), plain.mesh.describe());
  EXPECT_EQ(folded.numMicrobatches, 4u);
  EXPECT_EQ(folded.mirrorAxis, folded.mesh.findAxis("dp"));
  EXPECT_EQ(plain.mirrorAxis, -1);
  ASSERT_EQ(folded.stages.size(), 2u);
  for (unsigned stage = 0; stage < 2; ++stage) {
    const StageProgram &a = folded.stages[stage], &b = plain.stages[stage];
    EXPECT_EQ(a.schedule, b.schedule) << stage;
    EXPECT_EQ(a.memory.total(), b.memory.total()) << stage;
    std::vector<std::tuple<std::string, int64_t, uint64_t>> work[2];
    unsigned mirrorSends = 0, mirrorRecvs = 0;
    for (const ProgramNode &node : a.nodes) {
      if (!isMessage(node)) {
        work[0].push_back({node.name, node.numOps, node.tensorBytes});
        continue;
      }
      if (!node.acrossHalves)
        continue;
      // Only the turn of the V hands over between copies: the last stage's.
      EXPECT_EQ(stage, 1u) << node.name;
      EXPECT_EQ(node.peerStage, stage) << node.name;
      ++(node.kind == ProgramNodeKind::Send ? mirrorSends : mirrorRecvs);
    }
    for (const ProgramNode &node : b.nodes) {
      EXPECT_FALSE(node.acrossHalves);
      if (!isMessage(node))
        work[1].push_back({node.name, node.numOps, node.tensorBytes});
    }
    EXPECT_EQ(work[0], work[1]) << stage;
    // Each micro-batch's activations one way and gradients the other.
    unsigned expected = stage == 1 ? 2 * folded.numMicrobatches : 0;
    EXPECT_EQ(mirrorSends, expected) << stage;
    EXPECT_EQ(mirrorRecvs, expected) << stage;
  }
}

TEST(DualPipeTest, MirrorMessagesGoToTheOtherDirectionsRank) {
  std::optional<CompiledModel> dual =
      compile(PipelineSchedule::DualPipe, 4, 2, 8);
  ASSERT_TRUE(dual);
  const ProgramSet &programs = dual->programs;
  const Mesh &mesh = programs.mesh;
  unsigned dp = mesh.findAxis("dp"), pp = mesh.findAxis("pp");
  ASSERT_EQ(mesh.getDegree(dp), 4u);
  // Every message by (sender, receiver, tag), counted at both ends.
  std::map<std::tuple<unsigned, unsigned, int32_t>, std::pair<int, int>>
      messages;
  unsigned across = 0;
  for (unsigned rank = 0; rank < mesh.getNumRanks(); ++rank) {
    const StageProgram &stage = programs.stages[programs.getStageOfRank(rank)];
    for (const ProgramNode &node : stage.nodes) {
      if (!isMessage(node))
        continue;
      unsigned peer = programs.getPeerRank(rank, node);
      EXPECT_EQ(mesh.getCoordinate(peer, pp), node.peerStage);
      unsigned half = mesh.getCoordinate(rank, dp) / 2;
      EXPECT_EQ(mesh.getCoordinate(peer, dp) / 2,
                node.acrossHalves ? 1 - half : half);
      EXPECT_EQ(mesh.getCoordinate(peer, dp) % 2,
                mesh.getCoordinate(rank, dp) % 2);
      across += node.acrossHalves;
      if (node.kind == ProgramNodeKind::Send)
        ++messages[{rank, peer, node.tag}].first;
      else
        ++messages[{peer, rank, node.tag}].second;
    }
  }
  EXPECT_GT(across, 0u);
  for (const auto &[key, counts] : messages)
    EXPECT_EQ(counts, std::make_pair(1, 1))
        << std::get<0>(key) << " -> " << std::get<1>(key) << " tag "
        << std::get<2>(key);
}

TEST(DualPipeTest, ARankHoldsTwoStagesWeights) {
  // Rank s holds stage s of one copy and stage 2P-1-s of the other: twice
  // 1F1B's weights, as DeepSeek's table says (2x parameters).
  std::optional<CompiledModel> dual =
      compile(PipelineSchedule::DualPipe, 4, 1, 8);
  std::optional<CompiledModel> plain =
      compile(PipelineSchedule::OneFOneB, 4, 1, 8);
  ASSERT_TRUE(dual && plain);
  for (unsigned stage = 0; stage < 2; ++stage)
    EXPECT_EQ(dual->programs.stages[stage].memory.weights,
              plain->programs.stages[stage].memory.weights +
                  plain->programs.stages[3 - stage].memory.weights)
        << stage;
}

TEST(DualPipeTest, TheHandOffsBetweenCopiesOnlyAddTime) {
  llvm::Expected<SystemSpec> system = loadSystem("dgx-h100");
  ASSERT_TRUE(bool(system)) << llvm::toString(system.takeError());
  auto [dual, halves] = compileDualPipeAndItsHalves();
  ASSERT_TRUE(dual && halves);
  applyDeviceModel(dual->programs, system->device, nullptr);
  applyDeviceModel(halves->programs, system->device, nullptr);
  llvm::Expected<StepEstimate> a = estimateStep(dual->programs, *system);
  llvm::Expected<StepEstimate> b = estimateStep(halves->programs, *system);
  ASSERT_TRUE(a && b);
  // The turn's stage waits for its mirror's messages (on NVLink here, a
  // few MB each); the first stage, which sets the step, does not.
  EXPECT_GT(a->stages[1].finishMicros, b->stages[1].finishMicros);
  EXPECT_GE(a->stepMicros, b->stepMicros);
  EXPECT_LT(a->stepMicros, 1.02 * b->stepMicros);
}

} // namespace
