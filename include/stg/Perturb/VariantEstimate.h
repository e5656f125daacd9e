//===- VariantEstimate.h - Step times of perturbed variants -----*- C++ -*-===//
//
// What-if distributions (docs/perturbation.md): the step time of K
// perturbed variants of a plan, estimated without writing them, so that a
// thousand variants of a thousand ranks take seconds, MLSynth's straggler
// experiments in one command.
//
// The step estimate (StepEstimate.h) replays one program per pipeline
// stage, which every rank of the stage runs; a variant slows particular
// ranks. The programs a variant's estimate replays come from the clean ones:
//
//   Replicas. Ranks meet at the collectives of the forward and backward
//   passes (tensor, context, expert parallelism; data parallelism too
//   under FSDP, whose weight gathers run there) and at the pipeline's
//   messages. The ranks that differ only on those axes and the pipeline
//   axis form a replica, a model copy that runs in step; replicas meet
//   only at the gradient collectives, which end the step, so the step ends
//   when the slowest replica does.
//
//   Within a replica, a stage's node takes the longest of its ranks'
//   perturbed durations, and the longest of their delays before it: the
//   slowest rank sets the pace at the next collective. With one perturbed
//   rank the programs are exactly its written variant's.
//
//   A variant's step is the longest of its perturbed replicas' estimates,
//   and the clean step if a replica is untouched.
//
// Only changed nodes are copied (a per-thread copy of the clean programs
// is edited in place and restored; a stage gets a new program only where a
// delay node goes in), the schedule steps are kept, so each estimate
// replays step by step as the clean one does, and replicas with the same
// changes are estimated once. Variants run in parallel; each one's draws
// depend only on the seed and its index, so the results do not depend on
// the number of threads.
//
//===----------------------------------------------------------------------===//

#ifndef STG_PERTURB_VARIANTESTIMATE_H
#define STG_PERTURB_VARIANTESTIMATE_H

#include "stg/Perf/StepEstimate.h"
#include "stg/Perf/System.h"
#include "stg/Perturb/Perturbation.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <string>
#include <vector>

namespace stg {

/// The changes of one variant to one stage of a replica: per node, the
/// longest factor and delay of the replica's ranks of that stage.
struct StageChanges {
  unsigned stage = 0;
  std::vector<NodeChange> nodes; ///< By ascending node; `rule` is 0.
};

/// The changes of one variant to one replica, by ascending stage.
struct ReplicaChanges {
  unsigned replica = 0;
  std::vector<StageChanges> stages;
};

class VariantEstimator {
public:
  /// `programs` are the clean programs, with durations and the spec's scale
  /// applied (folded or not), and `system` the cluster to estimate on.
  VariantEstimator(const PerturbationSpec &spec, const ProgramSet &programs,
                   const SystemSpec &system);

  /// The mesh axes of the collectives of the forward and backward passes.
  AxisMask getLockstepAxes() const { return lockstepAxes; }
  /// The axes of a replica: the lockstep ones and those stages send along.
  AxisMask getReplicaAxes() const;
  unsigned getNumReplicas() const { return numReplicas; }
  /// The replica of `rank`: its group over the lockstep and pipeline axes.
  unsigned getReplica(unsigned rank) const;

  /// The changes of `variant` to each replica it perturbs, by ascending
  /// replica. Thread-safe.
  std::vector<ReplicaChanges> drawReplicas(unsigned variant) const;

  /// The stage programs a replica's estimate replays: the clean programs
  /// with `changes` made, their schedule steps kept.
  ProgramSet getReplicaPrograms(const ReplicaChanges &changes) const;

  const ProgramSet &getPrograms() const { return programs; }
  const SystemSpec &getSystem() const { return system; }

private:
  const ProgramSet &programs;
  const SystemSpec &system;
  PerturbationDraws draws;
  AxisMask lockstepAxes = 0;
  unsigned numReplicas = 1;
};

/// The step times of K variants against the clean step.
struct VariantSteps {
  std::string spec; ///< The spec's path.
  uint64_t seed = 0;
  double scale = 1.0;
  unsigned gpus = 0;                 ///< Ranks of the plan.
  unsigned replicas = 0;             ///< VariantEstimator::getNumReplicas.
  double cleanMicros = 0;            ///< The clean (scaled) programs' step.
  std::vector<double> variantMicros; ///< By variant index.

  /// Each variant's slowdown relative to the clean step.
  std::vector<double> getSlowdowns() const;
  /// The GPU-seconds each variant wastes against the clean step.
  std::vector<double> getWastedGpuSeconds() const;
  /// The share of the variants' GPU time spent waiting: all lost time over
  /// all step time.
  double getWastedFraction() const;
};

struct VariantEstimateOptions {
  unsigned jobs = 0; ///< Threads; 0: one per core.
  /// Called with (variants done, total) as they complete, one call at a
  /// time.
  llvm::function_ref<void(unsigned, unsigned)> progress;
};

/// Estimates variants 0 .. `count` - 1 of `spec` on the clean `programs`
/// (with durations; the spec's scale is applied here). `system`'s device
/// prices nic_slowdown delays, as for written variants.
llvm::Expected<VariantSteps>
estimateVariants(const PerturbationSpec &spec, const ProgramSet &programs,
                 const SystemSpec &system, unsigned count,
                 const VariantEstimateOptions &options = {});

/// Nearest-rank percentiles of a sample: the p-th percentile of n values is
/// the ceil(p n / 100)-th smallest (the smallest for p = 0), always one of
/// the values. The median is the 50th.
struct Percentiles {
  double min = 0, median = 0, p90 = 0, p99 = 0, max = 0;
  double mean = 0;
};

/// The percentiles of `values` (not empty).
Percentiles getPercentiles(llvm::ArrayRef<double> values);

} // namespace stg

#endif // STG_PERTURB_VARIANTESTIMATE_H
