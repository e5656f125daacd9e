//===- PromptBlocksTest.cpp - A trace's prompt blocks in the cache --------===//
//
// Traces that name their prompts' blocks (Mooncake's JSON lines and their
// hash_ids): how the reader takes them, and how the replicas' caches keep,
// share and evict the blocks on the hand clock of ServingTestClock.h
// (1000 us an iteration and 10 a token, a byte of cache a token).
//
//===----------------------------------------------------------------------===//

#include "ServingTestClock.h"

#include "stg/Serve/RequestLengths.h"

#include "gtest/gtest.h"

using namespace stg;

namespace {

/// Each line's prompt of `blockTokens`-token blocks.
PromptBlocks makeBlocks(uint64_t blockTokens,
                        std::vector<std::vector<uint64_t>> lines) {
  PromptBlocks blocks;
  blocks.tokens = blockTokens;
  blocks.begin.push_back(0);
  for (const std::vector<uint64_t> &line : lines) {
    blocks.ids.insert(blocks.ids.end(), line.begin(), line.end());
    blocks.begin.push_back(blocks.ids.size());
  }
  return blocks;
}

/// The prefill each request of a one-client run did: its time to the first
/// token, less the iteration's 1000 us, over 10 us a token.
std::vector<double> getPrefilledTokens(const ServingResult &result) {
  std::vector<double> tokens;
  for (const RequestRecord &request : result.requests)
    tokens.push_back((request.firstToken - request.arrival - 1000) / 10);
  return tokens;
}

/// Two engines, each request's prompt one of `lines` in blocks of 10,
/// arriving at `arrivals` (us) with `lengths`.
ServingRun makeTwoEngineRun(std::vector<RequestLengths> lengths,
                            std::vector<double> arrivals,
                            std::vector<std::vector<uint64_t>> lines) {
  ServingRun run;
  run.deployment.decode.instances = 2;
  run.workload.concurrency.reset();
  run.workload.requests = lengths.size();
  run.workload.lengths = std::move(lengths);
  run.workload.arrivals = std::move(arrivals);
  run.workload.promptBlocks = makeBlocks(10, std::move(lines));
  return run;
}

/// The error parsing `text` as the trace `t.jsonl` gives.
std::string getTraceError(llvm::StringRef text, uint64_t blockTokens = 16) {
  std::string errors;
  llvm::raw_string_ostream os(errors);
  DiagnosticEngine diags(os);
  EXPECT_FALSE(parseRequestTrace(text, "t.jsonl", diags, blockTokens))
      << text.str();
  return os.str();
}

} // namespace

TEST(PromptBlocksTest, JsonLinesGiveLengthsArrivalsAndBlocks) {
  std::string errors;
  llvm::raw_string_ostream os(errors);
  DiagnosticEngine diags(os);
  std::optional<RequestTrace> trace = parseRequestTrace(
      "{\"timestamp\": 0, \"input_length\": 40, \"output_length\": 5, "
      "\"hash_ids\": [0, 1, 2]}\n"
      "\n"
      "{\"hash_ids\": [0, 3], \"output_length\": 7, \"input_length\": 20, "
      "\"timestamp\": 3052.5}\r\n"
      "{\"timestamp\": 3052.5, \"input_length\": 9, \"output_length\": 1}\n",
      "t.jsonl", diags, 16);
  ASSERT_TRUE(trace) << errors;
  ASSERT_EQ(trace->lengths.size(), 3u);
  EXPECT_EQ(trace->lengths[1].input, 20u);
  EXPECT_EQ(trace->lengths[1].output, 7u);
  ASSERT_EQ(trace->arrivals.size(), 3u);
  EXPECT_DOUBLE_EQ(trace->arrivals[1], 3052500);
  EXPECT_DOUBLE_EQ(trace->arrivals[2], 3052500);
  const PromptBlocks &blocks = trace->blocks;
  EXPECT_EQ(blocks.tokens, 16u);
  EXPECT_EQ(blocks.getLine(0), llvm::makeArrayRef<uint64_t>({0, 1, 2}));
  EXPECT_EQ(blocks.getLine(1), llvm::makeArrayRef<uint64_t>({0, 3}));
  EXPECT_TRUE(blocks.getLine(2).empty());
  // Without hash ids or timestamps: lengths alone.
  trace = parseRequestTrace("{\"input_length\": 9, \"output_length\": 1}\n",
                            "plain.jsonl", diags);
  ASSERT_TRUE(trace) << errors;
  EXPECT_TRUE(trace->arrivals.empty());
  EXPECT_TRUE(trace->blocks.empty());
}

