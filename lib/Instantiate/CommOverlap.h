//===- CommOverlap.h - Tensor-parallel collectives beside their GEMMs -*- C++ -*-===//
//
// Transformer Engine's tensor-parallel communication overlap (Megatron's
// --tp-comm-overlap, on in NVIDIA's recipes wherever tp > 1 with sequence
// parallelism): the all-gather of a column-parallel GEMM's sequence-split
// input and the reduce-scatter of a row-parallel GEMM's output run in
// chunks under the GEMM (a ring exchange, one chunk per tp rank), in the
// forward and the backward pass. In a program that is a gather or a
// reduce-scatter that runs beside its GEMM, not before or after it: both
// start when the GEMM's other inputs are ready, and what reads the GEMM's
// result (or the reduce-scatter's) waits for both. The ring's first chunk,
// which runs before the GEMM can start, is not modelled.
//
//===----------------------------------------------------------------------===//

#ifndef STG_LIB_INSTANTIATE_COMMOVERLAP_H
#define STG_LIB_INSTANTIATE_COMMOVERLAP_H

#include "stg/Instantiate/Program.h"

#include "llvm/ADT/SmallVector.h"

namespace stg {

/// Whether `node` is a collective that overlaps a GEMM beside it: an
/// all-gather or reduce-scatter of the forward or backward pass over
/// exactly the tensor-parallel axes `tensorParallel`.
bool isOverlappableCollective(const ProgramNode &node,
                              AxisMask tensorParallel);

/// For a GEMM about to be added with data dependencies `deps`: replaces
/// each overlappable all-gather among them by that gather's own data
/// dependencies, and returns the gathers, which hold the GEMM's result
/// with it.
llvm::SmallVector<uint32_t, 2>
overlapGathers(const std::vector<ProgramNode> &nodes, AxisMask tensorParallel,
               llvm::SmallVectorImpl<uint32_t> &deps);

/// For an overlappable reduce-scatter about to be added with data
/// dependencies `deps`: if it reduces one GEMM's result, depends on that
/// GEMM's data dependencies instead and returns the GEMM, which holds the
/// reduce-scatter's result with it.
std::optional<uint32_t> overlapReduceScatter(
    const std::vector<ProgramNode> &nodes, llvm::SmallVectorImpl<uint32_t> &deps);

} // namespace stg

#endif // STG_LIB_INSTANTIATE_COMMOVERLAP_H
