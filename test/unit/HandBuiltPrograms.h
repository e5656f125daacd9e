//===- HandBuiltPrograms.h - Nodes and a cluster for clock tests -*- C++
//-*-===//
//
// The replay's tests (step estimate, metrics, what-if variants) build small
// programs by hand and price them on a made-up device whose numbers make
// times easy to work out: 1 TFLOP/s, links of 1 GB/s (1000 bytes per
// microsecond) without latency; and read the estimate and its timeline.
//
//===----------------------------------------------------------------------===//

#ifndef STG_TEST_UNIT_HANDBUILTPROGRAMS_H
#define STG_TEST_UNIT_HANDBUILTPROGRAMS_H

#include "stg/Instantiate/Program.h"
#include "stg/Perf/StepEstimate.h"
#include "stg/Perf/System.h"

#include "gtest/gtest.h"

#include <string>
#include <vector>

namespace stg {

inline const DeviceSpec TestDevice{"test", 1e12, 1e12, 1e9, 1.0, 1.0};

/// Two nodes of two GPUs: scale-up 1 GB/s with 1 us a step, scale-out
/// 0.1 GB/s with 10 us a step.
inline SystemSpec makeTwoTierSystem() {
  SystemSpec system = makeSingleDomainSystem(TestDevice, 4);
  system.gpusPerNode = 2;
  system.scaleUp = {1e9, 1e-6, NetworkTopology::Switch,
                    CollectiveAlgorithm::Ring};
  system.scaleOut = {1e8, 10e-6, NetworkTopology::Switch,
                     CollectiveAlgorithm::Ring};
  return system;
}

/// A kernel of `micros` and `flops`.
inline ProgramNode makeCompute(uint64_t micros,
                               llvm::SmallVector<uint32_t, 4> deps,
                               int64_t flops = 0) {
  ProgramNode node;
  node.durationMicros = micros;
  node.numOps = flops;
  node.dataDeps = deps;
  return node;
}

/// A send or receive of `bytes` to or from stage `peer`, tag 7.
inline ProgramNode makeMessage(ProgramNodeKind kind, unsigned peer,
                               int64_t bytes,
                               llvm::SmallVector<uint32_t, 4> deps) {
  ProgramNode node;
  node.kind = kind;
  node.peerStage = peer;
  node.commBytes = bytes;
  node.tag = 7;
  node.dataDeps = deps;
  return node;
}

/// The step estimate of `programs` on `system`, recording when each node
/// ran into `timeline` if given; on error a test failure and an empty one.
inline StepEstimate estimate(const ProgramSet &programs,
                             const SystemSpec &system,
                             StepTimeline *timeline = nullptr) {
  llvm::Expected<StepEstimate> result =
      estimateStep(programs, system, timeline);
  if (!result) {
    ADD_FAILURE() << llvm::toString(result.takeError());
    return {};
  }
  return *result;
}

/// When node `id` of stage 0 ended in `timeline`, in microseconds.
inline double getEnd(const StepTimeline &timeline, uint32_t id) {
  for (const TimelineEvent &event : timeline.events)
    if (event.stage == 0 && event.node == id)
      return event.endMicros;
  ADD_FAILURE() << "node " << id << " never ran";
  return -1;
}

/// An all-reduce of `bytes` per rank over the axes of `group`: over two
/// ranks of one tier, bytes / 1000 us of bandwidth. On the gradient
/// stream if `gradient`, else on the forward and backward one.
inline ProgramNode makeAllReduce(int64_t bytes, AxisMask group, bool gradient,
                                 llvm::SmallVector<uint32_t, 4> deps = {}) {
  ProgramNode reduce;
  reduce.kind = ProgramNodeKind::Collective;
  reduce.commType = CollectiveKind::AllReduce;
  reduce.commBytes = bytes;
  reduce.group = group;
  reduce.phase = gradient ? Phase::GradientSync : Phase::Backward;
  reduce.dataDeps = deps;
  return reduce;
}

/// A producing stage: a step a micro-batch, each computing for
/// durations[i] us and sending 5000 bytes, tag i, to stage 1.
inline void addProducer(StageProgram &producer,
                        const std::vector<uint64_t> &durations) {
  for (uint32_t index = 0; index < durations.size(); ++index) {
    producer.nodes.push_back(makeCompute(durations[index], {}));
    producer.nodes.push_back(
        makeMessage(ProgramNodeKind::Send, 1, 5000, {2 * index}));
    producer.nodes.back().tag = index;
    producer.steps.push_back({2 * index, 2 * index + 2, 0, -1});
  }
}

/// A pipeline of three stages, a micro-batch a step: stage 0 computes for
/// durations[i] us and sends (5 us); stage 1's steps, which share their
/// nodes, receive it, run a gradient all-reduce of `reduce` us from the
/// start and a `first` us kernel, read the message for `reading` us and
/// send on to stage 2 (5 us, sharing the link with the all-reduce), after
/// the reading or (`sendAtOnce`) as soon as the message is there. The
/// all-reduce holds `heldUnits` of the device's compute units.
inline ProgramSet makeForwardingPipeline(const std::vector<uint64_t> &durations,
                                         int64_t reduce, uint64_t first,
                                         uint64_t reading, bool sendAtOnce,
                                         uint16_t heldUnits = 0) {
  ProgramSet programs;
  programs.mesh = Mesh({{"pp", 3}});
  programs.pipelineAxis = 0;
  programs.stages.resize(3);
  StageProgram &producer = programs.stages[0];
  addProducer(producer, durations);
  StageProgram &forwarder = programs.stages[1];
  forwarder.nodes = {
      makeMessage(ProgramNodeKind::Recv, 0, 5000, {}),
      makeAllReduce(reduce * 750, 1, true), makeCompute(first, {}),
      makeCompute(reading, {0}),
      makeMessage(ProgramNodeKind::Send, 2, 5000, {sendAtOnce ? 0u : 3u})};
  // (Over the three stages' ranks, 2 * 2/3 * 750 bytes a microsecond.)
  forwarder.nodes[0].tag = 0;
  forwarder.nodes[1].heldUnits = heldUnits;
  forwarder.nodes[4].tag = 1000;
  StageProgram &consumer = programs.stages[2];
  consumer.nodes = {makeMessage(ProgramNodeKind::Recv, 1, 5000, {}),
                    makeCompute(1, {0})};
  consumer.nodes[0].tag = 1000;
  for (int32_t index = 0; index < int32_t(durations.size()); ++index) {
    forwarder.steps.push_back({0, 5, index, -1});
    consumer.steps.push_back({0, 2, index, -1});
  }
  return programs;
}

/// Expects every outcome the replay reuses for another arrival of
/// `programs`' messages (in its range, or moved with the message) to be
/// what simulating that step gives (as recording a timeline does), and
/// returns how many steps reused one.
inline uint64_t expectReusedAsSimulated(const ProgramSet &programs,
                                        const SystemSpec &system,
                                        const std::string &trial) {
  StepTimeline timeline;
  StepEstimate fresh = estimate(programs, system, &timeline);
  StepEstimate shortcut = estimate(programs, system);
  EXPECT_EQ(fresh.rangedSteps, 0u);
  EXPECT_EQ(shortcut.stepMicros, fresh.stepMicros) << trial;
  for (size_t stage = 0; stage < fresh.stages.size(); ++stage) {
    EXPECT_EQ(shortcut.stages[stage].finishMicros,
              fresh.stages[stage].finishMicros)
        << trial << ", stage " << stage;
    EXPECT_EQ(shortcut.stages[stage].communicationMicros,
              fresh.stages[stage].communicationMicros)
        << trial << ", stage " << stage;
    EXPECT_EQ(shortcut.stages[stage].computeMicros,
              fresh.stages[stage].computeMicros)
        << trial << ", stage " << stage;
  }
  return shortcut.rangedSteps;
}

} // namespace stg

#endif // STG_TEST_UNIT_HANDBUILTPROGRAMS_H