TEST(PromptBlocksTest, ATraceLineIsCheckedWhereItIsRead) {
  auto has = [](const std::string &errors, llvm::StringRef expected) {
    return errors.find(expected.str()) != std::string::npos;
  };
  EXPECT_TRUE(has(getTraceError("{\"input_length\": 9, \"output_length\": }\n"),
                  "t.jsonl:1:38: error: not a JSON line: "));
  EXPECT_TRUE(has(getTraceError("[1, 2]\n{\"input_length\": 9}\n"),
                  "t.jsonl:1:1: error: expected a JSON object a line"));
  // Nesting that would take llvm::json's recursion deep stops at its ninth
  // level.
  EXPECT_TRUE(
      has(getTraceError("{\"hash_ids\": " + std::string(100000, '[') + "\n"),
          "t.jsonl:1:21: error: arrays and objects nested deeper "
          "than 8 levels"));
  EXPECT_TRUE(has(getTraceError("{\"input_length\": 9, \"output_length\": 1, "
                                "\"session\": 4}\n"),
                  "t.jsonl:1:41: error: unknown key 'session'"));
  EXPECT_TRUE(has(getTraceError("{\"input_length\": 9}\n"),
                  "t.jsonl:1:1: error: expected \"output_length\""));
  EXPECT_TRUE(
      has(getTraceError("{\"input_length\": 0, \"output_length\": 1}\n"),
          "t.jsonl:1:2: error: input_length is not a whole number"));
  EXPECT_TRUE(
      has(getTraceError("{\"input_length\": 9, \"output_length\": 1, "
                        "\"timestamp\": 5}\n"
                        "{\"input_length\": 9, \"output_length\": 1}\n"),
          "t.jsonl:2:1: error: no timestamp where the lines before "
          "have one"));
  EXPECT_TRUE(has(getTraceError("{\"timestamp\": 5, \"input_length\": 9, "
                                "\"output_length\": 1}\n"
                                "{\"timestamp\": 4, \"input_length\": 9, "
                                "\"output_length\": 1}\n"),
                  "t.jsonl:2:2: error: arrival '4' is before the line "
                  "before's"));
  // 33 tokens fill three blocks of 16: four ids are too many, and say so
  // with the flag that sets the blocks' size.
  EXPECT_TRUE(has(getTraceError("{\"input_length\": 33, \"output_length\": 1, "
                                "\"hash_ids\": [0, 1, 2, 3]}\n"),
                  "t.jsonl:1:42: error: hash_ids names 4 blocks of 16 tokens, "
                  "more than the prompt's 33 tokens fill (3); give the "
                  "trace's block size with --trace-block-tokens"));
  EXPECT_TRUE(has(getTraceError("{\"input_length\": 33, \"output_length\": 1, "
                                "\"hash_ids\": [0, 1, 0]}\n"),
                  "error: hash_ids[2] repeats block 0 of the same prompt"));
  EXPECT_TRUE(has(getTraceError("{\"input_length\": 33, \"output_length\": 1, "
                                "\"hash_ids\": [0, -1]}\n"),
                  "error: hash_ids[1] is not a block id: a whole number from "
                  "0 to 9007199254740991"));
}

TEST(PromptBlocksTest, APromptReadsTheLeadingBlocksItsReplicaHolds) {
  // One client; prompts of 100, 100 and 40 tokens in blocks of 16. The
  // second shares its first three blocks with the first, the third its
  // first two, of which it can read both (32 tokens, short of its last).
  ServingRun run;
  run.workload.lengths = {{100, 5}, {100, 5}, {40, 5}};
  run.workload.requests = 3;
  run.workload.promptBlocks = makeBlocks(
      16, {{1, 2, 3, 4, 5, 6, 7}, {1, 2, 3, 9, 10, 11, 12}, {1, 2, 20}});
  std::optional<ServingResult> result = run.simulate();
  ASSERT_TRUE(result) << run.errors;
  EXPECT_EQ(result->prefixHitTokens, 48u + 32u);
  EXPECT_EQ(getPrefilledTokens(*result), (std::vector<double>{100, 52, 8}));
  // Without prefix caching every prompt is prefilled whole.
  run.settings.prefixCaching = false;
  result = run.simulate();
  ASSERT_TRUE(result) << run.errors;
  EXPECT_EQ(result->prefixHitTokens, 0u);
  EXPECT_EQ(getPrefilledTokens(*result), (std::vector<double>{100, 100, 40}));
}

