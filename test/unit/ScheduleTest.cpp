//===- ScheduleTest.cpp - Pipeline schedules ------------------------------===//
//
// The step orders of 1F1B, GPipe and Megatron-LM's interleaved 1F1B, written
// out as the papers and Megatron's scheduler give them, and the micro-batches
// each keeps in flight.
//
//===----------------------------------------------------------------------===//

#include "stg/Instantiate/Schedule.h"

#include "llvm/ADT/STLExtras.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <string>
#include <vector>

using namespace stg;

namespace {

/// `F0 F1 B0 ...`, with `.c` for the chunk when there are several, and
/// `&` joining a step to the one it overlaps.
std::string describe(const std::vector<ScheduleStep> &steps,
                     bool chunks = false) {
  std::string text;
  for (const ScheduleStep &step : steps) {
    if (!text.empty())
      text += step.overlapsPrevious ? '&' : ' ';
    text += getStepLetter(step) + std::to_string(step.microbatch);
    if (chunks)
      text += '.' + std::to_string(step.chunk);
  }
  return text;
}

/// The most steps' activations a stage holds at once, each from its F to
/// its W or its whole backward.
unsigned countMostHeld(const std::vector<ScheduleStep> &steps) {
  unsigned held = 0, most = 0;
  for (const ScheduleStep &step : steps) {
    if (!step.backward)
      most = std::max(most, ++held);
    else if (step.part != BackwardPart::Input)
      --held;
  }
  return most;
}

/// Expects getMaxInFlightMicrobatches to give, on every stage of a plan,
/// what the stage's order holds, counted step by step (in micro-batches'
/// worth: a chunk's activations count 1/numChunks).
void expectInFlightAsCounted(PipelineSchedule schedule, unsigned numStages,
                             unsigned numMicrobatches, unsigned numChunks = 1) {
  for (unsigned stage = 0; stage < numStages; ++stage)
    EXPECT_DOUBLE_EQ(
        getMaxInFlightMicrobatches(schedule, stage, numStages, numMicrobatches,
                                   numChunks),
        double(countMostHeld(getStageSchedule(
            schedule, stage, numStages, numMicrobatches, true, numChunks))) /
            numChunks)
        << getPipelineScheduleName(schedule).str() << ": stage " << stage
        << " of " << numStages << ", " << numMicrobatches << " x " << numChunks;
}

TEST(ScheduleTest, OneFOneBWarmsUpByStage) {
  auto order = [](unsigned stage) {
    return describe(
        getStageSchedule(PipelineSchedule::OneFOneB, stage, 4, 6, true));
  };
  EXPECT_EQ(order(0), "F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5");
  EXPECT_EQ(order(3), "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5");
  // Fewer micro-batches than warm-up slots: all forwards first.
  EXPECT_EQ(describe(getStageSchedule(PipelineSchedule::OneFOneB, 0, 4, 2,
                                      true)),
            "F0 F1 B0 B1");
}

TEST(ScheduleTest, GPipeRunsAllForwardsFirst) {
  EXPECT_EQ(describe(getStageSchedule(PipelineSchedule::GPipe, 1, 4, 3, true)),
            "F0 F1 F2 B0 B1 B2");
  EXPECT_EQ(getMaxInFlightMicrobatches(PipelineSchedule::GPipe, 1, 4, 3), 3);
}

TEST(ScheduleTest, InferenceRunsForwardsInOrder) {
  EXPECT_EQ(describe(getStageSchedule(PipelineSchedule::OneFOneB, 0, 2, 3,
                                      false)),
            "F0 F1 F2");
}

TEST(ScheduleTest, TwoBatchOverlapPairsEachEvenForwardWithTheNext) {
  auto paired = [](unsigned stage, unsigned numStages, unsigned microbatches,
                   unsigned chunks = 1) {
    std::vector<ScheduleStep> steps =
        getStageSchedule(PipelineSchedule::OneFOneB, stage, numStages,
                         microbatches, false, chunks);
    overlapForwardPairs(steps);
    return describe(steps, chunks > 1);
  };
  EXPECT_EQ(paired(0, 1, 2), "F0&F1");
  // An odd count leaves the last alone.
  EXPECT_EQ(paired(0, 1, 5), "F0&F1 F2&F3 F4");
  EXPECT_EQ(paired(1, 2, 4), "F0&F1 F2&F3");
  // With chunks, only forwards of one chunk pair up.
  EXPECT_EQ(paired(0, 2, 4, 2), "F0.0&F1.0 F0.1&F1.1 F2.0&F3.0 F2.1&F3.1");
}

TEST(ScheduleTest, InterleavedMatchesMegatron) {
  // 4 stages, 2 chunks each, 8 micro-batches: stage 0 warms up with
  // (4-0-1)*2 + (2-1)*4 = 10 forward units, groups of 4 micro-batches per
  // chunk, backward chunks in reverse.
  EXPECT_EQ(describe(getStageSchedule(PipelineSchedule::OneFOneB, 0, 4, 8,
                                      true, 2),
                     true),
            "F0.0 F1.0 F2.0 F3.0 F0.1 F1.1 F2.1 F3.1 F4.0 F5.0 "
            "F6.0 B0.1 F7.0 B1.1 F4.1 B2.1 F5.1 B3.1 F6.1 B0.0 F7.1 B1.0 "
            "B2.0 B3.0 B4.1 B5.1 B6.1 B7.1 B4.0 B5.0 B6.0 B7.0");
  // The last stage warms up with (2-1)*4 = 4 units.
  std::vector<ScheduleStep> last =
      getStageSchedule(PipelineSchedule::OneFOneB, 3, 4, 8, true, 2);
  EXPECT_EQ(describe({last.begin(), last.begin() + 6}, true),
            "F0.0 F1.0 F2.0 F3.0 F0.1 B0.1");
  // Peak in-flight: warm-up + 1 units of half a micro-batch each.
  EXPECT_DOUBLE_EQ(
      getMaxInFlightMicrobatches(PipelineSchedule::OneFOneB, 0, 4, 8, 2),
      5.5);
  EXPECT_DOUBLE_EQ(
      getMaxInFlightMicrobatches(PipelineSchedule::OneFOneB, 3, 4, 8, 2),
      2.5);
}

TEST(ScheduleTest, InterleavedWithAsManyMicrobatchesAsStagesWarmsUpFully) {
  std::vector<ScheduleStep> steps =
      getStageSchedule(PipelineSchedule::OneFOneB, 1, 2, 2, true, 2);
  EXPECT_EQ(describe(steps, true), "F0.0 F1.0 F0.1 F1.1 B0.1 B1.1 B0.0 B1.0");
}

TEST(ScheduleTest, ZeroBubbleH1DelaysStageSWeightGradientsBySteps) {
  auto order = [](unsigned stage) {
    return describe(
        getStageSchedule(PipelineSchedule::ZeroBubbleH1, stage, 4, 8, true));
  };
  EXPECT_EQ(order(0), "F0 F1 F2 F3 B0 W0 F4 B1 W1 F5 B2 W2 F6 B3 W3 F7 B4 W4 "
                      "B5 W5 B6 W6 B7 W7");
  EXPECT_EQ(order(1), "F0 F1 F2 B0 F3 B1 W0 F4 B2 W1 F5 B3 W2 F6 B4 W3 F7 B5 "
                      "W4 B6 W5 B7 W6 W7");
  EXPECT_EQ(order(3), "F0 B0 F1 B1 F2 B2 F3 B3 W0 F4 B4 W1 F5 B5 W2 F6 B6 W3 "
                      "F7 B7 W4 W5 W6 W7");
  // A micro-batch is held from its F to its W: 1F1B's first stage's P, on
  // every stage.
  for (unsigned stage = 0; stage < 4; ++stage)
    EXPECT_EQ(
        getMaxInFlightMicrobatches(PipelineSchedule::ZeroBubbleH1, stage, 4, 8),
        4);
  EXPECT_EQ(getMaxInFlightMicrobatches(PipelineSchedule::ZeroBubbleH1, 2, 4, 2),
            2);
  // The closed form is what the schedules hold, counted step by step.
  for (unsigned stages = 1; stages <= 8; ++stages)
    for (unsigned microbatches = 1; microbatches <= 20; ++microbatches)
      expectInFlightAsCounted(PipelineSchedule::ZeroBubbleH1, stages,
                              microbatches);
  // Inference has no backward to split.
  EXPECT_EQ(describe(getStageSchedule(PipelineSchedule::ZeroBubbleH1, 0, 2, 2,
                                      false)),
            "F0 F1");
}

/// Every stage running `schedule` in order, a step taking `times` (F, B,
/// W; a whole backward B + W) once what it needs is done: F after the
/// model chunk before's F, B after the chunk after's B (the last chunk's
/// after its own F), W after its B; the chunks placed as the schedule
/// places them. Two overlapped steps start together once both may and
/// take `overlapped` (DualPipe's F&B) together.
struct Replay {
  double makespan = 0;
  /// Per stage: the time it idles between its first step and its last.
  std::vector<double> idle;
};

Replay replaySchedule(PipelineSchedule schedule, unsigned numStages,
                      unsigned numMicrobatches, double forward, double input,
                      double weight, unsigned numChunks = 1,
                      double overlapped = 0) {
  ChunkPlacement placement = getChunkPlacement(schedule);
  unsigned numModelChunks = numStages * numChunks;
  std::vector<std::vector<ScheduleStep>> orders;
  for (unsigned stage = 0; stage < numStages; ++stage)
    orders.push_back(getStageSchedule(schedule, stage, numStages,
                                      numMicrobatches, true, numChunks));
  // finish[kind][model chunk][mb]: kind 0 = F, 1 = B (input), 2 = W.
  const double Never = -1;
  std::vector<std::vector<std::vector<double>>> finish(
      3, std::vector<std::vector<double>>(
             numModelChunks, std::vector<double>(numMicrobatches, Never)));
  std::vector<size_t> next(numStages, 0);
  std::vector<double> free(numStages, 0), first(numStages, -1),
      busy(numStages, 0);
  for (bool progressed = true; progressed;) {
    progressed = false;
    for (unsigned stage = 0; stage < numStages; ++stage) {
      if (next[stage] == orders[stage].size())
        continue;
      // The step, and the step it overlaps if any, with what each waits
      // for, where it finishes and how long it takes.
      size_t count = next[stage] + 1 < orders[stage].size() &&
                             orders[stage][next[stage] + 1].overlapsPrevious
                         ? 2
                         : 1;
      double after = 0, duration = 0;
      double *done[2];
      for (size_t i = 0; i < count; ++i) {
        ScheduleStep step = orders[stage][next[stage] + i];
        unsigned mb = step.microbatch;
        unsigned chunk = getModelChunk(placement, stage, step.chunk, numStages);
        EXPECT_EQ(getChunkStage(placement, chunk, numStages), stage);
        double waits;
        if (!step.backward) {
          waits = chunk > 0 ? finish[0][chunk - 1][mb] : 0;
          done[i] = &finish[0][chunk][mb];
          duration += forward;
        } else if (step.part == BackwardPart::Weight) {
          waits = finish[1][chunk][mb];
          done[i] = &finish[2][chunk][mb];
          duration += weight;
        } else {
          waits = chunk + 1 < numModelChunks ? finish[1][chunk + 1][mb]
                                             : finish[0][chunk][mb];
          done[i] = &finish[1][chunk][mb];
          duration += step.part == BackwardPart::Whole ? input + weight : input;
        }
        after =
            waits == Never || after == Never ? Never : std::max(after, waits);
      }
      if (after == Never)
        continue;
      if (count == 2)
        duration = overlapped;
      double start = std::max(free[stage], after);
      if (first[stage] < 0)
        first[stage] = start;
      busy[stage] += duration;
      free[stage] = start + duration;
      for (size_t i = 0; i < count; ++i)
        *done[i] = free[stage];
      next[stage] += count;
      progressed = true;
    }
  }
  Replay replay;
  for (unsigned stage = 0; stage < numStages; ++stage) {
    EXPECT_EQ(next[stage], orders[stage].size()) << "deadlock on " << stage;
    replay.makespan = std::max(replay.makespan, free[stage]);
    replay.idle.push_back(free[stage] - first[stage] - busy[stage]);
  }
  return replay;
}

double getMakespan(PipelineSchedule schedule, unsigned numStages,
                   unsigned numMicrobatches, double forward, double input,
                   double weight) {
  return replaySchedule(schedule, numStages, numMicrobatches, forward, input,
                        weight)
      .makespan;
}

TEST(ScheduleTest, ZeroBubbleH1BubbleIsThePapers) {
  // Qi et al. 2024: (P-1)(F+B-W) for ZB-H1 against 1F1B's (P-1)(F+B+W),
  // with at least as many micro-batches as stages.
  struct Times {
    double forward, input, weight;
  };
  for (Times times :
       {Times{1, 1, 1}, Times{2, 2, 1}, Times{2, 3, 2}, Times{1, 2, 1}})
    for (auto [stages, microbatches] :
         {std::pair{4u, 8u}, {4u, 4u}, {8u, 16u}, {8u, 9u}, {2u, 5u}}) {
      double work = microbatches * (times.forward + times.input + times.weight);
      double zeroBubble =
          getMakespan(PipelineSchedule::ZeroBubbleH1, stages, microbatches,
                      times.forward, times.input, times.weight);
      EXPECT_DOUBLE_EQ(zeroBubble - work,
                       (stages - 1) *
                           (times.forward + times.input - times.weight))
          << stages << " stages, " << microbatches << " micro-batches";
      double oneFOneB =
          getMakespan(PipelineSchedule::OneFOneB, stages, microbatches,
                      times.forward, times.input, times.weight);
      EXPECT_DOUBLE_EQ(oneFOneB - work,
                       (stages - 1) *
                           (times.forward + times.input + times.weight));
    }
}

TEST(ScheduleTest, ZeroBubbleVMatchesPyTorchsConstruction) {
  // 4 stages, 8 micro-batches: stage 0 (chunks 0 and 7) warms up with 7
  // forwards of its first chunk, stage 3 (chunks 3 and 4) with one and
  // three pairs; W follows B in the steady state.
  auto order = [](unsigned stage, unsigned microbatches = 8) {
    return describe(getStageSchedule(PipelineSchedule::ZeroBubbleV, stage, 4,
                                     microbatches, true, 2),
                    true);
  };
  EXPECT_EQ(order(0),
            "F0.0 F1.0 F2.0 F3.0 F4.0 F5.0 F6.0 F0.1 B0.1 W0.1 F1.1 B1.1 "
            "W1.1 F2.1 B2.1 W2.1 F3.1 B3.1 W3.1 F7.0 B0.0 W0.0 F4.1 B4.1 "
            "W4.1 B1.0 W1.0 F5.1 B5.1 W5.1 B2.0 W2.0 F6.1 B6.1 W6.1 B3.0 "
            "W3.0 F7.1 B7.1 W7.1 B4.0 W4.0 B5.0 W5.0 B6.0 W6.0 B7.0 W7.0");
  EXPECT_EQ(order(3).substr(0, 44),
            "F0.0 F0.1 F1.0 F1.1 F2.0 F2.1 F3.0 F3.1 B0.1");
  // Fewer micro-batches than the V needs: the same order, cut.
  EXPECT_EQ(order(3, 2), "F0.0 F0.1 F1.0 F1.1 B0.1 W0.1 B0.0 W0.0 B1.1 W1.1 "
                         "B1.0 W1.0");
  // Inference: the forwards alone, in the same order.
  EXPECT_EQ(describe(getStageSchedule(PipelineSchedule::ZeroBubbleV, 1, 2, 3,
                                      false, 2),
                     true),
            "F0.0 F0.1 F1.0 F1.1 F2.0 F2.1");
}

TEST(ScheduleTest, ZeroBubbleVIdlesNowhereWithinAStage) {
  // With F = B = W a chunk and at least 2P-1 micro-batches, no stage idles
  // between its first step and its last (Qi et al. 2024's bubble
  // (P-1)(F+B-2W) = 0), the last stage starting P-1 forwards late; 1F1B
  // over the same stages idles (P-1)(F+B+W) a stage's whole chunk pair.
  for (auto [stages, microbatches] : {std::pair{2u, 3u},
                                      {4u, 7u},
                                      {4u, 8u},
                                      {4u, 16u},
                                      {8u, 15u},
                                      {8u, 32u}}) {
    Replay v = replaySchedule(PipelineSchedule::ZeroBubbleV, stages,
                              microbatches, 1, 1, 1, 2);
    for (unsigned stage = 0; stage < stages; ++stage)
      EXPECT_EQ(v.idle[stage], 0) << stage << " of " << stages;
    double work = 2.0 * microbatches * 3;
    EXPECT_EQ(v.makespan - work, stages - 1) << stages;
    EXPECT_EQ(
        getMakespan(PipelineSchedule::OneFOneB, stages, microbatches, 2, 2, 2) -
            work,
        (stages - 1) * 6.0);
  }
  // Unequal times and fewer micro-batches still run to the end.
  Replay slow = replaySchedule(PipelineSchedule::ZeroBubbleV, 4, 3, 1, 2, 1, 2);
  EXPECT_GT(slow.makespan, 3 * 2 * 4);
}

TEST(ScheduleTest, ZeroBubbleVHoldsWhat1F1BsFirstStageHolds) {
  // 2P chunks' activations, P micro-batches' worth, on every stage.
  for (unsigned stage = 0; stage < 4; ++stage)
    EXPECT_DOUBLE_EQ(getMaxInFlightMicrobatches(PipelineSchedule::ZeroBubbleV,
                                                stage, 4, 8, 2),
                     4);
  // Fewer micro-batches: what the cut schedule holds, F0.0 F1.0 F0.1.
  EXPECT_DOUBLE_EQ(
      getMaxInFlightMicrobatches(PipelineSchedule::ZeroBubbleV, 0, 4, 2, 2),
      1.5);
  // The closed form is what the schedules hold, counted step by step.
  for (unsigned stages = 1; stages <= 8; ++stages)
    for (unsigned microbatches = 1; microbatches <= 20; ++microbatches)
      expectInFlightAsCounted(PipelineSchedule::ZeroBubbleV, stages,
                              microbatches, 2);
}

TEST(ScheduleTest, DualPipeVMatchesDeepSeeksConstruction) {
  // 4 stages, 8 micro-batches, as DeepSeek's dualpipev.py orders them:
  // `&` joins a forward to the backward it overlaps. Stage 0 splits the
  // backwards of its cool-down's first chunk; stage 3 runs its first pair
  // apart and splits the second half of its last backwards.
  auto order = [](unsigned stage) {
    return describe(
        getStageSchedule(PipelineSchedule::DualPipeV, stage, 4, 8, true, 2),
        true);
  };
  EXPECT_EQ(order(0),
            "F0.0 F1.0 F2.0 F3.0 F4.0 F5.0 F6.0 F0.1 B0.1 W0.1 F1.1 B1.1 "
            "W1.1 F2.1 B2.1 W2.1 F3.1 F7.0&B3.1 F4.1&B0.0 B4.1 F5.1&B1.0 "
            "B5.1 F6.1&B2.0 B6.1 F7.1&B3.0 B7.1 B4.0 W4.0 B5.0 W5.0 B6.0 "
            "W6.0 B7.0 W7.0");
  EXPECT_EQ(order(1),
            "F0.0 F1.0 F2.0 F3.0 F4.0 F0.1 F5.0 F1.1 B0.1 W0.1 F2.1 B1.1 "
            "W1.1 F3.1 F6.0&B2.1 F4.1&B0.0 F7.0&B3.1 F5.1&B1.0 B4.1 "
            "F6.1&B2.0 B5.1 F7.1&B3.0 B6.1 B4.0 B7.1 B5.0 W7.1 B6.0 W5.0 "
            "B7.0 W6.0 W7.0");
  EXPECT_EQ(order(3),
            "F0.0 F0.1 F1.0 F1.1 F2.0 F2.1 F3.0 F3.1 F4.0 B0.1 F4.1&B0.0 "
            "F5.0&B1.1 F5.1&B1.0 F6.0&B2.1 F6.1&B2.0 F7.0&B3.1 F7.1&B3.0 "
            "B4.1 B4.0 B5.1 B5.0 B6.1 B6.0 B7.1 B7.0 W6.1 W6.0 W7.1 W7.0");
  // Inference: zb-v's forwards.
  EXPECT_EQ(
      describe(getStageSchedule(PipelineSchedule::DualPipeV, 1, 2, 3, false, 2),
               true),
      "F0.0 F0.1 F1.0 F1.1 F2.0 F2.1");
}

TEST(ScheduleTest, DualPipeVBubbleIsThePapers) {
  // DualPipe's table gives (PP/2-1)(F&B + B - 3W) for its PP ranks, P/2 a
  // direction, B a whole backward (here B + W = 2); cut in half, P ranks
  // make it (P-1)(F&B + B - 3W) beyond the last stage's work, which has
  // the fewest overlapped steps. Every schedule runs to its end (no stage
  // waits for another forever).
  for (double overlapped : {3.0, 2.5, 2.0})
    for (auto [stages, microbatches] :
         {std::pair{2u, 4u}, {4u, 8u}, {4u, 13u}, {8u, 16u}, {8u, 32u}}) {
      Replay replay = replaySchedule(PipelineSchedule::DualPipeV, stages,
                                     microbatches, 1, 1, 1, 2, overlapped);
      std::vector<ScheduleStep> last =
          getStageSchedule(PipelineSchedule::DualPipeV, stages - 1, stages,
                           microbatches, true, 2);
      double work = 0;
      for (size_t i = 0; i < last.size(); ++i) {
        bool pair = i + 1 < last.size() && last[i + 1].overlapsPrevious;
        bool whole = last[i].backward && last[i].part == BackwardPart::Whole;
        work += pair ? overlapped : whole ? 2 : 1;
        i += pair;
      }
      EXPECT_DOUBLE_EQ(replay.makespan - work,
                       (stages - 1) * (overlapped + 2 - 3))
          << stages << " stages, " << microbatches << " micro-batches, F&B "
          << overlapped;
    }
}

TEST(ScheduleTest, DualPipeRunsDualPipeVsStepsOnItsHalves) {
  // dualpipe.py orders rank s of PP as dualpipev.py orders stage
  // min(s, PP-1-s) of PP/2 with half the micro-batches: instantiation runs
  // the folded plan (foldDualPipe), whose bubble is DeepSeek's table's
  // (PP/2-1)(F&B + B - 3W) for DualPipe.
  for (auto [stages, microbatches] : {std::pair{2u, 4u}, {4u, 8u}, {4u, 9u}})
    for (unsigned stage = 0; stage < stages; ++stage)
      EXPECT_EQ(getStageSchedule(PipelineSchedule::DualPipe, stage, stages,
                                 microbatches, true, 2),
                getStageSchedule(PipelineSchedule::DualPipeV, stage, stages,
                                 microbatches, true, 2));
  for (unsigned pipeline : {4u, 8u}) {
    // 2 x PP micro-batches, PP a direction: the halves' V of PP/2 stages.
    unsigned half = pipeline / 2;
    Replay replay = replaySchedule(PipelineSchedule::DualPipe, half, pipeline,
                                   1, 1, 1, 2, 3.0);
    std::vector<ScheduleStep> last = getStageSchedule(
        PipelineSchedule::DualPipe, half - 1, half, pipeline, true, 2);
    double work = 0;
    for (size_t i = 0; i < last.size(); ++i) {
      bool pair = i + 1 < last.size() && last[i + 1].overlapsPrevious;
      bool whole = last[i].backward && last[i].part == BackwardPart::Whole;
      work += pair ? 3.0 : whole ? 2 : 1;
      i += pair;
    }
    EXPECT_DOUBLE_EQ(replay.makespan - work, (pipeline / 2 - 1) * (3 + 2 - 3))
        << pipeline << " stages";
  }
}

TEST(ScheduleTest, DualPipeVHoldsOneChunkMoreThanZeroBubbleV) {
  // 2P+1 chunks: the forward of an F&B step runs beside the backward that
  // frees one, as DualPipe's table's PP+1.
  for (unsigned stages = 2; stages <= 8; ++stages)
    for (unsigned microbatches = 2 * stages; microbatches <= 2 * stages + 9;
         ++microbatches) {
      expectInFlightAsCounted(PipelineSchedule::DualPipeV, stages, microbatches,
                              2);
      for (unsigned stage = 0; stage < stages; ++stage) {
        std::vector<ScheduleStep> order = getStageSchedule(
            PipelineSchedule::DualPipeV, stage, stages, microbatches, true, 2);
        // Each micro-batch's chunks run F, B and W once each.
        unsigned forwards = 0, inputs = 0, weights = 0;
        for (const ScheduleStep &step : order) {
          forwards += !step.backward;
          inputs += step.backward && step.part != BackwardPart::Weight;
          weights += step.backward && step.part != BackwardPart::Input;
        }
        EXPECT_EQ(forwards, 2 * microbatches);
        EXPECT_EQ(inputs, 2 * microbatches);
        EXPECT_EQ(weights, 2 * microbatches);
      }
    }
}

TEST(ScheduleTest, Combined1F1BPairsTheSteadyStepsOfOneForwardMore) {
  // Megatron-Core's combined 1F1B: one stage pairs each forward after the
  // first with the backward of the micro-batch before.
  EXPECT_EQ(
      describe(getStageSchedule(PipelineSchedule::Combined1F1B, 0, 1, 4, true)),
      "F0 F1&B0 F2&B1 F3&B2 B3");
  // Interleaved: the warm-up of interleaving plus one unit.
  EXPECT_EQ(describe(getStageSchedule(PipelineSchedule::Combined1F1B, 0, 2, 4,
                                      true, 2),
                     true),
            "F0.0 F1.0 F0.1 F1.1 F2.0 F3.0&B0.1 F2.1&B1.1 F3.1&B0.0 B1.0 "
            "B2.1 B3.1 B2.0 B3.0");
  EXPECT_EQ(describe(getStageSchedule(PipelineSchedule::Combined1F1B, 1, 2, 4,
                                      true, 2),
                     true),
            "F0.0 F1.0 F0.1 F1.1&B0.1 F2.0&B1.1 F3.0&B0.0 F2.1&B1.0 "
            "F3.1&B2.1 B3.1 B2.0 B3.0");
  // The steps are 1F1B's, but for the warm-up.
  for (unsigned chunks : {1u, 2u}) {
    std::vector<ScheduleStep> combined =
        getStageSchedule(PipelineSchedule::Combined1F1B, 0, 2, 8, true, chunks);
    std::vector<ScheduleStep> plain =
        getStageSchedule(PipelineSchedule::OneFOneB, 0, 2, 8, true, chunks);
    auto key = [](const ScheduleStep &step) {
      return std::tuple(step.backward, step.microbatch, step.chunk);
    };
    llvm::sort(combined, [&](auto &a, auto &b) { return key(a) < key(b); });
    llvm::sort(plain, [&](auto &a, auto &b) { return key(a) < key(b); });
    ASSERT_EQ(combined.size(), plain.size());
    for (size_t i = 0; i < plain.size(); ++i)
      EXPECT_EQ(key(combined[i]), key(plain[i]));
  }
  // One micro-batch (a chunk's, interleaved) more in flight than 1F1B.
  for (unsigned chunks : {1u, 2u})
    for (unsigned stages : {1u, 2u, 4u})
      for (unsigned microbatches = stages; microbatches <= 16;
           microbatches += stages)
        if (chunks == 1 || stages > 1)
          expectInFlightAsCounted(PipelineSchedule::Combined1F1B, stages,
                                  microbatches, chunks);
}

} // namespace
