//===- Schedule.h - Pipeline schedules of micro-batches ---------*- C++ -*-===//
//
// The order in which one pipeline stage runs the forward and backward passes
// of its micro-batches. The emitter turns consecutive steps into control
// dependencies, so every simulator replays the schedule, not just the data
// flow (which alone would let a stage run all forwards first and hold every
// micro-batch's activations).
//
//   gpipe   F0 F1 .. F(M-1)  B0 B1 .. B(M-1)
//   1f1b    warm-up: min(P-s-1, M) forwards; steady: one forward, one
//           backward; cool-down: the remaining backwards (PipeDream-Flush,
//           Megatron-LM's default). Stage s keeps at most min(P-s, M)
//           micro-batches' activations.
//
// With V model chunks per stage (virtual stages), 1F1B is Megatron-LM's
// interleaved schedule: the M*V (micro-batch, chunk) units run in groups of
// P micro-batches per chunk, chunks ascending forward and descending
// backward, after a warm-up of (P-s-1)*2 + (V-1)*P forward units.
//
// Inference runs only the forwards, in order.
//
//===----------------------------------------------------------------------===//

#ifndef STG_INSTANTIATE_SCHEDULE_H
#define STG_INSTANTIATE_SCHEDULE_H

#include "llvm/ADT/StringRef.h"

#include <optional>
#include <vector>

namespace stg {

enum class PipelineSchedule { OneFOneB, GPipe };

std::optional<PipelineSchedule> parsePipelineSchedule(llvm::StringRef name);
llvm::StringRef getPipelineScheduleName(PipelineSchedule schedule);

struct ScheduleStep {
  bool backward;
  unsigned microbatch;
  unsigned chunk = 0; ///< The stage's model chunk (virtual stage).

  bool operator==(const ScheduleStep &other) const {
    return backward == other.backward && microbatch == other.microbatch &&
           chunk == other.chunk;
  }
};

/// The steps of `stage` (0-based, of `numStages`), in order. More than one
/// chunk needs 1F1B (interleaved) and a micro-batch count that is a
/// multiple of the stages.
std::vector<ScheduleStep> getStageSchedule(PipelineSchedule schedule,
                                           unsigned stage, unsigned numStages,
                                           unsigned numMicrobatches,
                                           bool training,
                                           unsigned numChunks = 1);

/// The most micro-batches whose activations `stage` holds at once; with
/// chunks, in micro-batches' worth (a chunk's unit counts 1/numChunks).
double getMaxInFlightMicrobatches(PipelineSchedule schedule, unsigned stage,
                                  unsigned numStages, unsigned numMicrobatches,
                                  unsigned numChunks = 1);

} // namespace stg

#endif // STG_INSTANTIATE_SCHEDULE_H
