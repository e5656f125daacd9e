//===- FoldedEstimateTest.cpp - Folded programs price plans alike ---------===//
//
// The plan search prices plans from programs whose middle micro-batches
// replay the first one's nodes (InstantiateOptions::foldMicrobatches), and
// whose middle layers replay a template layer's (foldLayers). The promise
// is that this changes nothing but the cost: for shipped models under every
// schedule shape, training and inference, the folded programs give the step
// time and memory of the programs written as traces.
//
//===----------------------------------------------------------------------===//

#include "stg/Driver/Compile.h"
#include "stg/Driver/ModelFlops.h"
#include "stg/Perf/DeviceModel.h"
#include "stg/Perf/StepEstimate.h"

#include "CompileForTest.h"
#include "TemplatePlan.h"

#include "gtest/gtest.h"

#include <map>

using namespace stg;

namespace {

using Plan = TemplatePlan;

enum class Fold { None, Microbatches, MicrobatchesAndLayers };

StepEstimate estimate(const Plan &plan, Fold fold, const SystemSpec &system,
                      std::vector<StageMemory> &memory,
                      size_t *numFolds = nullptr, double *flops = nullptr,
                      size_t *chunkReplays = nullptr) {
  CompileOptions options = getCompileOptions(plan);
  options.foldMicrobatches = fold != Fold::None;
  options.foldLayers = fold == Fold::MicrobatchesAndLayers;
  std::optional<CompiledModel> compiled = compileForTest(options);
  if (!compiled)
    return {};
  EXPECT_EQ(compiled->programs.folded, fold != Fold::None);
  if (numFolds)
    for (const StageProgram &stage : compiled->programs.stages)
      *numFolds += stage.folds.size();
  if (flops)
    *flops = countProgramFlops(compiled->programs, true);
  // Folded training builds the first micro-batch's forward only: the last
  // one's replays it (its backward is built, and reads the first's nodes).
  if (fold != Fold::None && plan.mode == "train") {
    for (const StageProgram &stage : compiled->programs.stages)
      for (const ProgramNode &node : stage.nodes)
        EXPECT_FALSE(node.phase == Phase::Forward && node.microbatch > 0 &&
                     node.opType != "barrier")
            << node.name;
  }
  // Tags move by whole micro-batch counts only when a step replays another
  // chunk's.
  if (chunkReplays)
    for (const StageProgram &stage : compiled->programs.stages)
      for (const ProgramStep &step : stage.steps)
        *chunkReplays += step.tagOffset >= int(plan.microbatches);
  // As in the traces, each message is sent once and received once: a step
  // that replays another chunk's receives what the chunk's backward uses.
  std::map<std::tuple<unsigned, unsigned, int64_t>, std::pair<int, int>>
      messages;
  for (const StageProgram &stage : compiled->programs.stages)
    for (const ProgramStep &step : stage.steps)
      for (uint32_t id = step.begin; id < step.end; ++id) {
        const ProgramNode &node = stage.nodes[id];
        int64_t tag = int64_t(node.tag) + step.tagOffset;
        if (node.kind == ProgramNodeKind::Send)
          ++messages[{stage.stage, node.peerStage, tag}].first;
        else if (node.kind == ProgramNodeKind::Recv)
          ++messages[{node.peerStage, stage.stage, tag}].second;
      }
  for (const auto &[key, counts] : messages)
    EXPECT_EQ(counts, std::make_pair(1, 1))
        << "message " << std::get<0>(key) << " -> " << std::get<1>(key)
        << " tag " << std::get<2>(key) << " (sends, receives)";
  applyDeviceModel(compiled->programs, system.device, nullptr);
  for (const StageProgram &stage : compiled->programs.stages)
    memory.push_back(stage.memory);
  llvm::Expected<StepEstimate> step = estimateStep(compiled->programs, system);
  EXPECT_TRUE(bool(step));
  if (!step) {
    ADD_FAILURE() << llvm::toString(step.takeError());
    return {};
  }
  // Recording a timeline simulates every step and copy afresh: the
  // replay's shortcuts (jumps over periods, outcomes reused for ranges of
  // arrivals) must give exactly what that gives.
  StepTimeline timeline;
  llvm::Expected<StepEstimate> fresh =
      estimateStep(compiled->programs, system, &timeline);
  if (fresh) {
    EXPECT_EQ(step->stepMicros, fresh->stepMicros);
    for (size_t stage = 0; stage < fresh->stages.size(); ++stage)
      EXPECT_EQ(step->stages[stage].pipelineWaitMicros,
                fresh->stages[stage].pipelineWaitMicros);
  } else {
    ADD_FAILURE() << llvm::toString(fresh.takeError());
  }
  return *step;
}

/// Expects the estimates of the flat and the folded programs to agree.
void expectSameEstimate(const StepEstimate &flat,
                        const std::vector<StageMemory> &flatMemory,
                        const StepEstimate &folded,
                        const std::vector<StageMemory> &foldedMemory) {
  ASSERT_GT(flat.stepMicros, 0);
  // Arrivals are matched to the nanosecond: steps may differ by that much.
  EXPECT_NEAR(folded.stepMicros, flat.stepMicros, 1e-3 * 512);
  ASSERT_EQ(folded.stages.size(), flat.stages.size());
  for (size_t stage = 0; stage < flat.stages.size(); ++stage) {
    EXPECT_NEAR(folded.stages[stage].computeMicros,
                flat.stages[stage].computeMicros, 1e-6 * flat.stepMicros);
    EXPECT_NEAR(folded.stages[stage].communicationMicros,
                flat.stages[stage].communicationMicros, 1e-6 * flat.stepMicros);
    EXPECT_NEAR(folded.stages[stage].pipelineWaitMicros,
                flat.stages[stage].pipelineWaitMicros, 1e-3 * 512);
    EXPECT_EQ(foldedMemory[stage].total(), flatMemory[stage].total());
  }
}

class FoldedEstimateTest : public ::testing::TestWithParam<Plan> {};

TEST_P(FoldedEstimateTest, FoldedProgramsGiveTheSameEstimate) {
  llvm::Expected<SystemSpec> system = loadSystem("dgx-h100");
  ASSERT_TRUE(bool(system)) << llvm::toString(system.takeError());
  std::vector<StageMemory> flatMemory, foldedMemory;
  StepEstimate flat = estimate(GetParam(), Fold::None, *system, flatMemory);
  StepEstimate folded =
      estimate(GetParam(), Fold::Microbatches, *system, foldedMemory);
  expectSameEstimate(flat, flatMemory, folded, foldedMemory);
}

/// What a folded compile of a plan must show to test its folding.
enum class Shortcut { LayersJumped, ChunksReplayed };

/// Expects `plan` folded (micro-batches, layers, like chunks) to give the
/// estimate, memory and FLOPs of its flat programs, and to have taken
/// `shortcut`.
void expectFoldedAlike(const Plan &plan, Shortcut shortcut) {
  llvm::Expected<SystemSpec> system = loadSystem("dgx-h100");
  ASSERT_TRUE(bool(system)) << llvm::toString(system.takeError());
  std::vector<StageMemory> flatMemory, foldedMemory;
  size_t numFolds = 0, unused = 0, chunkReplays = 0;
  double flatFlops = 0, foldedFlops = 0;
  StepEstimate flat =
      estimate(plan, Fold::None, *system, flatMemory, &unused, &flatFlops);
  StepEstimate folded =
      estimate(plan, Fold::MicrobatchesAndLayers, *system, foldedMemory,
               &numFolds, &foldedFlops, &chunkReplays);
  if (shortcut == Shortcut::LayersJumped) {
    EXPECT_GT(numFolds, 0u) << "no step folded its layers";
    EXPECT_GT(folded.jumpedCopies, 0u) << "no folded layer was jumped over";
  } else {
    EXPECT_GT(chunkReplays, 0u) << "no step replayed another chunk's";
  }
  // The steps run every layer's nodes, folded or not.
  EXPECT_DOUBLE_EQ(foldedFlops, flatFlops);
  expectSameEstimate(flat, flatMemory, folded, foldedMemory);
}

class FoldedLayersTest : public ::testing::TestWithParam<Plan> {};

TEST_P(FoldedLayersTest, FoldedLayersGiveTheSameEstimate) {
  expectFoldedAlike(GetParam(), Shortcut::LayersJumped);
}

class ChunkReplayTest : public ::testing::TestWithParam<Plan> {};

TEST_P(ChunkReplayTest, ReplayedChunksGiveTheSameEstimate) {
  expectFoldedAlike(GetParam(), Shortcut::ChunksReplayed);
}

using Degrees = std::vector<std::pair<std::string, unsigned>>;

INSTANTIATE_TEST_SUITE_P(
    Plans, FoldedEstimateTest,
    ::testing::Values(
        Plan{"llama3-8b.stg", Degrees{{"dp", 2}, {"tp", 2}, {"pp", 4}}, 12},
        Plan{"llama3-8b.stg", Degrees{{"tp", 4}, {"pp", 2}}, 8, 2},
        Plan{"llama3-8b.stg", Degrees{{"dp", 4}, {"pp", 4}}, 16, 2,
             "selective"},
        Plan{"llama3-8b.stg", Degrees{{"dp", 4}, {"pp", 2}, {"cp", 2}}, 6, 1,
             "full"},
        Plan{"llama3-8b.stg", Degrees{{"dp", 8}, {"pp", 2}}, 5, 1, "none",
             "train", true},
        Plan{"llama3-8b.stg", Degrees{{"tp", 2}, {"pp", 4}}, 7, 1, "none",
             "train", false, PipelineSchedule::GPipe},
        Plan{"llama3-8b.stg", Degrees{{"tp", 2}, {"pp", 2}}, 6, 1, "none",
             "prefill"},
        Plan{"gpt.stg", Degrees{{"dp", 2}, {"pp", 2}}, 9},
        Plan{"gpt.stg", Degrees{{"dp", 2}, {"pp", 2}}, 6, 2},
        Plan{"mixtral-8x7b.stg", Degrees{{"ep", 4}, {"pp", 2}}, 4},
        Plan{"deepseek-moe-16b.stg", Degrees{{"ep", 2}, {"pp", 4}}, 8, 2},
        Plan{"mamba-2.8b.stg", Degrees{{"dp", 2}, {"pp", 4}}, 10},
        // Many micro-batches: folding builds 2 of them.
        Plan{"llama3-8b.stg", Degrees{{"dp", 2}, {"tp", 2}, {"pp", 4}}, 64},
        Plan{"llama3-8b.stg", Degrees{{"tp", 4}, {"pp", 2}}, 64, 2},
        Plan{"llama3-8b.stg", Degrees{{"dp", 4}, {"pp", 2}, {"cp", 2}}, 40, 1,
             "full", "train", true},
        Plan{"llama3-8b.stg", Degrees{{"tp", 2}, {"pp", 4}}, 64, 1, "none",
             "train", false, PipelineSchedule::GPipe},
        Plan{"deepseek-moe-16b.stg", Degrees{{"ep", 2}, {"pp", 4}}, 96, 2},
        // Zero bubble: B and W steps of a kind each, W delayed by stage.
        Plan{"llama3-8b.stg", Degrees{{"dp", 2}, {"tp", 2}, {"pp", 4}}, 12, 1,
             "none", "train", false, PipelineSchedule::ZeroBubbleH1},
        Plan{"llama3-8b.stg", Degrees{{"dp", 2}, {"pp", 4}}, 64, 1, "selective",
             "train", true, PipelineSchedule::ZeroBubbleH1},
        Plan{"mixtral-8x7b.stg", Degrees{{"ep", 4}, {"pp", 2}}, 9, 1, "none",
             "train", false, PipelineSchedule::ZeroBubbleH1},
        // ZB-V: two chunks a stage in a V, the last stage's two chunks
        // handing over locally; fewer micro-batches than the V needs, too.
        Plan{"llama3-8b.stg", Degrees{{"dp", 2}, {"tp", 2}, {"pp", 4}}, 12, 2,
             "none", "train", false, PipelineSchedule::ZeroBubbleV},
        Plan{"llama3-8b.stg", Degrees{{"tp", 2}, {"pp", 4}}, 5, 2, "none",
             "train", false, PipelineSchedule::ZeroBubbleV},
        Plan{"llama3-8b.stg", Degrees{{"dp", 2}, {"pp", 2}}, 64, 2, "selective",
             "train", true, PipelineSchedule::ZeroBubbleV},
        Plan{"mixtral-8x7b.stg", Degrees{{"ep", 4}, {"pp", 2}}, 9, 2, "none",
             "train", false, PipelineSchedule::ZeroBubbleV}));

/// A plan of `layers` layers, with its options set by `change`.
template <typename Change>
Plan withLayers(Plan plan, unsigned layers, Change change) {
  plan.layers = layers;
  change(plan);
  return plan;
}

Plan withLayers(Plan plan, unsigned layers) {
  return withLayers(plan, layers, [](Plan &) {});
}

/// A plan of `layers` layers with the embedding and the loss counted as
/// layers (Megatron-LM's accounted split).
Plan accounted(Plan plan, unsigned layers, bool embedding = true,
               bool loss = true) {
  return withLayers(plan, layers, [&](Plan &plan) {
    plan.pipelineSplit.accountForEmbedding = embedding;
    plan.pipelineSplit.accountForLoss = loss;
  });
}

// Megatron-LM's splits: the first and the last model chunk hold one layer
// fewer, or none (then only the embedding, or the head and the loss: the
// tied GPT embedding crosses from one to the other); the first and the last
// stage given their layers.
INSTANTIATE_TEST_SUITE_P(
    Splits, FoldedEstimateTest,
    ::testing::Values(
        accounted(Plan{"gpt.stg", Degrees{{"pp", 4}}, 8, 2}, 6),
        accounted(Plan{"gpt.stg", Degrees{{"dp", 2}, {"pp", 4}}, 4, 1, "full"},
                  6),
        accounted(Plan{"llama3-8b.stg", Degrees{{"tp", 2}, {"pp", 4}}, 8, 2}, 7,
                  false, true),
        accounted(Plan{"llama3-8b.stg", Degrees{{"pp", 4}}, 6, 1, "none",
                       "train", false, PipelineSchedule::GPipe},
                  7, true, false),
        // In a V, stage 0 holds the embedding's chunk and the loss's.
        accounted(Plan{"llama3-8b.stg", Degrees{{"pp", 4}}, 8, 2, "none",
                       "train", false, PipelineSchedule::ZeroBubbleV},
                  14),
        withLayers(Plan{"llama3-8b.stg", Degrees{{"dp", 2}, {"pp", 4}}, 8, 2},
                   16, [](Plan &plan) {
                     plan.pipelineSplit.firstStageLayers = 2;
                     plan.pipelineSplit.lastStageLayers = 2;
                   })));

// Chunks of 4 to 24 layers, every kind of layer the templates have, and
// each option that adds nodes to a layer.
INSTANTIATE_TEST_SUITE_P(
    Plans, FoldedLayersTest,
    ::testing::Values(
        withLayers(Plan{"llama3-8b.stg", Degrees{{"dp", 2}, {"tp", 2}}, 4}, 24),
        withLayers(Plan{"llama3-8b.stg", Degrees{{"tp", 2}, {"pp", 2}}, 8}, 16),
        withLayers(Plan{"llama3-8b.stg", Degrees{{"tp", 2}, {"pp", 2}}, 8, 2},
                   24),
        withLayers(Plan{"llama3-8b.stg", Degrees{{"dp", 4}, {"pp", 2}}, 6, 1,
                        "full"},
                   12),
        withLayers(Plan{"llama3-8b.stg", Degrees{{"tp", 4}, {"pp", 2}}, 4, 1,
                        "selective"},
                   12, [](Plan &plan) { plan.sequenceParallel = "true"; }),
        withLayers(Plan{"llama3-8b.stg", Degrees{{"dp", 8}}, 3, 1, "none",
                        "train", true},
                   10),
        withLayers(Plan{"llama3-8b.stg", Degrees{{"dp", 4}, {"tp", 2}}, 3}, 10,
                   [](Plan &plan) {
                     plan.distributedOptimizer = true;
                     plan.overlapGradientReduction = false;
                   }),
        withLayers(Plan{"llama3-8b.stg", Degrees{{"dp", 2}, {"cp", 2}}, 4}, 10),
        withLayers(Plan{"llama3-8b.stg", Degrees{{"tp", 2}, {"pp", 2}}, 6, 1,
                        "none", "train", false, PipelineSchedule::GPipe},
                   12),
        withLayers(Plan{"llama3-8b.stg", Degrees{{"tp", 2}, {"pp", 2}}, 4, 1,
                        "none", "prefill"},
                   12),
        withLayers(Plan{"llama3-8b.stg", Degrees{{"tp", 2}}, 1, 1, "none",
                        "decode"},
                   12),
        withLayers(Plan{"mixtral-8x7b.stg", Degrees{{"ep", 4}, {"pp", 2}}, 4},
                   12),
        withLayers(Plan{"deepseek-moe-16b.stg", Degrees{{"ep", 2}}, 4}, 12),
        withLayers(Plan{"gemma3.stg", Degrees{{"tp", 2}}, 4}, 44),
        withLayers(Plan{"gemma3.stg", Degrees{{"tp", 2}, {"pp", 2}}, 4}, 62),
        // Bounded weight gathers inside a layer pattern's period of six.
        withLayers(Plan{"gemma3.stg", Degrees{{"dp", 2}, {"pp", 2}}, 4, 1,
                        "none", "train", true},
                   86),
        withLayers(Plan{"jamba.stg", Degrees{{"tp", 2}}, 2}, 48),
        withLayers(Plan{"mamba-2.8b.stg", Degrees{{"dp", 2}, {"pp", 2}}, 4},
                   12)));

// Interleaved: chunks without the embedding or the head replay the steps
// of a like chunk built before.
INSTANTIATE_TEST_SUITE_P(
    Plans, ChunkReplayTest,
    ::testing::Values(
        withLayers(Plan{"llama3-8b.stg", Degrees{{"tp", 2}, {"pp", 2}}, 8, 3},
                   48),
        withLayers(Plan{"llama3-8b.stg", Degrees{{"dp", 2}, {"pp", 4}}, 8, 4,
                        "full"},
                   64),
        withLayers(Plan{"llama3-8b.stg", Degrees{{"tp", 2}, {"pp", 2}}, 6, 4,
                        "selective"},
                   32, [](Plan &plan) { plan.distributedOptimizer = true; }),
        withLayers(Plan{"gemma3.stg", Degrees{{"tp", 2}, {"pp", 2}}, 4, 4}, 48),
        withLayers(Plan{"jamba.stg", Degrees{{"tp", 2}, {"pp", 2}}, 4, 3}, 48),
        withLayers(Plan{"deepseek-moe-16b.stg", Degrees{{"ep", 2}, {"pp", 2}},
                        4, 3},
                   25),
        // One layer a chunk, the first holding only the embedding and the
        // last only the loss, as Llama-3.1-405B on pp 16 x 8 chunks.
        accounted(Plan{"llama3-8b.stg", Degrees{{"tp", 2}, {"pp", 4}}, 8, 4},
                  14),
        accounted(Plan{"llama3-8b.stg", Degrees{{"dp", 2}, {"pp", 2}}, 4, 4,
                       "selective"},
                  30)));

// A chunk of many layers, one fewer for the embedding and the loss.
INSTANTIATE_TEST_SUITE_P(
    Splits, FoldedLayersTest,
    ::testing::Values(accounted(
        Plan{"llama3-8b.stg", Degrees{{"tp", 2}, {"pp", 2}}, 8}, 22)));

} // namespace
