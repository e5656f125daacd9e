//===- PipelineSplit.cpp - How many layers each model chunk runs ----------===//
//
// Megatron-Core's split rules, as arithmetic on the counts: each mode checks
// what Megatron-LM checks (transformer_config.py) and divides as it builds
// (transformer_block.py, get_num_layers_to_build).
//
//===----------------------------------------------------------------------===//

#include "stg/Instantiate/PipelineSplit.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/raw_ostream.h"

using namespace stg;

static const char *const EmbeddingFlag =
    "--account-for-embedding-in-pipeline-split";
static const char *const LossFlag = "--account-for-loss-in-pipeline-split";
static const char *const FirstFlag = "--decoder-first-pipeline-num-layers";
static const char *const LastFlag = "--decoder-last-pipeline-num-layers";

/// `16 stages x 8 model chunks`, or `4 stages` without interleaving.
static std::string describeChunks(unsigned numStages, unsigned numChunks) {
  std::string text = std::to_string(numStages) + " stages";
  if (numChunks > 1)
    text += " x " + std::to_string(numChunks) + " model chunks";
  return text;
}

/// The first/last stage flags given, with their values.
static std::string describeEdgeFlags(const PipelineSplit &split) {
  std::string text;
  if (split.firstStageLayers)
    text =
        std::string(FirstFlag) + " " + std::to_string(*split.firstStageLayers);
  if (split.lastStageLayers)
    text += (text.empty() ? "" : " and ") + std::string(LastFlag) + " " +
            std::to_string(*split.lastStageLayers);
  return text;
}

/// `the embedding and the loss count as layers`, as `split` counts them.
static std::string describeAccounted(const PipelineSplit &split) {
  if (split.accountForEmbedding && split.accountForLoss)
    return "the embedding and the loss count as layers";
  return split.accountForEmbedding ? "the embedding counts as a layer"
                                   : "the loss counts as a layer";
}

std::string stg::findPipelineSplitConflict(const PipelineSplit &split) {
  const char *other = split.accountForEmbedding ? EmbeddingFlag
                      : split.accountForLoss    ? LossFlag
                      : split.firstStageLayers  ? FirstFlag
                      : split.lastStageLayers   ? LastFlag
                                                : nullptr;
  if (!split.chunkLayers.empty() && other)
    return (llvm::Twine("--pp-layers gives every model chunk's layers: it "
                        "cannot be combined with ") +
            other)
        .str();
  if ((split.firstStageLayers || split.lastStageLayers) &&
      (split.accountForEmbedding || split.accountForLoss))
    return (llvm::Twine(split.firstStageLayers ? FirstFlag : LastFlag) +
            " cannot be combined with " +
            (split.accountForEmbedding ? EmbeddingFlag : LossFlag) +
            ": Megatron-LM counts the embedding and the loss as layers only "
            "in an even split")
        .str();
  return std::string();
}

