//===- Schedule.cpp - Pipeline schedules of micro-batches -----------------===//

#include "stg/Instantiate/Schedule.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/ErrorHandling.h"

#include <algorithm>
#include <cassert>

using namespace stg;

std::optional<PipelineSchedule> stg::parsePipelineSchedule(llvm::StringRef name) {
  for (PipelineSchedule schedule :
       {PipelineSchedule::OneFOneB, PipelineSchedule::GPipe,
        PipelineSchedule::ZeroBubbleH1, PipelineSchedule::ZeroBubbleV,
        PipelineSchedule::DualPipeV, PipelineSchedule::DualPipe,
        PipelineSchedule::Combined1F1B})
    if (name == getPipelineScheduleName(schedule))
      return schedule;
  return std::nullopt;
}

llvm::StringRef stg::getPipelineScheduleName(PipelineSchedule schedule) {
  switch (schedule) {
  case PipelineSchedule::OneFOneB:
    return "1f1b";
  case PipelineSchedule::GPipe:
    return "gpipe";
  case PipelineSchedule::ZeroBubbleH1:
    return "zb-h1";
  case PipelineSchedule::ZeroBubbleV:
    return "zb-v";
  case PipelineSchedule::DualPipeV:
    return "dualpipev";
  case PipelineSchedule::DualPipe:
    return "dualpipe";
  case PipelineSchedule::Combined1F1B:
    return "combined-1f1b";
  }
  llvm_unreachable("unknown pipeline schedule");
}

char stg::getStepLetter(const ScheduleStep &step) {
  if (!step.backward)
    return 'F';
  return step.part == BackwardPart::Weight ? 'W' : 'B';
}

static unsigned getWarmupForwards(PipelineSchedule schedule, unsigned stage,
                                  unsigned numStages, unsigned numMicrobatches) {
  if (schedule == PipelineSchedule::GPipe)
    return numMicrobatches;
  // Combined 1F1B pairs a steady forward with an older micro-batch's
  // backward: one forward more.
  if (schedule == PipelineSchedule::Combined1F1B)
    return std::min(numStages - stage, numMicrobatches);
  // 1F1B's warm-up, and ZB-H1's.
  return std::min(numStages - stage - 1, numMicrobatches);
}

/// Forward units before the first backward in the interleaved schedule; all
/// of them when there are only as many micro-batches as stages. Combined,
/// one more, so that a steady step's forward and backward are of
/// different micro-batches (Megatron-Core's combined 1F1B).
static unsigned getInterleavedWarmup(unsigned stage, unsigned numStages,
                                     unsigned numMicrobatches,
                                     unsigned numChunks, bool combined) {
  unsigned units = numMicrobatches * numChunks;
  if (numMicrobatches == numStages)
    return units;
  return std::min((numStages - stage - 1) * 2 + (numChunks - 1) * numStages +
                      (combined ? 1 : 0),
                  units);
}

/// Megatron-LM's interleaved 1F1B: unit k of M*V runs micro-batch
/// (k / (P*V)) * P + k % P in chunk (k / P) % V, reversed for backward.
static std::vector<ScheduleStep>
getInterleavedSchedule(unsigned stage, unsigned numStages,
                       unsigned numMicrobatches, unsigned numChunks,
                       bool training, bool combined) {
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
                                         numChunks, combined);
  for (unsigned k = 0; k < warmup; ++k)
    steps.push_back(unit(k, false));
  for (unsigned k = warmup; k < units; ++k) {
    steps.push_back(unit(k, false));
    steps.push_back(unit(k - warmup, true));
    steps.back().overlapsPrevious = combined;
  }
  for (unsigned k = units - warmup; k < units; ++k)
    steps.push_back(unit(k, true));
  return steps;
}

/// ZB-H1 (Schedule.h): 1F1B's order with each backward split into B and W,
/// stage s's first s steady iterations without their W.
static std::vector<ScheduleStep>
getZeroBubbleH1Schedule(unsigned stage, unsigned numStages,
                        unsigned numMicrobatches) {
  auto input = [](unsigned mb) {
    return ScheduleStep{true, mb, 0, BackwardPart::Input};
  };
  auto weight = [](unsigned mb) {
    return ScheduleStep{true, mb, 0, BackwardPart::Weight};
  };
  std::vector<ScheduleStep> steps;
  unsigned forwards = getWarmupForwards(PipelineSchedule::ZeroBubbleH1, stage,
                                        numStages, numMicrobatches);
  for (unsigned mb = 0; mb < forwards; ++mb)
    steps.push_back({false, mb});
  unsigned inputs = 0, weights = 0;
  for (unsigned iteration = 0; forwards < numMicrobatches; ++iteration) {
    steps.push_back({false, forwards++});
    steps.push_back(input(inputs++));
    if (iteration >= stage)
      steps.push_back(weight(weights++));
  }
  while (inputs < numMicrobatches) {
    steps.push_back(input(inputs++));
    steps.push_back(weight(weights++));
  }
  while (weights < numMicrobatches)
    steps.push_back(weight(weights++));
  return steps;
}

