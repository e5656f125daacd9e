//===- StepEstimate.h - The step time of a plan on a system -----*- C++ -*-===//
//
// A discrete-event replay of the stage programs, the way ASTRA-sim's
// workload layer issues them, on a two-tier cluster (System.h). Per rank
// there are four streams, as the frameworks run them: compute; the
// collectives of the forward and backward passes (tensor, context and
// expert parallelism, on the critical path through their dependencies);
// the gradient collectives of data parallelism and the optimizer, which
// overlap the backward; and the pipeline's sends. Each stream runs its
// ready node with the lowest id.
//
// A compute node takes its duration_micros (from the device model), longer
// beside a collective that holds some of the device's SMs
// (ProgramNode::heldUnits: DeepEP's normal kernels). A
// collective is priced by where its group sits, with an alpha-beta model
// per tier (alpha per algorithm step, beta the per-GPU bandwidth): inside a
// node at scale-up speed, across nodes at NIC speed, and a group that spans
// both hierarchically, as NCCL does (all-reduce: reduce-scatter in the
// node, all-reduce across nodes on a 1/m share, all-gather in the node). A
// send takes S/B + alpha of the tier between the two ranks; its receive
// completes when the send is done and the receive's dependencies are.
// Ranks of one stage run the same program, so the stage's first rank
// stands for it. docs/cluster.md has the formulas.
//
// A stage's schedule steps run one after another (each step's first nodes
// wait for all of the previous step's), so the replay goes step by step: a
// step is simulated from its start and the arrival of its messages, and
// the outcome is reused by every step of equal nodes (the same times and
// dependencies, on any stage) whose messages arrive alike, as in a
// pipeline's steady state. The cost is that of the distinct steps, and
// folded programs (Program.h) need no more nodes than two micro-batches
// have. Within a step, the copies of a folded layer are simulated until
// they repeat a period, and the rest jumped over (StepSimulation.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef STG_PERF_STEPESTIMATE_H
#define STG_PERF_STEPESTIMATE_H

#include "stg/Instantiate/Program.h"
#include "stg/Perf/DeviceModel.h"
#include "stg/Perf/System.h"

#include "llvm/Support/Error.h"

#include <memory>
#include <optional>
#include <vector>

namespace stg {

struct StageTime {
  double computeMicros = 0;       ///< Busy time of the compute stream.
  double communicationMicros = 0; ///< Busy time of the communication streams.
  double finishMicros = 0;        ///< When the stage's last node finished.
  /// How long the stage waited for other stages: the latest receive of
  /// each step past the step's start, and the time from its last node to
  /// the step's end (the pipeline bubble, as this rank sees it).
  double pipelineWaitMicros = 0;
};

/// The stream a node runs on. Receives run on none: they only wait.
enum class ReplayStream : uint8_t {
  Compute,
  Activation, ///< Forward and backward collectives (tp, cp, ep).
  Gradient,   ///< Gradient synchronization and optimizer collectives (dp).
  Pipeline,   ///< Sends to other stages.
  None
};

/// One run of a node in the replayed step.
struct TimelineEvent {
  unsigned stage = 0;
  uint32_t node = 0; ///< In the stage program's nodes.
  size_t step = 0;   ///< The index of the schedule step that ran it.
  ReplayStream stream = ReplayStream::None;
  /// From the training or inference step's start. A receive starts when it
  /// is ready to wait and ends when its message is there.
  double startMicros = 0, endMicros = 0;
};

/// Every node run of a replay, step by step in the order the replay ran
/// them (a stage's steps in their order), and by node within a step.
struct StepTimeline {
  std::vector<TimelineEvent> events;
};

struct StepEstimate {
  double stepMicros = 0; ///< The last stage to finish.
  std::vector<StageTime> stages;
  /// Copies of folded layers (LayerFold) whose simulation was skipped
  /// because they repeated a period: a measure of the replay's shortcut.
  uint64_t jumpedCopies = 0;
  /// Schedule steps simulated, and those whose outcome was another
  /// arrival's, known to hold for theirs (see StepOutcome::sameFor).
  uint64_t simulatedSteps = 0, rangedSteps = 0;
};

/// The streams and dependencies of the replay's step shapes, and the
/// messages of its steps, kept across estimates of program sets with the
/// same nodes, steps and folds but other numbers: the plan search's plans
/// of one structure (repriceProgramSet), which then only price the shapes.
/// A cache serves program sets of those nodes, steps and folds and is wrong
/// for any other until forgetSteps.
class StepShapeCache {
public:
  StepShapeCache();
  ~StepShapeCache();
  StepShapeCache(StepShapeCache &&) noexcept;
  StepShapeCache &operator=(StepShapeCache &&) noexcept;

  /// The program sets to come have the same nodes and folds but other
  /// steps (retargetMicrobatches): their messages are numbered again, and
  /// each step's streams and dependencies kept by its first node.
  void forgetSteps();

  struct Shapes; ///< lib/Perf/StepReplay.h's.
  std::unique_ptr<Shapes> shapes;
};

/// Replays `programs` (with durations from a device model) on `system`,
/// recording when each node ran into `timeline` if given. Fails, naming the
/// first node of each stuck stage, if some node never becomes ready: the
/// trace set would deadlock a simulator too.
llvm::Expected<StepEstimate> estimateStep(const ProgramSet &programs,
                                          const SystemSpec &system,
                                          StepTimeline *timeline = nullptr,
                                          StepShapeCache *shapes = nullptr);

/// The time of a collective of `kind` on a per-rank buffer of `bytes` over
/// a group laid out as `span`, in microseconds.
double getCollectiveMicros(CollectiveKind kind, double bytes,
                           const GroupSpan &span, const SystemSpec &system);

/// The time of a collective node: an expert exchange that DeepEP runs
/// (ProgramNode::expertExchange) by what its kernels move, any other as
/// the collective above.
double getCollectiveMicros(const ProgramNode &node, const GroupSpan &span,
                           const SystemSpec &system);

/// The time of a message of `bytes` inside a node or between nodes.
double getMessageMicros(double bytes, bool acrossNodes,
                        const SystemSpec &system);

} // namespace stg

#endif // STG_PERF_STEPESTIMATE_H
