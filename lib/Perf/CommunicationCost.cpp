//===- CommunicationCost.cpp - Collectives and messages on two tiers ------===//
//
// The time of one collective or one message by itself, on the tiers its
// group or its two ranks span: an alpha-beta model per tier (alpha per
// algorithm step, beta the per-GPU bandwidth), a group across nodes
// hierarchically, as NCCL runs it. The replay (StepEstimate.cpp) and the
// metrics (StepMetrics.cpp) price nodes with these; docs/cluster.md has the
// formulas. Kept apart from the replay because they are the model of the
// network, which changes for other reasons than the clock does. The same
// phases, without their latency, are the transfers the clock's link
// sharing divides a tier's bandwidth between (CommunicationCost.h).
//
//===----------------------------------------------------------------------===//

#include "CommunicationCost.h"

#include <algorithm>
#include <cmath>

using namespace stg;

/// Algorithm steps of one phase (a reduce-scatter or an all-gather) over
/// `n` ranks: each step costs the tier's latency once.
static double getSteps(const NetworkTier &tier, unsigned n) {
  if (n <= 1)
    return 0;
  switch (tier.algorithm) {
  case CollectiveAlgorithm::Ring:
    return n - 1;
  case CollectiveAlgorithm::Direct:
    return 1;
  case CollectiveAlgorithm::HalvingDoubling:
    return std::ceil(std::log2(double(n)));
  }
  return n - 1;
}

/// Seconds of a collective over `n` ranks of one tier; `bytes` is the
/// per-rank input buffer (an all-gather's output is n times it).
static double getFlatSeconds(CollectiveKind kind, double bytes, unsigned n,
                             const NetworkTier &tier) {
  if (n <= 1)
    return 0;
  double share = double(n - 1) / n;
  double steps = getSteps(tier, n);
  double bandwidth = tier.getEffectiveBandwidth();
  switch (kind) {
  case CollectiveKind::AllReduce:
    return 2 * share * bytes / bandwidth + 2 * steps * tier.latency;
  case CollectiveKind::AllGather:
    return (n - 1) * bytes / bandwidth + steps * tier.latency;
  case CollectiveKind::ReduceScatter:
  case CollectiveKind::AllToAll:
    return share * bytes / bandwidth + steps * tier.latency;
  }
  return 0;
}

double stg::getCollectiveMicros(CollectiveKind kind, double bytes,
                                const GroupSpan &span,
                                const SystemSpec &system) {
  const NetworkTier &up = system.scaleUp, &out = system.scaleOut;
  unsigned m = span.perNode, k = span.nodes;
  double seconds = 0;
  if (k <= 1) {
    seconds = getFlatSeconds(kind, bytes, span.members, up);
  } else if (m <= 1) {
    seconds = getFlatSeconds(kind, bytes, span.members, out);
  } else {
    // Hierarchical: NCCL's tree of rings, a phase per tier.
    switch (kind) {
    case CollectiveKind::AllReduce:
      seconds = getFlatSeconds(CollectiveKind::ReduceScatter, bytes, m, up) +
                getFlatSeconds(CollectiveKind::AllReduce, bytes / m, k, out) +
                getFlatSeconds(CollectiveKind::AllGather, bytes / m, m, up);
      break;
    case CollectiveKind::ReduceScatter:
      seconds =
          getFlatSeconds(CollectiveKind::ReduceScatter, bytes, m, up) +
          getFlatSeconds(CollectiveKind::ReduceScatter, bytes / m, k, out);
      break;
    case CollectiveKind::AllGather:
      seconds = getFlatSeconds(CollectiveKind::AllGather, bytes, k, out) +
                getFlatSeconds(CollectiveKind::AllGather, bytes * k, m, up);
      break;
    case CollectiveKind::AllToAll: {
      // Each rank's share for ranks of its node goes over scale-up, the
      // rest over its NIC, at the same time.
      double n = span.members;
      double inside = bytes * (m - 1) / n / up.getEffectiveBandwidth() +
                      getSteps(up, m) * up.latency;
      double across = bytes * (n - m) / n / out.getEffectiveBandwidth() +
                      getSteps(out, k) * out.latency;
      seconds = std::max(inside, across);
      break;
    }
    }
  }
  return seconds * 1e6;
}

