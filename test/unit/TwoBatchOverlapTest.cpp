//===- TwoBatchOverlapTest.cpp - Two forwards overlapped as engines run ---===//
//
// Two-batch overlap builds an inference step's two micro-batches as one
// step of turns. With exchanges on a communication stream the turns are
// SGLang's prefill strategy's (a turn ends before a layer's dispatch and
// after its combine), and each stream runs in the order the turns issue
// it. These tests hold the programs to that order and the clock to what
// it implies: the second half's dispatch waits behind the first's combine.
//
//===----------------------------------------------------------------------===//

#include "stg/Driver/Compile.h"
#include "stg/Perf/DeviceModel.h"
#include "stg/Perf/StepEstimate.h"

#include "CompileForTest.h"
#include "TemplatePlan.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringRef.h"

#include "gtest/gtest.h"

#include <string>
#include <vector>

using namespace stg;

namespace {

using DeepEpMode = CompileOptions::DeepEpMode;

/// Mixtral-8x7B, two layers, experts over 4 ranks, a prefill of two
/// overlapped halves of 512 tokens.
std::optional<CompiledModel> compileHalves(DeepEpMode mode) {
  TemplatePlan plan{};
  plan.model = "mixtral-8x7b.stg";
  plan.degrees = {{"ep", 4}};
  plan.microbatches = 2;
  plan.mode = "prefill";
  CompileOptions options = getCompileOptions(plan);
  options.overrides = {{"L", "2"}, {"S", "512"}, {"MB", "1"}};
  options.twoBatchOverlap = true;
  options.deepEpMode = mode;
  return compileForTest(options);
}

bool isExchange(const ProgramNode &node) {
  return node.kind == ProgramNodeKind::Collective &&
         node.commType == CollectiveKind::AllToAll;
}

bool dependsOn(const ProgramNode &node, uint32_t id) {
  return llvm::is_contained(node.dataDeps, id) ||
         llvm::is_contained(node.ctrlDeps, id);
}

/// Each exchange as layer, kind and half: `0.d.1` is layer 0's dispatch
/// of the second half, `1.o.0` layer 1's combine of the first.
std::vector<std::string> getExchangeOrder(const StageProgram &stage) {
  std::vector<std::string> order;
  for (const ProgramNode &node : stage.nodes) {
    if (!isExchange(node))
      continue;
    llvm::StringRef name = node.name;
    std::string layer = name.startswith("layer.1.") ? "1" : "0";
    std::string which = name.contains("moe.d.") ? "d" : "o";
    order.push_back(layer + "." + which + "." +
                    std::to_string(node.microbatch));
  }
  return order;
}

TEST(TwoBatchOverlapTest, HalvesTakeTurnsAtTheExpertExchanges) {
  std::optional<CompiledModel> compiled = compileHalves(DeepEpMode::Normal);
  ASSERT_TRUE(compiled);
  const StageProgram &stage = compiled->programs.stages.at(0);
  ASSERT_EQ(stage.steps.size(), 1u);
  EXPECT_EQ(getExchangeOrder(stage),
            (std::vector<std::string>{"0.d.0", "0.o.0", "0.d.1", "0.o.1",
                                      "1.d.0", "1.o.0", "1.d.1", "1.o.1"}));
  // Between a half's dispatch and its combine runs only that half's work
  // (its experts); before the first dispatch, both halves' attention.
  int half = -1;
  bool secondHalfBegun = false;
  for (const ProgramNode &node : stage.nodes) {
    if (node.microbatch == 1)
      secondHalfBegun = true;
    if (isExchange(node)) {
      if (half < 0) {
        EXPECT_TRUE(secondHalfBegun) << node.name;
      }
      half = half < 0 ? node.microbatch : -1;
      continue;
    }
    if (half >= 0) {
      EXPECT_EQ(node.microbatch, half) << node.name;
    }
  }
}

TEST(TwoBatchOverlapTest, EachStreamRunsInTheOrderItWasIssued) {
  for (DeepEpMode mode : {DeepEpMode::Normal, DeepEpMode::LowLatency}) {
    std::optional<CompiledModel> compiled = compileHalves(mode);
    ASSERT_TRUE(compiled);
    const StageProgram &stage = compiled->programs.stages.at(0);
    std::optional<uint32_t> lastCompute, lastCollective;
    for (uint32_t id = 0; id < stage.nodes.size(); ++id) {
      const ProgramNode &node = stage.nodes[id];
      ASSERT_TRUE(node.kind == ProgramNodeKind::Compute ||
                  node.kind == ProgramNodeKind::Collective);
      std::optional<uint32_t> &last =
          node.kind == ProgramNodeKind::Compute ? lastCompute : lastCollective;
      if (last) {
        EXPECT_TRUE(dependsOn(node, *last))
            << node.name << " does not wait for " << stage.nodes[*last].name;
      }
      last = id;
    }
  }
}

TEST(TwoBatchOverlapTest, LowLatencyExchangesEndATurnEach) {
  std::optional<CompiledModel> compiled = compileHalves(DeepEpMode::LowLatency);
  ASSERT_TRUE(compiled);
  EXPECT_EQ(getExchangeOrder(compiled->programs.stages.at(0)),
            (std::vector<std::string>{"0.d.0", "0.d.1", "0.o.0", "0.o.1",
                                      "1.d.0", "1.d.1", "1.o.0", "1.o.1"}));
}

TEST(TwoBatchOverlapTest, TheSecondDispatchWaitsBehindTheFirstCombine) {
  llvm::Expected<SystemSpec> system = loadSystem("dgx-h100");
  ASSERT_TRUE(bool(system)) << llvm::toString(system.takeError());
  std::optional<CompiledModel> compiled = compileHalves(DeepEpMode::Normal);
  ASSERT_TRUE(compiled);
  applyDeviceModel(compiled->programs, system->device, nullptr);
  StepTimeline timeline;
  llvm::Expected<StepEstimate> step =
      estimateStep(compiled->programs, *system, &timeline);
  ASSERT_TRUE(bool(step)) << llvm::toString(step.takeError());
  const StageProgram &stage = compiled->programs.stages.at(0);
  // The exchanges in the order they ran on the communication stream, one
  // at a time, none before the one issued before it has finished.
  std::vector<const TimelineEvent *> exchanges;
  for (const TimelineEvent &event : timeline.events)
    if (isExchange(stage.nodes[event.node]))
      exchanges.push_back(&event);
  ASSERT_EQ(exchanges.size(), 8u);
  for (size_t index = 1; index < exchanges.size(); ++index) {
    EXPECT_LT(exchanges[index - 1]->node, exchanges[index]->node);
    EXPECT_GE(exchanges[index]->startMicros, exchanges[index - 1]->endMicros)
        << stage.nodes[exchanges[index]->node].name;
  }
  // The first half's combine waits for its experts, and the second half's
  // dispatch for that combine.
  const ProgramNode &secondDispatch = stage.nodes[exchanges[2]->node];
  EXPECT_EQ(secondDispatch.microbatch, 1);
  EXPECT_TRUE(dependsOn(secondDispatch, exchanges[1]->node));
}

} // namespace
