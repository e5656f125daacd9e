//===- Mesh.cpp - Ranks, their coordinates and communicator groups --------===//

#include "stg/Instantiate/Mesh.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

#include <algorithm>
#include <cassert>

using namespace stg;

Mesh::Mesh(std::vector<AxisInfo> meshAxes) : axes(std::move(meshAxes)) {
  numRanks = 1;
  for (const AxisInfo &axis : axes) {
    assert(axis.degree >= 1 && "axis degree must be positive");
    strides.push_back(numRanks);
    numRanks *= axis.degree;
  }
}

int Mesh::findAxis(llvm::StringRef name) const {
  for (unsigned index = 0; index < axes.size(); ++index)
    if (axes[index].name == name)
      return index;
  return -1;
}

unsigned Mesh::withCoordinate(unsigned rank, unsigned axis,
                              unsigned value) const {
  return rank - getCoordinate(rank, axis) * strides[axis] +
         value * strides[axis];
}

unsigned Mesh::getGroupSize(AxisMask mask) const {
  unsigned size = 1;
  for (unsigned axis = 0; axis < axes.size(); ++axis)
    if (mask & (1u << axis))
      size *= axes[axis].degree;
  return size;
}

void Mesh::getGroupMembers(unsigned rank, AxisMask mask,
                           llvm::SmallVectorImpl<unsigned> &members) const {
  // Zero the group's coordinates, then enumerate them, fastest axis first:
  // that yields the members in increasing rank order.
  unsigned base = rank;
  llvm::SmallVector<unsigned, 8> groupAxes;
  for (unsigned axis = 0; axis < axes.size(); ++axis)
    if (mask & (1u << axis)) {
      base = withCoordinate(base, axis, 0);
      groupAxes.push_back(axis);
    }
  members.assign({base});
  for (unsigned axis : groupAxes) {
    size_t count = members.size();
    for (unsigned value = 1; value < axes[axis].degree; ++value)
      for (size_t i = 0; i < count; ++i)
        members.push_back(members[i] + value * strides[axis]);
  }
  std::sort(members.begin(), members.end()); // Inlined, not qsort.
}

unsigned Mesh::getGroupIndex(unsigned rank, AxisMask mask) const {
  // The mixed-radix number of the coordinates outside the group: increasing
  // with the group's lowest rank.
  unsigned index = 0, stride = 1;
  for (unsigned axis = 0; axis < axes.size(); ++axis) {
    if (mask & (1u << axis))
      continue;
    index += getCoordinate(rank, axis) * stride;
    stride *= axes[axis].degree;
  }
  return index;
}

std::string Mesh::describe() const {
  std::string text;
  llvm::raw_string_ostream os(text);
  for (const AxisInfo &axis : axes) {
    if (axis.degree == 1)
      continue;
    os << (text.empty() ? "" : ", ") << axis.name << '=' << axis.degree;
  }
  return text.empty() ? "one rank" : text;
}

std::string Mesh::describeMask(AxisMask mask) const {
  llvm::SmallVector<llvm::StringRef, 4> names;
  for (unsigned axis = 0; axis < axes.size(); ++axis)
    if (mask & (1u << axis))
      names.push_back(axes[axis].name);
  if (names.size() == 1)
    return names.front().str();
  return ("(" + llvm::Twine(llvm::join(names, ", ")) + ")").str();
}

CommGroups::CommGroups(const Mesh &mesh, llvm::ArrayRef<AxisMask> used)
    : mesh(mesh) {
  for (AxisMask mask : used)
    if (mesh.getGroupSize(mask) > 1)
      masks.push_back(mask);
  llvm::sort(masks);
  masks.erase(std::unique(masks.begin(), masks.end()), masks.end());
  unsigned nextId = 1;
  for (AxisMask mask : masks) {
    firstIds.push_back(nextId);
    nextId += mesh.getNumRanks() / mesh.getGroupSize(mask);
  }
  numGroups = nextId - 1;
}

unsigned CommGroups::getGroupId(unsigned rank, AxisMask mask) const {
  auto it = llvm::lower_bound(masks, mask);
  assert(it != masks.end() && *it == mask && "mask without groups");
  return firstIds[it - masks.begin()] + mesh.getGroupIndex(rank, mask);
}

/// True if `rank` has coordinate 0 on every axis of `mask`.
static bool isLowestOfGroup(const Mesh &mesh, unsigned rank, AxisMask mask) {
  for (unsigned axis = 0; axis < mesh.getAxes().size(); ++axis)
    if ((mask & (1u << axis)) && mesh.getCoordinate(rank, axis) != 0)
      return false;
  return true;
}

void CommGroups::writeJson(llvm::raw_ostream &os) const {
  os << '{';
  llvm::SmallVector<unsigned, 64> members;
  bool first = true;
  for (AxisMask mask : masks) {
    // Each group once, found from its lowest rank.
    for (unsigned rank = 0; rank < mesh.getNumRanks(); ++rank) {
      if (!isLowestOfGroup(mesh, rank, mask))
        continue;
      mesh.getGroupMembers(rank, mask, members);
      os << (first ? "\n" : ",\n") << "  \"" << getGroupId(rank, mask)
         << "\": [";
      first = false;
      llvm::interleave(members, os, ", ");
      os << ']';
    }
  }
  os << "\n}\n";
}