TEST(PromptBlocksTest, BlocksGoLeastRecentlyReadFirstAndTailsBeforeHeads) {
  // One client; prompts of 31 + 1 tokens in blocks of 10 (three whole
  // blocks each cache) in a cache of 60 bytes, so that every admission
  // from the second on evicts:
  //   1 [1,2,3] cached;
  //   2 [5,6,7]: evicts 3 (the deepest of those read last), reads nothing;
  //   3 [1,2,9]: reads 1, 2 and evicts 7, not them;
  //   4 [5,6,7]: reads 5, 6; evicts 2 (1 and 2 were read before 9 was
  //     cached; 2 is the deeper);
  //   5 [1,2,3]: reads 1; evicts 9, then 6 (5 and 6 were read together).
  ServingRun run;
  run.clock.kvBudget = 60;
  run.workload.requests = 5;
  run.workload.promptBlocks = makeBlocks(10, {{1, 2, 3, 4},
                                              {5, 6, 7, 8},
                                              {1, 2, 9, 10},
                                              {5, 6, 7, 11},
                                              {1, 2, 3, 12}});
  run.workload.lengths.assign(5, {31, 1});
  std::optional<ServingResult> result = run.simulate();
  ASSERT_TRUE(result) << run.errors;
  EXPECT_EQ(getPrefilledTokens(*result),
            (std::vector<double>{31, 31, 11, 11, 21}));
  EXPECT_EQ(result->prefixHitTokens, 20u + 20u + 10u);
  for (const IterationRecord &iteration : result->iterations)
    EXPECT_LE(iteration.kvUsed, 1.0 + 1e-12);
}

TEST(PromptBlocksTest, EvictedBlocksWaitInHostMemoryAndAreReadBack) {
  // One client; prompts [1,2,3], [5,6,7], [1,2,3], [5,6,7], [1,2,3] of
  // 31 + 1 tokens in blocks of 10, a cache of 60 bytes and 100 of host
  // memory read at a byte a microsecond. From the second on, each
  // admission evicts a block to the host (3, 7, 2, ...); the third reads 1
  // and 2 and, 10 us before its prefill, 3 from the host; the fourth 5, 6
  // and 7 from the host; the fifth 1, then 2 and 3 from the host (20 us).
  // Each prefills one token.
  ServingRun run;
  run.clock.kvBudget = 60;
  run.deployment.hostBandwidth = 1e6;
  run.settings.offloadBytes = 100;
  run.workload.lengths.assign(5, {31, 1});
  run.workload.requests = 5;
  run.workload.promptBlocks = makeBlocks(10, {{1, 2, 3, 4},
                                              {5, 6, 7, 8},
                                              {1, 2, 3, 10},
                                              {5, 6, 7, 11},
                                              {1, 2, 3, 12}});
  std::optional<ServingResult> result = run.simulate();
  ASSERT_TRUE(result) << run.errors;
  std::vector<double> ttfts;
  for (const RequestRecord &request : result->requests)
    ttfts.push_back(request.firstToken - request.arrival);
  EXPECT_EQ(ttfts,
            (std::vector<double>{1310, 1310, 10 + 1010, 10 + 1010, 20 + 1010}));
  EXPECT_EQ(result->prefixHitTokens, 90u);
  EXPECT_EQ(result->hostHitTokens, 40u);
  for (const IterationRecord &iteration : result->iterations)
    EXPECT_LE(iteration.kvUsed, 1.0 + 1e-12);
  // With room for one block on the host, the last evicted goes first: the
  // fifth finds block 2 there but not 3, and prefills 11 tokens.
  run.settings.offloadBytes = 10;
  result = run.simulate();
  ASSERT_TRUE(result) << run.errors;
  EXPECT_DOUBLE_EQ(result->requests[4].firstToken - result->requests[4].arrival,
                   10 + 1000 + 110);
}

