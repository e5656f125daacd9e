//===- StepEstimateTest.cpp - Replaying programs for a step time ----------===//

#include "stg/Perf/StepEstimate.h"

#include "HandBuiltPrograms.h"

#include "gtest/gtest.h"

using namespace stg;

namespace {

const SystemSpec OneDomain = makeSingleDomainSystem(TestDevice, 4);

TEST(StepEstimateTest, CollectiveTimesFollowTheRingAlgorithm) {
  GroupSpan four{4, 1, 4};
  auto micros = [&](CollectiveKind kind) {
    return getCollectiveMicros(kind, 4000, four, OneDomain);
  };
  EXPECT_DOUBLE_EQ(micros(CollectiveKind::AllReduce), 6.0);     // 2*3/4
  EXPECT_DOUBLE_EQ(micros(CollectiveKind::ReduceScatter), 3.0); // 3/4
  EXPECT_DOUBLE_EQ(micros(CollectiveKind::AllGather), 12.0);    // 3
  EXPECT_DOUBLE_EQ(micros(CollectiveKind::AllToAll), 3.0);      // 3/4
  EXPECT_DOUBLE_EQ(getMessageMicros(4000, false, OneDomain), 4.0);
}

TEST(StepEstimateTest, EachAlgorithmStepCostsTheLatency) {
  SystemSpec system = makeTwoTierSystem();
  GroupSpan inNode{2, 1, 2}, acrossNodes{2, 2, 1};
  // 2*(1/2)*1000/1e9 s + 2 steps of 1 us; across: 0.1 GB/s, 10 us steps.
  EXPECT_DOUBLE_EQ(
      getCollectiveMicros(CollectiveKind::AllReduce, 1000, inNode, system),
      1.0 + 2.0);
  EXPECT_DOUBLE_EQ(
      getCollectiveMicros(CollectiveKind::AllReduce, 1000, acrossNodes, system),
      10.0 + 20.0);
  EXPECT_DOUBLE_EQ(getMessageMicros(1000, true, system), 10.0 + 10.0);
  // Halving-doubling takes log2(n) steps a phase, a direct exchange one.
  system.scaleUp.algorithm = CollectiveAlgorithm::HalvingDoubling;
  GroupSpan eight{8, 1, 8};
  system.gpusPerNode = 8;
  EXPECT_DOUBLE_EQ(
      getCollectiveMicros(CollectiveKind::ReduceScatter, 8000, eight, system),
      7.0 + 3.0);
  system.scaleUp.algorithm = CollectiveAlgorithm::Direct;
  EXPECT_DOUBLE_EQ(
      getCollectiveMicros(CollectiveKind::ReduceScatter, 8000, eight, system),
      7.0 + 1.0);
}

TEST(StepEstimateTest, SwitchesThatReduceTakeLargeAllReducesAsNvls) {
  // Eight H100s: the ring's 2 x 7/8 of the buffer at 360 GB/s and 14 steps
  // of 0.7 us, or NVLS's buffer at 275 GB/s and 25 us, whichever is
  // shorter; the break-even is near 12.4 MB.
  llvm::Expected<SystemSpec> h100 = loadSystem("dgx-h100");
  ASSERT_TRUE(bool(h100));
  SystemSpec system = *h100;
  ASSERT_TRUE(system.scaleUp.inNetworkReduction);
  GroupSpan eight{8, 1, 8};
  auto ring = [](double bytes) { return 1.75 * bytes / 360e3 + 14 * 0.7; };
  auto nvls = [](double bytes) { return bytes / 275e3 + 25; };
  for (double bytes : {1e6, 10e6}) // Small: the ring.
    EXPECT_NEAR(
        getCollectiveMicros(CollectiveKind::AllReduce, bytes, eight, system),
        ring(bytes), 1e-6);
  for (double bytes : {16e6, 134e6}) // Large: NVLS.
    EXPECT_NEAR(
        getCollectiveMicros(CollectiveKind::AllReduce, bytes, eight, system),
        nvls(bytes), 1e-6);
  // The other collectives keep the ring, and so do two ranks (whose ring
  // moves the buffer once each way too) and switches that do not reduce.
  EXPECT_NEAR(
      getCollectiveMicros(CollectiveKind::ReduceScatter, 134e6, eight, system),
      0.875 * 134e6 / 360e3 + 7 * 0.7, 1e-6);
  GroupSpan two{2, 1, 2};
  EXPECT_NEAR(
      getCollectiveMicros(CollectiveKind::AllReduce, 134e6, two, system),
      134e6 / 360e3 + 2 * 0.7, 1e-6);
  system.scaleUp.inNetworkReduction = false;
  EXPECT_NEAR(
      getCollectiveMicros(CollectiveKind::AllReduce, 134e6, eight, system),
      ring(134e6), 1e-6);
  llvm::Expected<SystemSpec> a100 = loadSystem("dgx-a100");
  ASSERT_TRUE(bool(a100));
  EXPECT_FALSE(a100->scaleUp.inNetworkReduction);
}

TEST(StepEstimateTest, AGroupAcrossNodesIsHierarchical) {
  // Four ranks on two nodes: reduce-scatter in the node (1000 us of
  // bandwidth at 1 GB/s for half of 2 MB, 1 step), all-reduce across
  // nodes on the 1 MB share (1 MB at 0.1 GB/s, 2 steps of 10 us), then
  // all-gather in the node (1 MB, 1 step).
  SystemSpec system = makeTwoTierSystem();
  GroupSpan span{4, 2, 2};
  EXPECT_DOUBLE_EQ(
      getCollectiveMicros(CollectiveKind::AllReduce, 2e6, span, system),
      (1000.0 + 1.0) + (10000.0 + 20.0) + (1000.0 + 1.0));
  // All-to-all: a quarter stays in the node, half crosses it, at once.
  EXPECT_DOUBLE_EQ(
      getCollectiveMicros(CollectiveKind::AllToAll, 4e6, span, system),
      std::max(1000.0 + 1.0, 20000.0 + 10.0));
}

/// An expert all-to-all of `bytes` holding `copies` copies of each token.
ProgramNode makeExpertExchange(ExpertExchange mode, double bytes,
                               unsigned copies, unsigned experts) {
  ProgramNode node;
  node.kind = ProgramNodeKind::Collective;
  node.commType = CollectiveKind::AllToAll;
  node.commBytes = int64_t(bytes);
  node.expertExchange = mode;
  node.tokenCopies = uint16_t(copies);
  node.experts = experts;
  return node;
}

TEST(StepEstimateTest, DeepEpNormalSendsATokenOnceToANode) {
  // Two nodes of two ranks, 8 experts (2 a rank), top-2; 4 MB of copies
  // are 2 MB of tokens. A token misses the other node with chance
  // C(4,2)/C(8,2) = 6/28, a rank with C(6,2)/C(8,2) = 15/28. It crosses
  // once if it needs the other node (22/28 of 2 MB at 0.1 GB/s: 100 bytes
  // a microsecond); NVLink (1000 bytes a microsecond)
  // carries it to its own node's other rank (13/28) and forwards what
  // crossed to the rank beside the receiver (13/22 of what crossed).
  SystemSpec system = makeTwoTierSystem();
  GroupSpan span{4, 2, 2};
  double across = 2e6 * 22 / 28, inside = 2e6 * 13 / 28 + across * 13 / 22;
  ProgramNode normal = makeExpertExchange(ExpertExchange::Normal, 4e6, 2, 8);
  EXPECT_NEAR(getCollectiveMicros(normal, span, system),
              std::max(across / 100, inside / 1000) + 10.0, 1e-6);
  // Low-latency sends every copy: half of them cross, in one step.
  ProgramNode lowLatency =
      makeExpertExchange(ExpertExchange::LowLatency, 4e6, 2, 8);
  EXPECT_DOUBLE_EQ(getCollectiveMicros(lowLatency, span, system),
                   20000.0 + 10.0);
  // Without DeepEP, NCCL's all-to-all (a ring step a tier).
  ProgramNode nccl = makeExpertExchange(ExpertExchange::AllToAll, 4e6, 2, 8);
  EXPECT_DOUBLE_EQ(
      getCollectiveMicros(nccl, span, system),
      getCollectiveMicros(CollectiveKind::AllToAll, 4e6, span, system));
  // Inside one node (two ranks of 4 experts), normal kernels send a token
  // once to the other rank if it needs it: 22/28 of the tokens.
  GroupSpan node{2, 1, 2};
  ProgramNode inNode = makeExpertExchange(ExpertExchange::Normal, 4e6, 2, 8);
  EXPECT_NEAR(getCollectiveMicros(inNode, node, system),
              2e6 * 22 / 28 / 1000 + 1.0, 1e-6);
}

TEST(StepEstimateTest, DeepEpLowLatencyNearItsPublishedTimes) {
  // DeepEP's README (deepseek-ai/DeepEP, "Low-latency kernels with pure
  // RDMA"): H800 with a 50 GB/s CX7 NIC a GPU, 128 tokens a rank, hidden
  // 7168, top-8 of 256 experts, FP8 dispatch (a scale per 128 values)
  // and BF16 combine; microseconds at EP 32 to 256. The model leaves out
  // the kernels' own work (casts, per-expert signalling): it is 10-20 %
  // faster, and held to 22 %.
  llvm::Expected<SystemSpec> system = loadSystem("dgx-h100");
  ASSERT_TRUE(bool(system));
  struct Published {
    unsigned ep;
    double dispatch, combine;
  } published[] = {
      {32, 155, 273}, {64, 173, 314}, {128, 192, 369}, {256, 194, 360}};
  for (const Published &row : published) {
    GroupSpan span{row.ep, row.ep / 8, 8};
    double copies = 128.0 * 8;
    ProgramNode dispatch = makeExpertExchange(ExpertExchange::LowLatency,
                                              copies * (7168 + 56 * 4), 8, 256);
    ProgramNode combine = makeExpertExchange(ExpertExchange::LowLatency,
                                             copies * 7168 * 2, 8, 256);
    EXPECT_NEAR(getCollectiveMicros(dispatch, span, *system) / row.dispatch,
                1.0, 0.22)
        << "dispatch at EP" << row.ep;
    EXPECT_NEAR(getCollectiveMicros(combine, span, *system) / row.combine, 1.0,
                0.22)
        << "combine at EP" << row.ep;
  }
}

TEST(StepEstimateTest, GroupsAreSpannedByRankOrder) {
  Mesh mesh({{"tp", 2}, {"dp", 4}});
  SystemSpec system = makeTwoTierSystem(); // Ranks 0-1 node 0, 2-3 node 1, ...
  GroupSpan tp = getGroupSpan(mesh, system, 0, 1u << 0);
  EXPECT_EQ(tp.members, 2u);
  EXPECT_EQ(tp.nodes, 1u);
  GroupSpan dp = getGroupSpan(mesh, system, 0, 1u << 1);
  EXPECT_EQ(dp.members, 4u);
  EXPECT_EQ(dp.nodes, 4u);
  EXPECT_EQ(dp.perNode, 1u);
  GroupSpan both = getGroupSpan(mesh, system, 0, 3u);
  EXPECT_EQ(both.nodes, 4u);
  EXPECT_EQ(both.perNode, 2u);
}

TEST(StepEstimateTest, StagesWaitForTheirMessages) {
  // Stage 0: a 10 us kernel, then a 5 us send. Stage 1: the receive, a
  // 20 us kernel, then a 3 us AllReduce over two ranks.
  ProgramSet programs;
  programs.mesh = Mesh({{"tp", 2}, {"pp", 2}});
  programs.pipelineAxis = 1;
  programs.stages.resize(2);
  programs.stages[0].nodes = {makeCompute(10, {}),
                              makeMessage(ProgramNodeKind::Send, 1, 5000, {0})};
  ProgramNode reduce;
  reduce.kind = ProgramNodeKind::Collective;
  reduce.commType = CollectiveKind::AllReduce;
  reduce.commBytes = 3000;
  reduce.group = 1;
  reduce.dataDeps = {1};
  programs.stages[1].nodes = {makeMessage(ProgramNodeKind::Recv, 0, 5000, {}),
                              makeCompute(20, {0}), reduce};
  llvm::Expected<StepEstimate> estimate = estimateStep(programs, OneDomain);
  if (!estimate)
    FAIL() << llvm::toString(estimate.takeError());
  EXPECT_DOUBLE_EQ(estimate->stepMicros, 38.0);
  EXPECT_DOUBLE_EQ(estimate->stages[0].finishMicros, 15.0);
  EXPECT_DOUBLE_EQ(estimate->stages[0].computeMicros, 10.0);
  EXPECT_DOUBLE_EQ(estimate->stages[0].communicationMicros, 5.0);
  EXPECT_DOUBLE_EQ(estimate->stages[1].computeMicros, 20.0);
  EXPECT_DOUBLE_EQ(estimate->stages[1].communicationMicros, 3.0);
}

TEST(StepEstimateTest, MessagesOfOneTagBetweenOtherStagesStayApart) {
  // A chain of four stages whose messages share tag 7 (but for one of a
  // negative tag, or one past any table by tag): each receive waits for
  // its own sender's message.
  // Stage 0: 10 us, a 5 us send; stage 1: 20 us, a 2 us send; stage 2:
  // 1 us, a 1 us send; stage 3: 2 us.
  ProgramSet programs;
  programs.mesh = Mesh({{"pp", 4}});
  programs.pipelineAxis = 0;
  programs.stages.resize(4);
  programs.stages[0].nodes = {makeCompute(10, {}),
                              makeMessage(ProgramNodeKind::Send, 1, 5000, {0})};
  programs.stages[1].nodes = {makeMessage(ProgramNodeKind::Recv, 0, 5000, {}),
                              makeCompute(20, {0}),
                              makeMessage(ProgramNodeKind::Send, 2, 2000, {1})};
  programs.stages[2].nodes = {makeMessage(ProgramNodeKind::Recv, 1, 2000, {}),
                              makeCompute(1, {0}),
                              makeMessage(ProgramNodeKind::Send, 3, 1000, {1})};
  programs.stages[3].nodes = {makeMessage(ProgramNodeKind::Recv, 2, 1000, {}),
                              makeCompute(2, {0})};
  for (int32_t tag : {-5, INT32_MAX}) {
    programs.stages[2].nodes[2].tag = tag;
    programs.stages[3].nodes[0].tag = tag;
    llvm::Expected<StepEstimate> estimate = estimateStep(programs, OneDomain);
    if (!estimate)
      FAIL() << llvm::toString(estimate.takeError());
    EXPECT_DOUBLE_EQ(estimate->stages[1].finishMicros, 37.0);
    EXPECT_DOUBLE_EQ(estimate->stages[2].finishMicros, 39.0);
    EXPECT_DOUBLE_EQ(estimate->stepMicros, 41.0);
    EXPECT_DOUBLE_EQ(estimate->stages[3].pipelineWaitMicros, 39.0);
  }
}

TEST(StepEstimateTest, OneKernelAtATimeLowestIdFirst) {
  // Two independent kernels share the compute stream; the communication
  // stream runs beside them.
  ProgramSet programs;
  programs.mesh = Mesh({{"tp", 2}});
  programs.stages.resize(1);
  ProgramNode reduce;
  reduce.kind = ProgramNodeKind::Collective;
  reduce.commType = CollectiveKind::AllReduce;
  reduce.commBytes = 8000;
  reduce.group = 1;
  programs.stages[0].nodes = {makeCompute(4, {}), makeCompute(6, {}), reduce};
  llvm::Expected<StepEstimate> estimate = estimateStep(programs, OneDomain);
  if (!estimate)
    FAIL() << llvm::toString(estimate.takeError());
  EXPECT_DOUBLE_EQ(estimate->stepMicros, 10.0); // 4 + 6; the 8 us overlaps
  EXPECT_DOUBLE_EQ(estimate->stages[0].communicationMicros, 8.0);
}

TEST(StepEstimateTest, GradientReductionsOverlapActivationCollectives) {
  // A backward collective in the node (8 us and 2 steps of 1 us) and a
  // data-parallel gradient reduction across nodes (80 us and 2 steps of
  // 10 us), both ready at once, run on streams of their own. (On one tier
  // they would share its bandwidth: LinkSharingTest.)
  ProgramSet programs;
  programs.mesh = Mesh({{"tp", 2}, {"dp", 2}});
  programs.stages.resize(1);
  ProgramNode activation;
  activation.kind = ProgramNodeKind::Collective;
  activation.commType = CollectiveKind::AllReduce;
  activation.commBytes = 8000;
  activation.group = 1;
  activation.phase = Phase::Backward;
  ProgramNode gradient = activation;
  gradient.group = 2;
  gradient.phase = Phase::GradientSync;
  programs.stages[0].nodes = {activation, gradient};
  llvm::Expected<StepEstimate> estimate =
      estimateStep(programs, makeTwoTierSystem());
  if (!estimate)
    FAIL() << llvm::toString(estimate.takeError());
  EXPECT_DOUBLE_EQ(estimate->stepMicros, 100.0);
  EXPECT_DOUBLE_EQ(estimate->stages[0].communicationMicros, 110.0);
}

/// A tensor-parallel all-reduce of 8000 bytes (8 us on OneDomain), or a
/// data-parallel gradient reduction of 16000 bytes (16 us).
ProgramNode makeReduce(llvm::SmallVector<uint32_t, 4> deps,
                       bool gradient = false) {
  ProgramNode reduce;
  reduce.kind = ProgramNodeKind::Collective;
  reduce.commType = CollectiveKind::AllReduce;
  reduce.commBytes = gradient ? 16000 : 8000;
  reduce.group = gradient ? 2 : 1;
  reduce.phase = gradient ? Phase::GradientSync : Phase::Forward;
  reduce.dataDeps = deps;
  return reduce;
}

/// A step of a 5 us kernel, 23 layers of two nodes each (the first, the
/// template standing for itself and 20 folded copies, the last) and a 5 us
/// kernel after the last layer's second node: `layer(first)` gives a
/// layer's nodes from its first id.
template <typename Layer> ProgramSet makeFoldedLayers(Layer layer) {
  ProgramSet programs;
  programs.mesh = Mesh({{"tp", 2}, {"dp", 2}});
  programs.stages.resize(1);
  StageProgram &stage = programs.stages[0];
  stage.nodes = {makeCompute(5, {})};
  for (uint32_t first : {1u, 3u, 5u})
    for (ProgramNode &node : layer(first))
      stage.nodes.push_back(std::move(node));
  stage.nodes.push_back(makeCompute(5, {6}));
  LayerFold fold;
  fold.begin = 3;
  fold.end = 5;
  fold.copies = 20;
  stage.folds = {fold};
  stage.steps = {{0, 8, 0, 0}};
  return programs;
}

TEST(StepEstimateTest, AFoldedLayerJumpsOverItsPeriod) {
  // A layer's kernel (10 us) waits for the previous layer's all-reduce
  // (8 us): 23 layers of 18 us between two 5 us kernels.
  ProgramSet programs = makeFoldedLayers([](uint32_t first) {
    return std::vector<ProgramNode>{makeCompute(10, {first - 1}),
                                    makeReduce({first})};
  });
  // The template's kernel waits for the first layer's all-reduce, which
  // the template's own all-reduce stands for in the next copy.
  programs.stages[0].folds[0].carried = {{3, 2, 4}};
  llvm::Expected<StepEstimate> estimate = estimateStep(programs, OneDomain);
  if (!estimate)
    FAIL() << llvm::toString(estimate.takeError());
  EXPECT_NEAR(estimate->stepMicros, 5 + 23 * 18 + 5, 1e-9);
  EXPECT_NEAR(estimate->stages[0].computeMicros, 5 + 23 * 10 + 5, 1e-9);
  EXPECT_NEAR(estimate->stages[0].communicationMicros, 23 * 8, 1e-9);
  EXPECT_GT(estimate->jumpedCopies, 10u);
}

TEST(StepEstimateTest, AGrowingBacklogIsSimulatedCopyByCopy) {
  // Each layer's kernel (10 us) feeds the next and a gradient reduction
  // (16 us), which runs after the previous layer's: the reductions fall
  // further behind with every layer, and finish 15 + 23 * 16 us in.
  // The last kernel waits for the last.
  ProgramSet programs = makeFoldedLayers([](uint32_t first) {
    ProgramNode reduce = makeReduce({first}, true);
    if (first > 1)
      reduce.ctrlDeps = {first - 1};
    return std::vector<ProgramNode>{
        makeCompute(10, {first > 1 ? first - 2 : 0}), std::move(reduce)};
  });
  programs.stages[0].folds[0].carried = {{3, 1, 3}, {4, 2, 4}};
  llvm::Expected<StepEstimate> estimate = estimateStep(programs, OneDomain);
  if (!estimate)
    FAIL() << llvm::toString(estimate.takeError());
  EXPECT_NEAR(estimate->stepMicros, 15 + 23 * 16 + 5, 1e-9);
  EXPECT_NEAR(estimate->stages[0].communicationMicros, 23 * 16, 1e-9);
  EXPECT_EQ(estimate->jumpedCopies, 0u);
}

/// A pipeline of two stages, a micro-batch per step: stage 0 computes
/// micro-batch i for durations[i] us and sends it (5 us); stage 1 receives
/// it in a step of a `first` us kernel (no inputs) and a `reading` us one
/// that reads the message. Stage 1's steps share their nodes, as folded
/// micro-batches do, so that their outcomes are looked up by arrival.
ProgramSet makeConsumerPipeline(const std::vector<uint64_t> &durations,
                                uint64_t first, uint64_t reading) {
  ProgramSet programs;
  programs.mesh = Mesh({{"tp", 2}, {"pp", 2}});
  programs.pipelineAxis = 1;
  programs.stages.resize(2);
  StageProgram &producer = programs.stages[0], &consumer = programs.stages[1];
  addProducer(producer, durations);
  consumer.nodes = {makeMessage(ProgramNodeKind::Recv, 0, 5000, {}),
                    makeCompute(first, {}), makeCompute(reading, {0})};
  consumer.nodes[0].tag = 0;
  for (int32_t index = 0; index < int32_t(durations.size()); ++index)
    consumer.steps.push_back({0, 3, index, -1});
  return programs;
}

/// Expects the estimate to be the one of simulating every step afresh (as
/// recording a timeline does), and returns it.
StepEstimate expectExact(const ProgramSet &programs) {
  StepTimeline timeline;
  llvm::Expected<StepEstimate> fresh =
      estimateStep(programs, OneDomain, &timeline);
  llvm::Expected<StepEstimate> shortcut = estimateStep(programs, OneDomain);
  if (!fresh || !shortcut) {
    ADD_FAILURE() << "no estimate";
    return {};
  }
  EXPECT_EQ(fresh->rangedSteps, 0u);
  EXPECT_EQ(shortcut->stepMicros, fresh->stepMicros);
  for (size_t stage = 0; stage < fresh->stages.size(); ++stage) {
    EXPECT_EQ(shortcut->stages[stage].finishMicros,
              fresh->stages[stage].finishMicros);
    EXPECT_EQ(shortcut->stages[stage].pipelineWaitMicros,
              fresh->stages[stage].pipelineWaitMicros);
    EXPECT_EQ(shortcut->stages[stage].computeMicros,
              fresh->stages[stage].computeMicros);
  }
  return *shortcut;
}

TEST(StepEstimateTest, EarlyAndLateMessagesReuseAnOutcome) {
  // Stage 0 sends at 6 us, then every 15 us. Stage 1's steps run a 12 us
  // kernel while their message comes: one that comes early waits for it,
  // and the step takes 14 us, so each message comes 1 us later into its
  // step (6, 7, ..., 11 us: one outcome). From 13 us on, the message comes
  // into an idle step, which ends 2 us after it.
  std::vector<uint64_t> durations(12, 10);
  durations[0] = 1;
  StepEstimate estimate = expectExact(makeConsumerPipeline(durations, 12, 2));
  // Message 11 comes at 6 + 11 * 15 us.
  EXPECT_DOUBLE_EQ(estimate.stepMicros, 6 + 11 * 15 + 2);
  // Stage 0's two step shapes; stage 1's for arrivals of 6 us (7 to 11 us
  // reuse it), 12 us (its kernel starts as the first ends: exact) and 13
  // us (the later steps find it by their arrival, also 13 us).
  EXPECT_EQ(estimate.simulatedSteps, 5u);
  EXPECT_EQ(estimate.rangedSteps, 5u);
}

TEST(StepEstimateTest, ArrivalsAcrossAStreamsDecisionsAreSimulated) {
  // Stage 1's step: a 4 us kernel, then an 8 us all-reduce, then an 8 us
  // kernel; a 20 us kernel reads the message. The step ends, for a
  // message `at` us into it:
  auto finish = [](uint64_t at) -> uint64_t {
    if (at < 4) // The reader waits for the first kernel.
      return 32;
    if (at <= 12) // It runs at once, and the last kernel after it.
      return at + 28;
    if (at <= 20) // It waits for the last kernel, which started at 12.
      return 40;
    return at + 20; // It comes into an idle step.
  };
  // The producer's durations give these arrivals, in order. Reused: 3 us
  // (of 2 us), 18 us (of 14 us), 31 us (of 25 us, moved) and 1 us; and 5
  // us, of 6 us moved: its reader runs at once and the last kernel after
  // it, which moves with it while the message comes after the first kernel
  // ends and before the all-reduce does (12 us, which would tie with it,
  // is simulated). Not reused: 6 us, which 14 us's outcome would give
  // wrongly had its range ignored that the last kernel would have run
  // first; 5 us, which 6 us's would give wrongly unmoved.
  std::vector<uint64_t> arrivals = {25, 2, 3, 14, 6, 5, 18, 31, 12, 1};
  std::vector<uint64_t> durations;
  uint64_t start = 0, sent = 0;
  for (uint64_t at : arrivals) {
    durations.push_back(start + at - sent - 5);
    sent = start + at;
    start += finish(at);
  }
  ProgramSet programs = makeConsumerPipeline(durations, 4, 20);
  StageProgram &consumer = programs.stages[1];
  // The reader last: the last kernel has the lower id, so that only the
  // stream's idleness (not ids) says it would have run after an earlier
  // message's reader.
  ProgramNode reader = consumer.nodes[2];
  consumer.nodes[2] = makeReduce({1});
  consumer.nodes.push_back(makeCompute(8, {2}));
  consumer.nodes.push_back(reader);
  for (ProgramStep &step : consumer.steps)
    step.end = 5;
  StepEstimate estimate = expectExact(programs);
  EXPECT_DOUBLE_EQ(estimate.stepMicros, double(start));
  EXPECT_EQ(estimate.rangedSteps, 5u);
}

TEST(StepEstimateTest, AStepTooLongForTheClockIsAnError) {
  // The clock counts picoseconds in an int64: a step may last 10^12 us.
  ProgramSet programs;
  programs.mesh = Mesh({{"tp", 2}});
  programs.stages.resize(1);
  programs.stages[0].nodes = {makeCompute(600'000'000'000, {}),
                              makeCompute(600'000'000'000, {0})};
  llvm::Expected<StepEstimate> estimate = estimateStep(programs, OneDomain);
  if (estimate)
    FAIL() << "a step of 1.2e12 us was estimated";
  EXPECT_EQ(llvm::toString(estimate.takeError()),
            "stage 0 has a schedule step longer than 1000000000000 us");

  // So may a stage, its steps' times summed: no clock past it wraps.
  programs.stages[0].steps = {{0, 1, 0, -1}, {1, 2, 0, -1}};
  estimate = estimateStep(programs, OneDomain);
  if (estimate)
    FAIL() << "a stage of 1.2e12 us was estimated";
  EXPECT_EQ(llvm::toString(estimate.takeError()),
            "stage 0 runs longer than 1000000000000 us");
}

TEST(StepEstimateTest, AReceiveWithoutItsSendNeverCompletes) {
  ProgramSet programs;
  programs.mesh = Mesh({{"pp", 2}});
  programs.pipelineAxis = 0;
  programs.stages.resize(2);
  programs.stages[1].nodes = {makeMessage(ProgramNodeKind::Recv, 0, 10, {})};
  programs.stages[1].nodes[0].name = "lonely.recv";
  llvm::Expected<StepEstimate> estimate = estimateStep(programs, OneDomain);
  if (estimate)
    FAIL() << "a receive without its send completed";
  EXPECT_EQ(llvm::toString(estimate.takeError()),
            "the step cannot complete: 1 of 1 nodes never become ready; "
            "stage 1 waits in 'lonely.recv' for a send that never comes (the "
            "trace set would deadlock a simulator too)");
}

} // namespace
