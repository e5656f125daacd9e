//===- PairMesh.cpp - The mesh a prefill and a decode instance share ------===//
//
// The shared mesh's stage axes are the pieces between the sorted group
// boundaries (each instance's products of its axes, fastest first) of both
// instances; an instance axis covers the pieces between its own two
// boundaries. Pieces keep the name of the axes they come from (`tp`, or
// `tp/ep` where the instances differ), numbered where an axis is cut
// (`tp.0`, `tp.1`).
//
//===----------------------------------------------------------------------===//

#include "stg/Serve/PairMesh.h"

#include "stg/Instantiate/Limits.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/Twine.h"

#include <algorithm>

using namespace stg;

namespace {

const char *const InstanceNames[2] = {"prefill", "decode"};

bool haveSameStageAxes(InstanceMesh a, InstanceMesh b) {
  llvm::ArrayRef<Mesh::AxisInfo> axesA = a.mesh->getAxes(),
                                 axesB = b.mesh->getAxes();
  if (a.pipelineAxis != b.pipelineAxis || axesA.size() != axesB.size())
    return false;
  for (unsigned axis = 0; axis < axesA.size(); ++axis)
    if (axis != a.pipelineAxis && (axesA[axis].name != axesB[axis].name ||
                                   axesA[axis].degree != axesB[axis].degree))
      return false;
  return true;
}

llvm::Error makeError(const llvm::Twine &message) {
  return llvm::createStringError(std::errc::invalid_argument, "%s",
                                 message.str().c_str());
}

/// The ranks of a stage are the axes before the pipeline axis; one after it
/// would interleave the instances' stages.
llvm::Error checkPipelineOutermost(InstanceMesh instance, unsigned side) {
  llvm::ArrayRef<Mesh::AxisInfo> axes = instance.mesh->getAxes();
  for (unsigned axis = unsigned(instance.pipelineAxis) + 1; axis < axes.size();
       ++axis)
    if (axes[axis].degree > 1)
      return makeError(llvm::Twine("the ") + InstanceNames[side] +
                       " instance's " + axes[axis].name +
                       " axis is outside its pipeline axis: a window of two "
                       "plans needs pp last in --rank-order");
  return llvm::Error::success();
}

} // namespace