/// ZB-V (Schedule.h). Written for max(M, 2P-1) micro-batches, the fewest
/// that fill the V, then cut to the M there are: the cut keeps each stage's
/// order, so the stages still agree.
static std::vector<ScheduleStep>
getZeroBubbleVSchedule(unsigned stage, unsigned numStages,
                       unsigned numMicrobatches, bool training) {
  unsigned full = std::max(numMicrobatches, 2 * numStages - 1);
  std::vector<ScheduleStep> steps;
  unsigned forwards[2] = {0, 0}, inputs[2] = {0, 0}, weights[2] = {0, 0};
  auto forward = [&](unsigned chunk) {
    steps.push_back({false, forwards[chunk]++, chunk});
  };
  auto input = [&](unsigned chunk) {
    steps.push_back({true, inputs[chunk]++, chunk, BackwardPart::Input});
  };
  auto weight = [&](unsigned chunk) {
    steps.push_back({true, weights[chunk]++, chunk, BackwardPart::Weight});
  };
  unsigned fromEnd = numStages - stage;
  for (unsigned i = 0; i < 2 * fromEnd - 1; ++i)
    forward(0);
  for (unsigned i = 0; i < stage; ++i) {
    forward(1);
    forward(0);
  }
  for (unsigned i = 0; i < fromEnd; ++i) {
    forward(1);
    input(1);
    weight(1);
  }
  while (forwards[1] < forwards[0] || forwards[0] < full) {
    if (forwards[0] < full)
      forward(0);
    input(0);
    weight(0);
    forward(1);
    input(1);
    weight(1);
  }
  for (unsigned i = 0; i < stage; ++i) {
    input(0);
    input(1);
  }
  for (unsigned i = 0; i < fromEnd; ++i) {
    input(0);
    weight(0);
  }
  for (unsigned chunk : {1u, 0u})
    while (weights[chunk] < inputs[chunk])
      weight(chunk);
  llvm::erase_if(steps, [&](const ScheduleStep &step) {
    return step.microbatch >= numMicrobatches || (!training && step.backward);
  });
  return steps;
}

/// DualPipeV (Schedule.h), as DeepSeek's dualpipev.py orders a rank's
/// chunks: chunk 0 is the V's first half, chunk 1 its second. A backward
/// runs whole unless split, when its W waits in a queue for a W step.
static std::vector<ScheduleStep>
getDualPipeVSchedule(unsigned stage, unsigned numStages,
                     unsigned numMicrobatches) {
  assert(numMicrobatches >= 2 * numStages &&
         "dualpipev needs 2P micro-batches");
  std::vector<ScheduleStep> steps;
  unsigned forwards[2] = {0, 0}, backwards[2] = {0, 0};
  std::vector<ScheduleStep> deferredWeights;
  size_t nextWeight = 0;
  auto forward = [&](unsigned chunk) {
    steps.push_back({false, forwards[chunk]++, chunk});
  };
  auto backward = [&](unsigned chunk, bool split = false) {
    ScheduleStep step{true, backwards[chunk]++, chunk,
                      split ? BackwardPart::Input : BackwardPart::Whole};
    steps.push_back(step);
    if (split)
      deferredWeights.push_back(
          {true, step.microbatch, chunk, BackwardPart::Weight});
  };
  auto weight = [&] { steps.push_back(deferredWeights[nextWeight++]); };
  auto forwardBackward = [&](unsigned forwardChunk) {
    forward(forwardChunk);
    backward(1 - forwardChunk);
    steps.back().overlapsPrevious = true;
  };
  unsigned toLast = numStages - stage - 1;
  for (unsigned i = 0; i < 2 * toLast; ++i)
    forward(0);
  for (unsigned i = 0; i <= stage; ++i) {
    forward(0);
    forward(1);
  }
  for (unsigned i = 0; i < toLast; ++i) {
    backward(1, /*split=*/true);
    weight();
    forward(1);
  }
  unsigned steady = numMicrobatches - 2 * numStages + stage + 1;
  for (unsigned i = 0; i < steady; ++i) {
    // The last stage's first pair runs apart: its backward waits for the
    // forward it follows, through the loss at the V's bottom.
    if (i == 0 && toLast == 0) {
      forward(0);
      backward(1);
    } else {
      forwardBackward(0);
    }
    forwardBackward(1);
  }
  for (unsigned i = 0; i < toLast; ++i) {
    backward(1);
    forwardBackward(1);
  }
  // The second half of these backwards is split (from the second-chunk one
  // on odd stages, the first-chunk one on even stages).
  unsigned pairs = stage + 1;
  for (unsigned i = 0; i < pairs; ++i) {
    bool later = i >= pairs / 2;
    backward(1, later && (i > pairs / 2 || stage % 2 == 1));
    backward(0, later);
  }
  for (unsigned i = 0; i < toLast; ++i) {
    weight();
    backward(0, /*split=*/true);
  }
  while (nextWeight < deferredWeights.size())
    weight();
  return steps;
}

