//===- ServingWorkloadTest.cpp - How requests arrive, and the SLOs --------===//
//
// Open-loop arrivals (a trace's times, gamma-distributed gaps at a rate),
// `--lengths` files with an arrival column, and the share of requests that
// meet per-request SLOs, on the hand-made clock of ServingTestClock.h.
//
//===----------------------------------------------------------------------===//

#include "ServingTestClock.h"

#include "stg/Serve/RequestLengths.h"
#include "stg/Serve/ServingReport.h"

#include "llvm/Support/FileSystem.h"
#include "gtest/gtest.h"

#include <cmath>
#include <numeric>

using namespace stg;

namespace {

/// The gaps between a run's arrivals: their mean (us) and coefficient of
/// variation.
std::pair<double, double> getGapStatistics(const ServingResult &result) {
  std::vector<double> gaps;
  for (size_t index = 1; index < result.requests.size(); ++index)
    gaps.push_back(result.requests[index].arrival -
                   result.requests[index - 1].arrival);
  double mean =
      std::accumulate(gaps.begin(), gaps.end(), 0.0) / double(gaps.size());
  double variance = 0;
  for (double gap : gaps)
    variance += (gap - mean) * (gap - mean);
  variance /= double(gaps.size() - 1);
  return {mean, std::sqrt(variance) / mean};
}

/// `text` in a temporary file, removed with this.
class TemporaryFile {
public:
  explicit TemporaryFile(llvm::StringRef text) {
    int fd = -1;
    EXPECT_FALSE(llvm::sys::fs::createTemporaryFile("trace", "csv", fd, path));
    llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
    os << text;
  }
  ~TemporaryFile() { llvm::sys::fs::remove(path); }
  llvm::StringRef getPath() const { return path; }

private:
  llvm::SmallString<128> path;
};

} // namespace

TEST(ServingWorkloadTest, ATraceSendsEachRequestAtItsTime) {
  ServingRun run;
  run.workload.concurrency.reset();
  run.workload.arrivals = {0, 500, 500, 20000};
  run.workload.requests = 4;
  std::optional<ServingResult> result = run.simulate();
  ASSERT_TRUE(result) << run.errors;
  ASSERT_EQ(result->requests.size(), 4u);
  for (size_t index = 0; index < 4; ++index)
    EXPECT_DOUBLE_EQ(result->requests[index].arrival,
                     run.workload.arrivals[index]);
  // The two at 500 us wait for the first's prefill (to 2000 us), then
  // prefill together; all three are done long before the fourth, which
  // runs alone: 2000 us of prefill, four decode iterations of 1010 us.
  EXPECT_DOUBLE_EQ(result->requests[1].firstToken,
                   result->requests[2].firstToken);
  EXPECT_LT(result->requests[2].finish, 20000);
  EXPECT_DOUBLE_EQ(result->requests[3].firstToken, 22000);
  EXPECT_DOUBLE_EQ(result->requests[3].finish, 22000 + 4 * 1010);
}

TEST(ServingWorkloadTest, ArrivalsAndPrefixGroupsAreChecked) {
  ServingRun run;
  run.workload.concurrency.reset();
  run.workload.arrivals = {0, 500};
  run.workload.requests = 3;
  EXPECT_FALSE(run.simulate());
  EXPECT_NE(run.errors.find("one a request"), std::string::npos);
  run.errors.clear();
  run.workload.requests = 2;
  run.workload.requestRate = 5;
  EXPECT_FALSE(run.simulate());
  EXPECT_NE(run.errors.find("arrive one way"), std::string::npos);
  run.errors.clear();
  run.workload.requestRate.reset();
  run.workload.prefixGroups = 0;
  EXPECT_FALSE(run.simulate());
  EXPECT_NE(run.errors.find("at least one prefix group"), std::string::npos);
}

TEST(ServingWorkloadTest, BurstinessShapesTheGapsButNotTheirMean) {
  // Gamma gaps of shape k and mean 1/rate vary by 1/sqrt(k) of their mean:
  // 2 at k = 0.25, 1 (Poisson) at k = 1, 0.5 at k = 4.
  for (double shape : {0.25, 1.0, 4.0}) {
    ServingRun run;
    run.workload.lengths = {{1, 1}};
    run.workload.concurrency.reset();
    run.workload.requestRate = 1000;
    run.workload.burstiness = shape;
    run.workload.requests = 4000;
    run.workload.seed = 11;
    std::optional<ServingResult> result = run.simulate();
    ASSERT_TRUE(result) << run.errors;
    auto [mean, variation] = getGapStatistics(*result);
    EXPECT_NEAR(mean, 1000, 60) << "shape " << shape;
    EXPECT_NEAR(variation, 1 / std::sqrt(shape), 0.12 / std::sqrt(shape))
        << "shape " << shape;
  }
}

