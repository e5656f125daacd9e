//===- StageMemory.h - Peak memory of one rank of a stage ---------*- C++ -*-===//
//
// What a rank of one pipeline stage holds, from the instances placed on it:
// the local shards of the weights its ops read (a repeat's weights once per
// repetition it runs), for training a gradient per weight element and
// Adam's 12 bytes per element it steps (fp32 master weights and two
// moments; a slice of the shard with a distributed optimizer), its
// `state` tensors, and the forward values its backward ops read, for as
// many micro-batches as the schedule keeps in flight. Recomputation lowers
// the last (the backward reads replayed values); FSDP shrinks the shards.
// Inference keeps no values for a backward: its activations are the
// largest working set of one op, and its state holds, for every
// micro-batch's sequences, the KV cache the step reads (decode) or leaves
// behind (the keys and values a prefill computes).
//
//===----------------------------------------------------------------------===//

#ifndef STG_LIB_INSTANTIATE_STAGEMEMORY_H
#define STG_LIB_INSTANTIATE_STAGEMEMORY_H

// Protobuf's headers first: GiNaC's CLN defines a `Mutable` macro that
// breaks them.
#include "stg/Instantiate/Program.h"

#include "stg/Instantiate/Instantiate.h"

#include "stg/Instantiate/OpNumbers.h"
#include "Placement.h"

namespace stg {

/// `placementName` names the placement (stages, chunks, the stage, the
/// chunks' layer counts) for `numbers` to keep what a training stage sums
/// (OpNumberCache::findStageMemoryKeys).
std::optional<StageMemory>
computeStageMemory(const Module &module, const Placement &placement,
                   OpNumberCache &numbers, unsigned stage,
                   double inFlightMicrobatches, unsigned numMicrobatches,
                   bool training, MemoryAccounting accounting,
                   const std::vector<unsigned> &placementName);

} // namespace stg

#endif // STG_LIB_INSTANTIATE_STAGEMEMORY_H
