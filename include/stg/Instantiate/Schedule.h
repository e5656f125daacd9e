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
//   zb-h1   zero bubble (Qi et al. 2024, ZB-H1): the backward splits into
//           B, the input gradients the stage before waits for, and W, the
//           weight gradients nothing waits for. Warm-up as 1F1B; steady:
//           F, B and, from the (s+1)-th steady iteration on, the oldest W;
//           cool-down: B and W alternating, then the W left. Stage s delays
//           s of its W into the cool-down, where 1F1B's stage idles: with
//           M >= P the bubble is (P-1)(F+B-W) against 1F1B's (P-1)(F+B+W),
//           and no stage holds more than P micro-batches (1F1B's first).
//   zb-v    zero bubble in a V (Qi et al. 2024, ZB-V): two model chunks a
//           stage placed in a V (PipelineSplit.h), the backward split as
//           ZB-H1's. Stage s warms up with 2(P-s)-1 forwards of its first
//           chunk, then s pairs of second- and first-chunk forwards, then
//           P-s rounds of a second-chunk F, B, W; steady: F, B, W of the
//           first chunk, then of the second; cool-down: s pairs of B, then
//           B and W of the first chunk, then the W left. With F = B = W a
//           chunk, at least 2P-1 micro-batches, no stage idles between
//           its first step and its last, the makespan is (P-1) F beyond
//           the work, and a stage holds 2P chunks' activations, P
//           micro-batches' worth, as 1F1B's first stage (the construction
//           of PyTorch's ScheduleZBVZeroBubble).
//   dualpipev DeepSeek's DualPipeV (DualPipe cut in half, the V of zb-v):
//           in the steady state each step runs a forward of one chunk
//           together with a whole backward of the other, on two
//           micro-batches, so that each one's communication runs under the
//           other's compute (DualPipe's F&B). Stage s warms up with
//           2(P-s-1) first-chunk forwards, s+1 pairs of first- and
//           second-chunk forwards, then P-s-1 rounds of a second-chunk B,
//           its W and a forward; then the F&B pairs; the cool-down runs the
//           backwards left, half of them split so that their W fill its
//           gaps (the construction of DeepSeek's dualpipev.py). With
//           M >= 2P, the makespan exceeds the last stage's work by
//           (P-1)(F&B + B - 3W) (DualPipe's table, for its P/2 ranks a
//           direction), and a stage holds 2P+1 chunks' activations.
//   dualpipe DeepSeek's DualPipe (bidirectional): 2P stages, each rank
//           holding a stage of two copies of the model, one fed from each
//           end, half the micro-batches each. Rank s's copies hold the
//           layers of stages s and 2P-1-s, and so does its mirror, rank
//           2P-1-s, in the other direction: the pair is DualPipeV's stage
//           min(s, 2P-1-s) twice, and dualpipe.py orders a rank's steps as
//           dualpipev.py orders that stage's with half the micro-batches.
//           Instantiation runs it so (foldDualPipe, Compile.h): P stages in
//           a V, data parallelism doubled, its upper half the second
//           direction (ProgramSet::mirrorAxis), and each hand-off between a
//           rank's two copies a message to the other half.
//   combined-1f1b  Megatron-Core's combined 1F1B (EP A2A overlap,
//           --overlap-moe-expert-parallel-comm): 1F1B, plain or
//           interleaved, warmed up one forward further, whose steady steps
//           each run a forward and the backward of another micro-batch as
//           one F&B step, so that each one's expert all-to-alls run under
//           the other's compute. It holds one micro-batch (a chunk's, when
//           interleaved) more than 1F1B.
//
// Inference runs only the forwards, in order; with two-batch overlap, in
// overlapped pairs (overlapForwardPairs).
//
//===----------------------------------------------------------------------===//

#ifndef STG_INSTANTIATE_SCHEDULE_H
#define STG_INSTANTIATE_SCHEDULE_H

#include "stg/Instantiate/PipelineSplit.h"

#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <optional>
#include <tuple>
#include <vector>

