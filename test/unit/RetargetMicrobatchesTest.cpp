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

#include "gtest/gtest.h"

using namespace stg;

namespace {

struct Family {
  const char *model;
  std::vector<std::pair<std::string, unsigned>> degrees;
  unsigned virtualStages = 1;
  std::string recompute = "none";
  bool fsdp = false;
  bool distributedOptimizer = false;
  std::string mode = "train";
  PipelineSchedule schedule = PipelineSchedule::OneFOneB;
  unsigned layers = 8;
  /// The counts to build, the first for the set that is moved.
  std::vector<unsigned> counts;
  /// How many of the other counts the set must move to.
  unsigned moves;
};

void PrintTo(const Family &family, std::ostream *os) {
  *os << family.model << " L=" << family.layers;
  for (const auto &[axis, degree] : family.degrees)
    *os << " " << axis << degree;
  *os << " v" << family.virtualStages << " " << family.recompute << " "
      << family.mode << (family.fsdp ? " fsdp" : "")
      << (family.distributedOptimizer ? " dist-opt" : "");
}

CompileOptions getOptions(const Family &family, unsigned microbatches) {
  CompileOptions options;
  options.input = std::string(STG_SOURCE_TEMPLATES_DIR) + "/" + family.model;
  options.degrees = family.degrees;
  options.microbatches = microbatches;
  options.virtualStages = family.virtualStages;
  options.recompute = family.recompute;
  options.fsdp = family.fsdp;
  options.distributedOptimizer = family.distributedOptimizer;
  options.mode = family.mode;
  options.schedule = family.schedule;
  options.overrides = {{"L", std::to_string(family.layers)}, {"S", "1024"}};
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

INSTANTIATE_TEST_SUITE_P(
    Families, RetargetMicrobatchesTest,
    ::testing::Values(
        // Each count from the one before: from 4 up, back down to 2, and
        // up again; never to or from one micro-batch.
        Family{"llama3-8b.stg",
               {{"dp", 2}, {"tp", 2}, {"pp", 4}},
               1,
               "none",
               false,
               false,
               "train",
               PipelineSchedule::OneFOneB,
               8,
               {4, 7, 16, 2, 1, 3, 64},
               5},
        Family{"llama3-8b.stg",
               {{"dp", 2}, {"pp", 2}},
               1,
               "full",
               true,
               false,
               "train",
               PipelineSchedule::OneFOneB,
               8,
               {8, 2, 5, 32},
               3},
        Family{"llama3-8b.stg",
               {{"tp", 2}, {"pp", 2}, {"cp", 2}},
               1,
               "selective",
               false,
               true,
               "train",
               PipelineSchedule::GPipe,
               6,
               {3, 6, 2},
               2},
        // Interleaved: with one group of pp micro-batches (4 over 4
        // stages) a chunk's last backward runs before the next chunk's
        // first, so that count cannot move to or from two groups or more.
        Family{"llama3-8b.stg",
               {{"tp", 2}, {"pp", 4}},
               2,
               "none",
               false,
               false,
               "train",
               PipelineSchedule::OneFOneB,
               16,
               {8, 16, 12, 4, 8, 24},
               4},
        Family{"llama3-8b.stg",
               {{"dp", 2}, {"pp", 2}},
               4,
               "full",
               false,
               true,
               "train",
               PipelineSchedule::OneFOneB,
               16,
               {4, 8, 2, 6},
               2},
        Family{"gpt.stg",
               {{"dp", 2}, {"pp", 2}},
               2,
               "none",
               false,
               false,
               "train",
               PipelineSchedule::OneFOneB,
               8,
               {6, 10, 4},
               2},
        Family{"mixtral-8x7b.stg",
               {{"ep", 4}, {"pp", 2}},
               1,
               "none",
               false,
               false,
               "train",
               PipelineSchedule::OneFOneB,
               4,
               {4, 9, 2},
               2},
        Family{"deepseek-moe-16b.stg",
               {{"ep", 2}, {"pp", 4}},
               2,
               "selective",
               false,
               false,
               "train",
               PipelineSchedule::OneFOneB,
               8,
               {8, 16, 24},
               2},
        Family{"mamba-2.8b.stg",
               {{"dp", 2}, {"pp", 4}},
               1,
               "none",
               false,
               false,
               "train",
               PipelineSchedule::OneFOneB,
               8,
               {10, 3},
               1},
        Family{"llama3-8b.stg",
               {{"tp", 2}, {"pp", 4}},
               1,
               "none",
               false,
               false,
               "prefill",
               PipelineSchedule::OneFOneB,
               8,
               {5, 2, 9},
               2}));

} // namespace
