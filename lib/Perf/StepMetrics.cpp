//===- StepMetrics.cpp - CCL-Bench's metrics of an estimated step ---------===//
//
// One pass over each stage's schedule steps counts FLOPs and prices the
// collectives as the estimate does (the stage's first rank stands for it);
// the times come from the estimate's per-stage sums.
//
//===----------------------------------------------------------------------===//

#include "stg/Perf/StepMetrics.h"

#include <algorithm>
#include <climits>
#include <map>

using namespace stg;

std::optional<double> CollectiveTraffic::getBusBandwidth() const {
  if (count == 0 || micros <= 0)
    return std::nullopt;
  return busBytes / (micros / 1e6);
}

/// The bytes one rank sends over the links in a collective of `kind` on a
/// buffer of `bytes` over `members` ranks (NCCL's bus-bandwidth factors).
static double getBusBytes(CollectiveKind kind, double bytes, unsigned members) {
  double n = members;
  switch (kind) {
  case CollectiveKind::AllReduce:
    return 2 * (n - 1) / n * bytes;
  case CollectiveKind::AllGather:
    return (n - 1) * bytes; // The buffer is this rank's part.
  case CollectiveKind::ReduceScatter:
  case CollectiveKind::AllToAll:
    return (n - 1) / n * bytes;
  }
  return 0;
}

StepMetrics stg::computeStepMetrics(const ProgramSet &programs,
                                    const StepEstimate &estimate,
                                    const SystemSpec &system,
                                    const StepWork &work) {
  StepMetrics metrics;
  metrics.stepMicros = estimate.stepMicros;
  metrics.gpus = programs.mesh.getNumRanks();
  metrics.modelFlops = work.modelFlops;
  size_t numStages = std::max<size_t>(1, programs.stages.size());
  double ranksPerStage = double(metrics.gpus) / numStages;

  for (unsigned stage = 0; stage < programs.stages.size(); ++stage) {
    unsigned rank = programs.getPeerRank(0, stage);
    std::map<AxisMask, GroupSpan> spans;
    double flops = 0;
    forEachExecutedNode(programs.stages[stage], [&](const ProgramNode &node) {
      if (node.kind == ProgramNodeKind::Compute &&
          node.phase != Phase::Optimizer)
        flops += double(node.numOps);
      if (node.kind != ProgramNodeKind::Collective)
        return;
      auto [it, inserted] = spans.try_emplace(node.group);
      if (inserted)
        it->second = getGroupSpan(programs.mesh, system, rank, node.group);
      if (it->second.members <= 1)
        return; // A group of one sends nothing.
      CollectiveTraffic &traffic = metrics.collectives[unsigned(node.commType)];
      double bytes = double(node.commBytes);
      ++traffic.count;
      traffic.busBytes += getBusBytes(node.commType, bytes, it->second.members);
      traffic.micros += getCollectiveMicros(node, it->second, system);
    });
    metrics.hardwareFlops += flops * ranksPerStage;
  }
  for (CollectiveTraffic &traffic : metrics.collectives) {
    traffic.busBytes /= numStages;
    traffic.micros /= numStages;
  }

  double step = estimate.stepMicros;
  double fractionSum = 0, overlapSum = 0, bubbleSum = 0;
  unsigned communicating = 0;
  std::optional<double> mostActive, leastActive;
  for (const StageTime &time : estimate.stages) {
    double compute = time.computeMicros, comm = time.communicationMicros;
    // Compute idle, not for other stages: waiting on collectives. It
    // cannot exceed the communication that ran.
    double exposed =
        std::clamp(step - compute - time.pipelineWaitMicros, 0.0, comm);
    metrics.exposedCommunicationMicros += exposed;
    if (compute + comm > 0)
      fractionSum += comm / (compute + comm);
    if (comm > 0) {
      overlapSum += std::clamp((comm - exposed) / comm, 0.0, 1.0);
      ++communicating;
    }
    if (step > 0)
      bubbleSum += std::min(1.0, time.pipelineWaitMicros / step);
    double active = compute + exposed;
    mostActive = std::max(mostActive.value_or(active), active);
    leastActive = std::min(leastActive.value_or(active), active);
  }
  double stages = std::max<size_t>(1, estimate.stages.size());
  metrics.exposedCommunicationMicros /= stages;
  metrics.communicationFraction = fractionSum / stages;
  metrics.bubbleFraction = bubbleSum / stages;
  if (communicating)
    metrics.computeCommOverlap = overlapSum / communicating;
  if (mostActive && *leastActive > 0)
    metrics.loadImbalanceRatio = *mostActive / *leastActive;
  else if (mostActive && *mostActive == 0)
    metrics.loadImbalanceRatio = 1.0; // All idle: balanced.

  double seconds = step / 1e6;
  double capacity = system.device.peakFlops * metrics.gpus * seconds;
  if (capacity > 0) {
    metrics.mfu = metrics.modelFlops / capacity;
    metrics.hfu = metrics.hardwareFlops / capacity;
  }
  if (work.tokens > 0 && seconds > 0 && metrics.gpus > 0)
    metrics.tokensPerSecondPerGPU = work.tokens / seconds / metrics.gpus;
  if (work.phase == StepPhase::Prefill)
    metrics.ttftMicros = step;
  else if (work.phase == StepPhase::Decode)
    metrics.tpotMicros = step;
  return metrics;
}

SystemSpec stg::doubleResource(const SystemSpec &system,
                               ClusterResource resource) {
  SystemSpec doubled = system;
  switch (resource) {
  case ClusterResource::ScaleUpBandwidth:
    doubled.scaleUp.bandwidth *= 2;
    break;
  case ClusterResource::ScaleOutBandwidth:
    doubled.scaleOut.bandwidth *= 2;
    break;
  case ClusterResource::ScaleUpDomain:
    doubled.gpusPerNode = unsigned(
        std::min<uint64_t>(uint64_t(system.gpusPerNode) * 2, UINT_MAX));
    break;
  }
  return doubled;
}

llvm::Expected<ResourceUtility>
stg::estimateResourceUtility(const ProgramSet &programs,
                             const SystemSpec &system, double baselineMicros) {
  ResourceUtility utility;
  struct Target {
    ClusterResource resource;
    double *fraction, *micros;
  };
  for (Target target :
       {Target{ClusterResource::ScaleUpBandwidth, &utility.scaleUpBandwidth,
               &utility.scaleUpBandwidthMicros},
        Target{ClusterResource::ScaleOutBandwidth, &utility.scaleOutBandwidth,
               &utility.scaleOutBandwidthMicros},
        Target{ClusterResource::ScaleUpDomain, &utility.scaleUpDomain,
               &utility.scaleUpDomainMicros}}) {
    llvm::Expected<StepEstimate> changed =
        estimateStep(programs, doubleResource(system, target.resource));
    if (!changed)
      return changed.takeError();
    *target.micros = changed->stepMicros;
    if (baselineMicros > 0)
      *target.fraction =
          (baselineMicros - changed->stepMicros) / baselineMicros;
  }
  return utility;
}
