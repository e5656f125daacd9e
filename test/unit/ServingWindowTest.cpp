//===- ServingWindowTest.cpp - A serving window's programs ----------------===//
//
// The window's traces chain many compiled programs on the same ranks
// (ProgramChain.h): a link waits for the last step before it as a schedule
// step does, so the step clock prices the chain as the sum of its links.
// The window's iterations and KV transfers come from the run's records by
// fixed rules (chooseServingWindow), and the built set puts a disaggregated
// pair on one mesh with a send and a receive per cache and pair of stages
// that share layers.
//
//===----------------------------------------------------------------------===//

#include "stg/Perf/StepEstimate.h"
#include "stg/Serve/ProgramChain.h"
#include "stg/Serve/ServingWindow.h"

#include "HandBuiltPrograms.h"

#include "gtest/gtest.h"

using namespace stg;

namespace {

/// Two steps: [0, 1] then [2, 3]; each step's two nodes are independent,
/// so the first step has two exits.
StageProgram makeTwoStepProgram(uint64_t micros) {
  StageProgram program;
  program.nodes = {makeCompute(micros, {}), makeCompute(micros, {}),
                   makeCompute(micros, {}), makeCompute(micros, {})};
  program.nodes[0].name = "a";
  program.nodes[2].ctrlDeps = {0, 1};
  program.nodes[3].ctrlDeps = {0, 1};
  program.steps = {{0, 2, 0, -1}, {2, 4, 0, -1}};
  return program;
}

ProgramSet makeSet(std::vector<StageProgram> stages) {
  ProgramSet set;
  set.mesh = Mesh({{"tp", 1}, {"pp", unsigned(stages.size())}});
  set.pipelineAxis = 1;
  set.stages = std::move(stages);
  return set;
}

double estimateMicros(std::vector<StageProgram> stages) {
  llvm::Expected<StepEstimate> estimate =
      estimateStep(makeSet(std::move(stages)), makeTwoTierSystem());
  EXPECT_TRUE(bool(estimate)) << llvm::toString(estimate.takeError());
  return estimate ? estimate->stepMicros : -1;
}

} // namespace

TEST(ProgramChainTest, LinkWaitsForTheLastStepThroughABarrier) {
  StageProgram first = makeTwoStepProgram(10), second = makeTwoStepProgram(5);
  second.nodes[0].kind = ProgramNodeKind::Send;
  second.nodes[0].tag = 3;
  second.nodes[0].peerStage = 1;
  StageProgram chain;
  appendChainLink(chain, {&first, "iter0.decode", 0, 0, {}, false});
  ASSERT_EQ(chain.nodes.size(), 4u);
  EXPECT_EQ(chain.nodes[0].name, "iter0.decode.a");
  appendChainLink(chain, {&second, "iter0.prefill", 100, 2, {}, false});

  // The first link's last step has two exits (2, 3): a barrier joins them
  // and opens the second link's first step.
  ASSERT_EQ(chain.nodes.size(), 9u);
  const ProgramNode &barrier = chain.nodes[4];
  EXPECT_EQ(barrier.opType, "barrier");
  EXPECT_EQ(barrier.name, "barrier.iter0.prefill");
  EXPECT_EQ(barrier.ctrlDeps, (llvm::SmallVector<uint32_t, 2>{2, 3}));
  EXPECT_EQ(chain.nodes[5].ctrlDeps, (llvm::SmallVector<uint32_t, 2>{4}));
  EXPECT_EQ(chain.nodes[6].ctrlDeps, (llvm::SmallVector<uint32_t, 2>{4}));
  EXPECT_EQ(chain.nodes[7].ctrlDeps, (llvm::SmallVector<uint32_t, 2>{5, 6}));
  EXPECT_EQ(chain.nodes[5].tag, 103);
  EXPECT_EQ(chain.nodes[5].peerStage, 3u);
  ASSERT_EQ(chain.steps.size(), 4u);
  EXPECT_EQ(chain.steps[2].begin, 4u);
  EXPECT_EQ(chain.steps[2].end, 7u);
  EXPECT_EQ(chain.steps[3].begin, 7u);
  EXPECT_EQ(chain.steps[3].end, 9u);
  EXPECT_EQ(getMaxTag(chain), 103);
}

TEST(ProgramChainTest, OneExitNeedsNoBarrier) {
  StageProgram single;
  single.nodes = {makeCompute(1, {}), makeCompute(1, {0})};
  StageProgram chain;
  appendChainLink(chain, {&single, "iter0", 0, 0, {}, false});
  appendChainLink(chain, {&single, "iter1", 0, 0, {}, false});
  ASSERT_EQ(chain.nodes.size(), 4u);
  EXPECT_EQ(chain.nodes[2].ctrlDeps, (llvm::SmallVector<uint32_t, 2>{1}));
  EXPECT_EQ(chain.nodes[3].dataDeps, (llvm::SmallVector<uint32_t, 4>{2}));
  // Hand-built programs are one step each: the chain makes them explicit.
  ASSERT_EQ(chain.steps.size(), 2u);
  EXPECT_EQ(chain.steps[1].begin, 2u);
}

