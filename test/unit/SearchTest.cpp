//===- SearchTest.cpp - Enumerating, ranking and storing plans ------------===//

#include "stg/Search/PlanSpace.h"
#include "stg/Perf/DeviceModel.h"
#include "stg/Perf/StepEstimate.h"
#include "stg/Search/SearchResults.h"

#include "SmallSearchModel.h"

#include "llvm/Support/FormatVariadic.h"

#include "gtest/gtest.h"

#include <map>
#include <set>

using namespace stg;

namespace {

ModelShape denseShape(unsigned layers) {
  ModelShape shape;
  shape.layers = layers;
  shape.splits = {true, true, true, false, false}; // dp, tp, pp
  shape.hasSequenceParallel = true;
  shape.hasWeightSharding = true;
  return shape;
}

bool contains(const PlanSpace &space, llvm::StringRef label) {
  return llvm::any_of(space.plans,
                      [&](const Plan &plan) { return plan.getLabel() == label; });
}

TEST(PlanSpaceTest, EveryCandidateIsKeptOrCountedOnce) {
  PlanSpaceOptions options;
  options.gpus = 8;
  options.globalBatch = 8;
  options.splits = SplitChoice::Even;
  PlanSpace space = enumeratePlans(options, denseShape(4));
  // 5 axes over 8 = 2^3: C(3+4, 4) = 35 degree tuples; 4 micro-batch sizes
  // (divisors of 8), 3 virtual-stage counts (divisors of 4), 3 x 3 x 2 x 2
  // structures.
  EXPECT_EQ(space.getCandidates(), 35u * 4 * 3 * 36);
  EXPECT_TRUE(contains(space, "dp2 tp2 pp2 mb1x4 v2 rc=full ws=fsdp sp"));
  EXPECT_TRUE(contains(space, "dp8 tp1 pp1 mb1x1 v1 rc=none ws=none"));
  // pp 8 over 4 layers, cp without a model that splits over it.
  EXPECT_FALSE(contains(space, "dp1 tp1 pp8 mb1x8 v1 rc=none ws=none"));
  EXPECT_GT(space.pruned.at("pp exceeds the layers"), 0u);
  EXPECT_GT(space.pruned.at("the model splits nothing over cp"), 0u);
  // Sequence parallelism without tp, and sharding without dp, repeat
  // another plan.
  EXPECT_FALSE(contains(space, "dp8 tp1 pp1 mb1x1 v1 rc=none ws=none sp"));
  EXPECT_FALSE(contains(space, "dp1 tp8 pp1 mb1x8 v1 rc=none ws=fsdp sp"));
  // Interleaving: 2 stages of 2 chunks over 4 layers, micro-batches a
  // multiple of pp.
  EXPECT_FALSE(contains(space, "dp4 tp1 pp2 mb2x1 v2 rc=none ws=none"));
  EXPECT_EQ(space.pruned.count("virtual stages need pp > 1"), 1u);
  // tp outside the node is a plan of its own only when groups cross nodes.
  EXPECT_FALSE(contains(space, "dp2 tp4 pp1 mb1x4 v1 rc=none ws=none tp-outer"));
}

TEST(PlanSpaceTest, AccountedSplitsAreTriedWhereOnlyTheyDivide) {
  PlanSpaceOptions options;
  options.gpus = 8;
  options.globalBatch = 8;
  PlanSpace even = [&] {
    PlanSpaceOptions evenOptions = options;
    evenOptions.splits = SplitChoice::Even;
    return enumeratePlans(evenOptions, denseShape(4));
  }();
  PlanSpace space = enumeratePlans(options, denseShape(4));
  // 4 layers: only pp 2 x 3 chunks divides 4 + 2 and not 4, with both
  // counted (3 chunks being no divisor of 4, it is tried with that split
  // alone); 10 degree tuples have pp 2, each under 4 micro-batch sizes and
  // 36 structures.
  EXPECT_EQ(space.getCandidates(), even.getCandidates() + 10u * 4 * 36);
  EXPECT_TRUE(contains(
      space, "dp2 tp2 pp2 mb1x4 v3 split=embedding+loss rc=full ws=fsdp sp"));
  EXPECT_FALSE(contains(space, "dp2 tp2 pp2 mb1x4 v3 rc=full ws=fsdp sp"));
  EXPECT_FALSE(contains(
      space, "dp2 tp2 pp2 mb1x4 v2 split=embedding+loss rc=full ws=fsdp sp"));
  for (const Plan &plan : even.plans)
    EXPECT_EQ(plan.layerSplit, LayerSplit::Even);
  // The even plans are those of the even space, in its order.
  std::vector<std::string> evenLabels, labels;
  for (const Plan &plan : even.plans)
    evenLabels.push_back(plan.getLabel());
  for (const Plan &plan : space.plans)
    if (plan.layerSplit == LayerSplit::Even)
      labels.push_back(plan.getLabel());
  EXPECT_EQ(labels, evenLabels);

  // Past the layers: pp 8 over 6 layers is a slot a stage with both
  // counted, the first stage holding the embedding alone, the last the
  // loss; one counted alone leaves 7 (or 8) for 8 stages.
  PlanSpace deep = enumeratePlans(options, denseShape(6));
  EXPECT_TRUE(contains(
      deep, "dp1 tp1 pp8 mb1x8 v1 split=embedding+loss rc=none ws=none"));
  EXPECT_FALSE(contains(deep, "dp1 tp1 pp8 mb1x8 v1 rc=none ws=none"));
  EXPECT_GT(deep.pruned.at("pp exceeds the layers"), 0u);
  // 7 layers: 7 + 1 over 8 stages, with either counted.
  PlanSpace odd = enumeratePlans(options, denseShape(7));
  EXPECT_TRUE(
      contains(odd, "dp1 tp1 pp8 mb1x8 v1 split=embedding rc=none ws=none"));
  EXPECT_TRUE(contains(odd, "dp1 tp1 pp8 mb1x8 v1 split=loss rc=none ws=none"));
  // And with an even split too where the remainder split works: pp 2 over
  // 7 layers (4 + 3), or 8 slots with one counted.
  EXPECT_TRUE(contains(odd, "dp4 tp1 pp2 mb1x2 v1 rc=none ws=none"));
  EXPECT_TRUE(
      contains(odd, "dp4 tp1 pp2 mb1x2 v1 split=embedding rc=none ws=none"));

  // Only the accounted splits, and the plans without a pipeline.
  options.splits = SplitChoice::Accounted;
  PlanSpace accounted = enumeratePlans(options, denseShape(4));
  for (const Plan &plan : accounted.plans)
    EXPECT_TRUE(plan.getDegree("pp") == 1 ||
                plan.layerSplit != LayerSplit::Even)
        << plan.getLabel();
  EXPECT_TRUE(contains(
      accounted, "dp4 tp1 pp2 mb1x2 v1 split=embedding+loss rc=none ws=none"));
  EXPECT_TRUE(contains(accounted, "dp8 tp1 pp1 mb1x1 v1 rc=none ws=none"));
}

TEST(PlanSpaceTest, ShardsSplitThePlansAndCountTheSame) {
  PlanSpaceOptions options;
  options.gpus = 8;
  options.globalBatch = 8;
  PlanSpace whole = enumeratePlans(options, denseShape(4));
  std::vector<std::string> labels;
  // A shard takes whole families of structures, which share their
  // programs.
  std::map<std::string, unsigned> shardOfFamily;
  for (unsigned index = 0; index < 3; ++index) {
    options.shardIndex = index;
    options.shardCount = 3;
    PlanSpace shard = enumeratePlans(options, denseShape(4));
    EXPECT_EQ(shard.pruned, whole.pruned);
    EXPECT_EQ(shard.kept, whole.plans.size());
    EXPECT_FALSE(shard.plans.empty());
    for (const Plan &plan : shard.plans) {
      labels.push_back(plan.getLabel());
      auto [it, first] =
          shardOfFamily.try_emplace(plan.getFamilyKey(), index);
      EXPECT_EQ(it->second, index) << plan.getLabel();
    }
  }
  std::vector<std::string> expected;
  for (const Plan &plan : whole.plans)
    expected.push_back(plan.getLabel());
  llvm::sort(labels);
  llvm::sort(expected);
  EXPECT_EQ(labels, expected);
}

TEST(PlanSpaceTest, ASpaceTooLargeIsTruncatedNotAllocated) {
  PlanSpaceOptions options;
  options.gpus = 8;
  options.globalBatch = 8;
  options.maxPlans = 10;
  PlanSpace space = enumeratePlans(options, denseShape(4));
  EXPECT_TRUE(space.truncated);
  EXPECT_EQ(space.plans.size(), 10u);
  EXPECT_GT(space.kept, 10u);
}

TEST(PlanSpaceTest, NarrowedDimensionsAreNotCandidates) {
  PlanSpaceOptions options;
  options.gpus = 16;
  options.globalBatch = 32;
  options.degrees[1] = {4};      // tp
  options.microBatchSizes = {2};
  options.virtualStages = {1};
  options.recompute = {"full"};
  options.sharding = {WeightSharding::None};
  options.sequenceParallel = {true};
  options.tpInNode = {true};
  PlanSpace space = enumeratePlans(options, denseShape(8));
  std::vector<std::string> labels;
  for (const Plan &plan : space.plans)
    labels.push_back(plan.getLabel());
  EXPECT_EQ(labels, (std::vector<std::string>{
                        "dp1 tp4 pp4 mb2x16 v1 rc=full ws=none sp",
                        "dp2 tp4 pp2 mb2x8 v1 rc=full ws=none sp",
                        "dp4 tp4 pp1 mb2x4 v1 rc=full ws=none sp"}));
}

PlanResult makeResult(const char *label, PlanStatus status, double step,
                      unsigned dp) {
  PlanResult result;
  result.plan.degrees[0] = dp;
  result.plan.recompute = label;
  result.status = status;
  result.stepMicros = step;
  result.memory.weights = 1000 * dp;
  result.mfu = 0.5;
  if (status == PlanStatus::Failed)
    result.reason = "why, with \"quotes\", and commas";
  return result;
}

SearchTable makeTable() {
  SearchTable table;
  table.header.generatorVersion = "test";
  table.header.model = "m";
  table.header.gpus = 8;
  table.header.memoryLimitBytes = 4000;
  table.pruned["pp exceeds the layers"] = 7;
  table.prunedByModel["tp = N does not divide NH"] = 3;
  table.plans = {makeResult("none", PlanStatus::OverMemory, 5, 8),
                 makeResult("full", PlanStatus::Fits, 9, 1),
                 makeResult("selective", PlanStatus::Failed, 0, 2),
                 makeResult("none", PlanStatus::Fits, 4, 2),
                 makeResult("selective", PlanStatus::Fits, 4, 1)};
  rankPlans(table);
  return table;
}

std::string printJSON(const SearchTable &table) {
  std::string text;
  llvm::raw_string_ostream os(text);
  writeJSON(os, table);
  return os.str();
}

TEST(SearchResultsTest, FittingPlansRankByStepTime) {
  SearchTable table = makeTable();
  std::vector<std::pair<unsigned, double>> order;
  for (const PlanResult &plan : table.plans)
    order.push_back({plan.rank, plan.stepMicros});
  // Ties in time go by label; over-memory after fitting, failed last.
  EXPECT_EQ(order, (std::vector<std::pair<unsigned, double>>{
                       {1, 4}, {2, 4}, {3, 9}, {0, 5}, {0, 0}}));
  EXPECT_EQ(table.plans[0].plan.getLabel(),
            "dp1 tp1 pp1 mb1x1 v1 rc=selective ws=none");
}

TEST(SearchResultsTest, JSONReadsBackToTheSameBytes) {
  SearchTable table = makeTable();
  // Only an accounted split is written, and read back.
  table.plans[1].plan.layerSplit = LayerSplit::Loss;
  std::string text = printJSON(table);
  EXPECT_EQ(llvm::StringRef(text).count("\"pipeline_split\": \"loss\""), 1u);
  llvm::Expected<SearchTable> read = parseSearchTable(text, "plans.json");
  ASSERT_TRUE(bool(read)) << llvm::toString(read.takeError());
  EXPECT_EQ(printJSON(*read), text);
  EXPECT_EQ(read->plans[1].plan.layerSplit, LayerSplit::Loss);
  EXPECT_EQ(read->plans[4].reason, "why, with \"quotes\", and commas");
}

TEST(SearchResultsTest, AFileMissingAFieldIsNamed) {
  std::string text = printJSON(makeTable());
  std::string broken = text;
  broken.replace(broken.find("\"microbatches\""), 14, "\"micro_batches\"");
  llvm::Expected<SearchTable> read = parseSearchTable(broken, "x.json");
  ASSERT_FALSE(bool(read));
  EXPECT_EQ(llvm::toString(read.takeError()),
            "x.json: plans[0].microbatches is not a whole number; not a "
            "plans.json of stage-search");
}

TEST(SearchResultsTest, TheUnionOfShardsIsTheWholeSearch) {
  SearchTable whole = makeTable();
  std::vector<SearchTable> shards(2, whole);
  for (unsigned index = 0; index < 2; ++index) {
    shards[index].header.shardIndex = index;
    shards[index].header.shardCount = 2;
    shards[index].plans.clear();
    shards[index].prunedByModel.clear();
  }
  for (size_t i = 0; i < whole.plans.size(); ++i)
    shards[i % 2].plans.push_back(whole.plans[i]);
  shards[0].prunedByModel["tp = N does not divide NH"] = 1;
  shards[1].prunedByModel["tp = N does not divide NH"] = 2;
  llvm::Expected<SearchTable> merged = mergeTables(shards);
  ASSERT_TRUE(bool(merged)) << llvm::toString(merged.takeError());
  EXPECT_EQ(printJSON(*merged), printJSON(whole));

  llvm::Expected<SearchTable> half = mergeTables({shards[0]});
  ASSERT_FALSE(bool(half));
  EXPECT_EQ(llvm::toString(half.takeError()),
            "1 of 2 shards given; the union needs all");
  llvm::Expected<SearchTable> twice = mergeTables({shards[0], shards[0]});
  ASSERT_FALSE(bool(twice));
  EXPECT_EQ(llvm::toString(twice.takeError()), "shard 0/2 is given twice");
  shards[1].header.gpus = 16;
  llvm::Expected<SearchTable> other = mergeTables(shards);
  ASSERT_FALSE(bool(other));
  llvm::consumeError(other.takeError());
}

TEST(SearchResultsTest, CSVHasARowPerPlan) {
  SearchTable table = makeTable();
  std::string text;
  llvm::raw_string_ostream os(text);
  writeCSV(os, table);
  llvm::SmallVector<llvm::StringRef, 8> lines;
  llvm::StringRef(os.str()).split(lines, '\n', -1, false);
  ASSERT_EQ(lines.size(), 1 + table.plans.size());
  EXPECT_TRUE(
      lines[1].startswith("1,dp1 tp1 pp1 mb1x1 v1 rc=selective ws=none,fits,1,"));
  EXPECT_TRUE(lines[5].endswith(",\"why, with \"\"quotes\"\", and commas\""));
}

} // namespace

