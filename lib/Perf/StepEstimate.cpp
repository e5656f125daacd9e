//===- StepEstimate.cpp - The step time of a plan on a system -------------===//
//
// A replay step by step: within a step, a discrete-event simulation of its
// nodes on the stage's streams (StepSimulation.cpp); across steps and
// stages, the messages. Each stage runs its steps until one waits for a
// message not yet sent; a step's outcome is looked up by its shape and the
// arrivals of its messages (the last one asked for, one kept for a range
// of arrivals that holds these, ArrivalRanges.cpp) and simulated only when
// none is known. The steps' structures and shapes come from
// StepStructures.cpp.
//
//===----------------------------------------------------------------------===//

#include "StepReplay.h"

#include <algorithm>

using namespace stg;

const ShapeOutcomes::Ranged *Replay::findRanged(const ShapeOutcomes &known,
                                                int64_t &movedPicos) {
  int64_t firstArrival = arrivals.empty() ? 0 : arrivals[0];
  for (const ShapeOutcomes::Ranged &kept : known.ranged) {
    if (kept.first > firstArrival || firstArrival >= kept.second)
      continue;
    uint32_t index = kept.index;
    const StepOutcome &outcome = outcomes[index];
    bool holds = true;
    for (size_t recv = 1; recv < arrivals.size() && holds; ++recv)
      holds = outcome.sameFor[recv].first <= arrivals[recv] &&
              arrivals[recv] < outcome.sameFor[recv].second;
    if (!holds)
      continue;
    movedPicos = getMovedPicos(index);
    return &kept;
  }
  return nullptr;
}

void Replay::keepRanged(ShapeOutcomes &known, uint32_t index) {
  // Recorded times need every node's own; ranges only give the step's.
  const StepOutcome &outcome = outcomes[index];
  if (timeline || llvm::all_of(outcome.sameFor, [](const auto &range) {
        return range.second - range.first == 1;
      }))
    return;
  // A shape with no receives keeps no ranges (all_of holds): one has a first.
  ShapeOutcomes::Ranged kept{outcome.sameFor[0].first,
                             outcome.sameFor[0].second, index};
  if (known.ranged.size() < MaxRangedOutcomes) {
    known.ranged.push_back(kept);
    return;
  }
  known.ranged[known.nextReplaced] = kept;
  known.nextReplaced = (known.nextReplaced + 1) % MaxRangedOutcomes;
}

uint32_t Replay::lookUpOutcome(uint32_t shapeIndex, int64_t &movedPicos) {
  ShapeSummary &summary = summaries[shapeIndex];
  ShapeOutcomes &known = outcomeIndex[shapeIndex];
  uint32_t fresh = outcomes.size();
  // Arrivals are at most MaxStepPicos: a single one is never a DenseMap
  // sentinel.
  bool single = arrivals.size() <= 1;
  int64_t arrival = single && !arrivals.empty() ? arrivals[0] : 0;
  const ShapeOutcomes::Ranged *ranged = nullptr;
  uint32_t index =
      single
          ? findOutcome(known.byArrival, arrival, known, movedPicos, ranged)
          : findOutcome(known.byPattern, arrivals, known, movedPicos, ranged);
  if (single && !movedPicos) {
    summary.lastOutcome = index;
    summary.lastArrival = arrival;
  }
  if (ranged && arrivals.size() == 1) {
    summary.rangedOutcome = ranged->index;
    summary.rangedFirst = ranged->first;
    summary.rangedSecond = ranged->second;
  }
  if (index == fresh) {
    outcomes.push_back(
        simulateStep(shapes[shapeIndex], arrivals, timeline, scratch));
    estimate.jumpedCopies += outcomes.back().jumpedCopies;
    ++estimate.simulatedSteps;
    keepRanged(known, index);
  }
  return index;
}