TEST(ProgramChainTest, ChainTakesTheSumOfItsLinks) {
  StageProgram first = makeTwoStepProgram(10), second = makeTwoStepProgram(5);
  StageProgram chain;
  appendChainLink(chain, {&first, "iter0", 0, 0, {}, false});
  appendChainLink(chain, {&second, "iter1", 0, 0, {}, false});
  EXPECT_DOUBLE_EQ(estimateMicros({chain}),
                   estimateMicros({first}) + estimateMicros({second}));
}

TEST(ProgramChainTest, ReceivesGateTheLinkAndMessagesAloneMakeAStep) {
  StageProgram work = makeTwoStepProgram(10);
  ProgramNode send = makeMessage(ProgramNodeKind::Send, 1, 1000, {});
  ProgramNode recv = makeMessage(ProgramNodeKind::Recv, 0, 1000, {});

  // Stage 0 computes, then sends beside nothing; stage 1 waits for the
  // message before its work.
  StageProgram sender, receiver;
  appendChainLink(sender, {&work, "iter0", 0, 0, {}, false});
  appendChainLink(sender, {nullptr, "kv", 0, 0, {send}, false});
  ASSERT_EQ(sender.steps.size(), 3u);
  EXPECT_EQ(sender.steps.back().end - sender.steps.back().begin, 2u)
      << "a barrier and the send";
  appendChainLink(receiver, {&work, "iter0", 0, 0, {recv}, true});
  EXPECT_EQ(receiver.nodes[0].kind, ProgramNodeKind::Recv);
  EXPECT_TRUE(receiver.nodes[0].ctrlDeps.empty());
  EXPECT_EQ(receiver.nodes[1].ctrlDeps, (llvm::SmallVector<uint32_t, 2>{0}));
  EXPECT_EQ(receiver.nodes[2].ctrlDeps, (llvm::SmallVector<uint32_t, 2>{0}));

  // 40 us of work (two steps of two 10 us kernels), 1000 bytes over the
  // scale-up link (1 us a step + 1 us), then the receiver's 40 us.
  EXPECT_DOUBLE_EQ(estimateMicros({sender, receiver}), 40 + 2 + 40);
}

namespace {

IterationCostModel makeCost(unsigned replicas) {
  IterationCostModel cost;
  cost.replicas = replicas;
  cost.kvBytes = {{0, 1000}, {0, 1000}}; // One byte a token.
  return cost;
}

IterationRecord makeIteration(unsigned engine, double start, double micros,
                              uint64_t decodes, uint64_t prefillTokens) {
  IterationRecord record;
  record.engine = engine;
  record.start = start;
  record.micros = micros;
  record.decodeSequences = decodes;
  record.decodeContext = decodes * 100;
  record.prefillTokens = prefillTokens;
  record.prefillChunks = prefillTokens ? 3 : 0;
  return record;
}

} // namespace

TEST(ServingWindowTest, ChoosesIterationsFromTheMiddleOfTheRun) {
  IterationCostModel cost = makeCost(2);
  ServingDeployment deployment;
  deployment.decode = {&cost, 1, "dp2"};
  ServingResult result;
  result.engines.resize(1);
  for (unsigned index = 0; index < 10; ++index)
    result.iterations.push_back(makeIteration(0, 10.0 * index, 10, 5, 600));
  result.requests.push_back({});
  result.requests.back().finish = 100;

  // The middle is 50: iterations 5 and 6; per replica, halves rounded up.
  ServingWindowPlan plan = chooseServingWindow(deployment, result, 2);
  ASSERT_EQ(plan.iterations.size(), 2u);
  EXPECT_EQ(plan.iterations[0].record, 5u);
  EXPECT_EQ(plan.iterations[0].decodeSequences, 3u);
  EXPECT_EQ(plan.iterations[0].decodeContext, 100u);
  EXPECT_EQ(plan.iterations[0].prefillSequences, 2u);
  EXPECT_EQ(plan.iterations[0].prefillTokens, 150u); // 300 over 2 chunks.
  EXPECT_DOUBLE_EQ(plan.startMicros, 50);
  EXPECT_DOUBLE_EQ(plan.endMicros, 70);
  EXPECT_DOUBLE_EQ(plan.busyMicros, 20);

  // Fewer than asked after the middle: the window moves back.
  plan = chooseServingWindow(deployment, result, 8);
  ASSERT_EQ(plan.iterations.size(), 8u);
  EXPECT_EQ(plan.iterations[0].record, 2u);
  plan = chooseServingWindow(deployment, result, 20);
  EXPECT_EQ(plan.iterations.size(), 10u);
}

