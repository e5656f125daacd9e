//===- Placement.h - Where and how often each op of a module runs -*- C++ -*-===//
//
// The numbering instantiation works with: every layer of every repetition
// of every repeat gets a global layer index (forward repeats in program
// order; a backward repeat shares its forward repeat's indices), layers are
// split over the pipeline stages, and every top-level op is given a stage.
// A repetition runs as many layers as its body holds (several for a layer
// pattern's period), so a stage boundary may fall inside a repetition.
// An op instance is an op and the index of its repetition's first layer (-1
// at top level); the op's body layer adds to it. `resolve` follows
// loop-carried arguments and repeat results to the instance that really
// computes a value, so that cross-layer and cross-stage edges are plain
// edges.
//
//===----------------------------------------------------------------------===//

#ifndef STG_LIB_INSTANTIATE_PLACEMENT_H
#define STG_LIB_INSTANTIATE_PLACEMENT_H

#include "stg/IR/Module.h"
#include "stg/Instantiate/PipelineSplit.h"
#include "stg/Support/Diagnostics.h"

#include "llvm/ADT/DenseMap.h"

#include <optional>
#include <vector>

namespace stg {

/// A value as computed in one repetition (layer -1: at top level).
struct ValueInstance {
  const Value *value = nullptr;
  int layer = -1;
};

class Placement {
public:
  struct RepeatInfo {
    bool backward = false;
    unsigned offset = 0; ///< Global index of repetition 0's first layer.
    unsigned count = 0;  ///< Repetitions.
    unsigned period = 1; ///< Layers a repetition runs.
    /// Global index of the first layer of the repeat statement it comes
    /// from: a layer pattern's last layers, repeats of their own, continue
    /// its numbering.
    unsigned loopStart = 0;
  };

  /// Numbers the layers of `module` and splits them into `numStages` x
  /// `numChunks` model chunks as `split` asks, placed on the stages as
  /// `chunkPlacement` says (PipelineSplit.h). Reports (and returns null for)
  /// what cannot be split.
  static std::optional<Placement> create(const Module &module,
                                         unsigned numStages, unsigned numChunks,
                                         const PipelineSplit &split,
                                         ChunkPlacement chunkPlacement,
                                         DiagnosticEngine &diags);

  unsigned getNumLayers() const { return numLayers; }
  unsigned getNumStages() const { return numStages; }
  /// The layer count of each model chunk, in chunk order.
  llvm::ArrayRef<unsigned> getChunkSizes() const { return chunkSizes; }
  unsigned getStageOfLayer(unsigned layer) const {
    return layerStages[layer];
  }
  /// The stage's model chunk (0 .. numChunks-1) a layer belongs to.
  unsigned getChunkOfLayer(unsigned layer) const { return layerChunks[layer]; }
  /// The layers `stage` runs, ascending.
  std::vector<unsigned> getLayersOf(unsigned stage) const;
  /// The global layer an op instance runs in.
  unsigned getLayer(const Op *op, int layer) const {
    return layer + op->getBodyLayer();
  }
  /// The model chunk of an op instance (top-level ops: their assigned
  /// chunk).
  unsigned getChunk(const Op *op, int layer) const {
    return layer >= 0 ? layerChunks[getLayer(op, layer)] : topChunks.lookup(op);
  }

  const RepeatInfo &getRepeat(const Op *repeat) const {
    return repeats.find(repeat)->second;
  }
  /// Whether a layer of `repetition` of `info`'s repeat runs on `stage`
  /// (and in `chunk`, unless negative).
  bool hasLayerOn(const RepeatInfo &info, unsigned repetition, unsigned stage,
                  int chunk = -1) const {
    unsigned first = info.offset + repetition * info.period;
    for (unsigned layer = first; layer < first + info.period; ++layer)
      if (layerStages[layer] == stage &&
          (chunk < 0 || layerChunks[layer] == unsigned(chunk)))
        return true;
    return false;
  }
  /// The stage of an op instance (top-level ops: their assigned stage).
  unsigned getStage(const Op *op, int layer) const {
    return layer >= 0 ? layerStages[getLayer(op, layer)] : topStages.lookup(op);
  }
  /// True if `op`'s results need no computation on any stage: parameters,
  /// inputs, state, and layouts or reshapes of only those.
  bool isFloating(const Op *op) const { return floating.count(op); }

  /// The instance that computes `value` as used in `layer`.
  ValueInstance resolve(const Value *value, int layer) const;

private:
  Placement() = default;
  void assignTopLevelStages(const Graph &model);
  /// Reports a model chunk that holds neither a layer nor top-level work.
  bool checkEmptyChunks(const Module &module, DiagnosticEngine &diags) const;

  unsigned numLayers = 0;
  unsigned numStages = 1;
  ChunkPlacement chunkPlacement = ChunkPlacement::Interleaved;
  std::vector<unsigned> layerStages, layerChunks;
  std::vector<unsigned> chunkSizes;
  llvm::DenseMap<const Op *, RepeatInfo> repeats;
  /// Body argument -> (its repeat, its index).
  llvm::DenseMap<const Value *, std::pair<const Op *, unsigned>> bodyArgs;
  llvm::DenseMap<const Op *, unsigned> topStages, topChunks;
  llvm::DenseMap<const Op *, bool> floating;
};

/// Calls `fn(op, layer)` for every instance of a non-repeat op, in program
/// order: top-level ops, and each repeat's body ops once per repetition
/// (ascending, yields left out; `layer` is the repetition's first layer).
void forEachInstance(const Module &module, const Placement &placement,
                     llvm::function_ref<void(const Op &, int)> fn);
/// The same for the instances placed on `stage`.
void forEachInstanceOnStage(const Module &module, const Placement &placement,
                            unsigned stage,
                            llvm::function_ref<void(const Op &, int)> fn);

/// True for ops that emit no node: declarations, yields, repeats, layouts,
/// reshapes, local slices and slices of a cache (views of data the rank
/// already holds).
bool isElided(const Op &op);

} // namespace stg

#endif // STG_LIB_INSTANTIATE_PLACEMENT_H