/// Megatron-LM's num_layers_in_first/last_pipeline_stage: the given stages
/// take their layers, the middle ones share the rest evenly, and each
/// stage's layers split evenly over its chunks.
static std::optional<std::vector<unsigned>>
splitEdgeStages(unsigned numLayers, unsigned numStages, unsigned numChunks,
                const PipelineSplit &split, ChunkPlacement placement,
                std::string &error) {
  std::string flags = describeEdgeFlags(split);
  if (numStages < 2) {
    error = flags + " needs pp above 1: it sets the first or the last of "
                    "several pipeline stages";
    return std::nullopt;
  }
  if (split.firstStageLayers == 0u || split.lastStageLayers == 0u) {
    error = flags + ": a stage's layers must be at least 1";
    return std::nullopt;
  }
  unsigned first = split.firstStageLayers.value_or(0);
  unsigned last = split.lastStageLayers.value_or(0);
  unsigned middle =
      numStages - bool(split.firstStageLayers) - bool(split.lastStageLayers);
  if (uint64_t(first) + last > numLayers) {
    error = flags + " give " + std::to_string(uint64_t(first) + last) +
            " layers; the model has " + std::to_string(numLayers);
    return std::nullopt;
  }
  unsigned remaining = numLayers - first - last;
  if (!middle && remaining) {
    error = flags + " leave " + std::to_string(remaining) + " of the " +
            std::to_string(numLayers) + " layers to no stage: with " +
            std::to_string(numStages) +
            " stages they must add up to the layers";
    return std::nullopt;
  }
  if (middle && (!remaining || remaining % middle)) {
    error = flags + " leave " + std::to_string(remaining) +
            " layers, which the " + std::to_string(middle) +
            " other stages do not split evenly (at least one each)";
    return std::nullopt;
  }
  unsigned perMiddle = middle ? remaining / middle : 0;
  // Each stage's layers are split evenly over its chunks.
  for (auto [what, count] : {std::pair{"the first stage's", first},
                             {"the last stage's", last},
                             {"each other stage's", perMiddle}})
    if (count % numChunks) {
      error = flags + ": " + what + " " + std::to_string(count) +
              " layers do not split evenly over its " +
              std::to_string(numChunks) + " model chunks";
      return std::nullopt;
    }
  std::vector<unsigned> counts;
  counts.reserve(size_t(numStages) * numChunks);
  for (unsigned chunk = 0; chunk < numStages * numChunks; ++chunk) {
    unsigned stage = getChunkStage(placement, chunk, numStages);
    unsigned layers = stage == 0 && split.firstStageLayers ? first
                      : stage + 1 == numStages && split.lastStageLayers
                          ? last
                          : perMiddle;
    counts.push_back(layers / numChunks);
  }
  return counts;
}

std::optional<std::vector<unsigned>>
stg::splitLayers(unsigned numLayers, unsigned numStages, unsigned numChunks,
                 const PipelineSplit &split, std::string &error,
                 ChunkPlacement placement) {
  error = findPipelineSplitConflict(split);
  if (!error.empty())
    return std::nullopt;
  uint64_t numModelChunks = uint64_t(numStages) * numChunks;
  if (!split.chunkLayers.empty()) {
    uint64_t total = 0;
    for (unsigned layers : split.chunkLayers)
      total += layers;
    // Only the chunks that hold the embedding or the loss may hold no layer.
    bool emptyMiddle = false;
    for (size_t chunk = 1; chunk + 1 < split.chunkLayers.size(); ++chunk)
      emptyMiddle |= split.chunkLayers[chunk] == 0;
    if (split.chunkLayers.size() != numModelChunks || total != numLayers ||
        emptyMiddle) {
      error = "--pp-layers gives " + std::to_string(split.chunkLayers.size()) +
              " layer counts adding up to " + std::to_string(total) +
              "; the plan has " + std::to_string(numModelChunks) +
              " model chunks and the model " + std::to_string(numLayers) +
              " layers, at least one a chunk but the first and the last "
              "(which hold the embedding and the loss)";
      return std::nullopt;
    }
    return split.chunkLayers;
  }
  if (split.firstStageLayers || split.lastStageLayers)
    return splitEdgeStages(numLayers, numStages, numChunks, split, placement,
                           error);
  if (split.accountForEmbedding || split.accountForLoss) {
    // Megatron-LM: (L + 1 or 2) / (pp x vp) slots a chunk; the embedding
    // takes one of the first chunk's, the loss one of the last's.
    unsigned extra = split.accountForEmbedding + split.accountForLoss;
    uint64_t slots = uint64_t(numLayers) + extra;
    if (slots % numModelChunks) {
      error = std::string(split.accountForEmbedding ? EmbeddingFlag : "") +
              (extra == 2 ? " and " : "") +
              (split.accountForLoss ? LossFlag : "") + ": " +
              describeAccounted(split) + ", and " + std::to_string(numLayers) +
              " + " + std::to_string(extra) + " = " + std::to_string(slots) +
              " do not split evenly into " +
              describeChunks(numStages, numChunks);
      return std::nullopt;
    }
    std::vector<unsigned> counts(numModelChunks,
                                 unsigned(slots / numModelChunks));
    counts.front() -= split.accountForEmbedding;
    counts.back() -= split.accountForLoss;
    return counts;
  }
  if (numModelChunks > 1 && numLayers < numModelChunks) {
    error =
        "pipeline parallelism splits layers over stages: " +
        std::to_string(numStages) + " stages" +
        (numChunks > 1 ? " of " + std::to_string(numChunks) + " model chunks"
                       : std::string()) +
        " need at least " + std::to_string(numModelChunks) +
        " layers, the model has " + std::to_string(numLayers);
    return std::nullopt;
  }
  // Even, the remainder to the first chunks.
  std::vector<unsigned> counts;
  counts.reserve(numModelChunks);
  for (uint64_t chunk = 0; chunk < numModelChunks; ++chunk)
    counts.push_back(unsigned(numLayers / numModelChunks +
                              (chunk < numLayers % numModelChunks)));
  return counts;
}