TEST(PromptBlocksTest, ABlockARunningSequenceReadsStays) {
  // A cache of 70 bytes, blocks of 10. The first request ([1,2,3], 31 + 20
  // tokens, 51 bytes) caches its blocks and decodes to 20.6 ms; the second
  // ([1,2,5], 31 + 1, at 5 ms) reads 1 and 2 and caches 5 (61 bytes used
  // once it is done). The third ([7,8,9], 31 + 1, at 6 ms) needs 32 where
  // 9 are free and only block 5 may go: blocks 1 to 3, which the first
  // still reads, stay, and it waits for the first to finish.
  ServingRun run;
  run.clock.kvBudget = 70;
  run.workload.concurrency.reset();
  run.workload.lengths = {{31, 20}, {31, 1}, {31, 1}};
  run.workload.arrivals = {0, 5000, 6000};
  run.workload.requests = 3;
  run.workload.promptBlocks =
      makeBlocks(10, {{1, 2, 3, 4}, {1, 2, 5, 6}, {7, 8, 9, 10}});
  std::optional<ServingResult> result = run.simulate();
  ASSERT_TRUE(result) << run.errors;
  EXPECT_EQ(result->prefixHitTokens, 20u);
  const std::vector<RequestRecord> &requests = result->requests;
  // Its 19 decodes, one beside the second's prefill of 11 tokens.
  EXPECT_DOUBLE_EQ(requests[0].finish, 1310 + 18 * 1010 + 1120);
  EXPECT_DOUBLE_EQ(requests[2].admitted, requests[0].finish);
  for (const IterationRecord &iteration : result->iterations)
    EXPECT_LE(iteration.kvUsed, 1.0 + 1e-12);
}

TEST(PromptBlocksTest, ARunRefusesBlocksThatDoNotFitItsWorkload) {
  ServingRun run;
  run.workload.promptBlocks = makeBlocks(16, {{1, 2}, {3}});
  EXPECT_FALSE(run.simulate()); // Two lines of blocks, one of lengths.
  EXPECT_NE(run.errors.find("a serving run's prompt blocks need a line of "
                            "ids"),
            std::string::npos);
  run.workload.promptBlocks = makeBlocks(16, {{1, 2}});
  run.settings.blockTokens = 5; // Blocks of 16 are not whole pages of 5.
  EXPECT_FALSE(run.simulate());
  run.settings.blockTokens = 16;
  EXPECT_TRUE(run.simulate()) << run.errors;
}

TEST(PromptBlocksTest, TheKVRouterSendsAPromptWhereItsBlocksAre) {
  // Two engines; prompts of 31 + 1 tokens in blocks of 10, documents A, B,
  // A, B arriving at 0, 0, 10 and 20 ms. The first two go to engines 0 and
  // 1 and cache their documents there; the later two find both engines
  // idle. By load both go to engine 0, where B is not cached; the KV
  // router sends each to its document's engine (its cost there: 1 token
  // to prefill and 31 held, against 31 and 31).
  ServingRun run = makeTwoEngineRun(
      std::vector<RequestLengths>(4, {31, 1}), {0, 0, 10000, 20000},
      {{1, 2, 3, 4}, {5, 6, 7, 8}, {1, 2, 3, 9}, {5, 6, 7, 10}});
  std::optional<ServingResult> result = run.simulate();
  ASSERT_TRUE(result) << run.errors;
  EXPECT_EQ(getPrefilledTokens(*result), (std::vector<double>{31, 31, 1, 31}));
  EXPECT_EQ(result->requests[3].prefillEngine, 0u);
  run.settings.router = Router::KVAware;
  result = run.simulate();
  ASSERT_TRUE(result) << run.errors;
  EXPECT_EQ(getPrefilledTokens(*result), (std::vector<double>{31, 31, 1, 1}));
  EXPECT_EQ(result->requests[1].prefillEngine, 1u);
  EXPECT_EQ(result->requests[3].prefillEngine, 1u);
  // Weighing prefill tokens at nothing, the cost is the tokens held alone,
  // the same on both idle engines: the first takes both.
  run.settings.kvOverlapWeight = 0;
  result = run.simulate();
  ASSERT_TRUE(result) << run.errors;
  EXPECT_EQ(result->requests[3].prefillEngine, 0u);
  // So between the attention replicas of one engine: by the fewest
  // running, B's second prompt goes to replica 0; by cost, to B's.
  run.deployment.decode.instances = 1;
  run.clock.replicas = 2;
  run.settings.kvOverlapWeight = 1;
  run.settings.router = Router::Load;
  result = run.simulate();
  ASSERT_TRUE(result) << run.errors;
  EXPECT_EQ(getPrefilledTokens(*result), (std::vector<double>{31, 31, 1, 31}));
  run.settings.router = Router::KVAware;
  result = run.simulate();
  ASSERT_TRUE(result) << run.errors;
  EXPECT_EQ(getPrefilledTokens(*result), (std::vector<double>{31, 31, 1, 1}));
}

