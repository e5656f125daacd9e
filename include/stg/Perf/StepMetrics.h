//===- StepMetrics.h - CCL-Bench's metrics of an estimated step -*- C++ -*-===//
//
// What a step estimate means in the terms CCL-Bench reports a trace in
// (ccl-bench-paper.txt, section 4 and appendix D), so that a plan priced by
// stagec and a run profiled on hardware can be compared metric by metric:
// the step time; model and hardware FLOPs utilisation; tokens per second
// per GPU; the share of GPU time in communication, how much of it is
// exposed, how much compute hides; the pipeline bubble; the imbalance
// between stages; the bus bandwidth each collective kind reaches; for
// inference, the time to the first token and per output token. And the
// utility of a resource (section 4.2): the fraction of the step time that
// doubling scale-up bandwidth, scale-out bandwidth or the scale-up domain
// would save, each by estimating the step again on the changed cluster.
//
// The estimate gives each stage's busy and waiting times, not when each
// node ran, so the time-based metrics come from those sums: a stage's
// exposed communication is the step less its compute and its pipeline
// waits (the time its compute stream waited on collectives), and its
// communication time is the busy time of its communication streams added
// up. CCL-Bench merges the intervals of concurrent collectives instead, so
// where two communication streams run at once stagec counts that time
// twice: its overlap then reads high. docs/metrics.md has each definition.
//
// Everything here is a fraction or a time in microseconds; the report and
// the JSON convert to CCL-Bench's units (per cent, seconds, GB/s).
//
//===----------------------------------------------------------------------===//

#ifndef STG_PERF_STEPMETRICS_H
#define STG_PERF_STEPMETRICS_H

#include "stg/Instantiate/Program.h"
#include "stg/Perf/StepEstimate.h"
#include "stg/Perf/System.h"

#include "llvm/Support/Error.h"

#include <array>
#include <optional>

namespace stg {

/// What a step does: training, or one of inference's two phases.
enum class StepPhase : uint8_t { Training, Prefill, Decode };

/// What the programs alone do not say about a step: how much of its work
/// is the model's, and how many tokens it moves along.
struct StepWork {
  StepPhase phase = StepPhase::Training;
  /// The model FLOPs of the whole step on all GPUs: every op of the model
  /// once, forward and backward, without recomputation or the optimizer
  /// (ModelFlops.h in Driver computes them for stagec; stage-search has
  /// them from ModelFacts).
  double modelFlops = 0;
  /// Tokens the step processes (sequences times their length; one per
  /// sequence in a decode step); 0 when not known.
  double tokens = 0;
};

constexpr unsigned NumCollectiveKinds = 4;

/// One collective kind's traffic in a step, per rank (the mean over ranks).
struct CollectiveTraffic {
  unsigned count = 0;
  /// What each rank sends over the links: NCCL's bus bytes (all-reduce
  /// 2(n-1)/n of its buffer, all-gather n-1 times its part, reduce-scatter
  /// and all-to-all (n-1)/n of their buffer).
  double busBytes = 0;
  double micros = 0; ///< The alpha-beta time the estimate gives them.

  /// Bus bytes per second: NCCL's bus bandwidth, which CCL-Bench reports as
  /// `bw_<kind>`; nothing when the step has none of them.
  std::optional<double> getBusBandwidth() const;
};

struct StepMetrics {
  double stepMicros = 0;
  unsigned gpus = 0;
  double modelFlops = 0;
  /// The FLOPs the GPUs execute, forward and backward: recomputation and
  /// work repeated on tensor-parallel ranks included, optimizer not.
  double hardwareFlops = 0;
  double mfu = 0; ///< modelFlops / (peak x gpus x step).
  double hfu = 0; ///< hardwareFlops / (peak x gpus x step).
  std::optional<double> tokensPerSecondPerGPU;
  /// Communication busy time over compute and communication busy time,
  /// the mean over ranks.
  double communicationFraction = 0;
  /// Per rank (mean): the time compute waits on collectives.
  double exposedCommunicationMicros = 0;
  /// The fraction of communication time compute hides, the mean over the
  /// ranks that communicate; nothing if none does.
  std::optional<double> computeCommOverlap;
  /// The mean over ranks of the step spent waiting for other stages.
  double bubbleFraction = 0;
  /// The most busy stage's active time (compute and exposed communication)
  /// over the least busy one's; nothing if one is idle.
  std::optional<double> loadImbalanceRatio;
  /// Indexed by CollectiveKind.
  std::array<CollectiveTraffic, NumCollectiveKinds> collectives;
  /// Inference: the prefill step is the time to the first token, a decode
  /// step the time per output token.
  std::optional<double> ttftMicros, tpotMicros;
};

/// The metrics of `estimate`, the step of `programs` on `system`. Cheap
/// (one pass over the nodes of each schedule step), so a plan search can
/// call it for every plan.
StepMetrics computeStepMetrics(const ProgramSet &programs,
                               const StepEstimate &estimate,
                               const SystemSpec &system, const StepWork &work);

/// The resources of CCL-Bench's utility metric.
enum class ClusterResource : uint8_t {
  ScaleUpBandwidth,
  ScaleOutBandwidth,
  ScaleUpDomain, ///< GPUs per node.
};

/// `system` with `resource` doubled, all else as it was.
SystemSpec doubleResource(const SystemSpec &system, ClusterResource resource);

/// The fraction of the step time each doubling saves: (T - T') / T.
struct ResourceUtility {
  double scaleUpBandwidth = 0;
  double scaleOutBandwidth = 0;
  double scaleUpDomain = 0;
  /// The step times T' behind them, in microseconds.
  double scaleUpBandwidthMicros = 0;
  double scaleOutBandwidthMicros = 0;
  double scaleUpDomainMicros = 0;
};

/// Estimates the step of `programs` on `system` with each resource doubled
/// and compares with `baselineMicros`, the step on `system`.
llvm::Expected<ResourceUtility>
estimateResourceUtility(const ProgramSet &programs, const SystemSpec &system,
                        double baselineMicros);

} // namespace stg

#endif // STG_PERF_STEPMETRICS_H
