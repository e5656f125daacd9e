//===- CommunicationCost.h - Where a collective's time goes ------*- C++
//-*-===//
//
// The links a collective or a message uses, for the step clock's link
// sharing (StepSimulation.h): the part of its time that moves bytes over a
// tier at the tier's full bandwidth, phase by phase, in the order the
// phases run. The rest of its time (getCollectiveMicros less these) is
// latency, which streams that share the tier do not slow. Private to
// lib/Perf: the public times are in stg/Perf/StepEstimate.h.
//
//===----------------------------------------------------------------------===//

#ifndef STG_LIB_PERF_COMMUNICATIONCOST_H
#define STG_LIB_PERF_COMMUNICATIONCOST_H

#include "stg/Perf/StepEstimate.h"

#include "llvm/ADT/SmallVector.h"

#include <cstdint>

namespace stg {

/// A rank's links: its share of the node's switch (NVLink) and of the
/// node's NICs.
enum LinkTier : uint8_t { ScaleUpTier, ScaleOutTier, NumLinkTiers };

/// Microseconds of bytes moving over one tier at its full bandwidth.
struct TierTransfer {
  LinkTier tier = ScaleUpTier;
  double micros = 0;
};

/// The transfers of getCollectiveMicros's collective, in the order its
/// phases run (at most three: a hierarchical all-reduce reduces in the
/// node, across nodes, and gathers in the node), appended to `into`.
void getCollectiveTransfers(CollectiveKind kind, double bytes,
                            const GroupSpan &span, const SystemSpec &system,
                            llvm::SmallVectorImpl<TierTransfer> &into);

/// The transfers of a collective node: an expert exchange as DeepEP moves
/// it (getCollectiveMicros of the node), any other as above.
void getCollectiveTransfers(const ProgramNode &node, const GroupSpan &span,
                            const SystemSpec &system,
                            llvm::SmallVectorImpl<TierTransfer> &into);

/// The transfer of getMessageMicros's message, appended to `into`.
void getMessageTransfers(double bytes, bool acrossNodes,
                         const SystemSpec &system,
                         llvm::SmallVectorImpl<TierTransfer> &into);

} // namespace stg

#endif // STG_LIB_PERF_COMMUNICATIONCOST_H