namespace {

class PlanEvaluatorTest : public SmallSearchModel {
protected:
  PlanEvaluator makeEvaluator() const {
    return PlanEvaluator(base, system, facts, GlobalBatch, 72'000'000'000);
  }
  /// dp4 tp4 on 16 GPUs: tp groups inside a node, or across two.
  static Plan makePlan(bool tpInNode) {
    Plan plan;
    plan.degrees = {4, 4, 1, 1, 1};
    plan.microBatchSize = 1;
    plan.microbatches = GlobalBatch / 4;
    plan.sequenceParallel = true;
    plan.tpInNode = tpInNode;
    return plan;
  }

  static constexpr unsigned GlobalBatch = 8;
};

TEST_F(PlanEvaluatorTest, AReusedModuleAndProgramsPriceAsAFreshCompile) {
  PlanEvaluator warm = makeEvaluator();
  PlanResult inNode = warm.evaluate(makePlan(true));
  // The programs of the previous plan, moved to the other rank order.
  PlanResult outer = warm.evaluate(makePlan(false));
  PlanEvaluator cold = makeEvaluator();
  PlanResult fresh = cold.evaluate(makePlan(false));
  ASSERT_EQ(inNode.status, PlanStatus::Fits) << inNode.reason;
  ASSERT_EQ(fresh.status, PlanStatus::Fits) << fresh.reason;
  EXPECT_EQ(outer.stepMicros, fresh.stepMicros);
  EXPECT_EQ(outer.memory.total(), fresh.memory.total());
  EXPECT_EQ(outer.memory.total(), inNode.memory.total());
  // The rank order did reach the estimate (this small model, whose
  // gradient reduction outweighs its tp traffic, gains from dp in the node).
  EXPECT_NE(outer.stepMicros, inNode.stepMicros);

  // And the search's step is stagec's, from the unfolded programs.
  std::string errors;
  llvm::raw_string_ostream os(errors);
  DiagnosticEngine diags(os);
  std::optional<CompiledModel> compiled =
      compileModel(warm.getCompileOptions(makePlan(false)), diags);
  ASSERT_TRUE(compiled) << os.str();
  applyDeviceModel(compiled->programs, system.device, nullptr);
  llvm::Expected<StepEstimate> flat = estimateStep(compiled->programs, system);
  ASSERT_TRUE(bool(flat)) << llvm::toString(flat.takeError());
  EXPECT_NEAR(flat->stepMicros, outer.stepMicros, 1e-3 * 64);
}

TEST_F(PlanEvaluatorTest, PlansOfOneStructureRepriceAsFreshCompiles) {
  // Two micro-batches of 1, 2 or 4 sequences: one structure, re-priced.
  std::vector<Plan> plans;
  for (auto [dp, tp, size] :
       {std::tuple{4u, 4u, 1u}, {2u, 8u, 2u}, {2u, 2u, 2u}, {4u, 2u, 1u}}) {
    Plan plan = makePlan(tp < 8);
    plan.degrees = {dp, tp, 2, 1, 1};
    plan.microBatchSize = size;
    plan.microbatches = GlobalBatch / (dp * size);
    plans.push_back(plan);
  }
  PlanEvaluator warm = makeEvaluator();
  std::set<double> steps;
  for (const Plan &plan : plans) {
    EXPECT_EQ(plan.getStructureKey(), plans[0].getStructureKey());
    PlanResult repriced = warm.evaluate(plan);
    PlanResult fresh = makeEvaluator().evaluate(plan);
    ASSERT_EQ(repriced.status, fresh.status) << plan.getLabel();
    EXPECT_EQ(repriced.stepMicros, fresh.stepMicros) << plan.getLabel();
    EXPECT_EQ(repriced.memory.total(), fresh.memory.total());
    EXPECT_EQ(repriced.memory.activations, fresh.memory.activations);
    EXPECT_EQ(repriced.exposedCommunicationMicros,
              fresh.exposedCommunicationMicros);
    steps.insert(repriced.stepMicros);
  }
  EXPECT_EQ(steps.size(), plans.size());
  // Another micro-batch count, or tp 1, is another structure.
  Plan other = plans[0];
  other.microbatches = 4;
  EXPECT_NE(other.getStructureKey(), plans[0].getStructureKey());
  other = plans[0];
  other.degrees[1] = 1;
  EXPECT_NE(other.getStructureKey(), plans[0].getStructureKey());
}

TEST_F(PlanEvaluatorTest, PlansOfOneFamilyPriceAsFreshCompiles) {
  // dp 2 over pp 2: 4 and 2 micro-batches are one family, whose programs
  // move from count to count; one micro-batch is a family of its own.
  // Interleaved, 2 micro-batches are one group and cannot move: built.
  std::vector<Plan> plans;
  for (auto [interleaved, size] : {std::pair{false, 1u}, {false, 2u},
                                   {false, 4u}, {true, 1u}, {true, 2u}}) {
    Plan plan = makePlan(true);
    plan.degrees = {2, 4, 2, 1, 1};
    plan.virtualStages = interleaved ? 2 : 1;
    plan.microBatchSize = size;
    plan.microbatches = GlobalBatch / (2 * size);
    plans.push_back(plan);
  }
  PlanEvaluator warm = makeEvaluator();
  std::set<double> steps;
  for (const Plan &plan : plans) {
    PlanResult moved = warm.evaluate(plan);
    PlanResult fresh = makeEvaluator().evaluate(plan);
    ASSERT_EQ(moved.status, fresh.status) << plan.getLabel();
    EXPECT_NE(moved.status, PlanStatus::Failed) << moved.reason;
    EXPECT_EQ(moved.stepMicros, fresh.stepMicros) << plan.getLabel();
    EXPECT_EQ(moved.memory.total(), fresh.memory.total());
    EXPECT_EQ(moved.memory.activations, fresh.memory.activations);
    EXPECT_EQ(moved.bubbleFraction, fresh.bubbleFraction);
    steps.insert(moved.stepMicros);
  }
  EXPECT_EQ(steps.size(), plans.size());
  EXPECT_NE(plans[0].getStructureKey(), plans[1].getStructureKey());
  EXPECT_EQ(plans[0].getFamilyKey(), plans[1].getFamilyKey());
  EXPECT_NE(plans[0].getFamilyKey(), plans[2].getFamilyKey());
  EXPECT_EQ(plans[3].getFamilyKey(), plans[4].getFamilyKey());
  EXPECT_NE(plans[0].getFamilyKey(), plans[3].getFamilyKey());
}

TEST_F(PlanEvaluatorTest, MFUCountsTheModelFLOPsOnce) {
  PlanResult result = makeEvaluator().evaluate(makePlan(true));
  ASSERT_EQ(result.status, PlanStatus::Fits) << result.reason;
  double flops = facts.flopsPerSequence * GlobalBatch;
  EXPECT_DOUBLE_EQ(result.mfu, flops / (system.device.peakFlops * 16 *
                                        result.stepMicros / 1e6));
  EXPECT_DOUBLE_EQ(result.tokensPerSecondPerGPU,
                   GlobalBatch * 1024 / (result.stepMicros / 1e6 * 16));
  // Recomputation adds FLOPs to the step, not to the model.
  Plan full = makePlan(true);
  full.recompute = "full";
  PlanResult recomputed = makeEvaluator().evaluate(full);
  EXPECT_GT(recomputed.stepMicros, result.stepMicros);
  EXPECT_LT(recomputed.mfu, result.mfu);
}

TEST_F(PlanEvaluatorTest, OneShardedOptimizerModuleServesEveryDegree) {
  // The distributed optimizer pads a shard's rows to the data-parallel
  // degree: 4096 rows over dp 3 become 4098. The search's module pads for
  // any degrees; each plan must still cost what stagec's padding gives.
  constexpr unsigned Batch = 12;
  PlanEvaluator warm(base, system, facts, Batch, 72'000'000'000);
  for (auto [dp, tp] : {std::pair{3u, 2u}, {2u, 2u}, {6u, 1u}}) {
    Plan plan;
    plan.degrees = {dp, tp, 1, 1, 1};
    plan.microBatchSize = 1;
    plan.microbatches = Batch / dp;
    plan.sharding = WeightSharding::DistributedOptimizer;
    PlanResult result = warm.evaluate(plan);
    ASSERT_EQ(result.status, PlanStatus::Fits) << result.reason;

    std::string errors;
    llvm::raw_string_ostream os(errors);
    DiagnosticEngine diags(os);
    std::optional<CompiledModel> compiled =
        compileModel(warm.getCompileOptions(plan), diags);
    ASSERT_TRUE(compiled) << os.str();
    EXPECT_EQ(result.memory.optimizer,
              compiled->programs.stages[0].memory.optimizer)
        << "dp" << dp << " tp" << tp;
    EXPECT_EQ(result.memory.total(),
              compiled->programs.stages[0].memory.total());
    applyDeviceModel(compiled->programs, system.device, nullptr);
    llvm::Expected<StepEstimate> flat =
        estimateStep(compiled->programs, system);
    ASSERT_TRUE(bool(flat)) << llvm::toString(flat.takeError());
    EXPECT_NEAR(flat->stepMicros, result.stepMicros, 1e-3 * 64);
  }
}

} // namespace
