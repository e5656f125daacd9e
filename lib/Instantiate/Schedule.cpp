//===- Schedule.cpp - Pipeline schedules of micro-batches -----------------===//

#include "stg/Instantiate/Schedule.h"

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

/// Forward units before the first backward in the interleaved schedule; all
/// of them when there are only as many micro-batches as stages.
static unsigned getInterleavedWarmup(unsigned stage, unsigned numStages,
                                     unsigned numMicrobatches,
                                     unsigned numChunks) {
  unsigned units = numMicrobatches * numChunks;
  if (numMicrobatches == numStages)
    return units;
  return std::min((numStages - stage - 1) * 2 + (numChunks - 1) * numStages,
                  units);
}

/// Megatron-LM's interleaved 1F1B: unit k of M*V runs micro-batch
/// (k / (P*V)) * P + k % P in chunk (k / P) % V, reversed for backward.
static std::vector<ScheduleStep>
getInterleavedSchedule(unsigned stage, unsigned numStages,
                       unsigned numMicrobatches, unsigned numChunks,
                       bool training) {
  unsigned units = numMicrobatches * numChunks;
  auto unit = [&](unsigned k, bool backward) {
    unsigned chunk = k % (numStages * numChunks) / numStages;
    if (backward)
      chunk = numChunks - 1 - chunk;
    unsigned microbatch =
        k / (numStages * numChunks) * numStages + k % numStages;
    return ScheduleStep{backward, microbatch, chunk};
  };
  std::vector<ScheduleStep> steps;
  if (!training) {
    for (unsigned k = 0; k < units; ++k)
      steps.push_back(unit(k, false));
    return steps;
  }
  unsigned warmup = getInterleavedWarmup(stage, numStages, numMicrobatches,
                                         numChunks);
  for (unsigned k = 0; k < warmup; ++k)
    steps.push_back(unit(k, false));
  for (unsigned k = warmup; k < units; ++k) {
    steps.push_back(unit(k, false));
    steps.push_back(unit(k - warmup, true));
  }
  for (unsigned k = units - warmup; k < units; ++k)
    steps.push_back(unit(k, true));
  return steps;
}

std::vector<ScheduleStep> stg::getStageSchedule(PipelineSchedule schedule,
                                                unsigned stage,
                                                unsigned numStages,
                                                unsigned numMicrobatches,
                                                bool training,
                                                unsigned numChunks) {
  if (numChunks > 1)
    return getInterleavedSchedule(stage, numStages, numMicrobatches,
                                  numChunks, training);
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

double stg::getMaxInFlightMicrobatches(PipelineSchedule schedule,
                                       unsigned stage, unsigned numStages,
                                       unsigned numMicrobatches,
                                       unsigned numChunks) {
  if (numChunks > 1) {
    unsigned units = std::min(getInterleavedWarmup(stage, numStages,
                                                   numMicrobatches, numChunks) +
                                  1,
                              numMicrobatches * numChunks);
    return double(units) / numChunks;
  }
  if (schedule == PipelineSchedule::GPipe)
    return numMicrobatches;
  return std::min(numStages - stage, numMicrobatches);
}