TEST(ServingWorkloadTest, SLOsCountTheRequestsWithinEveryBound) {
  // One client: a prompt of 100 tokens (TTFT 2 ms, TPOT 1.01 ms, done at
  // 6.04 ms), then one of 300 (TTFT 4 ms, done 14.08 ms from the start),
  // then one of 100 with one output token (no TPOT, done at 16.08 ms).
  ServingRun run;
  run.workload.lengths = {{100, 5}, {300, 5}, {100, 1}};
  run.workload.requests = 3;
  std::optional<ServingResult> result = run.simulate();
  ASSERT_TRUE(result) << run.errors;
  ASSERT_DOUBLE_EQ(result->requests[2].finish, 16080);

  ServingSLO slo;
  slo.ttftMs = 3;
  ServingSummary summary = summarizeServing(*result, 0, slo);
  ASSERT_TRUE(summary.slo);
  EXPECT_EQ(summary.slo->good, 2u);
  EXPECT_DOUBLE_EQ(summary.slo->attainment, 2.0 / 3);
  EXPECT_DOUBLE_EQ(summary.slo->ttft, 2.0 / 3);
  EXPECT_DOUBLE_EQ(summary.slo->tpot, 1); // no bound on it
  EXPECT_NEAR(summary.slo->goodput, 2 / 16.08e-3, 1e-9);

  // A TPOT bound of 1 ms: the two of 1.01 ms miss, the single token meets.
  slo.tpotMs = 1;
  summary = summarizeServing(*result, 0, slo);
  EXPECT_EQ(summary.slo->good, 1u);
  EXPECT_DOUBLE_EQ(summary.slo->tpot, 1.0 / 3);
  // An end-to-end bound with it: the last request's 2 ms is within 5 ms.
  slo.e2eMs = 5;
  summary = summarizeServing(*result, 0, slo);
  EXPECT_EQ(summary.slo->good, 1u);
  EXPECT_DOUBLE_EQ(summary.slo->e2e, 1.0 / 3);
  // After a warm-up request, over the two measured: the window runs from
  // the second's arrival at 6.04 ms to 16.08 ms, and the last is the good
  // one.
  summary = summarizeServing(*result, 1, slo);
  EXPECT_EQ(summary.requests, 2u);
  EXPECT_DOUBLE_EQ(summary.slo->attainment, 0.5);
  EXPECT_NEAR(summary.slo->goodput, 1 / 10.04e-3, 1e-9);
  // Without SLOs, nothing to report.
  EXPECT_FALSE(summarizeServing(*result).slo);
}

TEST(ServingWorkloadTest, AzureTracesGiveArrivalsFromTheFirstRequest) {
  TemporaryFile file("TIMESTAMP,ContextTokens,GeneratedTokens\n"
                     "2023-11-16 18:15:46.6805900,374,44\n"
                     "2023-11-16 18:15:50.9951690,396,109\n"
                     "2023-11-16 18:16:00,879,28 # a comment\n");
  std::string errors;
  llvm::raw_string_ostream os(errors);
  DiagnosticEngine diags(os);
  std::optional<RequestTrace> trace = loadRequestTrace(file.getPath(), diags);
  ASSERT_TRUE(trace) << errors;
  ASSERT_EQ(trace->lengths.size(), 3u);
  EXPECT_EQ(trace->lengths[1].input, 396u);
  EXPECT_EQ(trace->lengths[1].output, 109u);
  ASSERT_EQ(trace->arrivals.size(), 3u);
  EXPECT_DOUBLE_EQ(trace->arrivals[0], 0);
  EXPECT_NEAR(trace->arrivals[1], 4314579, 1e-3);
  EXPECT_NEAR(trace->arrivals[2], 13319410, 1e-3);
}