TEST(ServingWindowTest, SendsEachFinishedPrefillToTheDecodeIterationAfter) {
  IterationCostModel prefillCost = makeCost(1), decodeCost = makeCost(1);
  // The decode plan holds half a byte a token on a rank: what it receives.
  decodeCost.kvBytes = {{0, 1000}, {0, 500}};
  ServingDeployment deployment;
  deployment.prefill = EnginePool{&prefillCost, 2, "tp1"};
  deployment.decode = {&decodeCost, 1, "tp1"};
  ServingResult result;
  result.engines.resize(3); // prefill.0, prefill.1, decode.0.
  // Prefill engine 0 at 0-10, 10-20, 20-30; engine 1 at 10-20 too; the
  // decode engine every 4 us from 2.
  for (unsigned index = 0; index < 3; ++index)
    result.iterations.push_back(makeIteration(0, 10.0 * index, 10, 0, 64));
  result.iterations.push_back(makeIteration(1, 10, 10, 0, 64));
  for (unsigned index = 0; index < 12; ++index)
    result.iterations.push_back(makeIteration(2, 2 + 4.0 * index, 4, 1, 0));
  std::stable_sort(result.iterations.begin(), result.iterations.end(),
                   [](const IterationRecord &a, const IterationRecord &b) {
                     return a.start < b.start;
                   });
  auto addRequest = [&](unsigned engine, double firstToken, uint64_t output) {
    RequestRecord request;
    request.input = 200;
    request.output = output;
    request.prefillEngine = engine;
    request.firstToken = firstToken;
    request.transfer = 5;
    request.finish = 60;
    result.requests.push_back(request);
  };
  addRequest(0, 20, 8); // Arrives at 25: the decode iteration at 26.
  addRequest(1, 20, 8); // Another prefill engine's: not in the window.
  addRequest(0, 20, 1); // Nothing left to decode: no transfer.
  addRequest(0, 30, 8); // Arrives at 35, after the decode side's last.

  ServingWindowPlan plan = chooseServingWindow(deployment, result, 2);
  // The middle (30) has no iteration of prefill.0 after it: moved back to
  // the last two; the decode side's iterations that start in [10, 30).
  ASSERT_EQ(plan.iterations.size(), 2u);
  EXPECT_DOUBLE_EQ(plan.startMicros, 10);
  ASSERT_EQ(plan.decodeIterations.size(), 5u);
  EXPECT_DOUBLE_EQ(
      result.iterations[plan.decodeIterations.front().record].start, 10);
  ASSERT_EQ(plan.transfers.size(), 2u);
  EXPECT_EQ(plan.transfers[0].request, 0u);
  EXPECT_EQ(plan.transfers[0].afterPrefill, 0u);
  ASSERT_TRUE(plan.transfers[0].beforeDecode.has_value());
  EXPECT_EQ(*plan.transfers[0].beforeDecode, 4u);
  EXPECT_EQ(plan.transfers[0].bytesPerRank, 100u);
  EXPECT_EQ(plan.transfers[1].request, 3u);
  EXPECT_EQ(plan.transfers[1].afterPrefill, 1u);
  EXPECT_FALSE(plan.transfers[1].beforeDecode.has_value());
}

namespace {

CompileOptions getSmallInstance() {
  CompileOptions options;
  options.input = std::string(STG_SOURCE_TEMPLATES_DIR) + "/llama3-8b.stg";
  options.overrides = {{"L", "2"}};
  options.degrees = {{"tp", 2}};
  return options;
}

size_t countKind(const StageProgram &program, ProgramNodeKind kind) {
  return llvm::count_if(program.nodes, [&](const ProgramNode &node) {
    return node.kind == kind;
  });
}

} // namespace