void Replay::advance(unsigned stage) {
  StageState &state = states[stage];
  const StageSteps &stageSteps = steps.stages[stage];
  for (; state.next < state.steps.size(); ++state.next) {
    // Known after the plan's first step of its structure (most steps).
    uint32_t shapeIndex = state.shapes[stageSteps.steps[state.next].distinct];
    if (shapeIndex == NoShape)
      shapeIndex = getShape(stage, state.next);
    if (shapeIndex == NoShape) {
      runnable.clear();
      return;
    }
    ShapeSummary &summary = summaries[shapeIndex];
    const uint32_t *messages =
        &stageSteps.messages[stageSteps.steps[state.next].messageBegin];
    uint32_t numRecvs = summary.numRecvs;
    // Each message's arrival after the step's start, to the nearest
    // nanosecond, halves away from zero. A step has one receive or none
    // almost always: the pattern is filled only when the summary misses.
    int64_t arrival = 0, latest = 0;
    if (numRecvs > 1)
      arrivals.clear();
    for (uint32_t recv = 0; recv < numRecvs; ++recv) {
      MessageState &message = messageStates[messages[recv]];
      int64_t sent = message.sentAt;
      if (sent == NotSent) {
        message.waiter = stage;
        waiting[stage] = messages[recv];
        return;
      }
      int64_t wait = sent - state.now;
      if (wait > MaxStepPicos) {
        failure = "stage " + std::to_string(stage) + " waits more than " +
                  std::to_string(int64_t(MaxStepMicros)) +
                  " us for a message in one schedule step";
        runnable.clear();
        return;
      }
      arrival = std::max<int64_t>(0, (wait + 500) / 1000);
      latest = std::max(latest, arrival);
      if (numRecvs > 1)
        arrivals.push_back(arrival);
    }
    // The outcome of the same nodes with the same arrivals, else a new one.
    uint32_t index;
    int64_t movedPicos = 0; // When a ranged outcome moves with an arrival.
    if (numRecvs <= 1 && summary.lastOutcome != ~0u &&
        summary.lastArrival == arrival) {
      index = summary.lastOutcome;
    } else if (numRecvs == 1 && summary.rangedOutcome != ~0u &&
               summary.rangedFirst <= arrival &&
               arrival < summary.rangedSecond) {
      index = summary.rangedOutcome;
      movedPicos = getMovedPicos(index, arrival);
    } else {
      if (numRecvs <= 1)
        arrivals.assign(numRecvs, arrival);
      index = lookUpOutcome(shapeIndex, movedPicos);
    }
    const StepOutcome &outcome = outcomes[index];
    for (size_t i = 0; i < summary.numSends; ++i) {
      uint32_t message = messages[numRecvs + i];
      int64_t done = outcome.sendDonePicos[i];
      if (movedPicos && outcome.sendMoves[i])
        done += movedPicos;
      MessageState &sent = messageStates[message];
      sent.sentAt = state.now + done;
      if (sent.waiter != NoStage) {
        runnable.push_back(sent.waiter);
        waiting[sent.waiter] = NoMessage;
        sent.waiter = NoStage;
      }
    }
    if (timeline) { // A folded layer's copies: as their template's nodes.
      const ProgramStep &step = state.steps[state.next];
      const StepShape &shape = shapes[shapeIndex];
      for (uint32_t id = 0; id < shape->getNumNodes(); ++id) {
        uint32_t slot = shape->getSlot(id).first;
        timeline->events.push_back(
            {stage, step.begin + slot, state.next, shape->streams[slot],
             double(state.now) / 1e6 + outcome.starts[id],
             double(state.now) / 1e6 + outcome.ends[id]});
      }
    }
    state.computePicos += outcome.computePicos;
    state.communicationPicos += outcome.communicationPicos;
    int64_t finish =
        outcome.finishPicos + (outcome.finishMoves ? movedPicos : 0);
    state.waitPicos += std::min(latest * 1000, finish);
    state.now += finish;
    // Each step is at most MaxStepPicos: the sums stay far from overflow.
    if (state.now > MaxStepPicos) {
      failure = "stage " + std::to_string(stage) + " runs longer than " +
                std::to_string(int64_t(MaxStepMicros)) + " us";
      runnable.clear();
      return;
    }
  }
}

