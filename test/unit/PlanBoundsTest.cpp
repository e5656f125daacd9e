//===- PlanBoundsTest.cpp - The bounds never exceed what is evaluated -----===//

#include "stg/Search/PlanBounds.h"
#include "stg/Search/BoundPruning.h"
#include "stg/Search/PlanEvaluator.h"

#include "SmallSearchModel.h"

#include "gtest/gtest.h"

#include <map>

using namespace stg;

namespace {

using PlanBoundsTest = SmallSearchModel;

/// Every plan of a small space of Llama-3-8B (4 layers, 16 GPUs): both
/// bounds at most what the evaluator reports, under both accountings.
TEST_F(PlanBoundsTest, BoundsAreBelowEveryEvaluatedPlan) {
  for (MemoryAccounting accounting :
       {MemoryAccounting::Megatron, MemoryAccounting::ZeRO}) {
    base.memoryAccounting = accounting;
    PlanSpaceOptions options;
    options.gpus = 16;
    options.globalBatch = 16;
    // Zero bubble's stages count their work alone (no backward chain);
    // ZB-V's stage 0 both the first chunk's and the last's. DualPipeV's
    // F&B steps overlap communication, not compute; DualPipe is bounded as
    // the DualPipeV it folds into.
    options.schedules = {
        PipelineSchedule::OneFOneB, PipelineSchedule::ZeroBubbleH1,
        PipelineSchedule::ZeroBubbleV, PipelineSchedule::DualPipeV,
        PipelineSchedule::DualPipe};
    // FP8 plans count their collectives at FP8's share of the bytes.
    options.precisions = {Precision::BF16, Precision::FP8};
    PlanSpace space = enumeratePlans(options, facts.shape);
    ASSERT_GT(space.plans.size(), 100u);
    llvm::Expected<ModelBounds> bounds = readModelBounds(
        base, options.recompute, facts.shape, options.precisions);
    ASSERT_TRUE(bool(bounds)) << llvm::toString(bounds.takeError());
    // FP8's activations read in its recipe: those only its GEMMs read back
    // saved in FP8 (none under full recomputation, which saves the layers'
    // inputs), the rest in bf16.
    unsigned smaller = 0;
    for (const std::string &mode : options.recompute) {
      std::string fp8 = getActivationKey(mode, Precision::FP8);
      ASSERT_TRUE(bounds->activationsPerSequence.count(fp8)) << fp8;
      double bf16 = bounds->activationsPerSequence.at(mode);
      EXPECT_LE(bounds->activationsPerSequence.at(fp8), bf16) << mode;
      EXPECT_GT(bounds->activationsPerSequence.at(fp8), 0.5 * bf16) << mode;
      smaller += bounds->activationsPerSequence.at(fp8) < bf16;
    }
    EXPECT_GT(smaller, 0u);
    // Without sequence parallelism every tp rank holds the norms' inputs
    // and the residual stream whole: a part tp does not split.
    for (const auto &[mode, layers] : bounds->layerReplicatedPerSequence)
      EXPECT_GT(layers.front(), 0) << mode;
    EXPECT_EQ(bounds->layerReplicatedPerSequence.size(),
              bounds->layerActivationsPerSequence.size());
    ModelBounds computeOnly = *bounds, withoutContext = *bounds,
                withoutSharded = *bounds;
    computeOnly.tensorParallelBytes.clear();
    computeOnly.contextParallelBytes.clear();
    computeOnly.shardedWeightBytes.clear();
    withoutContext.contextParallelBytes.clear();
    withoutSharded.shardedWeightBytes.clear();
    // The work outside the layers on the first and last stage; the FLOPs
    // alone, without the other kernels' bytes and every kernel's launch.
    ModelBounds withoutEnds = *bounds, flopsOnly = *bounds;
    for (auto &[mode, work] : withoutEnds.work)
      work.beforeLayers = work.afterLayers = {};
    for (auto &[mode, work] : flopsOnly.work)
      for (ModelBounds::Work &layer : work.layers)
        layer.otherBytes = layer.kernels = 0;
    EXPECT_FALSE(bounds->tensorParallelBytes.empty());
    EXPECT_FALSE(bounds->contextParallelBytes.empty());
    EXPECT_FALSE(bounds->shardedWeightBytes.empty());
    PlanEvaluator evaluator(base, system, facts, options.globalBatch,
                            72'000'000'000);
    unsigned priced = 0, memoryBounded = 0, communicationBounded = 0,
             contextBounded = 0, shardedBounded = 0, endsBounded = 0,
             kernelsBounded = 0;
    for (const Plan &plan : space.plans) {
      PlanResult result = evaluator.evaluate(plan);
      if (result.status == PlanStatus::Failed)
        continue;
      ++priced;
      uint64_t memory = getMemoryLowerBound(*bounds, plan, accounting);
      double step = getStepLowerBound(*bounds, plan, system);
      EXPECT_LE(memory, result.memory.total()) << plan.getLabel();
      EXPECT_LE(step, result.stepMicros) << plan.getLabel();
      // Not trivially true: the step bound is of the same order (this
      // small model's steps are mostly communication).
      EXPECT_GT(step, 0.01 * result.stepMicros) << plan.getLabel();
      memoryBounded += memory >= result.memory.weights;
      communicationBounded +=
          step > getStepLowerBound(computeOnly, plan, system);
      contextBounded += step > getStepLowerBound(withoutContext, plan, system);
      shardedBounded += step > getStepLowerBound(withoutSharded, plan, system);
      endsBounded += step > getStepLowerBound(withoutEnds, plan, system);
      kernelsBounded += step > getStepLowerBound(flopsOnly, plan, system);
    }
    EXPECT_GT(priced, 100u);
    // The weights alone are below the bound for most plans: it counts
    // them, their gradients and the optimizer.
    EXPECT_GT(memoryBounded, priced / 2);
    // A rank's collectives over tp, one at a time, bound some plans more
    // than their compute does (tp across nodes here).
    EXPECT_GT(communicationBounded, priced / 50);
    EXPECT_GT(contextBounded, 0u);
    EXPECT_GT(shardedBounded, 0u);
    // The embedding and the head weigh on their stages; the norms, the
    // activations and the launches on every plan.
    EXPECT_GT(endsBounded, priced / 4);
    EXPECT_GT(kernelsBounded, priced / 2);
  }
}

/// Every plan of a small space of Mixtral 8x7B (4 layers, 16 GPUs, experts
/// over ep): the step bound, which counts the expert exchanges and, for
/// plans with ep > 1, the collectives over tp read at ep 2, at most what
/// the evaluator reports.
TEST_F(PlanBoundsTest, StepBoundIsBelowEveryEvaluatedMoEPlan) {
  base.input = std::string(STG_SOURCE_TEMPLATES_DIR) + "/mixtral-8x7b.stg";
  llvm::Expected<ModelFacts> read = readModelFacts(base);
  ASSERT_TRUE(bool(read)) << llvm::toString(read.takeError());
  facts = std::move(*read);
  PlanSpaceOptions options;
  options.gpus = 16;
  options.globalBatch = 16;
  options.recompute = {"none"};
  options.precisions = {Precision::BF16, Precision::FP8};
  PlanSpace space = enumeratePlans(options, facts.shape);
  llvm::Expected<ModelBounds> bounds =
      readModelBounds(base, options.recompute, facts.shape);
  ASSERT_TRUE(bool(bounds)) << llvm::toString(bounds.takeError());
  ASSERT_TRUE(bounds->exchange);
  EXPECT_EQ(bounds->elementBytes, 2u);
  ASSERT_EQ(bounds->exchange->axes.size(), 1u);
  EXPECT_EQ(bounds->exchange->axes.front(), "ep");
  EXPECT_FALSE(bounds->shardedExpertSplitBytes.empty());
  ModelBounds computeOnly = *bounds, withoutExchanges = *bounds,
              withoutExpertSplit = *bounds;
  computeOnly.tensorParallelBytes.clear();
  computeOnly.exchange.reset();
  withoutExchanges.exchange.reset();
  withoutExpertSplit.shardedExpertSplitBytes.clear();
  PlanEvaluator evaluator(base, system, facts, options.globalBatch,
                          72'000'000'000);
  unsigned priced = 0, withExperts = 0, communicationBounded = 0,
           exchangeBounded = 0, shardedExpertsBounded = 0,
           lowPrecisionBounded = 0;
  for (const Plan &plan : space.plans) {
    PlanResult result = evaluator.evaluate(plan);
    if (result.status == PlanStatus::Failed)
      continue;
    ++priced;
    withExperts += plan.getDegree("ep") > 1;
    double step = getStepLowerBound(*bounds, plan, system);
    EXPECT_LE(step, result.stepMicros) << plan.getLabel();
    communicationBounded += plan.getDegree("ep") > 1 &&
                            step > getStepLowerBound(computeOnly, plan, system);
    lowPrecisionBounded += isLowPrecision(plan.precision) &&
                           step > getStepLowerBound(computeOnly, plan, system);
    exchangeBounded += step > getStepLowerBound(withoutExchanges, plan, system);
    // FSDP's gathers of weights ep splits, read at ep 1 and 2.
    shardedExpertsBounded +=
        step > getStepLowerBound(withoutExpertSplit, plan, system);
  }
  EXPECT_GT(withExperts, 50u) << priced;
  EXPECT_GT(communicationBounded, 0u);
  EXPECT_GT(exchangeBounded, 0u);
  EXPECT_GT(shardedExpertsBounded, 0u);
  EXPECT_GT(lowPrecisionBounded, 0u);
}

/// Pruning keeps each kept plan's result and drops only plans that could
/// not rank first.
TEST_F(PlanBoundsTest, PruningKeepsTheBestAndEachKeptResult) {
  PlanSpaceOptions options;
  options.gpus = 16;
  options.globalBatch = 16;
  PlanSpace space = enumeratePlans(options, facts.shape);
  llvm::Expected<ModelBounds> bounds =
      readModelBounds(base, options.recompute, facts.shape);
  ASSERT_TRUE(bool(bounds));
  uint64_t limit = 20'000'000'000;
  PlanEvaluator evaluator(base, system, facts, options.globalBatch, limit);
  BoundPruningOptions pruning;
  pruning.memoryLimitBytes = limit;
  pruning.system = system;
  pruning.batchSize = 64;
  llvm::Expected<BoundedResults> bounded = evaluatePlansWithinBounds(
      evaluator, space.plans, *bounds, pruning, 1, nullptr);
  ASSERT_TRUE(bool(bounded)) << llvm::toString(bounded.takeError());
  EXPECT_GT(bounded->pruned[MemoryBoundReason], 0u);
  EXPECT_GT(bounded->pruned[StepBoundReason], 0u);
  EXPECT_EQ(bounded->results.size() + bounded->pruned[MemoryBoundReason] +
                bounded->pruned[StepBoundReason],
            space.plans.size());
  // The search's order, every plan: the kept plans' rows are the same.
  PlanEvaluator fresh(base, system, facts, options.globalBatch, limit);
  double best = 1e300, bestKept = 1e300;
  std::map<std::string, PlanResult> all;
  for (const Plan &plan : space.plans) {
    PlanResult result = fresh.evaluate(plan);
    if (result.status == PlanStatus::Fits)
      best = std::min(best, result.stepMicros);
    all[plan.getLabel()] = result;
  }
  for (const PlanResult &kept : bounded->results) {
    const PlanResult &again = all.at(kept.plan.getLabel());
    EXPECT_EQ(kept.stepMicros, again.stepMicros) << kept.plan.getLabel();
    EXPECT_EQ(kept.memory.total(), again.memory.total());
    if (kept.status == PlanStatus::Fits)
      bestKept = std::min(bestKept, kept.stepMicros);
  }
  EXPECT_EQ(best, bestKept);
  // Two workers kept from batch to batch give the same results.
  PlanEvaluator pooled(base, system, facts, options.globalBatch, limit);
  llvm::Expected<BoundedResults> workers = evaluatePlansWithinBounds(
      pooled, space.plans, *bounds, pruning, 2, nullptr);
  ASSERT_TRUE(bool(workers)) << llvm::toString(workers.takeError());
  ASSERT_EQ(workers->results.size(), bounded->results.size());
  for (const PlanResult &kept : workers->results) {
    const PlanResult &again = all.at(kept.plan.getLabel());
    EXPECT_EQ(kept.stepMicros, again.stepMicros) << kept.plan.getLabel();
    EXPECT_EQ(kept.memory.total(), again.memory.total());
  }
  // Keeping the best eight: each of the eight fastest fitting plans of the
  // whole space is evaluated, at more cost than keeping the best.
  auto getFastest = [](auto &&results, size_t count) {
    std::vector<std::pair<double, std::string>> steps;
    for (const PlanResult &result : results)
      if (result.status == PlanStatus::Fits)
        steps.push_back({result.stepMicros, result.plan.getLabel()});
    llvm::sort(steps);
    steps.resize(std::min(count, steps.size()));
    return steps;
  };
  std::vector<PlanResult> every;
  for (auto &entry : all)
    every.push_back(entry.second);
  pruning.keep = 8;
  PlanEvaluator eight(base, system, facts, options.globalBatch, limit);
  llvm::Expected<BoundedResults> kept = evaluatePlansWithinBounds(
      eight, space.plans, *bounds, pruning, 1, nullptr);
  ASSERT_TRUE(bool(kept)) << llvm::toString(kept.takeError());
  EXPECT_GT(kept->results.size(), bounded->results.size());
  EXPECT_GT(kept->pruned[StepBoundReason], 0u);
  ASSERT_EQ(getFastest(every, 8).size(), 8u);
  EXPECT_EQ(getFastest(kept->results, 8), getFastest(every, 8));
}

} // namespace
