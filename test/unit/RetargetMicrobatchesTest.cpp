//===- RetargetMicrobatchesTest.cpp - Moved sets against built ones -------===//
//
// The plan search builds a folded program set for one micro-batch count
// and moves it to the others of its family (retargetMicrobatches). A moved
// set, re-priced, must be field for field the set built for that count;
// where the count's schedule reaches the built steps in another order the
// move must fail and leave the set as it was.
//
//===----------------------------------------------------------------------===//

#include "stg/Driver/Compile.h"
#include "stg/Instantiate/OpNumbers.h"

#include "CompileForTest.h"
#include "ExpectSamePrograms.h"
#include "TemplatePlan.h"

#include "gtest/gtest.h"

#include <functional>

using namespace stg;

namespace {

/// A plan whose micro-batch count is the first of `counts`, built, then
/// moved to each of the others in turn.
struct Family {
  TemplatePlan plan;
  std::vector<unsigned> counts;
  /// How many of the other counts the set must move to.
  unsigned moves;
};

void PrintTo(const Family &family, std::ostream *os) {
  PrintTo(family.plan, os);
}

CompileOptions getOptions(const Family &family, unsigned microbatches) {
  TemplatePlan plan = family.plan;
  plan.microbatches = microbatches;
  CompileOptions options = getCompileOptions(plan);
  options.foldMicrobatches = options.foldLayers = true;
  return options;
}

class RetargetMicrobatchesTest : public ::testing::TestWithParam<Family> {};

TEST_P(RetargetMicrobatchesTest, AMovedSetIsTheBuiltOne) {
  const Family &family = GetParam();
  std::string errors;
  llvm::raw_string_ostream os(errors);
  DiagnosticEngine diags(os);
  // The module of the first count, instantiated again with its sources.
  CompileOptions firstOptions = getOptions(family, family.counts.front());
  std::optional<CompiledModel> built = compileModel(firstOptions, diags);
  ASSERT_TRUE(built) << errors;
  std::optional<Mesh> mesh = bindPlan(*built->module, firstOptions, diags);
  ASSERT_TRUE(mesh) << errors;
  ProgramSources sources;
  std::optional<ProgramSet> original = instantiateModel(
      *built->module, *mesh, firstOptions, diags, nullptr, &sources);
  ASSERT_TRUE(original) << errors;
  ASSERT_TRUE(sources.foldedMicrobatches);

  unsigned moved = 0;
  ProgramSet set = *original;
  for (unsigned count : llvm::ArrayRef(family.counts).drop_front()) {
    SCOPED_TRACE("to " + std::to_string(count) + " micro-batches from " +
                 std::to_string(set.numMicrobatches));
    ProgramSet before = set;
    if (failed(retargetMicrobatches(set, sources, count))) {
      expectSameSet(set, before);
      continue;
    }
    ++moved;
    CompileOptions options = getOptions(family, count);
    OpNumberCache numbers(*built->module, diags);
    ASSERT_TRUE(succeeded(repriceProgramSet(
        set, sources, *built->module, *mesh,
        getInstantiateOptions(*mesh, options), numbers, diags)))
        << errors;
    std::optional<CompiledModel> fresh = compileForTest(options);
    ASSERT_TRUE(fresh);
    expectSameSet(set, fresh->programs);
  }
  EXPECT_EQ(moved, family.moves);
}

/// A plan of `model` with `degrees` (and the rest of TemplatePlan's
/// defaults), changed by `change`.
Family makeFamily(const char *model,
                  std::vector<std::pair<std::string, unsigned>> degrees,
                  std::vector<unsigned> counts, unsigned moves,
                  std::function<void(TemplatePlan &)> change = {}) {
  Family family{TemplatePlan{model, std::move(degrees), counts.front()},
                std::move(counts), moves};
  if (change)
    change(family.plan);
  return family;
}

INSTANTIATE_TEST_SUITE_P(
    Families, RetargetMicrobatchesTest,
    ::testing::Values(
        // Each count from the one before: from 4 up, down to 2, and up
        // again; never to or from one micro-batch.
        makeFamily("llama3-8b.stg", {{"dp", 2}, {"tp", 2}, {"pp", 4}},
                   {4, 7, 16, 2, 1, 3, 64}, 5),
        makeFamily("llama3-8b.stg", {{"dp", 2}, {"pp", 2}}, {8, 2, 5, 32}, 3,
                   [](TemplatePlan &plan) {
                     plan.recompute = "full";
                     plan.fsdp = true;
                   }),
        makeFamily("llama3-8b.stg", {{"tp", 2}, {"pp", 2}, {"cp", 2}},
                   {3, 6, 2}, 2,
                   [](TemplatePlan &plan) {
                     plan.recompute = "selective";
                     plan.distributedOptimizer = true;
                     plan.schedule = PipelineSchedule::GPipe;
                     plan.layers = 6;
                   }),
        // Zero bubble: how many W a stage delays depends on the count
        // while it is below the stages.
        makeFamily("llama3-8b.stg", {{"dp", 2}, {"pp", 4}}, {8, 3, 16, 2, 5}, 4,
                   [](TemplatePlan &plan) {
                     plan.schedule = PipelineSchedule::ZeroBubbleH1;
                   }),
        // ZB-V: counts of 2P-1 = 7 or more move among themselves; below,
        // the cut order reaches the first and the last micro-batch's
        // steps in another order, so those are built.
        makeFamily("llama3-8b.stg", {{"tp", 2}, {"pp", 4}},
                   {8, 16, 7, 12, 3, 2}, 3,
                   [](TemplatePlan &plan) {
                     plan.schedule = PipelineSchedule::ZeroBubbleV;
                     plan.virtualStages = 2;
                     plan.layers = 16;
                   }),
        // Interleaved: with one group of pp micro-batches (4 over 4
        // stages) a chunk's last backward runs before the next chunk's
        // first, so that count cannot move to or from two groups or more.
        makeFamily("llama3-8b.stg", {{"tp", 2}, {"pp", 4}},
                   {8, 16, 12, 4, 8, 24}, 4,
                   [](TemplatePlan &plan) {
                     plan.virtualStages = 2;
                     plan.layers = 16;
                   }),
        makeFamily("llama3-8b.stg", {{"dp", 2}, {"pp", 2}}, {4, 8, 2, 6}, 2,
                   [](TemplatePlan &plan) {
                     plan.virtualStages = 4;
                     plan.recompute = "full";
                     plan.distributedOptimizer = true;
                     plan.layers = 16;
                   }),
        makeFamily("gpt.stg", {{"dp", 2}, {"pp", 2}}, {6, 10, 4}, 2,
                   [](TemplatePlan &plan) { plan.virtualStages = 2; }),
        // The embedding and the loss counted as layers: the first and the
        // last chunk hold none.
        makeFamily("llama3-8b.stg", {{"tp", 2}, {"pp", 4}},
                   {8, 16, 12, 4, 8, 24}, 4,
                   [](TemplatePlan &plan) {
                     plan.virtualStages = 2;
                     plan.layers = 6;
                     plan.pipelineSplit.accountForEmbedding = true;
                     plan.pipelineSplit.accountForLoss = true;
                   }),
        makeFamily("mixtral-8x7b.stg", {{"ep", 4}, {"pp", 2}}, {4, 9, 2}, 2,
                   [](TemplatePlan &plan) { plan.layers = 4; }),
        makeFamily("deepseek-moe-16b.stg", {{"ep", 2}, {"pp", 4}}, {8, 16, 24},
                   2,
                   [](TemplatePlan &plan) {
                     plan.virtualStages = 2;
                     plan.recompute = "selective";
                   }),
        makeFamily("mamba-2.8b.stg", {{"dp", 2}, {"pp", 4}}, {10, 3}, 1),
        makeFamily("llama3-8b.stg", {{"tp", 2}, {"pp", 4}}, {5, 2, 9}, 2,
                   [](TemplatePlan &plan) { plan.mode = "prefill"; })));

} // namespace