llvm::Error Replay::describeDeadlock() const {
  size_t total = 0, left = 0;
  std::string stuck;
  for (unsigned stage = 0; stage < states.size(); ++stage) {
    const StageState &state = states[stage];
    for (size_t index = 0; index < state.steps.size(); ++index) {
      const ProgramStep &step = state.steps[index];
      total += step.end - step.begin;
      if (index >= state.next)
        left += step.end - step.begin;
    }
    if (state.next == state.steps.size())
      continue;
    std::optional<MessageKey> waits;
    if (waiting[stage] != NoMessage)
      waits = steps.messages[waiting[stage]];
    const ProgramStep &step = state.steps[state.next];
    for (uint32_t id = step.begin; id < step.end; ++id) {
      const ProgramNode &recv = node(stage, id);
      if (waits && recv.kind == ProgramNodeKind::Recv &&
          MessageKey{recv.peerStage, stage, recv.tag + step.tagOffset} ==
              *waits) {
        std::string name =
            !recv.name.empty()
                ? recv.name
                : "a receive from stage " + std::to_string(recv.peerStage);
        stuck += "; stage " + std::to_string(stage) + " waits in '" + name +
                 "' for a send that never comes";
        break;
      }
    }
  }
  return llvm::createStringError(
      std::errc::resource_deadlock_would_occur,
      "the step cannot complete: %zu of %zu nodes never become ready%s "
      "(the trace set would deadlock a simulator too)",
      left, total, stuck.c_str());
}

llvm::Expected<StepEstimate> Replay::run() {
  estimate.stages.resize(programs.stages.size());
  for (unsigned stage = 0; stage < programs.stages.size(); ++stage) {
    initialize(stage);
    runnable.push_back(stage);
  }
  if (!steps.ready)
    findSteps();
  messageStates.assign(steps.messages.size(), MessageState());
  for (unsigned stage = 0; stage < states.size(); ++stage)
    states[stage].shapes.assign(steps.stages[stage].structures.size(), NoShape);
  // A step's outcome depends only on its start and its messages, so the
  // order in which stages advance does not change the result. A stage is
  // runnable once: when it waits, it waits for one message.
  while (!runnable.empty()) {
    unsigned stage = runnable.back();
    runnable.pop_back();
    advance(stage);
  }
  if (!failure.empty())
    return llvm::createStringError(std::errc::value_too_large, "%s",
                                   failure.c_str());
  for (const StageState &state : states)
    if (state.next < state.steps.size())
      return describeDeadlock();
  auto micros = [](int64_t picos) { return double(picos) / 1e6; };
  for (unsigned stage = 0; stage < states.size(); ++stage) {
    const StageState &state = states[stage];
    StageTime &time = estimate.stages[stage];
    time.computeMicros = micros(state.computePicos);
    time.communicationMicros = micros(state.communicationPicos);
    time.pipelineWaitMicros = micros(state.waitPicos);
    time.finishMicros = micros(state.now);
  }
  for (const StageTime &stage : estimate.stages)
    estimate.stepMicros = std::max(estimate.stepMicros, stage.finishMicros);
  for (StageTime &stage : estimate.stages)
    stage.pipelineWaitMicros += estimate.stepMicros - stage.finishMicros;
  return estimate;
}

llvm::Expected<StepEstimate> stg::estimateStep(const ProgramSet &programs,
                                               const SystemSpec &system,
                                               StepTimeline *timeline,
                                               StepShapeCache *cache) {
  return Replay(programs, system, timeline,
                cache ? cache->shapes.get() : nullptr)
      .run();
}