TEST(ServingWindowTest, BuildsAPairOnOneMeshWithTheCachesAsMessages) {
  ServingWindowPlan plan;
  plan.iterations = {{0, 0, 0, 2, 64}, {1, 0, 0, 1, 32}};
  plan.decodeIterations = {{2, 4, 100, 0, 0}, {3, 4, 101, 0, 0},
                           {4, 5, 102, 0, 0}};
  plan.transfers = {{7, 0, 1, 1 << 20}, {8, 0, std::nullopt, 1 << 20},
                    {9, 1, std::nullopt, 1 << 20}};
  CompileOptions instance = getSmallInstance();
  std::string errors;
  llvm::raw_string_ostream os(errors);
  DiagnosticEngine diags(os);
  llvm::Expected<SystemSpec> system = loadSystem("dgx-h100");
  ASSERT_TRUE(bool(system));
  std::optional<ServingWindow> window =
      buildServingWindow(plan, instance, &instance, *system, diags);
  ASSERT_TRUE(window) << os.str();

  const ProgramSet &programs = window->programs;
  EXPECT_EQ(programs.mesh.describe(), "tp=2, pp=2");
  ASSERT_EQ(programs.stages.size(), 2u);
  const StageProgram &prefill = programs.stages[0];
  const StageProgram &decode = programs.stages[1];
  EXPECT_EQ(countKind(prefill, ProgramNodeKind::Send), 3u);
  EXPECT_EQ(countKind(prefill, ProgramNodeKind::Recv), 0u);
  EXPECT_EQ(countKind(decode, ProgramNodeKind::Recv), 3u);
  // The caches go after their prefill: the first two beside the second
  // prefill, the third in a step of its own at the end.
  EXPECT_EQ(prefill.nodes.back().kind, ProgramNodeKind::Send);
  EXPECT_EQ(prefill.nodes.back().name, "kv.request9.send");
  // The second decode iteration opens with its cache's receive.
  auto received = llvm::find_if(decode.nodes, [](const ProgramNode &node) {
    return node.name == "kv.request7.recv";
  });
  ASSERT_NE(received, decode.nodes.end());
  EXPECT_EQ(received->peerStage, 0u);
  EXPECT_EQ(std::next(received)->name.rfind("iter1.decode.", 0), 0u);
  for (const ProgramNode &node : prefill.nodes)
    if (node.kind == ProgramNodeKind::Send)
      EXPECT_EQ(node.peerStage, 1u);

  llvm::Expected<StepEstimate> estimate = estimateStep(programs, *system);
  ASSERT_TRUE(bool(estimate)) << llvm::toString(estimate.takeError());
  EXPECT_GT(estimate->stepMicros, 0);
}

TEST(ServingWindowTest, PairsTwoPlansWithEachStageSendingItsLayers) {
  // A tp 2 prefill instance beside tp 1 decode instances of two stages: the
  // decode instance runs as two replicas in a stage of two ranks, and the
  // prefill stage sends each decode stage its layer, half of it to each
  // replica.
  ServingWindowPlan plan;
  plan.iterations = {{0, 0, 0, 2, 64}};
  plan.decodeIterations = {{1, 4, 100, 0, 0}, {2, 4, 101, 0, 0}};
  plan.transfers = {{7, 0, 1, 1 << 20}};
  CompileOptions prefillInstance = getSmallInstance();
  CompileOptions decodeInstance = getSmallInstance();
  decodeInstance.degrees = {{"pp", 2}};
  std::string errors;
  llvm::raw_string_ostream os(errors);
  DiagnosticEngine diags(os);
  llvm::Expected<SystemSpec> system = loadSystem("dgx-h100");
  ASSERT_TRUE(bool(system));
  std::optional<ServingWindow> window = buildServingWindow(
      plan, prefillInstance, &decodeInstance, *system, diags);
  ASSERT_TRUE(window) << os.str();

  const ProgramSet &programs = window->programs;
  EXPECT_EQ(programs.mesh.describe(), "tp=2, pp=3");
  ASSERT_TRUE(window->pair);
  EXPECT_EQ(window->pair->instanceRanksPerStage[1], 1u);
  ASSERT_EQ(programs.stages.size(), 3u);
  std::vector<unsigned> peers;
  for (const ProgramNode &node : programs.stages[0].nodes)
    if (node.kind == ProgramNodeKind::Send) {
      EXPECT_EQ(node.commBytes, 1 << 19);
      peers.push_back(node.peerStage);
    }
  EXPECT_EQ(peers, (std::vector<unsigned>{1, 2}));
  for (unsigned stage : {1u, 2u}) {
    EXPECT_EQ(programs.stages[stage].layers,
              (std::vector<unsigned>{stage - 1}));
    auto received = llvm::find_if(
        programs.stages[stage].nodes, [](const ProgramNode &node) {
          return node.kind == ProgramNodeKind::Recv && node.peerStage == 0;
        });
    ASSERT_NE(received, programs.stages[stage].nodes.end());
    EXPECT_EQ(received->commBytes, 1 << 19);
  }
  // The prefill instance's all-reduces stay on its tp axis; the decode
  // instance's have none.
  for (const ProgramNode &node : programs.stages[0].nodes)
    if (node.kind == ProgramNodeKind::Collective)
      EXPECT_EQ(node.group, AxisMask(1));
  for (unsigned stage : {1u, 2u})
    EXPECT_EQ(countKind(programs.stages[stage], ProgramNodeKind::Collective),
              0u);

  llvm::Expected<StepEstimate> estimate = estimateStep(programs, *system);
  ASSERT_TRUE(bool(estimate)) << llvm::toString(estimate.takeError());
  EXPECT_GT(estimate->stepMicros, 0);
}
