//===- FoldedEstimateTest.cpp - Folded programs price plans alike ---------===//
//
// The plan search prices plans from programs whose middle micro-batches
// replay the first one's nodes (InstantiateOptions::foldMicrobatches). The
// promise is that this changes nothing but the cost: for shipped models
// under every schedule shape, training and inference, the folded programs
// give the step time and memory of the programs written as traces.
//
//===----------------------------------------------------------------------===//

#include "stg/Driver/Compile.h"
#include "stg/Perf/DeviceModel.h"
#include "stg/Perf/StepEstimate.h"

#include "CompileForTest.h"

#include "gtest/gtest.h"

using namespace stg;

namespace {

struct Plan {
  const char *model;
  std::vector<std::pair<std::string, unsigned>> degrees;
  unsigned microbatches;
  unsigned virtualStages = 1;
  std::string recompute = "none";
  std::string mode = "train";
  bool fsdp = false;
  PipelineSchedule schedule = PipelineSchedule::OneFOneB;
};

StepEstimate estimate(const Plan &plan, bool fold, const SystemSpec &system,
                      std::vector<StageMemory> &memory) {
  CompileOptions options;
  options.input = std::string(STG_SOURCE_TEMPLATES_DIR) + "/" + plan.model;
  options.degrees = plan.degrees;
  options.microbatches = plan.microbatches;
  options.virtualStages = plan.virtualStages;
  options.recompute = plan.recompute;
  options.mode = plan.mode;
  options.fsdp = plan.fsdp;
  options.schedule = plan.schedule;
  options.overrides = {{"L", "8"}, {"S", "1024"}};
  options.foldMicrobatches = fold;
  std::optional<CompiledModel> compiled = compileForTest(options);
  if (!compiled)
    return {};
  EXPECT_EQ(compiled->programs.folded, fold);
  applyDeviceModel(compiled->programs, system.device, nullptr);
  for (const StageProgram &stage : compiled->programs.stages)
    memory.push_back(stage.memory);
  llvm::Expected<StepEstimate> step = estimateStep(compiled->programs, system);
  EXPECT_TRUE(bool(step));
  if (!step) {
    ADD_FAILURE() << llvm::toString(step.takeError());
    return {};
  }
  return *step;
}

class FoldedEstimateTest : public ::testing::TestWithParam<Plan> {};

TEST_P(FoldedEstimateTest, FoldedProgramsGiveTheSameEstimate) {
  llvm::Expected<SystemSpec> system = loadSystem("dgx-h100");
  ASSERT_TRUE(bool(system)) << llvm::toString(system.takeError());
  std::vector<StageMemory> flatMemory, foldedMemory;
  StepEstimate flat = estimate(GetParam(), false, *system, flatMemory);
  StepEstimate folded = estimate(GetParam(), true, *system, foldedMemory);
  ASSERT_GT(flat.stepMicros, 0);
  // Arrivals are matched to the nanosecond: steps may differ by that much.
  EXPECT_NEAR(folded.stepMicros, flat.stepMicros, 1e-3 * 512);
  ASSERT_EQ(folded.stages.size(), flat.stages.size());
  for (size_t stage = 0; stage < flat.stages.size(); ++stage) {
    EXPECT_NEAR(folded.stages[stage].computeMicros,
                flat.stages[stage].computeMicros, 1e-6 * flat.stepMicros);
    EXPECT_NEAR(folded.stages[stage].communicationMicros,
                flat.stages[stage].communicationMicros,
                1e-6 * flat.stepMicros);
    EXPECT_NEAR(folded.stages[stage].pipelineWaitMicros,
                flat.stages[stage].pipelineWaitMicros, 1e-3 * 512);
    EXPECT_EQ(foldedMemory[stage].total(), flatMemory[stage].total());
  }
}

using Degrees = std::vector<std::pair<std::string, unsigned>>;

INSTANTIATE_TEST_SUITE_P(
    Plans, FoldedEstimateTest,
    ::testing::Values(
        Plan{"llama3-8b.stg", Degrees{{"dp", 2}, {"tp", 2}, {"pp", 4}}, 12},
        Plan{"llama3-8b.stg", Degrees{{"tp", 4}, {"pp", 2}}, 8, 2},
        Plan{"llama3-8b.stg", Degrees{{"dp", 4}, {"pp", 4}}, 16, 2,
             "selective"},
        Plan{"llama3-8b.stg", Degrees{{"dp", 4}, {"pp", 2}, {"cp", 2}}, 6, 1,
             "full"},
        Plan{"llama3-8b.stg", Degrees{{"dp", 8}, {"pp", 2}}, 5, 1, "none",
             "train", true},
        Plan{"llama3-8b.stg", Degrees{{"tp", 2}, {"pp", 4}}, 7, 1, "none",
             "train", false, PipelineSchedule::GPipe},
        Plan{"llama3-8b.stg", Degrees{{"tp", 2}, {"pp", 2}}, 6, 1, "none",
             "prefill"},
        Plan{"gpt.stg", Degrees{{"dp", 2}, {"pp", 2}}, 9},
        Plan{"gpt.stg", Degrees{{"dp", 2}, {"pp", 2}}, 6, 2},
        Plan{"mixtral-8x7b.stg", Degrees{{"ep", 4}, {"pp", 2}}, 4},
        Plan{"deepseek-moe-16b.stg", Degrees{{"ep", 2}, {"pp", 4}}, 8, 2},
        Plan{"mamba-2.8b.stg", Degrees{{"dp", 2}, {"pp", 4}}, 10},
        // Many micro-batches: folding builds 2 of them.
        Plan{"llama3-8b.stg", Degrees{{"dp", 2}, {"tp", 2}, {"pp", 4}}, 64},
        Plan{"llama3-8b.stg", Degrees{{"tp", 4}, {"pp", 2}}, 64, 2},
        Plan{"llama3-8b.stg", Degrees{{"dp", 4}, {"pp", 2}, {"cp", 2}}, 40,
             1, "full", "train", true},
        Plan{"llama3-8b.stg", Degrees{{"tp", 2}, {"pp", 4}}, 64, 1, "none",
             "train", false, PipelineSchedule::GPipe},
        Plan{"deepseek-moe-16b.stg", Degrees{{"ep", 2}, {"pp", 4}}, 96, 2}));

} // namespace
