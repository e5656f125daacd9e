//===- CommOverlap.cpp - Tensor-parallel collectives beside their GEMMs ---===//

#include "CommOverlap.h"

#include "llvm/ADT/STLExtras.h"

using namespace stg;

bool stg::isOverlappableCollective(const ProgramNode &node,
                                   AxisMask tensorParallel) {
  return node.kind == ProgramNodeKind::Collective && tensorParallel &&
         node.group == tensorParallel &&
         (node.phase == Phase::Forward || node.phase == Phase::Backward) &&
         (node.commType == CollectiveKind::AllGather ||
          node.commType == CollectiveKind::ReduceScatter);
}

llvm::SmallVector<uint32_t, 2>
stg::overlapGathers(const std::vector<ProgramNode> &nodes,
                    AxisMask tensorParallel,
                    llvm::SmallVectorImpl<uint32_t> &deps) {
  llvm::SmallVector<uint32_t, 2> gathers;
  llvm::SmallVector<uint32_t, 4> replaced;
  for (uint32_t dep : deps) {
    const ProgramNode &node = nodes[dep];
    if (isOverlappableCollective(node, tensorParallel) &&
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
                          llvm::SmallVectorImpl<uint32_t> &deps) {
  if (deps.size() != 1)
    return std::nullopt;
  uint32_t gemm = deps.front();
  const ProgramNode &node = nodes[gemm];
  if (node.kind != ProgramNodeKind::Compute || !node.gemm.isGemm())
    return std::nullopt;
  deps.assign(node.dataDeps.begin(), node.dataDeps.end());
  return gemm;
}
