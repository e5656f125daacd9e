//===- Mesh.h - Ranks, their coordinates and communicator groups -*- C++ -*-===//
//
// The device mesh of a run: named axes with degrees, listed fastest-varying
// first (`tp, cp, ep, dp, pp` by default, Megatron-LM's order, so a tensor-
// parallel group lands inside one node). A rank is the mixed-radix number of
// its coordinates.
//
// A collective runs over a set of axes, written as a bit mask over the mesh's
// axes; its group is the ranks that agree with the issuing rank on every
// other axis. CommGroups numbers all groups of the masks a run uses, as the
// comm-group file (`P.json`) lists them: ids are decimal strings from "1",
// masks in increasing order, within a mask groups in increasing order of
// their lowest rank. The id of a rank's group is arithmetic, not a lookup, so
// stamping 32K ranks needs no table per rank.
//
//===----------------------------------------------------------------------===//

#ifndef STG_INSTANTIATE_MESH_H
#define STG_INSTANTIATE_MESH_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <string>
#include <vector>

namespace stg {

/// A set of mesh axes: bit i is the mesh's axis i.
using AxisMask = uint32_t;

class Mesh {
public:
  struct AxisInfo {
    std::string name;
    unsigned degree;
  };

  Mesh() = default;
  /// `axes` fastest-varying first; every degree at least 1.
  explicit Mesh(std::vector<AxisInfo> axes);

  llvm::ArrayRef<AxisInfo> getAxes() const { return axes; }
  unsigned getNumRanks() const { return numRanks; }
  /// Index of the axis called `name`, or -1.
  int findAxis(llvm::StringRef name) const;
  unsigned getDegree(unsigned axis) const { return axes[axis].degree; }

  unsigned getCoordinate(unsigned rank, unsigned axis) const {
    return rank / strides[axis] % axes[axis].degree;
  }
  /// `rank` moved to coordinate `value` on `axis`.
  unsigned withCoordinate(unsigned rank, unsigned axis, unsigned value) const;

  /// Number of ranks in each group over `mask`.
  unsigned getGroupSize(AxisMask mask) const;
  /// The members of `rank`'s group over `mask`, in increasing order.
  void getGroupMembers(unsigned rank, AxisMask mask,
                       llvm::SmallVectorImpl<unsigned> &members) const;
  /// Index of `rank`'s group among the groups over `mask`, which are ordered
  /// by their lowest rank.
  unsigned getGroupIndex(unsigned rank, AxisMask mask) const;

  /// `tp=4, dp=8` (axes of degree 1 left out), for messages.
  std::string describe() const;
  /// `(dp, cp)`: the axes of a mask.
  std::string describeMask(AxisMask mask) const;

private:
  std::vector<AxisInfo> axes;
  llvm::SmallVector<unsigned, 8> strides;
  unsigned numRanks = 1;
};

/// The communicator groups of a run, numbered for `P.json`.
class CommGroups {
public:
  /// `masks` may repeat and come in any order; masks whose groups have one
  /// rank are dropped (no collective runs on them).
  CommGroups(const Mesh &mesh, llvm::ArrayRef<AxisMask> masks);

  /// The id of `rank`'s group over `mask`, which must be one of the masks.
  unsigned getGroupId(unsigned rank, AxisMask mask) const;
  llvm::ArrayRef<AxisMask> getMasks() const { return masks; }
  unsigned getNumGroups() const { return numGroups; }

  /// Writes `{"1": [0, 1], ...}`, one group per line, ids in order.
  void writeJson(llvm::raw_ostream &os) const;

private:
  const Mesh &mesh;
  llvm::SmallVector<AxisMask, 8> masks;
  llvm::SmallVector<unsigned, 8> firstIds; ///< Id of each mask's group 0.
  unsigned numGroups = 0;
};

} // namespace stg

#endif // STG_INSTANTIATE_MESH_H