TEST(ServingWorkloadTest, BurstGPTTracesReadAsPublished) {
  // BurstGPT's columns, its model, total and log type ignored; a failed
  // request (0 response tokens) is refused with where to find the file
  // without them.
  std::string errors;
  llvm::raw_string_ostream os(errors);
  DiagnosticEngine diags(os);
  llvm::StringRef header =
      "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n";
  std::optional<RequestTrace> trace = parseRequestTrace(
      header.str() + "5,ChatGPT,472,18,490,Conversation log\n"
                     "45,ChatGPT,1087,253,1340,Conversation log\n"
                     "118,GPT-4,417,276,693,Conversation log\n",
      "burst.csv", diags);
  ASSERT_TRUE(trace) << errors;
  ASSERT_EQ(trace->lengths.size(), 3u);
  EXPECT_EQ(trace->lengths[1].input, 1087u);
  EXPECT_EQ(trace->lengths[1].output, 253u);
  EXPECT_DOUBLE_EQ(trace->arrivals[2], 113e6);
  EXPECT_FALSE(
      parseRequestTrace(header.str() + "5,ChatGPT,472,0,472,Conversation log\n",
                        "fails.csv", diags));
  EXPECT_NE(os.str().find("fails.csv:2:15: error: output tokens '0' is not "
                          "a whole number from 1 to 16777216 (a failed "
                          "request: BurstGPT's without_fails files leave "
                          "them out)"),
            std::string::npos)
      << os.str();
}

TEST(ServingWorkloadTest, ColumnsFollowTheHeaderInAnyOrder) {
  std::string errors;
  llvm::raw_string_ostream os(errors);
  DiagnosticEngine diags(os);
  std::optional<RequestTrace> trace = parseRequestTrace(
      "output,arrival_ms,input\n8,0,100\n16,2.5,200\n", "t.csv", diags);
  ASSERT_TRUE(trace) << errors;
  EXPECT_EQ(trace->lengths[1].input, 200u);
  EXPECT_EQ(trace->lengths[1].output, 16u);
  EXPECT_DOUBLE_EQ(trace->arrivals[1], 2500);

  trace = parseRequestTrace("128,16\n2048,4\n", "plain.csv", diags);
  ASSERT_TRUE(trace) << errors;
  EXPECT_EQ(trace->lengths.size(), 2u);
  EXPECT_TRUE(trace->arrivals.empty());
}

TEST(ServingWorkloadTest, AHeaderNamesEachColumnOnce) {
  auto error = [](llvm::StringRef text) {
    std::string errors;
    llvm::raw_string_ostream os(errors);
    DiagnosticEngine diags(os);
    EXPECT_FALSE(parseRequestTrace(text, "h.csv", diags)) << text.str();
    return os.str();
  };
  EXPECT_NE(error("arrival_s,input\n0,5\n")
                .find("h.csv:1:1: error: the header needs an input and an "
                      "output column"),
            std::string::npos);
  EXPECT_NE(error("input,output,arrival_s,timestamp\n")
                .find("h.csv:1:24: error: column 'timestamp' repeats what "
                      "an earlier one gives"),
            std::string::npos);
  EXPECT_NE(error("input,output,input_length\n")
                .find("column 'input_length' repeats"),
            std::string::npos);
  EXPECT_NE(error("input,output,arrival_s\n1,2\n")
                .find("h.csv:2:1: error: expected 3 cells, as the header "
                      "names"),
            std::string::npos);
  EXPECT_NE(error("timestamp,input,output\n1e13,1,1\n")
                .find("h.csv:2:1: error: arrival '1e13' is not a time"),
            std::string::npos);
  EXPECT_NE(error("arrival_s,input,output\n0,1,1\n2e7,1,1\n")
                .find("arrival '2e7' is 2.000000e+07 s after the first"),
            std::string::npos);
}

TEST(ServingWorkloadTest, QueueTimeIsTheWaitBeforeAnEngineAdmits) {
  // Two requests of 100 + 5 tokens at once in a cache that holds one: the
  // first is admitted at once and done at 6040 us (a prefill of 2000, four
  // decodes of 1010); the second waits for it, then prefills.
  ServingRun run;
  run.clock.kvBudget = 150;
  run.workload.concurrency = 2;
  run.workload.requests = 2;
  std::optional<ServingResult> result = run.simulate();
  ASSERT_TRUE(result) << run.errors;
  const RequestRecord &first = result->requests[0],
                      &second = result->requests[1];
  EXPECT_DOUBLE_EQ(first.admitted, 0);
  EXPECT_DOUBLE_EQ(second.admitted, 6040);
  EXPECT_DOUBLE_EQ(second.firstToken, 6040 + 2000);
  ServingSummary summary = summarizeServing(*result);
  EXPECT_DOUBLE_EQ(summary.queue.mean, 3.02);
  EXPECT_DOUBLE_EQ(summary.queue.p99, 6.04 * 0.99);
  EXPECT_DOUBLE_EQ(summary.ttft.mean, (2.0 + 8.04) / 2);
}
