//===- CommOverlap.h - Collectives beside the compute they feed -*- C++ -*-===//
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
// Context parallelism's ring (Megatron's default cp_comm_type, p2p) is the
// same pattern around attention: the keys and values a rank's queries need
// pass around the ring while it computes on the blocks it holds, and their
// gradients pass back while the backward computes. The program says it as
// the gathers of the keys and values over cp beside the attention kernel
// and the reduce-scatters of their gradients beside its backward (the
// ring's partial kernels and their corrections are not modelled);
// cp_comm_type all_gather gathers them before the kernel instead.
//
//===----------------------------------------------------------------------===//

#ifndef STG_LIB_INSTANTIATE_COMMOVERLAP_H
#define STG_LIB_INSTANTIATE_COMMOVERLAP_H

#include "stg/Instantiate/Program.h"

#include "llvm/ADT/SmallVector.h"

#include <optional>

namespace stg {

/// The compute a collective over `axes` may run beside: GEMMs for tensor
/// parallelism, attention (forward or backward) for context parallelism.
enum class OverlapPartner { Gemm, Attention };

/// Whether `node` is a collective that may run beside compute: an
/// all-gather or reduce-scatter of the forward or backward pass over
/// exactly the axes `axes`.
bool isOverlappableCollective(const ProgramNode &node, AxisMask axes);

/// Whether `node` is compute of the kind `partner`.
bool isOverlapPartner(const ProgramNode &node, OverlapPartner partner);

/// For a compute node about to be added with data dependencies `deps`:
/// replaces each overlappable all-gather over `axes` among them by that
/// gather's own data dependencies, and returns the gathers, which hold the
/// node's result with it.
llvm::SmallVector<uint32_t, 2>
overlapGathers(const std::vector<ProgramNode> &nodes, AxisMask axes,
               llvm::SmallVectorImpl<uint32_t> &deps);

/// For an overlappable reduce-scatter about to be added with data
/// dependencies `deps`: if it reduces the result of one node of the kind
/// `partner`, depends on that node's data dependencies instead and
/// returns the node, which holds the reduce-scatter's result with it.
std::optional<uint32_t>
overlapReduceScatter(const std::vector<ProgramNode> &nodes,
                     OverlapPartner partner,
                     llvm::SmallVectorImpl<uint32_t> &deps);

} // namespace stg

#endif // STG_LIB_INSTANTIATE_COMMOVERLAP_H
