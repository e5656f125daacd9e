//===- Timeline.h - The estimated step as Chrome trace events ---*- C++ -*-===//
//
// `stagec --timeline FILE.json` writes the replayed step (StepTimeline) in
// the Trace Event Format that Perfetto, chrome://tracing and CCL-Bench's
// metric tools read: a process per simulated rank (one per pipeline stage,
// named with its stage and mesh coordinates), a thread per stream (compute,
// the activation and gradient collectives, sends, and receives waiting), a
// complete event per node run with the trace node's name and its numbers
// (FLOPs, bytes, group, peer) as arguments, and a flow arrow from each send
// to its receive. Times are microseconds from the step's start.
// `stage-plot timeline` draws the same file as a Gantt chart.
//
//===----------------------------------------------------------------------===//

#ifndef STG_EMIT_TIMELINE_H
#define STG_EMIT_TIMELINE_H

#include "stg/Instantiate/Program.h"
#include "stg/Perf/StepEstimate.h"

#include "llvm/Support/raw_ostream.h"

namespace stg {

/// What marks a file as a timeline stagec wrote (so that a rerun may
/// replace it).
inline constexpr const char *TimelineMarker = "\"kind\":\"stagec-timeline\"";

/// Writes `timeline`, the replay of `programs` whose step took
/// `stepMicros`, as a Chrome trace JSON object. `model` names the model.
void writeChromeTimeline(llvm::raw_ostream &os, const ProgramSet &programs,
                         const StepTimeline &timeline, double stepMicros,
                         llvm::StringRef model);

} // namespace stg

#endif // STG_EMIT_TIMELINE_H
