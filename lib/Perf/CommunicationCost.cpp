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
#include <utility>

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

namespace {
/// A collective's time on one tier: the seconds it moves bytes (which link
/// sharing divides) and its latency.
struct FlatTime {
  double transfer = 0, latency = 0;
  double total() const { return transfer + latency; }
};
} // namespace

/// A collective over `n` ranks of one tier; `bytes` is the per-rank input
/// buffer (an all-gather's output is n times it). An all-reduce runs as
/// NCCL picks it: on a tier whose switches reduce, NVLS (the buffer once
/// each way at its bandwidth, after its latency) where that is faster than
/// the ring (from about 12 MB on eight H100s, 39 MB on four, never on two).
static FlatTime getFlatTime(CollectiveKind kind, double bytes, unsigned n,
                            const NetworkTier &tier) {
  if (n <= 1)
    return {};
  double share = double(n - 1) / n;
  double steps = getSteps(tier, n);
  double bandwidth = tier.getEffectiveBandwidth();
  switch (kind) {
  case CollectiveKind::AllReduce: {
    FlatTime ring{2 * share * bytes / bandwidth, 2 * steps * tier.latency};
    if (!tier.inNetworkReduction || n <= 2)
      return ring;
    FlatTime nvls{bytes / (NvlsBandwidthShare * tier.bandwidth),
                  NvlsLatencySeconds};
    return nvls.total() < ring.total() ? nvls : ring;
  }
  case CollectiveKind::AllGather:
    return {(n - 1) * bytes / bandwidth, steps * tier.latency};
  case CollectiveKind::ReduceScatter:
  case CollectiveKind::AllToAll:
    return {share * bytes / bandwidth, steps * tier.latency};
  }
  return {};
}

/// Seconds of a collective over `n` ranks of one tier.
static double getFlatSeconds(CollectiveKind kind, double bytes, unsigned n,
                             const NetworkTier &tier) {
  return getFlatTime(kind, bytes, n, tier).total();
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

/// The chance that none of a token's `copies` experts, drawn without
/// repeats from `experts`, is among the `held` experts of one rank or node.
static double getMissChance(unsigned copies, unsigned experts, unsigned held) {
  double chance = 1;
  for (unsigned i = 0; i < copies; ++i) {
    if (experts <= held + i)
      return 0;
    chance *= double(experts - held - i) / double(experts - i);
  }
  return chance;
}

namespace {
/// An expert exchange's bytes on each tier, and its latency.
struct ExchangeLoad {
  double insideBytes = 0, acrossBytes = 0, latency = 0;

  /// Seconds of the bytes on scale-up and on scale-out, which move at once.
  std::pair<double, double> getSeconds(const SystemSpec &system) const {
    return {insideBytes / system.scaleUp.getEffectiveBandwidth(),
            acrossBytes / system.scaleOut.getEffectiveBandwidth()};
  }
};
} // namespace

/// What DeepEP moves for a rank whose buffer holds `bytes` of token copies
/// (docs/cluster.md, "Expert exchanges"). Normal kernels send a token once
/// to each other node holding one of its experts and once to each rank of
/// its own node that does; a receiving node's rank forwards it over
/// NVLink to the ranks of that node that need it. Low-latency kernels send
/// each copy to its expert's rank. Either takes one step on each tier.
static ExchangeLoad getExchangeLoad(ExpertExchange mode, double bytes,
                                    unsigned copies, unsigned experts,
                                    const GroupSpan &span,
                                    const SystemSpec &system) {
  ExchangeLoad load;
  double n = span.members, m = span.perNode, k = span.nodes;
  // Experts that do not split evenly over the group: every copy, as NCCL.
  if (mode == ExpertExchange::LowLatency || !copies || !experts ||
      experts % span.members) {
    load.insideBytes = bytes * (m - 1) / n;
    load.acrossBytes = bytes * (n - m) / n;
  } else {
    double token = bytes / copies;
    unsigned perRank = experts / span.members;
    double rankHit = 1 - getMissChance(copies, experts, perRank);
    double nodeHit = 1 - getMissChance(copies, experts, perRank * span.perNode);
    load.acrossBytes = token * (k - 1) * nodeHit;
    // The node's own ranks, then the tokens that crossed to this node,
    // each to the ranks of the node its experts are on but the receiver.
    double forwarded =
        nodeHit > 0 ? load.acrossBytes * (m - 1) * rankHit / nodeHit : 0;
    load.insideBytes = token * (m - 1) * rankHit + forwarded;
  }
  if (m > 1)
    load.latency = system.scaleUp.latency;
  if (k > 1)
    load.latency = std::max(load.latency, system.scaleOut.latency);
  return load;
}

double stg::getCollectiveMicros(const ProgramNode &node, const GroupSpan &span,
                                const SystemSpec &system) {
  if (node.expertExchange == ExpertExchange::AllToAll || span.members <= 1)
    return getCollectiveMicros(node.commType, double(node.commBytes), span,
                               system);
  ExchangeLoad load =
      getExchangeLoad(node.expertExchange, double(node.commBytes),
                      node.tokenCopies, node.experts, span, system);
  auto [inside, across] = load.getSeconds(system);
  return (std::max(inside, across) + load.latency) * 1e6;
}

double stg::getMessageMicros(double bytes, bool acrossNodes,
                             const SystemSpec &system) {
  const NetworkTier &tier = acrossNodes ? system.scaleOut : system.scaleUp;
  return (bytes / tier.getEffectiveBandwidth() + tier.latency) * 1e6;
}

/// The part of getFlatSeconds that moves bytes, without the latency.
static double getFlatBandwidthSeconds(CollectiveKind kind, double bytes,
                                      unsigned n, const NetworkTier &tier) {
  return getFlatTime(kind, bytes, n, tier).transfer;
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

void stg::getCollectiveTransfers(const ProgramNode &node, const GroupSpan &span,
                                 const SystemSpec &system,
                                 llvm::SmallVectorImpl<TierTransfer> &into) {
  if (node.expertExchange == ExpertExchange::AllToAll || span.members <= 1) {
    getCollectiveTransfers(node.commType, double(node.commBytes), span, system,
                           into);
    return;
  }
  // As an all-to-all: the tier that bounds it, counted on that tier alone.
  ExchangeLoad load =
      getExchangeLoad(node.expertExchange, double(node.commBytes),
                      node.tokenCopies, node.experts, span, system);
  auto [inside, across] = load.getSeconds(system);
  if (inside > across && inside > 0)
    into.push_back({ScaleUpTier, inside * 1e6});
  else if (across > 0)
    into.push_back({ScaleOutTier, across * 1e6});
}

void stg::getMessageTransfers(double bytes, bool acrossNodes,
                              const SystemSpec &system,
                              llvm::SmallVectorImpl<TierTransfer> &into) {
  const NetworkTier &tier = acrossNodes ? system.scaleOut : system.scaleUp;
  double seconds = bytes / tier.getEffectiveBandwidth();
  if (seconds > 0)
    into.push_back({acrossNodes ? ScaleOutTier : ScaleUpTier, seconds * 1e6});
}
