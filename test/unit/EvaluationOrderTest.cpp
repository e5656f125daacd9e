//===- EvaluationOrderTest.cpp - A plan's result whatever came before -----===//

#include "stg/Search/PlanEvaluator.h"

#include "SmallSearchModel.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <map>
#include <random>

using namespace stg;

namespace {

using EvaluationOrderTest = SmallSearchModel;

/// The evaluator re-prices a structure's programs for each of its plans
/// and moves a family's to other micro-batch counts, keeping a few
/// structures: in a shuffled order (structures built for tp outside the
/// node re-priced for plans inside it, counts moved down as well as up),
/// every plan of a small space gets the result it gets in the search's.
TEST_F(EvaluationOrderTest, ShuffledOrderGivesTheSameResults) {
  PlanSpaceOptions options;
  options.gpus = 32;
  options.globalBatch = 32;
  PlanSpace space = enumeratePlans(options, facts.shape);
  PlanEvaluator inOrder(base, system, facts, options.globalBatch,
                        72'000'000'000);
  std::map<std::string, PlanResult> expected;
  for (const Plan &plan : space.plans)
    expected[plan.getLabel()] = inOrder.evaluate(plan);
  std::vector<Plan> shuffled = space.plans;
  std::shuffle(shuffled.begin(), shuffled.end(), std::mt19937(2026));
  PlanEvaluator evaluator(base, system, facts, options.globalBatch,
                          72'000'000'000);
  unsigned outer = 0;
  for (const Plan &plan : shuffled) {
    outer += !plan.tpInNode;
    PlanResult result = evaluator.evaluate(plan);
    const PlanResult &wanted = expected.at(plan.getLabel());
    EXPECT_EQ(result.status, wanted.status) << plan.getLabel();
    EXPECT_EQ(result.stepMicros, wanted.stepMicros) << plan.getLabel();
    EXPECT_EQ(result.memory.total(), wanted.memory.total()) << plan.getLabel();
  }
  EXPECT_GT(outer, 10u);
  // A plan evaluated alone, without a structure to re-price, agrees too:
  // those with tp outside the node and a context-parallel ring, whose
  // attention names the ring's axes by their index in the mesh.
  unsigned alone = 0;
  for (const Plan &plan : space.plans) {
    if (plan.tpInNode || plan.getDegree("cp") == 1 || alone == 24)
      continue;
    PlanEvaluator fresh(base, system, facts, options.globalBatch,
                        72'000'000'000);
    EXPECT_EQ(fresh.evaluate(plan).stepMicros,
              expected.at(plan.getLabel()).stepMicros)
        << plan.getLabel();
    ++alone;
  }
  EXPECT_EQ(alone, 24u);
}

} // namespace