llvm::Expected<PairMesh> stg::buildPairMesh(InstanceMesh prefill,
                                            InstanceMesh decode) {
  std::array<InstanceMesh, 2> instances = {prefill, decode};
  if (prefill.pipelineAxis < 0 || decode.pipelineAxis < 0)
    return makeError("a disaggregated window puts its instances on the "
                     "pipeline axis: keep pp in --rank-order");
  PairMesh pair;
  uint64_t stages = 0;
  for (unsigned side = 0; side < 2; ++side) {
    const Mesh &mesh = *instances[side].mesh;
    unsigned degree = mesh.getDegree(instances[side].pipelineAxis);
    stages += degree;
    pair.instanceStages[side] = degree;
    pair.instanceRanksPerStage[side] = mesh.getNumRanks() / degree;
    pair.axisMaps[side].assign(mesh.getAxes().size(), 0);
  }
  pair.ranksPerStage =
      std::max(pair.instanceRanksPerStage[0], pair.instanceRanksPerStage[1]);
  if (uint64_t(pair.ranksPerStage) * stages > MaxRanks)
    return makeError("the window's two instances have more than " +
                     llvm::Twine(MaxRanks) + " ranks");

  if (haveSameStageAxes(prefill, decode)) {
    std::vector<Mesh::AxisInfo> axes(prefill.mesh->getAxes().begin(),
                                     prefill.mesh->getAxes().end());
    axes[prefill.pipelineAxis].degree = unsigned(stages);
    pair.mesh = Mesh(std::move(axes));
    pair.pipelineAxis = unsigned(prefill.pipelineAxis);
    for (std::vector<AxisMask> &axisMap : pair.axisMaps)
      for (unsigned axis = 0; axis < axisMap.size(); ++axis)
        axisMap[axis] = AxisMask(1) << axis;
    return pair;
  }

  // Every instance's group boundaries, and where each of its axes lies.
  std::vector<uint64_t> bounds = {1};
  std::array<std::vector<std::pair<uint64_t, uint64_t>>, 2> spans;
  for (unsigned side = 0; side < 2; ++side) {
    if (llvm::Error err = checkPipelineOutermost(instances[side], side))
      return err;
    const Mesh &mesh = *instances[side].mesh;
    uint64_t product = 1;
    for (int axis = 0; axis < instances[side].pipelineAxis; ++axis) {
      uint64_t next = product * mesh.getDegree(axis);
      spans[side].push_back({product, next});
      bounds.push_back(next);
      product = next;
    }
  }
  llvm::sort(bounds);
  bounds.erase(std::unique(bounds.begin(), bounds.end()), bounds.end());
  for (size_t index = 1; index < bounds.size(); ++index)
    if (bounds[index] % bounds[index - 1] != 0)
      return makeError(
          "the instances' groups do not nest (prefill " +
          prefill.mesh->describe() + "; decode " + decode.mesh->describe() +
          "): a window of two plans needs each group of one within a group "
          "of the other, as tp 2 within tp 8");
  if (bounds.size() > 8 * sizeof(AxisMask))
    return makeError("the window's instances cut a stage into too many axes");

  // The pieces, each named for the axes it lies in.
  std::vector<Mesh::AxisInfo> axes;
  for (size_t piece = 0; piece + 1 < bounds.size(); ++piece) {
    std::string name;
    for (unsigned side = 0; side < 2; ++side) {
      const auto &sideSpans = spans[side];
      for (unsigned axis = 0; axis < sideSpans.size(); ++axis) {
        if (sideSpans[axis].first > bounds[piece] ||
            sideSpans[axis].second < bounds[piece + 1])
          continue;
        pair.axisMaps[side][axis] |= AxisMask(1) << piece;
        const std::string &own = instances[side].mesh->getAxes()[axis].name;
        if (name != own)
          name += (name.empty() ? "" : "/") + own;
      }
    }
    axes.push_back({name, unsigned(bounds[piece + 1] / bounds[piece])});
  }
  llvm::StringMap<unsigned> uses, seen;
  for (const Mesh::AxisInfo &axis : axes)
    ++uses[axis.name];
  for (Mesh::AxisInfo &axis : axes)
    if (uses[axis.name] > 1) {
      unsigned ordinal = seen[axis.name]++;
      axis.name += "." + std::to_string(ordinal);
    }

  pair.pipelineAxis = unsigned(axes.size());
  for (unsigned side = 0; side < 2; ++side)
    pair.axisMaps[side][instances[side].pipelineAxis] = AxisMask(1)
                                                        << pair.pipelineAxis;
  axes.push_back(
      {prefill.mesh->getAxes()[prefill.pipelineAxis].name, unsigned(stages)});
  pair.mesh = Mesh(std::move(axes));
  return pair;
}

AxisMask stg::mapAxisMask(AxisMask mask, llvm::ArrayRef<AxisMask> axisMap) {
  AxisMask mapped = 0;
  for (unsigned axis = 0; axis < axisMap.size(); ++axis)
    if (mask & (AxisMask(1) << axis))
      mapped |= axisMap[axis];
  return mapped;
}

llvm::json::Array stg::describePairMesh(const PairMesh &pair) {
  llvm::json::Array instances;
  for (unsigned side = 0; side < 2; ++side)
    instances.push_back(llvm::json::Object{
        {"instance", InstanceNames[side]},
        {"stages", int64_t(pair.instanceStages[side])},
        {"first_stage", int64_t(side ? pair.instanceStages[0] : 0)},
        {"ranks_per_stage", int64_t(pair.instanceRanksPerStage[side])},
        {"replicas",
         int64_t(pair.ranksPerStage / pair.instanceRanksPerStage[side])}});
  return instances;
}