namespace stg {

enum class PipelineSchedule {
  OneFOneB,
  GPipe,
  ZeroBubbleH1,
  ZeroBubbleV,
  DualPipeV,
  DualPipe,
  Combined1F1B
};

std::optional<PipelineSchedule> parsePipelineSchedule(llvm::StringRef name);
llvm::StringRef getPipelineScheduleName(PipelineSchedule schedule);

/// Whether the schedule runs DualPipeV's steps: dualpipev, or dualpipe
/// folded into its mirrored halves.
inline bool runsDualPipeSteps(PipelineSchedule schedule) {
  return schedule == PipelineSchedule::DualPipeV ||
         schedule == PipelineSchedule::DualPipe;
}

/// Whether the schedule runs each backward as B and W steps.
inline bool splitsBackward(PipelineSchedule schedule) {
  return schedule == PipelineSchedule::ZeroBubbleH1 ||
         schedule == PipelineSchedule::ZeroBubbleV ||
         runsDualPipeSteps(schedule);
}

/// Whether the schedule runs a forward and a backward in one step
/// (ScheduleStep::overlapsPrevious).
inline bool overlapsSteps(PipelineSchedule schedule) {
  return runsDualPipeSteps(schedule) ||
         schedule == PipelineSchedule::Combined1F1B;
}

/// Whether the schedule is 1F1B's order, plain or interleaved with virtual
/// stages (combined-1f1b pairs its steps).
inline bool isOneFOneB(PipelineSchedule schedule) {
  return schedule == PipelineSchedule::OneFOneB ||
         schedule == PipelineSchedule::Combined1F1B;
}

/// The fewest micro-batches the schedule runs with `numStages` stages
/// (DualPipeV's steady state needs 2P; folded DualPipe's stages and
/// micro-batches are its halves').
inline unsigned getMinMicrobatches(PipelineSchedule schedule,
                                   unsigned numStages) {
  return runsDualPipeSteps(schedule) ? 2 * numStages : 1;
}

/// What keeps DualPipe from running a plan, if anything: it feeds a
/// pipeline from both ends, so it needs an even count of at least four
/// stages, one stage of each of its two model copies a rank, and an even
/// count of micro-batches, at least two for each stage (DeepSeek's
/// `num_chunks`, both directions').
enum class DualPipeProblem { Stages, Chunks, OddMicrobatches, FewMicrobatches };
inline std::optional<DualPipeProblem> checkDualPipe(unsigned numStages,
                                                    unsigned numChunks,
                                                    unsigned numMicrobatches) {
  if (numStages < 4 || numStages % 2)
    return DualPipeProblem::Stages;
  if (numChunks != 1)
    return DualPipeProblem::Chunks;
  if (numMicrobatches % 2)
    return DualPipeProblem::OddMicrobatches;
  if (numMicrobatches < 2 * numStages)
    return DualPipeProblem::FewMicrobatches;
  return std::nullopt;
}

/// The plan DualPipe runs as (foldDualPipe): DualPipeV's V over half the
/// stages, twice, the second copy in the upper half of a doubled
/// data-parallel axis, each with half the micro-batches.
struct DualPipeFold {
  unsigned numStages, dataParallel, numMicrobatches, numChunks = 2;
};
inline DualPipeFold foldDualPipeDegrees(unsigned numStages,
                                        unsigned dataParallel,
                                        unsigned numMicrobatches) {
  return {numStages / 2, dataParallel * 2, numMicrobatches / 2};
}

/// How the schedule places its model chunks: in a V, two a stage, or
/// interleaved (any count; one without virtual stages).
inline ChunkPlacement getChunkPlacement(PipelineSchedule schedule) {
  return schedule == PipelineSchedule::ZeroBubbleV ||
                 runsDualPipeSteps(schedule)
             ? ChunkPlacement::VShape
             : ChunkPlacement::Interleaved;
}

/// Whether `numChunks` chunks a stage run Megatron-LM's interleaved 1F1B,
/// whose micro-batch count must be a multiple of the stages (the V
/// schedules' two chunks take any).
inline bool isInterleaved(PipelineSchedule schedule, unsigned numChunks) {
  return numChunks > 1 &&
         getChunkPlacement(schedule) == ChunkPlacement::Interleaved;
}

/// The part of a backward a step runs: all of it, or, in a zero-bubble
/// schedule, its input gradients (B) or its weight gradients (W) alone.
enum class BackwardPart : uint8_t { Whole, Input, Weight };

struct ScheduleStep {
  bool backward;
  unsigned microbatch;
  unsigned chunk = 0; ///< The stage's model chunk (virtual stage).
  BackwardPart part = BackwardPart::Whole; ///< Of a backward step.
  /// Runs in one step with the step before it, neither waiting for the
  /// other: DualPipe's overlapped forward and backward of two micro-batches.
  bool overlapsPrevious = false;

  /// Steps of one kind run the same ops, each for its micro-batch.
  std::tuple<unsigned, bool, BackwardPart> getKind() const {
    return {chunk, backward, part};
  }
  bool operator==(const ScheduleStep &other) const {
    return getKind() == other.getKind() && microbatch == other.microbatch &&
           overlapsPrevious == other.overlapsPrevious;
  }
};

/// The letter of a step in a schedule's text: F, B, or W for a weight
/// gradient step.
char getStepLetter(const ScheduleStep &step);

/// The steps of `stage` (0-based, of `numStages`), in order. More than one
/// chunk needs 1F1B (interleaved, or combined) and a micro-batch count that is
/// a multiple of the stages, or zb-v or dualpipe(v), which run two;
/// dualpipe(v) needs getMinMicrobatches. Folded dualpipe's are dualpipev's.
std::vector<ScheduleStep> getStageSchedule(PipelineSchedule schedule,
                                           unsigned stage, unsigned numStages,
                                           unsigned numMicrobatches,
                                           bool training,
                                           unsigned numChunks = 1);

/// Marks, in an inference schedule, each odd micro-batch's forward that
/// follows its even partner's forward as overlapping it: SGLang's two-batch
/// overlap, which splits a serving step's batch in two so that each half's
/// expert all-to-alls (and tensor-parallel reductions) run beside the
/// other's compute.
void overlapForwardPairs(std::vector<ScheduleStep> &steps);

/// The most micro-batches whose activations `stage` holds at once, from a
/// micro-batch's forward to the end of its backward (its W in a zero-bubble
/// schedule: B frees most of them, W's inputs stay); with chunks, in
/// micro-batches' worth (a chunk's unit counts 1/numChunks).
double getMaxInFlightMicrobatches(PipelineSchedule schedule, unsigned stage,
                                  unsigned numStages, unsigned numMicrobatches,
                                  unsigned numChunks = 1);

} // namespace stg

#endif // STG_INSTANTIATE_SCHEDULE_H
