//===- PairMesh.h - A prefill and a decode instance's mesh -----*- C++ -*-===//
//
// A disaggregated serving window is written as one trace set: the prefill
// instance's stages, then the decode instance's, on one pipeline axis of
// their stages together, so that a KV cache is an ordinary send from a
// prefill stage to a decode stage. Where the two instances have the same
// plan apart from pp, their mesh is the instances' own with the pipeline
// degrees added. Otherwise (tp 2 prefill, tp 8 decode) a stage's ranks are
// the larger instance's, cut into axes at every boundary of either
// instance's groups: each instance axis is then a set of the shared mesh's
// axes, and the smaller instance runs as replicas over the axes it lacks
// (four tp 2 prefill instances beside one tp 8 decode instance), as a
// deployment runs several. That needs each instance's group sizes to divide
// the next boundary (tp 2 beside tp 8, not tp 3 beside tp 2).
//
//===----------------------------------------------------------------------===//

#ifndef STG_SERVE_PAIRMESH_H
#define STG_SERVE_PAIRMESH_H

#include "stg/Instantiate/Mesh.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

#include <array>
#include <vector>

namespace stg {

/// One instance's mesh and the axis whose coordinate is its stage (-1:
/// none, which a pair refuses).
struct InstanceMesh {
  const Mesh *mesh = nullptr;
  int pipelineAxis = -1;
};

struct PairMesh {
  Mesh mesh;
  unsigned pipelineAxis = 0;
  /// Per instance (prefill, decode): each axis of its mesh as a set of
  /// `mesh`'s axes (none for an axis of degree 1).
  std::array<std::vector<AxisMask>, 2> axisMaps;
  /// Ranks of one stage, and each instance's own; each instance's stages
  /// (the prefill instance's first on the pipeline axis).
  unsigned ranksPerStage = 1;
  std::array<unsigned, 2> instanceRanksPerStage = {1, 1};
  std::array<unsigned, 2> instanceStages = {1, 1};
};

/// The mesh of `prefill` and `decode` together; an error says why there is
/// none (a pipeline axis inside the others, groups that do not nest).
llvm::Expected<PairMesh> buildPairMesh(InstanceMesh prefill,
                                       InstanceMesh decode);

/// `mask` over an instance's axes as a mask over the pair's.
AxisMask mapAxisMask(AxisMask mask, llvm::ArrayRef<AxisMask> axisMap);

/// The manifest's `serving_window.instances`: per instance its stages,
/// ranks a stage, first stage and replicas in the pair's stages.
llvm::json::Array describePairMesh(const PairMesh &pair);

} // namespace stg

#endif // STG_SERVE_PAIRMESH_H
