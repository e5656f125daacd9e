//===- CommOverlap.cpp - Collectives beside the compute they feed ---------===//

#include "CommOverlap.h"

#include "llvm/ADT/STLExtras.h"

using namespace stg;

bool stg::isOverlappableCollective(const ProgramNode &node, AxisMask axes) {
  return node.kind == ProgramNodeKind::Collective && axes &&
         node.group == axes &&
         (node.phase == Phase::Forward || node.phase == Phase::Backward) &&
         (node.commType == CollectiveKind::AllGather ||
          node.commType == CollectiveKind::ReduceScatter);
}

bool stg::isOverlapPartner(const ProgramNode &node, OverlapPartner partner) {
  if (node.kind != ProgramNodeKind::Compute)
    return false;
  if (partner == OverlapPartner::Gemm)
    return node.gemm.isGemm();
  // A fused kernel's, not an unfused attention's several kernels.
  llvm::StringRef type = node.opType;
  return type == "attention" || type == "attention_backward";
}

llvm::SmallVector<uint32_t, 2>
stg::overlapGathers(const std::vector<ProgramNode> &nodes, AxisMask axes,
                    llvm::SmallVectorImpl<uint32_t> &deps) {
  llvm::SmallVector<uint32_t, 2> gathers;
  llvm::SmallVector<uint32_t, 4> replaced;
  for (uint32_t dep : deps) {
    const ProgramNode &node = nodes[dep];
    if (isOverlappableCollective(node, axes) &&
        node.commType == CollectiveKind::AllGather) {
      gathers.push_back(dep);
      replaced.append(node.dataDeps.begin(), node.dataDeps.end());
    } else {
      replaced.push_back(dep);
    }
  }
  if (gathers.empty())
    return gathers;
  // A dependency given twice (the gather's input was also an operand) is
  // one edge.
  deps.clear();
  for (uint32_t dep : replaced)
    if (!llvm::is_contained(deps, dep))
      deps.push_back(dep);
  return gathers;
}

std::optional<uint32_t>
stg::overlapReduceScatter(const std::vector<ProgramNode> &nodes,
                          OverlapPartner partner,
                          llvm::SmallVectorImpl<uint32_t> &deps) {
  if (deps.size() != 1)
    return std::nullopt;
  uint32_t producer = deps.front();
  const ProgramNode &node = nodes[producer];
  if (!isOverlapPartner(node, partner))
    return std::nullopt;
  deps.assign(node.dataDeps.begin(), node.dataDeps.end());
  return producer;
}