TEST(PromptBlocksTest, OneEngineLeavesOnlyTheKVRouterAChoice) {
  // The KV router's test's prompts on one engine of two replicas: SGLang's
  // router picks engines alone, so it routes as by load there, as
  // getEffectiveRouter says (the search leaves such runs out).
  ServingRun run = makeTwoEngineRun(
      std::vector<RequestLengths>(4, {31, 1}), {0, 0, 10000, 20000},
      {{1, 2, 3, 4}, {5, 6, 7, 8}, {1, 2, 3, 9}, {5, 6, 7, 10}});
  run.deployment.decode.instances = 1;
  run.clock.replicas = 2;
  std::vector<std::vector<double>> prefilled;
  for (Router router : {Router::Load, Router::CacheAware, Router::KVAware}) {
    run.settings.router = router;
    std::optional<ServingResult> result = run.simulate();
    ASSERT_TRUE(result) << run.errors;
    prefilled.push_back(getPrefilledTokens(*result));
  }
  EXPECT_EQ(prefilled[0], prefilled[1]);
  EXPECT_NE(prefilled[0], prefilled[2]);
  EXPECT_EQ(getEffectiveRouter(Router::CacheAware, 1, 2), Router::Load);
  EXPECT_EQ(getEffectiveRouter(Router::KVAware, 1, 2), Router::KVAware);
  EXPECT_EQ(getEffectiveRouter(Router::KVAware, 1, 1), Router::Load);
  EXPECT_EQ(getEffectiveRouter(Router::CacheAware, 2, 1), Router::CacheAware);
}

TEST(PromptBlocksTest, TheCacheAwareRouterFollowsThePromptsBlocks) {
  // Documents A, B, A, A as above. SGLang's router sends the first to
  // engine 0 and the second, which finds no prefix anywhere, to the engine
  // sent the fewest prompt tokens: engine 1. The later two find A's blocks
  // on engine 0 (30 of 31 tokens, over the 0.3 threshold) and go there.
  ServingRun run = makeTwoEngineRun(
      std::vector<RequestLengths>(4, {31, 1}), {0, 0, 10000, 20000},
      {{1, 2, 3, 4}, {5, 6, 7, 8}, {1, 2, 3, 9}, {1, 2, 3, 10}});
  run.settings.router = Router::CacheAware;
  std::optional<ServingResult> result = run.simulate();
  ASSERT_TRUE(result) << run.errors;
  EXPECT_EQ(getPrefilledTokens(*result), (std::vector<double>{31, 31, 1, 1}));
  EXPECT_EQ(result->requests[1].prefillEngine, 1u);
  EXPECT_EQ(result->requests[3].prefillEngine, 0u);
  // A threshold no prefix passes leaves it to the tokens sent: the third
  // goes to engine 0 (31 and 31, the first of equals), the fourth to
  // engine 1 (62 against 31), where A is not cached.
  run.settings.cacheAware.cacheThreshold = 1;
  result = run.simulate();
  ASSERT_TRUE(result) << run.errors;
  EXPECT_EQ(getPrefilledTokens(*result), (std::vector<double>{31, 31, 1, 31}));
  EXPECT_EQ(result->requests[3].prefillEngine, 1u);
}

TEST(PromptBlocksTest, TheCacheAwareRouterBalancesLoadsOutOfBalance) {
  // A's first prompt decodes 50 tokens on engine 0, B's one on engine 1;
  // A's second comes at 10 ms, engine 0 running one request and engine 1
  // none. Within sgl-router's thresholds it goes where A is cached; with
  // thresholds of 0 requests and 1 x, the loads are out of balance and it
  // goes to the idle engine.
  ServingRun run = makeTwoEngineRun({{31, 50}, {31, 1}, {31, 1}}, {0, 0, 10000},
                                    {{1, 2, 3, 4}, {5, 6, 7, 8}, {1, 2, 3, 9}});
  run.settings.router = Router::CacheAware;
  std::optional<ServingResult> result = run.simulate();
  ASSERT_TRUE(result) << run.errors;
  EXPECT_EQ(result->requests[0].prefillEngine, 0u);
  EXPECT_EQ(result->requests[2].prefillEngine, 0u);
  run.settings.cacheAware.balanceAbsolute = 0;
  run.settings.cacheAware.balanceRelative = 1;
  result = run.simulate();
  ASSERT_TRUE(result) << run.errors;
  EXPECT_EQ(result->requests[2].prefillEngine, 1u);
  // Thresholds out of range are an error.
  run.settings.cacheAware.balanceRelative = 0.5;
  EXPECT_FALSE(run.simulate());
}
