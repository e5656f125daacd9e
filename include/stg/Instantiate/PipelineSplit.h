//===- PipelineSplit.h - How many layers each model chunk runs --*- C++ -*-===//
//
// The pipeline split: the model's L layers (of every forward repeat, in
// order) divided into pp x virtual-stages model chunks, chunk c on stage
// c mod pp (interleaved), or with two chunks a stage in a V: chunk c on
// stage c for c < pp, then back, chunk 2pp-1-c on stage c (ZB-V's; also
// DualPipeV's), so that the last stage hands its first chunk's output to
// its second without a message and the first stage holds the embedding
// and the loss.
// By default evenly, the remainder to the first chunks; or as Megatron-LM
// splits them:
//
//  - `--pp-layers`: each chunk's count, given;
//  - the embedding and/or the loss counted as a layer
//    (`--account-for-embedding-in-pipeline-split`,
//    `--account-for-loss-in-pipeline-split`): L + 1 or L + 2 divided evenly
//    over the chunks, the first chunk (the last) holding one decoder layer
//    fewer, since the embedding (the loss) takes that slot; it may hold none;
//  - `--decoder-first-pipeline-num-layers` / `--decoder-last-...`: that many
//    layers on the first (last) stage, the others evenly over the middle
//    stages, each stage's layers evenly over its chunks.
//
// Megatron-Core's rules (megatron/core/transformer/transformer_block.py,
// get_num_layers_to_build, and the checks of transformer_config.py's
// __post_init__) are those of splitLayers; docs/instantiation.md cites them.
// The split is pure arithmetic on the counts, shared by instantiation (which
// reports its errors at the model's first repeat) and the plan search.
//
//===----------------------------------------------------------------------===//

#ifndef STG_INSTANTIATE_PIPELINESPLIT_H
#define STG_INSTANTIATE_PIPELINESPLIT_H

#include "llvm/ADT/ArrayRef.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace stg {

/// How the model chunks sit on the stages (above).
enum class ChunkPlacement : uint8_t { Interleaved, VShape };

/// The stage of model chunk `chunk` of `numStages` x chunks-a-stage.
inline unsigned getChunkStage(ChunkPlacement placement, unsigned chunk,
                              unsigned numStages) {
  if (placement == ChunkPlacement::VShape && chunk >= numStages)
    return 2 * numStages - 1 - chunk;
  return chunk % numStages;
}

/// Which of its stage's chunks (0-based, in the order the forward reaches
/// them) model chunk `chunk` is.
inline unsigned getStageChunkIndex(unsigned chunk, unsigned numStages) {
  return chunk / numStages;
}

/// The model chunk that is `stage`'s `index`-th.
inline unsigned getModelChunk(ChunkPlacement placement, unsigned stage,
                              unsigned index, unsigned numStages) {
  if (placement == ChunkPlacement::VShape && index % 2)
    return (index + 1) * numStages - 1 - stage;
  return index * numStages + stage;
}

struct PipelineSplit {
  /// The layer count of each model chunk, in chunk order (`--pp-layers`);
  /// empty: computed. The first and the last chunk may hold none.
  std::vector<unsigned> chunkLayers;
  /// The embedding (the work before the first layer) counts as a layer of
  /// the first model chunk (Megatron-LM's
  /// account_for_embedding_in_pipeline_split).
  bool accountForEmbedding = false;
  /// The loss (the work after the last layer: the final norm, the output
  /// layer and the loss) counts as a layer of the last model chunk.
  bool accountForLoss = false;
  /// Decoder layers of the first (last) pipeline stage, split evenly over
  /// its model chunks; the other stages share the rest evenly (Megatron-
  /// LM's num_layers_in_first/last_pipeline_stage).
  std::optional<unsigned> firstStageLayers, lastStageLayers;

  /// Whether nothing is asked: an even split.
  bool isEven() const {
    return chunkLayers.empty() && !accountForEmbedding && !accountForLoss &&
           !firstStageLayers && !lastStageLayers;
  }
  bool operator==(const PipelineSplit &other) const {
    return chunkLayers == other.chunkLayers &&
           accountForEmbedding == other.accountForEmbedding &&
           accountForLoss == other.accountForLoss &&
           firstStageLayers == other.firstStageLayers &&
           lastStageLayers == other.lastStageLayers;
  }
};

/// Why `split` asks for two things that exclude each other (`--pp-layers`
/// with any other; first/last stage layers with the embedding or loss
/// counted, which Megatron-LM refuses together), in the flags' names; empty
/// if it does not.
std::string findPipelineSplitConflict(const PipelineSplit &split);

/// The layers of each of the `numStages` x `numChunks` model chunks of a
/// model of `numLayers` layers, adding up to `numLayers`; only the first and
/// the last chunk may hold none (they hold the work before and after the
/// layers). Fails, with `error` set to a sentence naming the flags and the
/// numbers, where the numbers do not split as `split` asks.
std::optional<std::vector<unsigned>>
splitLayers(unsigned numLayers, unsigned numStages, unsigned numChunks,
            const PipelineSplit &split, std::string &error,
            ChunkPlacement placement = ChunkPlacement::Interleaved);

/// One line for the report: how `split` divided `numLayers` into
/// `chunkLayers` over `numStages` stages (`the embedding and the loss count
/// as layers: 128 over 128 model chunks, 1 each`); empty for an even split.
std::string describePipelineSplit(const PipelineSplit &split,
                                  unsigned numLayers, unsigned numStages,
                                  llvm::ArrayRef<unsigned> chunkLayers);

/// The layer counts of `stage`'s model chunks, its first chunk marked
/// `embedding + ` and its last ` + loss` where `split` counts them as
/// layers there: `embedding + 0, 1, 1`.
std::string
describeStageChunks(const PipelineSplit &split, unsigned stage,
                    unsigned numStages, llvm::ArrayRef<unsigned> chunkLayers,
                    ChunkPlacement placement = ChunkPlacement::Interleaved);

} // namespace stg

#endif // STG_INSTANTIATE_PIPELINESPLIT_H
