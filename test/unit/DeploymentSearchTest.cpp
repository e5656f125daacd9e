//===- DeploymentSearchTest.cpp - Searching serving deployments -----------===//

#include "stg/Serve/DeploymentSearch.h"
#include "stg/Serve/DeploymentReplay.h"

#include "llvm/Support/raw_ostream.h"

#include "gtest/gtest.h"

#include <map>
#include <set>
#include <tuple>

using namespace stg;

namespace {

InstancePlanResult plan(unsigned tp, bool prefill, bool decode,
                        Precision precision = Precision::BF16) {
  InstancePlanResult result;
  result.plan.tp = tp;
  result.plan.precision = precision;
  result.fitsPrefill = prefill;
  result.fitsDecode = decode;
  return result;
}

/// (prefill plan or -1, its instances, serve plan, its instances).
using Shape = std::tuple<int, unsigned, unsigned, unsigned>;

std::vector<Shape> shapes(const std::vector<Deployment> &deployments) {
  std::vector<Shape> result;
  for (const Deployment &d : deployments)
    result.push_back({d.prefill ? int(d.prefill->plan) : -1,
                      d.prefill ? d.prefill->instances : 0, d.serve.plan,
                      d.serve.instances});
  return result;
}

TEST(DeploymentSearchTest, DeploymentsFillTheBudget) {
  // tp1 and tp2 hold a whole request; tp4 only a prompt; tp1 in fp8 too.
  std::vector<InstancePlanResult> plans = {
      plan(1, true, true), plan(2, true, true), plan(4, true, false),
      plan(1, true, true, Precision::FP8)};
  std::vector<Shape> aggregated =
      shapes(enumerateDeployments(plans, 8, true, false));
  EXPECT_EQ(aggregated, (std::vector<Shape>{
                            {-1, 0, 0, 8}, {-1, 0, 1, 4}, {-1, 0, 3, 8}}));

  std::vector<Shape> all = shapes(enumerateDeployments(plans, 8, true, true));
  std::set<Shape> disaggregated(all.begin() + 3, all.end());
  EXPECT_EQ(disaggregated.size(), all.size() - 3);
  // tp1 -> tp1: x + y = 8.
  for (unsigned x = 1; x < 8; ++x)
    EXPECT_TRUE(disaggregated.count({0, x, 0, 8 - x})) << x;
  // tp1 -> tp2: an odd x leaves a GPU another prefill instance takes.
  for (Shape shape : {Shape{0, 2, 1, 3}, Shape{0, 4, 1, 2}, Shape{0, 6, 1, 1}})
    EXPECT_TRUE(disaggregated.count(shape));
  EXPECT_FALSE(disaggregated.count({0, 1, 1, 3}));
  // tp2 -> tp1, tp2 -> tp2, and the prompt-only tp4 as a prefill pool.
  for (Shape shape : {Shape{1, 1, 0, 6}, Shape{1, 2, 0, 4}, Shape{1, 3, 0, 2},
                      Shape{1, 1, 1, 3}, Shape{1, 3, 1, 1}, Shape{2, 1, 0, 4},
                      Shape{2, 1, 1, 2}})
    EXPECT_TRUE(disaggregated.count(shape));
  // Nothing decodes on tp4, and precisions do not mix.
  for (const Shape &shape : disaggregated) {
    EXPECT_NE(std::get<2>(shape), 2u);
    EXPECT_EQ(std::get<0>(shape) == 3, std::get<2>(shape) == 3);
  }
  // 7 + 3 + 3 + 3 + 1 + 1 (tp4 -> tp1, tp2) + 7 (fp8).
  EXPECT_EQ(disaggregated.size(), 7u + 3 + 3 + 3 + 1 + 1 + 7);
  // Every deployment within the budget, and no instance more would fit.
  for (const Shape &shape : all) {
    unsigned prefillGPUs =
        std::get<0>(shape) < 0
            ? 0
            : plans[std::get<0>(shape)].plan.getGPUs() * std::get<1>(shape);
    unsigned serveSize = plans[std::get<2>(shape)].plan.getGPUs();
    unsigned used = prefillGPUs + serveSize * std::get<3>(shape);
    EXPECT_LE(used, 8u);
    EXPECT_LT(8 - used, serveSize);
    if (std::get<0>(shape) >= 0)
      EXPECT_LT(8 - used, plans[std::get<0>(shape)].plan.getGPUs());
  }
}

DeploymentRun summary(double perGPU, double perUser,
                      RunStatus status = RunStatus::Meets) {
  DeploymentRun run;
  run.status = status;
  run.summary.outputTokensPerSecondPerGPU = perGPU;
  run.summary.outputTokensPerSecondPerUser = perUser;
  return run;
}

TEST(DeploymentSearchTest, RanksByTokensPerGPUAndMarksTheFront) {
  DeploymentTable table;
  table.runs = {summary(100, 10),
                summary(300, 5, RunStatus::Misses), // the best, but misses
                summary(80, 30),
                summary(90, 20),
                summary(80, 25), // beaten by 80 / 30
                summary(0, 0, RunStatus::Failed),
                summary(90, 20), // ties the front's 90 / 20
                summary(50, 30)}; // beaten by 80 / 30
  for (size_t index = 0; index < table.runs.size(); ++index)
    table.runs[index].requests = index; // to follow them through the sort
  rankDeployments(table);
  std::vector<uint64_t> order;
  std::vector<unsigned> ranks;
  std::vector<bool> front;
  for (const DeploymentRun &run : table.runs) {
    order.push_back(run.requests);
    ranks.push_back(run.rank);
    front.push_back(run.pareto);
  }
  EXPECT_EQ(order, (std::vector<uint64_t>{0, 3, 6, 2, 4, 7, 1, 5}));
  EXPECT_EQ(ranks, (std::vector<unsigned>{1, 2, 3, 4, 5, 6, 0, 0}));
  EXPECT_EQ(front, (std::vector<bool>{true, true, true, true, false, false,
                                      false, false}));
}

TEST(DeploymentSearchTest, SLOsBoundTheChosenStatistic) {
  ServingSummary run;
  run.ttft = {/*mean=*/300, /*p50=*/100, /*p90=*/400, /*p99=*/900};
  run.tpot = {/*mean=*/20, /*p50=*/19, /*p90=*/30, /*p99=*/45};
  DeploymentSearchOptions options;
  EXPECT_FALSE(checkSLOs(run, options));
  options.maxTTFTMillis = 200;
  options.maxTPOTMillis = 40;
  EXPECT_FALSE(checkSLOs(run, options)); // p50: 100 and 19
  options.sloStatistic = SLOStatistic::Mean;
  EXPECT_EQ(checkSLOs(run, options), "ttft mean 300.0 ms > 200 ms");
  options.sloStatistic = SLOStatistic::P99;
  EXPECT_EQ(checkSLOs(run, options),
            "ttft p99 900.0 ms > 200 ms, tpot p99 45.0 ms > 40 ms");
  EXPECT_EQ(parseSLOStatistic("p90"), SLOStatistic::P90);
  EXPECT_FALSE(parseSLOStatistic("p95"));
}

TEST(DeploymentSearchTest, PerRequestSLOsBoundTheShareOfRequestsWithinThem) {
  DeploymentSearchOptions options;
  options.maxTPOTMillis = 40;
  options.sloAttainment = 0.9;
  ServingSLO slo = options.getRequestSLO();
  EXPECT_FALSE(slo.ttftMs);
  EXPECT_EQ(slo.tpotMs, 40);
  // The statistics would miss (p99 45 ms), the share decides.
  ServingSummary run;
  run.tpot.p99 = 45;
  run.slo.emplace();
  run.slo->attainment = 0.95;
  EXPECT_FALSE(checkSLOs(run, options));
  run.slo->attainment = 0.85;
  EXPECT_EQ(checkSLOs(run, options),
            "85.0 % of requests within the SLOs < 90.0 %");
  // Without the per-request bound, the statistics again (p50: 0 ms).
  options.sloAttainment.reset();
  EXPECT_TRUE(options.getRequestSLO().empty());
  EXPECT_FALSE(checkSLOs(run, options));
}

/// Llama-3-8B with 4 layers on up to 4 H100s: seconds to search.
DeploymentSearchOptions smallSearch() {
  DeploymentSearchOptions options;
  options.base.input = std::string(STG_SOURCE_TEMPLATES_DIR) + "/llama3-8b.stg";
  options.base.overrides = {{"L", "4"}};
  options.gpus = 4;
  options.tp = {1, 2};
  options.lengths = {{256, 64}};
  options.concurrencies = {2, 16};
  options.maxBatches = {4, 64, 128};
  return options;
}

DeploymentTable search(const DeploymentSearchOptions &options) {
  std::string errors;
  llvm::raw_string_ostream os(errors);
  DiagnosticEngine diags(os);
  SystemSpec system = *loadSystem("dgx-h100");
  std::optional<DeploymentTable> table =
      searchDeployments(options, system, diags);
  EXPECT_TRUE(table) << os.str();
  return table ? std::move(*table) : DeploymentTable();
}

std::string describe(const DeploymentTable &table,
                     const DeploymentSearchOptions &options) {
  std::string text;
  llvm::raw_string_ostream os(text);
  writeDeploymentsCSV(os, table);
  printDeploymentSummary(os, table, options, 1000);
  return os.str();
}

TEST(DeploymentSearchTest, ARunIsWhatSimulateServingGivesAndThreadsChangeNothing) {
  DeploymentSearchOptions options = smallSearch();
  options.jobs = 1;
  DeploymentTable one = search(options);
  options.jobs = 3;
  DeploymentTable three = search(options);
  ASSERT_FALSE(one.runs.empty());
  EXPECT_EQ(describe(one, options), describe(three, options));
  EXPECT_EQ(one.plans.size(), 2u);
  EXPECT_EQ(one.aggregatedDeployments, 2u);  // 4 x tp1, 2 x tp2
  EXPECT_EQ(one.disaggregatedDeployments, 6u); // 3 + 1 + 1 + 1

  // The best aggregated run, from the pieces stagec --mode serve uses.
  const DeploymentRun *run = nullptr;
  for (const DeploymentRun &candidate : one.runs)
    if (!candidate.deployment.prefill && candidate.status != RunStatus::Failed) {
      run = &candidate;
      break;
    }
  ASSERT_TRUE(run);
  const InstancePlan &instance = one.plans[run->deployment.serve.plan].plan;
  CompileOptions base = options.base;
  base.degrees = instance.getDegrees();
  ServingEngineSettings settings;
  settings.limits.maxBatch = run->maxBatch;
  settings.limits.maxContext = 256 + 64;
  std::string errors;
  llvm::raw_string_ostream os(errors);
  DiagnosticEngine diags(os);
  SystemSpec system = *loadSystem("dgx-h100");
  std::optional<IterationCostModel> model =
      IterationCostModel::build(base, system, settings.limits, diags);
  ASSERT_TRUE(model) << os.str();
  ServingDeployment deployment;
  deployment.decode.cost = &*model;
  deployment.decode.instances = run->deployment.serve.instances;
  ServingWorkload workload;
  workload.lengths = options.lengths;
  workload.concurrency = run->concurrency;
  workload.requests = run->requests;
  std::optional<ServingResult> result =
      simulateServing(deployment, settings, workload, diags);
  ASSERT_TRUE(result) << os.str();
  ServingSummary expected = summarizeServing(*result);
  EXPECT_EQ(run->summary.outputTokensPerSecondPerGPU,
            expected.outputTokensPerSecondPerGPU);
  EXPECT_EQ(run->summary.ttft.p99, expected.ttft.p99);
  EXPECT_EQ(run->summary.tpot.mean, expected.tpot.mean);
  // 10 a client, at least 100, as stagec --mode serve.
  EXPECT_EQ(run->requests, std::max<uint64_t>(100, 10 * *run->concurrency));
}

TEST(DeploymentSearchTest, AReplayRunsTheRunAgain) {
  // Every run that ran, aggregated and disaggregated, at a concurrency and
  // a request rate, by both routers and under a cap that binds: the
  // replay's summary is the search's, to the bit.
  DeploymentSearchOptions options = smallSearch();
  options.maxBatches = {4};
  options.concurrencies = {16};
  options.requestRates = {40};
  options.routers = {Router::Load, Router::KVAware};
  options.warmupRequests = 4;
  DeploymentTable table = search(options);
  SystemSpec system = *loadSystem("dgx-h100");
  unsigned replayed = 0, pairs = 0;
  for (const DeploymentRun &run : table.runs) {
    if (run.status == RunStatus::Failed)
      continue;
    std::string errors;
    llvm::raw_string_ostream os(errors);
    DiagnosticEngine diags(os);
    std::optional<ReplayedRun> replay =
        replayDeploymentRun(table, run, options, system, diags);
    ASSERT_TRUE(replay) << os.str();
    std::string label = getStagecFlags(table, run, options);
    EXPECT_EQ(replay->summary.outputTokensPerSecondPerGPU,
              run.summary.outputTokensPerSecondPerGPU)
        << label;
    EXPECT_EQ(replay->summary.ttft.p99, run.summary.ttft.p99) << label;
    EXPECT_EQ(replay->summary.tpot.mean, run.summary.tpot.mean) << label;
    EXPECT_EQ(replay->summary.iterations, run.summary.iterations) << label;
    EXPECT_EQ(replay->prefillInstance.has_value(),
              run.deployment.prefill.has_value());
    EXPECT_EQ(replay->instance.degrees,
              table.plans[run.deployment.serve.plan].plan.getDegrees());
    ++replayed;
    pairs += run.deployment.prefill.has_value();
  }
  EXPECT_GE(replayed, 10u);
  EXPECT_GE(pairs, 4u);
}

TEST(DeploymentSearchTest, CapsThatNeverBindAreNotRunAgain) {
  DeploymentSearchOptions options = smallSearch();
  options.disaggregated = false;
  options.concurrencies = {2, 32};
  DeploymentTable table = search(options);
  // 2 deployments x 3 caps x 2 points, one cost model for every cap. Two
  // clients never fill a cap of 4: 64 and 128 repeat it. 32 clients (8 or
  // 16 an engine) fill cap 4, not 64: 128 repeats 64.
  EXPECT_EQ(table.candidateRuns, 12u);
  std::set<std::tuple<unsigned, uint64_t, uint64_t>> seen;
  for (const DeploymentRun &run : table.runs) {
    seen.insert({run.deployment.serve.plan, run.maxBatch, *run.concurrency});
    if (run.maxBatch == 4 && *run.concurrency == 32)
      EXPECT_TRUE(run.maxBatchBinding);
    if (*run.concurrency == 2)
      EXPECT_FALSE(run.maxBatchBinding);
  }
  for (unsigned plan : {0u, 1u}) {
    EXPECT_TRUE(seen.count({plan, 4, 2}));
    EXPECT_FALSE(seen.count({plan, 64, 2}));
    EXPECT_TRUE(seen.count({plan, 4, 32}));
    EXPECT_TRUE(seen.count({plan, 64, 32}));
    for (uint64_t clients : {2u, 32u})
      EXPECT_FALSE(seen.count({plan, 128, clients}));
  }
  EXPECT_EQ(table.runs.size(), 6u);
  EXPECT_EQ(table.repeatedRuns, 6u);
}

TEST(DeploymentSearchTest, RoutersRunWhereThereIsAChoice) {
  // Four tp1 instances, two tp2 ones, and the disaggregated pairs.
  DeploymentSearchOptions options = smallSearch();
  options.maxBatches = {64};
  options.concurrencies = {16};
  options.routers = {Router::Load, Router::KVAware};
  DeploymentTable table = search(options);
  EXPECT_EQ(table.candidateRuns, 16u); // 8 deployments x 2 routers
  std::map<std::string, std::map<Router, const DeploymentRun *>> byLabel;
  for (const DeploymentRun &run : table.runs)
    byLabel[getDeploymentLabel(table, run.deployment)][run.router] = &run;
  // Pairs with one prefill instance of one replica ran by load alone (the
  // decode instances are chosen by load whatever the router): the KV
  // router's runs would repeat them.
  for (const char *pair : {"1xtp2 -> 1xtp2", "1xtp1 -> 3xtp1"}) {
    ASSERT_TRUE(byLabel.count(pair)) << pair;
    EXPECT_EQ(byLabel[pair].size(), 1u) << pair;
    EXPECT_TRUE(byLabel[pair].count(Router::Load)) << pair;
  }
  EXPECT_EQ(table.repeatedRuns, 16u - table.runs.size() - table.skippedRuns);
  EXPECT_GE(table.repeatedRuns, 1u);
  // Four aggregated instances: both routers ran (that they route apart,
  // and as stagec does, stage-search/serve.test shows).
  const auto &four = byLabel["4xtp1"];
  ASSERT_EQ(four.size(), 2u);
  const DeploymentRun &load = *four.at(Router::Load);
  const DeploymentRun &kv = *four.at(Router::KVAware);
  // Each run's command names its router, as stagec takes it.
  EXPECT_EQ(getStagecFlags(table, load, options).find("--router"),
            std::string::npos);
  EXPECT_NE(getStagecFlags(table, kv, options).find("--router kv"),
            std::string::npos);
}

TEST(DeploymentSearchTest, SplitSweepsKeepTheFront) {
  DeploymentSearchOptions options = smallSearch();
  options.gpus = 8;
  options.maxBatches = {64};
  options.concurrencies = {4, 64};
  DeploymentTable swept = search(options);
  options.splitPatience = 0;
  DeploymentTable every = search(options);
  EXPECT_EQ(every.skippedRuns, 0u);
  EXPECT_EQ(every.runs.size(), every.candidateRuns);
  EXPECT_LT(swept.runs.size(), every.runs.size());
  auto front = [&](const DeploymentTable &table) {
    std::vector<std::string> labels;
    for (const DeploymentRun &run : table.runs)
      if (run.pareto)
        labels.push_back(getDeploymentLabel(table, run.deployment) + " @" +
                         std::to_string(*run.concurrency));
    return labels;
  };
  EXPECT_EQ(front(swept), front(every));
}

TEST(DeploymentSearchTest, PipelinesOnlyAsDeepAsMemoryNeeds) {
  DeploymentSearchOptions options = smallSearch();
  options.base.overrides.clear(); // all 32 layers: 16 GB of weights
  options.engine.limits.memoryFraction = 0.2; // 17.1 GB of an H100's 85.5
  options.concurrencies = {4};
  options.maxBatches = {64};
  options.disaggregated = false;
  DeploymentTable table = search(options);
  std::vector<std::string> plans;
  for (const InstancePlanResult &result : table.plans)
    plans.push_back(result.plan.getLabel() +
                    (result.fitsDecode ? " fits" : " no"));
  EXPECT_EQ(plans, (std::vector<std::string>{"tp1 no", "tp1pp2 fits",
                                             "tp2 fits"}));
  EXPECT_NE(table.plans[0].reason.find("GB of KV cache a rank"),
            std::string::npos);
}

TEST(DeploymentSearchTest, TooManyRunsIsAnError) {
  DeploymentSearchOptions options = smallSearch();
  options.maxRuns = 10;
  std::string errors;
  llvm::raw_string_ostream os(errors);
  DiagnosticEngine diags(os);
  SystemSpec system = *loadSystem("dgx-h100");
  EXPECT_FALSE(searchDeployments(options, system, diags));
  EXPECT_NE(os.str().find("more than the 10 a search takes"),
            std::string::npos);
}

} // namespace