std::string stg::describePipelineSplit(const PipelineSplit &split,
                                       unsigned numLayers, unsigned numStages,
                                       llvm::ArrayRef<unsigned> chunkLayers) {
  if (split.isEven() || chunkLayers.empty())
    return std::string();
  std::string text;
  llvm::raw_string_ostream os(text);
  unsigned numChunks = chunkLayers.size() / std::max(1u, numStages);
  if (!split.chunkLayers.empty()) {
    os << "--pp-layers: ";
    llvm::interleave(chunkLayers, os, ", ");
    os << " layers a model chunk";
  } else if (split.firstStageLayers || split.lastStageLayers) {
    os << describeEdgeFlags(split) << ": ";
    std::vector<std::string> parts;
    if (split.firstStageLayers)
      parts.push_back(std::to_string(*split.firstStageLayers) +
                      " layers on the first stage");
    if (split.lastStageLayers)
      parts.push_back(
          std::to_string(*split.lastStageLayers) +
          (parts.empty() ? " layers on the last stage" : " on the last"));
    unsigned middle =
        numStages - bool(split.firstStageLayers) - bool(split.lastStageLayers);
    // A middle stage's chunk: stage 1, or the last if it is not given.
    unsigned stage = split.firstStageLayers ? 1 : 0;
    if (middle)
      parts.push_back(std::to_string(chunkLayers[stage] * numChunks) +
                      " on each of the " + std::to_string(middle) + " other" +
                      (middle == 1 ? "" : "s"));
    llvm::interleave(parts, os, ", ");
    if (numChunks > 1)
      os << ", each stage's split evenly over its " << numChunks
         << " model chunks";
  } else {
    unsigned extra = split.accountForEmbedding + split.accountForLoss;
    os << describeAccounted(split) << ": " << numLayers << " + " << extra
       << " = " << numLayers + extra << " over "
       << describeChunks(numStages, numChunks) << ", "
       << (numLayers + extra) / chunkLayers.size() << " each";
    const char *unit = numChunks > 1 ? "chunk" : "stage";
    if (split.accountForEmbedding && split.accountForLoss)
      os << "; the first " << unit << " holds the embedding and "
         << chunkLayers.front() << " decoder layers, the last the loss and "
         << chunkLayers.back();
    else if (split.accountForEmbedding)
      os << "; the first " << unit << " holds the embedding and "
         << chunkLayers.front() << " decoder layers";
    else
      os << "; the last " << unit << " holds the loss and "
         << chunkLayers.back() << " decoder layers";
  }
  return text;
}

std::string stg::describeStageChunks(const PipelineSplit &split, unsigned stage,
                                     unsigned numStages,
                                     llvm::ArrayRef<unsigned> chunkLayers,
                                     ChunkPlacement placement) {
  std::string text;
  llvm::raw_string_ostream os(text);
  unsigned numChunks = chunkLayers.size() / std::max(1u, numStages);
  for (unsigned index = 0; index < numChunks; ++index) {
    unsigned chunk = getModelChunk(placement, stage, index, numStages);
    if (index)
      os << ", ";
    if (chunk == 0 && split.accountForEmbedding)
      os << "embedding + ";
    os << chunkLayers[chunk];
    if (chunk + 1 == chunkLayers.size() && split.accountForLoss)
      os << " + loss";
  }
  return text;
}
