//===- PipelineSplitTest.cpp - Layers per model chunk, as Megatron ------===//
//
// The split arithmetic of PipelineSplit.h against Megatron-Core's
// get_num_layers_to_build (megatron/core/transformer/transformer_block.py):
// the plans Megatron-LM runs, worked out by hand, and the numbers it
// refuses, with the message that names the flags.
//
//===----------------------------------------------------------------------===//

#include "stg/Instantiate/PipelineSplit.h"

#include "gtest/gtest.h"

using namespace stg;

namespace {

using Counts = std::vector<unsigned>;

/// The counts of a split that must succeed.
Counts split(unsigned layers, unsigned stages, unsigned chunks,
             const PipelineSplit &split) {
  std::string error;
  std::optional<Counts> counts =
      splitLayers(layers, stages, chunks, split, error);
  EXPECT_TRUE(counts) << error;
  return counts.value_or(Counts());
}

/// The error of a split that must fail.
std::string refusal(unsigned layers, unsigned stages, unsigned chunks,
                    const PipelineSplit &split) {
  std::string error;
  EXPECT_FALSE(splitLayers(layers, stages, chunks, split, error));
  return error;
}

PipelineSplit accounted(bool embedding, bool loss) {
  PipelineSplit split;
  split.accountForEmbedding = embedding;
  split.accountForLoss = loss;
  return split;
}

PipelineSplit edges(std::optional<unsigned> first,
                    std::optional<unsigned> last) {
  PipelineSplit split;
  split.firstStageLayers = first;
  split.lastStageLayers = last;
  return split;
}

TEST(PipelineSplitTest, EvenGivesTheRemainderToTheFirstChunks) {
  EXPECT_EQ(split(30, 4, 1, PipelineSplit()), Counts({8, 8, 7, 7}));
  EXPECT_EQ(split(16, 2, 2, PipelineSplit()), Counts({4, 4, 4, 4}));
  EXPECT_EQ(refusal(3, 2, 2, PipelineSplit()),
            "pipeline parallelism splits layers over stages: 2 stages of 2 "
            "model chunks need at least 4 layers, the model has 3");
}

// Llama-3.1-405B as Megatron-LM runs it: 126 layers, pp 16, vp 8, the
// embedding and the loss counted: (126 + 2) / 128 = 1 slot a chunk; the
// first chunk of stage 0 holds only the embedding, the last chunk of stage
// 15 only the output layer and the loss.
TEST(PipelineSplitTest, AccountedLlama405BOnPp16Vp8) {
  Counts counts = split(126, 16, 8, accounted(true, true));
  ASSERT_EQ(counts.size(), 128u);
  EXPECT_EQ(counts.front(), 0u);
  EXPECT_EQ(counts.back(), 0u);
  for (size_t chunk = 1; chunk + 1 < counts.size(); ++chunk)
    EXPECT_EQ(counts[chunk], 1u) << chunk;
  EXPECT_EQ(describeStageChunks(accounted(true, true), 0, 16, counts),
            "embedding + 0, 1, 1, 1, 1, 1, 1, 1");
  EXPECT_EQ(describeStageChunks(accounted(true, true), 15, 16, counts),
            "1, 1, 1, 1, 1, 1, 1, 0 + loss");
  EXPECT_EQ(describePipelineSplit(accounted(true, true), 126, 16, counts),
            "the embedding and the loss count as layers: 126 + 2 = 128 over "
            "16 stages x 8 model chunks, 1 each; the first chunk holds the "
            "embedding and 0 decoder layers, the last the loss and 0");
}

TEST(PipelineSplitTest, AccountedTakesASlotOfTheFirstOrLastChunk) {
  // (31 + 1) / 4 = 8 a stage, the first giving one to the embedding.
  EXPECT_EQ(split(31, 4, 1, accounted(true, false)), Counts({7, 8, 8, 8}));
  EXPECT_EQ(split(31, 4, 1, accounted(false, true)), Counts({8, 8, 8, 7}));
  EXPECT_EQ(split(30, 4, 1, accounted(true, true)), Counts({7, 8, 8, 7}));
  // With chunks, only the first chunk of stage 0 and the last of the last
  // stage give up a slot: (30 + 2) / 8 = 4.
  EXPECT_EQ(split(30, 4, 2, accounted(true, true)),
            Counts({3, 4, 4, 4, 4, 4, 4, 3}));
  // Without pipelining, the one chunk gives up both: the layers.
  EXPECT_EQ(split(30, 1, 1, accounted(true, true)), Counts({30}));
}

TEST(PipelineSplitTest, AccountedNeedsTheSlotsToDivide) {
  EXPECT_EQ(refusal(32, 4, 1, accounted(true, true)),
            "--account-for-embedding-in-pipeline-split and "
            "--account-for-loss-in-pipeline-split: the embedding and the "
            "loss count as layers, and 32 + 2 = 34 do not split evenly into "
            "4 stages");
  EXPECT_EQ(refusal(126, 16, 7, accounted(false, true)),
            "--account-for-loss-in-pipeline-split: the loss counts as a "
            "layer, and 126 + 1 = 127 do not split evenly into 16 stages x 7 "
            "model chunks");
}

// Megatron-LM's num_layers_in_first/last_pipeline_stage: DeepSeek-V3's 61
// layers on pp 16 as 3 + 14 x 4 + 2.
TEST(PipelineSplitTest, FirstAndLastStageLayers) {
  Counts counts = split(61, 16, 1, edges(3, 2));
  ASSERT_EQ(counts.size(), 16u);
  EXPECT_EQ(counts.front(), 3u);
  EXPECT_EQ(counts.back(), 2u);
  for (size_t stage = 1; stage + 1 < counts.size(); ++stage)
    EXPECT_EQ(counts[stage], 4u);
  // Only the first given: the last stage is a middle one.
  EXPECT_EQ(split(31, 4, 1, edges(4, std::nullopt)), Counts({4, 9, 9, 9}));
  EXPECT_EQ(split(31, 4, 1, edges(std::nullopt, 4)), Counts({9, 9, 9, 4}));
  // Each stage's layers split evenly over its chunks, chunk c on stage c
  // mod pp.
  EXPECT_EQ(split(28, 4, 2, edges(4, 4)), Counts({2, 5, 5, 2, 2, 5, 5, 2}));
  EXPECT_EQ(describePipelineSplit(edges(4, 4), 28, 4,
                                  Counts({2, 5, 5, 2, 2, 5, 5, 2})),
            "--decoder-first-pipeline-num-layers 4 and "
            "--decoder-last-pipeline-num-layers 4: 4 layers on the first "
            "stage, 4 on the last, 10 on each of the 2 others, each stage's "
            "split evenly over its 2 model chunks");
}

TEST(PipelineSplitTest, FirstAndLastStageLayersMustSplit) {
  EXPECT_EQ(refusal(32, 4, 1, edges(3, 2)),
            "--decoder-first-pipeline-num-layers 3 and "
            "--decoder-last-pipeline-num-layers 2 leave 27 layers, which the "
            "2 other stages do not split evenly (at least one each)");
  EXPECT_EQ(refusal(32, 2, 1, edges(3, 2)),
            "--decoder-first-pipeline-num-layers 3 and "
            "--decoder-last-pipeline-num-layers 2 leave 27 of the 32 layers "
            "to no stage: with 2 stages they must add up to the layers");
  EXPECT_EQ(refusal(32, 4, 1, edges(20, 20)),
            "--decoder-first-pipeline-num-layers 20 and "
            "--decoder-last-pipeline-num-layers 20 give 40 layers; the model "
            "has 32");
  EXPECT_EQ(refusal(32, 4, 1, edges(16, 16)),
            "--decoder-first-pipeline-num-layers 16 and "
            "--decoder-last-pipeline-num-layers 16 leave 0 layers, which the "
            "2 other stages do not split evenly (at least one each)");
  EXPECT_EQ(refusal(32, 1, 1, edges(32, std::nullopt)),
            "--decoder-first-pipeline-num-layers 32 needs pp above 1: it "
            "sets the first or the last of several pipeline stages");
  EXPECT_EQ(refusal(30, 4, 2, edges(3, 3)),
            "--decoder-first-pipeline-num-layers 3 and "
            "--decoder-last-pipeline-num-layers 3: the first stage's 3 layers "
            "do not split evenly over its 2 model chunks");
}

TEST(PipelineSplitTest, GivenCountsMayLeaveTheEdgeChunksEmpty) {
  PipelineSplit given;
  given.chunkLayers = {0, 16, 16, 0};
  EXPECT_EQ(split(32, 4, 1, given), given.chunkLayers);
  given.chunkLayers = {8, 0, 24, 0};
  EXPECT_EQ(refusal(32, 4, 1, given),
            "--pp-layers gives 4 layer counts adding up to 32; the plan has 4 "
            "model chunks and the model 32 layers, at least one a chunk but "
            "the first and the last (which hold the embedding and the loss)");
}

TEST(PipelineSplitTest, ConflictsAreNamed) {
  PipelineSplit both = accounted(true, false);
  both.chunkLayers = {16, 16};
  EXPECT_EQ(findPipelineSplitConflict(both),
            "--pp-layers gives every model chunk's layers: it cannot be "
            "combined with --account-for-embedding-in-pipeline-split");
  PipelineSplit mixed = edges(std::nullopt, 4);
  mixed.accountForLoss = true;
  EXPECT_EQ(findPipelineSplitConflict(mixed),
            "--decoder-last-pipeline-num-layers cannot be combined with "
            "--account-for-loss-in-pipeline-split: Megatron-LM counts the "
            "embedding and the loss as layers only in an even split");
  EXPECT_EQ(refusal(32, 2, 1, mixed), findPipelineSplitConflict(mixed));
  EXPECT_EQ(findPipelineSplitConflict(accounted(true, true)), "");
}

} // namespace
