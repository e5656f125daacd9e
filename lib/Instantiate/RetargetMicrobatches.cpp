//===- RetargetMicrobatches.cpp - A folded set at another micro-batch count ===//
//
// A folded program set (InstantiateOptions::foldMicrobatches) has nodes for
// the first and the last micro-batch only: every other step replays the
// first's with its tags moved on. So the micro-batch count shapes three
// things alone: the schedule, which steps replay which, and the tags
// (an edge's number times the count plus the micro-batch). The plan search
// builds one set for a family of structures and moves it to each count its
// plans use, where it built one per count before: 12,171 builds became
// 3,181 on Llama-3-70B's 1024-GPU space.
//
// The builder records, in schedule order, each schedule step that built
// nodes or replayed another chunk's (ProgramSources::ScheduleSource). The
// new count's schedule must reach those steps in the same order, else the
// nodes would come in another order (an interleaved schedule of a single
// group of pp micro-batches runs a chunk's last backward before the next
// chunk's first): then nothing changes and the caller builds.
// test/unit/RetargetMicrobatchesTest.cpp compares moved sets with built
// ones.
//
//===----------------------------------------------------------------------===//

#include "stg/Instantiate/Instantiate.h"

#include "StageBuilder.h"

#include "stg/Instantiate/Limits.h"
#include "stg/Instantiate/Schedule.h"

#include <map>

using namespace stg;

/// The steps `recorded` gives the schedule of `numMicrobatches`, as
/// StageBuilder::build assembles them; none if the schedule reaches the
/// recorded steps otherwise.
static std::optional<std::vector<ProgramStep>>
assembleSteps(llvm::ArrayRef<ScheduleStep> schedule,
              const ProgramSources::Stage &recorded, unsigned numMicrobatches,
              bool training) {
  std::vector<ProgramStep> steps;
  // The first micro-batch's step of each kind stands for the middle ones.
  std::map<std::tuple<unsigned, bool, BackwardPart>, std::optional<ProgramStep>>
      firstOfKind;
  size_t next = 0;
  for (const ScheduleStep &step : schedule) {
    auto kind = step.getKind();
    if (replaysFirstMicrobatch(step, numMicrobatches, training)) {
      auto first = firstOfKind.find(kind);
      if (first == firstOfKind.end())
        return std::nullopt;
      if (first->second) {
        ProgramStep replay = *first->second;
        int64_t offset = int64_t(replay.tagOffset) + step.microbatch;
        if (offset > INT32_MAX)
          return std::nullopt;
        replay.tagOffset = int32_t(offset);
        steps.push_back(replay);
      }
      continue;
    }
    if (next == recorded.scheduleSources.size())
      return std::nullopt;
    const ProgramSources::ScheduleSource &source =
        recorded.scheduleSources[next++];
    if (source.chunk != step.chunk || source.backward != step.backward ||
        source.part != step.part ||
        source.lastMicrobatch != (step.microbatch != 0))
      return std::nullopt;
    std::optional<ProgramStep> added = source.step;
    if (added && source.edgeShift) {
      int64_t offset = source.edgeShift * int64_t(numMicrobatches);
      if (offset > INT32_MAX || offset < INT32_MIN)
        return std::nullopt;
      added->tagOffset = int32_t(offset);
    }
    if (added)
      steps.push_back(*added);
    if (step.microbatch == 0) {
      // The other micro-batches replay it without its weight gathers.
      firstOfKind[kind] = added;
      if (added)
        firstOfKind[kind]->begin += source.preamble;
    }
  }
  if (next != recorded.scheduleSources.size())
    return std::nullopt;
  if (recorded.optimizerStep)
    steps.push_back(*recorded.optimizerStep);
  return steps;
}

LogicalResult stg::retargetMicrobatches(ProgramSet &set,
                                        const ProgramSources &sources,
                                        unsigned numMicrobatches) {
  unsigned before = set.numMicrobatches;
  unsigned numStages = set.stages.size();
  // With one micro-batch, the first is the last: its nodes are another
  // structure's.
  if (!sources.foldedMicrobatches || sources.stages.size() != numStages ||
      before < 2 || numMicrobatches < 2 || numMicrobatches > MaxMicrobatches ||
      uint64_t(sources.numEdges) * numMicrobatches > INT32_MAX ||
      (isInterleaved(set.schedule, set.numVirtualStages) &&
       numMicrobatches % numStages))
    return failure();
  std::vector<std::vector<ScheduleStep>> schedules(numStages);
  std::vector<std::vector<ProgramStep>> steps(numStages);
  for (unsigned stage = 0; stage < numStages; ++stage) {
    schedules[stage] =
        getStageSchedule(set.schedule, stage, numStages, numMicrobatches,
                         set.training, set.numVirtualStages);
    std::optional<std::vector<ProgramStep>> assembled =
        assembleSteps(schedules[stage], sources.stages[stage],
                      numMicrobatches, set.training);
    if (!assembled)
      return failure();
    steps[stage] = std::move(*assembled);
    // A tag is edge * count + micro-batch, the micro-batch 0 or the last.
    for (const ProgramNode &node : set.stages[stage].nodes)
      if ((node.kind == ProgramNodeKind::Send ||
           node.kind == ProgramNodeKind::Recv) &&
          (node.tag - std::max(node.microbatch, 0)) % int64_t(before))
        return failure();
  }
  for (unsigned stage = 0; stage < numStages; ++stage) {
    StageProgram &program = set.stages[stage];
    for (ProgramNode &node : program.nodes) {
      int32_t microbatch =
          node.microbatch == int32_t(before) - 1 ? int32_t(numMicrobatches) - 1
                                                 : node.microbatch;
      if (node.kind == ProgramNodeKind::Send ||
          node.kind == ProgramNodeKind::Recv) {
        int64_t edge =
            (node.tag - std::max(node.microbatch, 0)) / int64_t(before);
        node.tag = int32_t(edge * numMicrobatches + std::max(microbatch, 0));
      }
      node.microbatch = microbatch;
    }
    program.schedule = std::move(schedules[stage]);
    program.steps = std::move(steps[stage]);
  }
  set.numMicrobatches = numMicrobatches;
  return success();
}
