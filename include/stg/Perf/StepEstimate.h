//===- StepEstimate.h - A first estimate of the step time -------*- C++ -*-===//
//
// Before handing the traces to a network simulator, a user wants to know
// roughly how long a step takes and where the time goes. This replays the
// programs the way ASTRA-sim's workload layer issues them, with a simple
// network: per rank one compute stream and one communication stream, each
// running the ready node with the lowest id; a compute node takes its
// duration_micros (from the device model); a collective over n ranks of a
// per-rank buffer S takes a ring algorithm's time on the device's link
// bandwidth B (AllReduce 2(n-1)/n S/B, ReduceScatter (n-1)/n S/B, AllGather
// (n-1) S/B, AllToAll (n-1)/n S/B); a send takes S/B, and its receive
// completes when both the send is done and the receive's dependencies are.
// Ranks of one stage run the same program, so one rank stands for each
// stage. No contention, no latency, one link speed for every group: an
// estimate for orientation, not a substitute for the simulator.
//
//===----------------------------------------------------------------------===//

#ifndef STG_PERF_STEPESTIMATE_H
#define STG_PERF_STEPESTIMATE_H

#include "stg/Instantiate/Program.h"
#include "stg/Perf/DeviceModel.h"

#include "llvm/Support/Error.h"

#include <optional>
#include <vector>

namespace stg {

struct StageTime {
  double computeMicros = 0;       ///< Busy time of the compute stream.
  double communicationMicros = 0; ///< Busy time of the communication stream.
  double finishMicros = 0;        ///< When the stage's last node finished.
};

struct StepEstimate {
  double stepMicros = 0; ///< The last stage to finish.
  std::vector<StageTime> stages;
};

/// Replays `programs` (with durations from a device model) on `device`'s
/// links. Fails, naming the first node of each stuck stage, if some node
/// never becomes ready: the trace set would deadlock in a simulator too.
llvm::Expected<StepEstimate> estimateStep(const ProgramSet &programs,
                                          const DeviceSpec &device);

/// The modelled time of a communication node, in microseconds.
double getCommunicationMicros(const ProgramNode &node, unsigned groupSize,
                              const DeviceSpec &device);

} // namespace stg

#endif // STG_PERF_STEPESTIMATE_H