std::vector<ScheduleStep> stg::getStageSchedule(PipelineSchedule schedule,
                                                unsigned stage,
                                                unsigned numStages,
                                                unsigned numMicrobatches,
                                                bool training,
                                                unsigned numChunks) {
  if (schedule == PipelineSchedule::ZeroBubbleV ||
      (runsDualPipeSteps(schedule) && !training))
    return getZeroBubbleVSchedule(stage, numStages, numMicrobatches, training);
  if (runsDualPipeSteps(schedule))
    return getDualPipeVSchedule(stage, numStages, numMicrobatches);
  if (numChunks > 1)
    return getInterleavedSchedule(stage, numStages, numMicrobatches, numChunks,
                                  training,
                                  schedule == PipelineSchedule::Combined1F1B);
  std::vector<ScheduleStep> steps;
  if (!training) {
    for (unsigned mb = 0; mb < numMicrobatches; ++mb)
      steps.push_back({false, mb});
    return steps;
  }
  if (schedule == PipelineSchedule::ZeroBubbleH1)
    return getZeroBubbleH1Schedule(stage, numStages, numMicrobatches);
  unsigned warmup =
      getWarmupForwards(schedule, stage, numStages, numMicrobatches);
  for (unsigned mb = 0; mb < warmup; ++mb)
    steps.push_back({false, mb});
  for (unsigned mb = warmup; mb < numMicrobatches; ++mb) {
    steps.push_back({false, mb});
    steps.push_back({true, mb - warmup});
    steps.back().overlapsPrevious = schedule == PipelineSchedule::Combined1F1B;
  }
  for (unsigned mb = numMicrobatches - warmup; mb < numMicrobatches; ++mb)
    steps.push_back({true, mb});
  return steps;
}

void stg::overlapForwardPairs(std::vector<ScheduleStep> &steps) {
  for (size_t index = 1; index < steps.size(); ++index) {
    const ScheduleStep &previous = steps[index - 1];
    ScheduleStep &step = steps[index];
    if (!step.backward && !previous.backward && step.microbatch % 2 &&
        previous.microbatch + 1 == step.microbatch &&
        previous.chunk == step.chunk && !previous.overlapsPrevious)
      step.overlapsPrevious = true;
  }
}

double stg::getMaxInFlightMicrobatches(PipelineSchedule schedule,
                                       unsigned stage, unsigned numStages,
                                       unsigned numMicrobatches,
                                       unsigned numChunks) {
  // ZB-V holds a chunk's activations from its F to its W: stage s runs
  // 2P-s-1 first-chunk and s+1 second-chunk forwards before its first W,
  // as many as there are micro-batches, and never more after it.
  // DualPipeV holds 2P chunks before its first W or whole B, and one more
  // in each F&B step, whose forward runs beside the backward that frees.
  if (runsDualPipeSteps(schedule))
    return (2 * numStages + 1) / 2.0;
  if (schedule == PipelineSchedule::ZeroBubbleV)
    return (std::min(numMicrobatches, 2 * numStages - stage - 1) +
            std::min(numMicrobatches, stage + 1)) /
           2.0;
  bool combined = schedule == PipelineSchedule::Combined1F1B;
  if (numChunks > 1) {
    unsigned units =
        std::min(getInterleavedWarmup(stage, numStages, numMicrobatches,
                                      numChunks, combined) +
                     1,
                 numMicrobatches * numChunks);
    return double(units) / numChunks;
  }
  if (schedule == PipelineSchedule::GPipe)
    return numMicrobatches;
  // Its warm-up's forwards and the steady step's, beside the backward that
  // frees one.
  if (combined)
    return std::min(numStages - stage + 1, numMicrobatches);
  // ZB-H1 holds a micro-batch from its F to its W: stage s's P-s-1 warm-up
  // forwards, then one more each of its first s+1 steady iterations before
  // the first W, so P, unless the micro-batches run out first.
  if (schedule == PipelineSchedule::ZeroBubbleH1)
    return std::min(numStages, numMicrobatches);
  return std::min(numStages - stage, numMicrobatches);
}