double stg::getMessageMicros(double bytes, bool acrossNodes,
                             const SystemSpec &system) {
  const NetworkTier &tier = acrossNodes ? system.scaleOut : system.scaleUp;
  return (bytes / tier.getEffectiveBandwidth() + tier.latency) * 1e6;
}

/// The part of getFlatSeconds that moves bytes, without the latency.
static double getFlatBandwidthSeconds(CollectiveKind kind, double bytes,
                                      unsigned n, const NetworkTier &tier) {
  if (n <= 1)
    return 0;
  double share = double(n - 1) / n;
  double bandwidth = tier.getEffectiveBandwidth();
  switch (kind) {
  case CollectiveKind::AllReduce:
    return 2 * share * bytes / bandwidth;
  case CollectiveKind::AllGather:
    return (n - 1) * bytes / bandwidth;
  case CollectiveKind::ReduceScatter:
  case CollectiveKind::AllToAll:
    return share * bytes / bandwidth;
  }
  return 0;
}

void stg::getCollectiveTransfers(CollectiveKind kind, double bytes,
                                 const GroupSpan &span,
                                 const SystemSpec &system,
                                 llvm::SmallVectorImpl<TierTransfer> &into) {
  const NetworkTier &up = system.scaleUp, &out = system.scaleOut;
  unsigned m = span.perNode, k = span.nodes;
  auto add = [&](LinkTier tier, double seconds) {
    if (seconds > 0)
      into.push_back({tier, seconds * 1e6});
  };
  if (k <= 1) {
    add(ScaleUpTier, getFlatBandwidthSeconds(kind, bytes, span.members, up));
    return;
  }
  if (m <= 1) {
    add(ScaleOutTier, getFlatBandwidthSeconds(kind, bytes, span.members, out));
    return;
  }
  // The phases of getCollectiveMicros's hierarchical collectives, in order.
  switch (kind) {
  case CollectiveKind::AllReduce:
    add(ScaleUpTier,
        getFlatBandwidthSeconds(CollectiveKind::ReduceScatter, bytes, m, up));
    add(ScaleOutTier,
        getFlatBandwidthSeconds(CollectiveKind::AllReduce, bytes / m, k, out));
    add(ScaleUpTier,
        getFlatBandwidthSeconds(CollectiveKind::AllGather, bytes / m, m, up));
    return;
  case CollectiveKind::ReduceScatter:
    add(ScaleUpTier,
        getFlatBandwidthSeconds(CollectiveKind::ReduceScatter, bytes, m, up));
    add(ScaleOutTier, getFlatBandwidthSeconds(CollectiveKind::ReduceScatter,
                                              bytes / m, k, out));
    return;
  case CollectiveKind::AllGather:
    add(ScaleOutTier,
        getFlatBandwidthSeconds(CollectiveKind::AllGather, bytes, k, out));
    add(ScaleUpTier,
        getFlatBandwidthSeconds(CollectiveKind::AllGather, bytes * k, m, up));
    return;
  case CollectiveKind::AllToAll: {
    // Both tiers at once, the longer bounding it: counted on that tier
    // only (the other's bytes finish first, whoever shares it).
    double n = span.members;
    double insideBytes = bytes * (m - 1) / n / up.getEffectiveBandwidth();
    double acrossBytes = bytes * (n - m) / n / out.getEffectiveBandwidth();
    double inside = insideBytes + getSteps(up, m) * up.latency;
    double across = acrossBytes + getSteps(out, k) * out.latency;
    if (inside > across)
      add(ScaleUpTier, insideBytes);
    else
      add(ScaleOutTier, acrossBytes);
    return;
  }
  }
}

void stg::getMessageTransfers(double bytes, bool acrossNodes,
                              const SystemSpec &system,
                              llvm::SmallVectorImpl<TierTransfer> &into) {
  const NetworkTier &tier = acrossNodes ? system.scaleOut : system.scaleUp;
  double seconds = bytes / tier.getEffectiveBandwidth();
  if (seconds > 0)
    into.push_back({acrossNodes ? ScaleOutTier : ScaleUpTier, seconds * 1e6});
}
