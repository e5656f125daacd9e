//===- ScheduleTest.cpp - Pipeline schedules ------------------------------===//
//
// The step orders of 1F1B, GPipe and Megatron-LM's interleaved 1F1B, written
// out as the papers and Megatron's scheduler give them, and the micro-batches
// each keeps in flight.
//
//===----------------------------------------------------------------------===//

#include "stg/Instantiate/Schedule.h"

#include "gtest/gtest.h"

#include <string>

using namespace stg;

namespace {

/// `F0 F1 B0 ...`, with `.c` for the chunk when there are several.
std::string describe(const std::vector<ScheduleStep> &steps,
                     bool chunks = false) {
  std::string text;
  for (const ScheduleStep &step : steps) {
    if (!text.empty())
      text += ' ';
    text += (step.backward ? 'B' : 'F') + std::to_string(step.microbatch);
    if (chunks)
      text += '.' + std::to_string(step.chunk);
  }
  return text;
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

} // namespace
