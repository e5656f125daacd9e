//===- Schedule.cpp - Pipeline schedules of micro-batches -----------------===//

#include "stg/Emit/Schedule.h"

#include <algorithm>

using namespace stg;

std::optional<PipelineSchedule> stg::parsePipelineSchedule(llvm::StringRef name) {
  if (name == "1f1b")
    return PipelineSchedule::OneFOneB;
  if (name == "gpipe")
    return PipelineSchedule::GPipe;
  return std::nullopt;
}

llvm::StringRef stg::getPipelineScheduleName(PipelineSchedule schedule) {
  return schedule == PipelineSchedule::OneFOneB ? "1f1b" : "gpipe";
}

static unsigned getWarmupForwards(PipelineSchedule schedule, unsigned stage,
                                  unsigned numStages, unsigned numMicrobatches) {
  if (schedule == PipelineSchedule::GPipe)
    return numMicrobatches;
  return std::min(numStages - stage - 1, numMicrobatches);
}

std::vector<ScheduleStep> stg::getStageSchedule(PipelineSchedule schedule,
                                                unsigned stage,
                                                unsigned numStages,
                                                unsigned numMicrobatches,
                                                bool training) {
  std::vector<ScheduleStep> steps;
  if (!training) {
    for (unsigned mb = 0; mb < numMicrobatches; ++mb)
      steps.push_back({false, mb});
    return steps;
  }
  unsigned warmup =
      getWarmupForwards(schedule, stage, numStages, numMicrobatches);
  for (unsigned mb = 0; mb < warmup; ++mb)
    steps.push_back({false, mb});
  for (unsigned mb = warmup; mb < numMicrobatches; ++mb) {
    steps.push_back({false, mb});
    steps.push_back({true, mb - warmup});
  }
  for (unsigned mb = numMicrobatches - warmup; mb < numMicrobatches; ++mb)
    steps.push_back({true, mb});
  return steps;
}

unsigned stg::getMaxInFlightMicrobatches(PipelineSchedule schedule,
                                         unsigned stage, unsigned numStages,
                                         unsigned numMicrobatches) {
  if (schedule == PipelineSchedule::GPipe)
    return numMicrobatches;
  return std::min(numStages - stage, numMicrobatches);
}
