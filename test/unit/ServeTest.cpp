//===- ServeTest.cpp - Continuous batching over a hand-made clock ---------===//
//
// The scheduler and the report on the hand-made clock of
// ServingTestClock.h, where every time can be worked out on paper.
//
//===----------------------------------------------------------------------===//

#include "ServingTestClock.h"

#include "stg/Serve/RequestLengths.h"
#include "stg/Serve/ServingReport.h"

#include "gtest/gtest.h"

#include <cmath>

using namespace stg;

namespace {

/// Three clients' conversations of two turns of 100 + 5 tokens, their
/// second turns long after the first, in a cache of 320 bytes (a byte a
/// token): the first turns fit at once, their three contexts (105 each)
/// too, but not a second turn beside them.
ServingRun makeThreeConversations() {
  ServingRun run;
  run.clock.kvBudget = 320;
  run.workload.concurrency = 3;
  run.workload.turns = 2;
  run.workload.requests = 6;
  run.workload.thinkMicros = 1e5;
  return run;
}

/// Requests of 100 + 5 tokens, conversations of alternate prefix groups
/// (0, 1, 0, 1) of 64 tokens each, on one client.
ServingRun makeTwoPrefixGroups() {
  ServingRun run;
  run.workload.requests = 4;
  run.workload.sharedPrefix = 64;
  run.workload.prefixGroups = 2;
  return run;
}

} // namespace

TEST(ServeTest, SampledCurvesInterpolateAndExtendTheirLastSegment) {
  SampledCurve curve{{1, 4, 8}, {10, 40, 60}};
  EXPECT_DOUBLE_EQ(curve(2), 20);
  EXPECT_DOUBLE_EQ(curve(6), 50);
  EXPECT_DOUBLE_EQ(curve(16), 100); // 5 a unit past the last point
  EXPECT_DOUBLE_EQ(curve(0), 0);    // the first segment, before it
}

TEST(ServeTest, PercentilesInterpolateBetweenRanksAsNumpyDoes) {
  LatencySummary summary = summarizeLatencies({10, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  EXPECT_DOUBLE_EQ(summary.mean, 5.5);
  EXPECT_DOUBLE_EQ(summary.p50, 5.5);
  EXPECT_NEAR(summary.p90, 9.1, 1e-12);
  EXPECT_NEAR(summary.p99, 9.91, 1e-12);
}

TEST(ServeTest, ARequestPrefillsThenDecodesOneTokenAnIteration) {
  ServingRun run;
  std::optional<ServingResult> result = run.simulate();
  ASSERT_TRUE(result) << run.errors;
  ASSERT_EQ(result->requests.size(), 1u);
  const RequestRecord &request = result->requests[0];
  // The prefill of 100 tokens: 1000 + 10 x 100 us; its first token comes
  // with it. Then four decode iterations of one token, 1010 us each.
  EXPECT_DOUBLE_EQ(request.firstToken, 2000);
  EXPECT_DOUBLE_EQ(request.finish, 2000 + 4 * 1010);
  EXPECT_EQ(result->iterations.size(), 5u);
  ServingSummary summary = summarizeServing(*result);
  EXPECT_DOUBLE_EQ(summary.ttft.mean, 2.0);
  EXPECT_DOUBLE_EQ(summary.tpot.mean, 1.01);
  EXPECT_NEAR(summary.outputTokensPerSecondPerUser, 1e3 / 1.01, 1e-9);
  EXPECT_NEAR(summary.outputTokensPerSecondPerGPU, 5 / 6.04e-3, 1e-6);
}

TEST(ServeTest, ALongPromptIsPrefilledInChunksOfTheTokenBudget) {
  ServingRun run;
  run.settings.limits.maxBatchedTokens = 64;
  std::optional<ServingResult> result = run.simulate();
  ASSERT_TRUE(result) << run.errors;
  ASSERT_GE(result->iterations.size(), 2u);
  EXPECT_EQ(result->iterations[0].prefillTokens, 64u);
  EXPECT_EQ(result->iterations[1].prefillTokens, 36u);
  EXPECT_DOUBLE_EQ(result->requests[0].firstToken, (1000 + 640) + (1000 + 360));
}

/// Two requests of 100 + 3 tokens at once, 64 tokens an iteration.
ServingRun makeTwoPromptsInChunks() {
  ServingRun run;
  run.workload.concurrency = 2;
  run.workload.requests = 2;
  run.workload.lengths = {{100, 3}};
  run.settings.limits.maxBatchedTokens = 64;
  return run;
}

TEST(ServeTest, DecodesRideAlongAPrefillInOneIteration) {
  ServingRun run = makeTwoPromptsInChunks();
  std::optional<ServingResult> result = run.simulate();
  ASSERT_TRUE(result) << run.errors;
  // Both arrive at 0: the first iteration prefills 64 of the first, the
  // second its last 36 and 28 of the other.
  EXPECT_EQ(result->iterations[1].prefillTokens, 64u);
  // The third: the first's decode token and 63 of the second's last 72.
  EXPECT_EQ(result->iterations[2].decodeSequences, 1u);
  EXPECT_EQ(result->iterations[2].prefillTokens, 63u);
}

TEST(ServeTest, WithoutMixedBatchesAReadyPromptRunsAlone) {
  ServingRun run = makeTwoPromptsInChunks();
  run.settings.mixedBatches = false;
  std::optional<ServingResult> result = run.simulate();
  ASSERT_TRUE(result) << run.errors;
  ASSERT_EQ(result->iterations.size(), 6u);
  // As above until the first decodes: 64 of the first, its last 36 and 28
  // of the other; then the other's 72 left in chunks of 64 and 8, the
  // first's decode waiting; then both decode, twice.
  const std::vector<std::pair<uint64_t, uint64_t>> expected = {
      {64, 0}, {64, 0}, {64, 0}, {8, 0}, {0, 2}, {0, 2}};
  for (size_t index = 0; index < expected.size(); ++index) {
    EXPECT_EQ(result->iterations[index].prefillTokens, expected[index].first)
        << index;
    EXPECT_EQ(result->iterations[index].decodeSequences, expected[index].second)
        << index;
  }
  // The first request's second token waits for the other's prompt.
  EXPECT_DOUBLE_EQ(result->requests[0].finish,
                   result->iterations[5].start + result->iterations[5].micros);
}

TEST(ServeTest, WithoutChunkedPrefillAPromptWaitsForRoomForAllOfIt) {
  ServingRun run;
  run.workload.concurrency = 3;
  run.workload.requests = 3;
  run.workload.lengths = {{100, 3}};
  run.settings.limits.maxBatchedTokens = 150;
  std::optional<ServingResult> chunked = run.simulate();
  ASSERT_TRUE(chunked) << run.errors;
  EXPECT_EQ(chunked->iterations[0].prefillTokens, 150u);

  run.settings.chunkedPrefill = false;
  std::optional<ServingResult> whole = run.simulate();
  ASSERT_TRUE(whole) << run.errors;
  ASSERT_GE(whole->iterations.size(), 3u);
  // The first prompt whole (2000 us); the second leaves 50 of the budget,
  // under its 100, so it and the third wait. Then the first's decode and
  // the second prompt (101 tokens, 2010 us), and the two decodes and the
  // third prompt (102 tokens, 2020 us).
  for (unsigned index : {0, 1, 2})
    EXPECT_EQ(whole->iterations[index].prefillTokens, 100u) << index;
  EXPECT_EQ(whole->iterations[1].decodeSequences, 1u);
  EXPECT_EQ(whole->iterations[2].decodeSequences, 2u);
  EXPECT_DOUBLE_EQ(whole->requests[0].firstToken, 2000);
  EXPECT_DOUBLE_EQ(whole->requests[1].firstToken, 2000 + 2010);
  EXPECT_DOUBLE_EQ(whole->requests[2].firstToken, 2000 + 2010 + 2020);
}

TEST(ServeTest, WithoutChunkedPrefillAPromptOverTheBudgetIsAnError) {
  ServingRun run;
  run.settings.chunkedPrefill = false;
  run.settings.limits.maxBatchedTokens = 64;
  EXPECT_FALSE(run.simulate());
  EXPECT_NE(run.errors.find("without chunked prefill a request of 100 input "
                            "and 5 output tokens prefills 100 tokens in one "
                            "iteration, over its budget of 64"),
            std::string::npos)
      << run.errors;
  // A preempted sequence recomputes its prompt and its output so far.
  run.errors.clear();
  run.settings.kvAllocation = KVAllocation::OnDemand;
  run.settings.limits.maxBatchedTokens = 100;
  EXPECT_FALSE(run.simulate());
  EXPECT_NE(run.errors.find("prefills 104 tokens"), std::string::npos)
      << run.errors;
  run.settings.limits.maxBatchedTokens = 104;
  EXPECT_TRUE(run.simulate()) << run.errors;
}

TEST(ServeTest, TheKVCacheBoundsTheSequencesRunningAtOnce) {
  ServingRun run;
  // Each request holds 100 + 5 tokens: two fit, a third does not.
  run.clock.kvBudget = 250;
  run.workload.concurrency = 6;
  run.workload.requests = 12;
  std::optional<ServingResult> result = run.simulate();
  ASSERT_TRUE(result) << run.errors;
  EXPECT_EQ(result->requests.size(), 12u);
  uint64_t most = 0;
  for (const IterationRecord &iteration : result->iterations) {
    most = std::max(most, iteration.running);
    EXPECT_LE(iteration.kvUsed, 1.0);
  }
  EXPECT_EQ(most, 2u);
  for (const RequestRecord &request : result->requests)
    EXPECT_GT(request.finish, request.firstToken);
}

TEST(ServeTest, ARequestLargerThanTheCacheIsAnError) {
  ServingRun run;
  run.clock.kvBudget = 50;
  EXPECT_FALSE(run.simulate());
  EXPECT_NE(run.errors.find("a request of 100 input and 5 output tokens"),
            std::string::npos)
      << run.errors;
}

TEST(ServeTest, OnDemandCachesAdmitMoreAndPreemptTheNewest) {
  // Two requests of 10 + 6 tokens, a cache of 25 (a byte a token, blocks
  // of one). Reserved, each holds 16 from admission: the second waits for
  // the first (prefill 1000 + 10 x 10 us, five decodes of 1010 us).
  ServingRun reserve;
  reserve.clock.kvBudget = 25;
  reserve.workload.lengths = {{10, 6}};
  reserve.workload.concurrency = 2;
  reserve.workload.requests = 2;
  ServingRun onDemand = reserve;
  std::optional<ServingResult> reserved = reserve.simulate();
  ASSERT_TRUE(reserved) << reserve.errors;
  EXPECT_DOUBLE_EQ(reserved->requests[0].finish, 1100 + 5 * 1010);
  EXPECT_DOUBLE_EQ(reserved->requests[1].firstToken, 6150 + 1100);
  EXPECT_EQ(reserved->preemptions, 0u);
  // On demand, each holds its prompt and a token (11) and both prefill at
  // once (1200 us). Two decodes later they hold 12 each, and the first's
  // thirteenth token fills the cache: the second, the newer, is preempted
  // with 3 tokens out, the first decodes alone to its end (6270 us), and
  // the second recomputes its 13 (1130 us), samples its fourth token with
  // them and decodes its last two.
  onDemand.settings.kvAllocation = KVAllocation::OnDemand;
  std::optional<ServingResult> result = onDemand.simulate();
  ASSERT_TRUE(result) << onDemand.errors;
  EXPECT_EQ(result->preemptions, 1u);
  EXPECT_DOUBLE_EQ(result->requests[0].firstToken, 1200);
  EXPECT_DOUBLE_EQ(result->requests[1].firstToken, 1200);
  EXPECT_DOUBLE_EQ(result->requests[0].finish, 1200 + 2 * 1020 + 3 * 1010);
  EXPECT_DOUBLE_EQ(result->requests[1].finish, 6270 + 1130 + 2 * 1010);
}

TEST(ServeTest, APromptReadsTheSharedPrefixItsReplicaHolds) {
  // Two requests of 100 + 5 tokens arrive at once; their first 70 tokens
  // are shared, 64 of them in whole blocks of 16. A request holds 112
  // tokens' blocks (a byte a token) of a cache of 180: the second waits.
  ServingRun run;
  run.settings.blockTokens = 16;
  run.clock.kvBudget = 180;
  run.workload.concurrency = 2;
  run.workload.requests = 2;
  run.workload.sharedPrefix = 70;
  ServingRun uncached = run;
  uncached.settings.prefixCaching = false;
  // Without prefix caching the second waits for the first's end
  // (prefill 2000 us, four decodes of 1010) and prefills all 100.
  std::optional<ServingResult> plain = uncached.simulate();
  ASSERT_TRUE(plain) << uncached.errors;
  EXPECT_DOUBLE_EQ(plain->requests[0].finish, 6040);
  EXPECT_DOUBLE_EQ(plain->requests[1].firstToken, 6040 + 2000);
  EXPECT_EQ(plain->prefixHitTokens, 0u);
  // With it, the first's prefill leaves the 64 tokens' blocks to the
  // replica and holds 48 of its own; the second then needs 48 (160 of
  // 180), is admitted at 2000 and prefills its last 36 beside the first's
  // decode (1000 + 10 x 37 us); then both decode (1020 us an iteration).
  std::optional<ServingResult> result = run.simulate();
  ASSERT_TRUE(result) << run.errors;
  EXPECT_EQ(result->prefixHitTokens, 64u);
  EXPECT_DOUBLE_EQ(result->requests[1].firstToken, 2000 + 1370);
  EXPECT_DOUBLE_EQ(result->requests[0].finish, 3370 + 3 * 1020);
  EXPECT_DOUBLE_EQ(result->requests[1].finish, 6430 + 1010);
  for (const IterationRecord &iteration : result->iterations)
    EXPECT_LE(iteration.kvUsed, 160.0 / 180 + 1e-12);
  EXPECT_EQ(result->iterations[1].prefillTokens, 36u);
}

TEST(ServeTest, AShorterPromptLeavesLessOfThePrefixAndALongerOneTheRest) {
  // Prompts of 40 and 100 tokens in turn, one at a time, sharing their
  // first 70 (blocks of 16): the 40-token one can reuse 32 (short of its
  // last token), the 100-token one 64. The first leaves 32 on the replica;
  // the second reads them, computes the next 32 and leaves 64; then each
  // reads what it can.
  ServingRun run;
  run.settings.blockTokens = 16;
  run.workload.lengths = {{40, 5}, {100, 5}};
  run.workload.requests = 4;
  run.workload.sharedPrefix = 70;
  std::optional<ServingResult> result = run.simulate();
  ASSERT_TRUE(result) << run.errors;
  const std::vector<RequestRecord> &requests = result->requests;
  EXPECT_DOUBLE_EQ(requests[0].firstToken, 1000 + 400);
  EXPECT_DOUBLE_EQ(requests[1].firstToken, 5440 + 1000 + 680);
  EXPECT_DOUBLE_EQ(requests[2].firstToken, 11160 + 1000 + 80);
  EXPECT_DOUBLE_EQ(requests[3].firstToken, 16280 + 1000 + 360);
  EXPECT_EQ(result->prefixHitTokens, 32u + 32u + 64u);
}

TEST(ServeTest, EachPrefixGroupReadsItsOwnPrefix) {
  // One client, four requests of 100 + 5 tokens, conversations 0 to 3 of
  // groups 0, 1, 0, 1: each group's first request computes its 64-token
  // prefix, its second reads it and prefills 36 (1000 + 360 us).
  ServingRun run = makeTwoPrefixGroups();
  std::optional<ServingResult> result = run.simulate();
  ASSERT_TRUE(result) << run.errors;
  EXPECT_EQ(result->prefixHitTokens, 128u);
  const RequestRecord &third = result->requests[2];
  EXPECT_DOUBLE_EQ(third.firstToken - third.arrival, 1360);
  // One group: every request after the first reads it.
  run.workload.prefixGroups = 1;
  result = run.simulate();
  ASSERT_TRUE(result) << run.errors;
  EXPECT_EQ(result->prefixHitTokens, 192u);
}

TEST(ServeTest, APrefixNothingReadsIsEvictedForRoom) {
  // The same requests in a cache of 150 bytes (a byte a token): the second
  // request (105) fits only once group 0's prefix (64) goes, and so on, so
  // no request finds its group's prefix; in 200 bytes both prefixes stay.
  ServingRun run = makeTwoPrefixGroups();
  run.clock.kvBudget = 150;
  std::optional<ServingResult> result = run.simulate();
  ASSERT_TRUE(result) << run.errors;
  EXPECT_EQ(result->prefixHitTokens, 0u);
  for (const IterationRecord &iteration : result->iterations)
    EXPECT_LE(iteration.kvUsed, 1.0);
  run.clock.kvBudget = 200;
  result = run.simulate();
  ASSERT_TRUE(result) << run.errors;
  EXPECT_EQ(result->prefixHitTokens, 128u);
  // One group in 150: its prefix is always read, never evicted.
  run.clock.kvBudget = 150;
  run.workload.prefixGroups = 1;
  result = run.simulate();
  ASSERT_TRUE(result) << run.errors;
  EXPECT_EQ(result->prefixHitTokens, 192u);
}

TEST(ServeTest, APrefixARunningSequenceReadsStays) {
  // Requests of groups 0, 1, 0, 1 arrive 10 ms apart (the last 2 ms after
  // the third) in a cache of 200. The first two leave their prefixes (128
  // bytes); the third reads group 0's and, needing 86 with 72 free,
  // evicts group 1's; the fourth then needs 105 with 50 free, and group
  // 0's prefix, which the third reads, is not evicted for it: it waits
  // for the third's end.
  ServingRun run = makeTwoPrefixGroups();
  run.workload.concurrency.reset();
  run.workload.lengths = {{100, 5}, {100, 5}, {100, 50}, {100, 5}};
  run.workload.arrivals = {0, 10000, 20000, 22000};
  run.clock.kvBudget = 200;
  std::optional<ServingResult> result = run.simulate();
  ASSERT_TRUE(result) << run.errors;
  EXPECT_EQ(result->prefixHitTokens, 64u);
  const RequestRecord &third = result->requests[2],
                      &fourth = result->requests[3];
  EXPECT_DOUBLE_EQ(third.firstToken, 20000 + 1360);
  EXPECT_GE(fourth.firstToken, third.finish);
  for (const IterationRecord &iteration : result->iterations)
    EXPECT_LE(iteration.kvUsed, 1.0 + 1e-12);
}

TEST(ServeTest, APreemptedPromptReadsTheSharedPrefixAgain) {
  // On demand, a cache that holds the shared prefix (48 tokens, kept for
  // good) and about two sequences more: some are preempted, and each
  // readmission reads the prefix again; the cache is never overfull and
  // every request ends.
  ServingRun run;
  run.settings.blockTokens = 16;
  run.settings.kvAllocation = KVAllocation::OnDemand;
  run.clock.kvBudget = 48 + 2 * 80;
  run.workload.lengths = {{60, 60}};
  run.workload.concurrency = 4;
  run.workload.requests = 8;
  run.workload.sharedPrefix = 50;
  std::optional<ServingResult> result = run.simulate();
  ASSERT_TRUE(result) << run.errors;
  EXPECT_GT(result->preemptions, 0u);
  // The last four requests, sent as the first ones end, read it when
  // admitted, and a preempted one reads it again when readmitted.
  EXPECT_GE(result->prefixHitTokens, 4 * 48u);
  EXPECT_EQ(result->prefixHitTokens % 48, 0u);
  for (const IterationRecord &iteration : result->iterations)
    EXPECT_LE(iteration.kvUsed, 1.0 + 1e-12);
  for (const RequestRecord &request : result->requests)
    EXPECT_GT(request.finish, request.firstToken);
}

TEST(ServeTest, AConversationsNextTurnReadsItsContextFromTheCache) {
  // One client, two turns of 100 new tokens and 5 out. The first: prefill
  // 2000 us, four decodes of 1010, done at 6040; its context stays cached,
  // all but its last token (104). The second's prompt is the conversation
  // so far and its new input, 205 tokens, of which it prefills 101
  // (2010 us); uncached, all 205 (3050 us).
  ServingRun run;
  run.workload.turns = 2;
  run.workload.requests = 2;
  std::optional<ServingResult> result = run.simulate();
  ASSERT_TRUE(result) << run.errors;
  const std::vector<RequestRecord> &requests = result->requests;
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[1].conversation, 0u);
  EXPECT_EQ(requests[1].turn, 1u);
  EXPECT_EQ(requests[1].input, 205u);
  EXPECT_DOUBLE_EQ(requests[1].arrival, 6040);
  EXPECT_DOUBLE_EQ(requests[1].firstToken, 6040 + 2010);
  EXPECT_DOUBLE_EQ(requests[1].finish, 8050 + 4 * 1010);
  EXPECT_EQ(result->prefixHitTokens, 104u);
  EXPECT_EQ(result->evictedTokens, 0u);
  // The report gives each turn's time to first token.
  ServingSummary summary = summarizeServing(*result);
  ASSERT_EQ(summary.ttftByTurn.size(), 2u);
  EXPECT_DOUBLE_EQ(summary.ttftByTurn[0].mean, 2.0);
  EXPECT_DOUBLE_EQ(summary.ttftByTurn[1].mean, 2.01);

  ServingRun uncached = run;
  uncached.settings.prefixCaching = false;
  std::optional<ServingResult> plain = uncached.simulate();
  ASSERT_TRUE(plain) << uncached.errors;
  EXPECT_DOUBLE_EQ(plain->requests[1].firstToken, 6040 + 3050);
  EXPECT_EQ(plain->prefixHitTokens, 0u);

  // The user thinks half a millisecond before the next turn.
  run.workload.thinkMicros = 500;
  std::optional<ServingResult> later = run.simulate();
  ASSERT_TRUE(later) << run.errors;
  EXPECT_DOUBLE_EQ(later->requests[1].arrival, 6540);
  EXPECT_DOUBLE_EQ(later->requests[1].firstToken, 6540 + 2010);
}

TEST(ServeTest, TheLeastRecentlyCachedContextIsEvictedForRoom) {
  // Three clients' first turns (100 + 5, a byte a token) run together and
  // leave their contexts, 105 each, in a cache of 320, the first's oldest.
  // The second turns come long after. The first needs 106 more: the
  // least recently cached of the others' (the second client's) goes. The
  // second client's turn then prefills whole and waits for room (210),
  // the third's waits behind it, and reads its context when admitted.
  ServingRun run = makeThreeConversations();
  std::optional<ServingResult> result = run.simulate();
  ASSERT_TRUE(result) << run.errors;
  EXPECT_EQ(result->prefixHitTokens, 2 * 104u);
  EXPECT_EQ(result->evictedTokens, 104u);
  const std::vector<RequestRecord> &requests = result->requests;
  ASSERT_EQ(requests.size(), 6u);
  for (unsigned index : {3, 4, 5})
    EXPECT_EQ(requests[index].turn, 1u) << index;
  EXPECT_EQ(requests[4].conversation, 1u);
  EXPECT_GE(requests[4].firstToken, requests[3].finish);
  EXPECT_GE(requests[5].firstToken, requests[4].finish);
  for (const IterationRecord &iteration : result->iterations)
    EXPECT_LE(iteration.kvUsed, 1.0);
}

TEST(ServeTest, AnEvictedContextGoesToHostMemoryAndIsReadBack) {
  // As above, with host memory for offloaded contexts and a host link of
  // 1e6 B/s: the second client's context (105 bytes) is offloaded, not
  // dropped. Its next turn is admitted when the first client's ends,
  // reserves its whole cache again, waits 105 us for the context to come
  // back and prefills its 101 new tokens (2010 us).
  ServingRun run = makeThreeConversations();
  run.settings.offloadBytes = 1000;
  run.deployment.hostBandwidth = 1e6;
  std::optional<ServingResult> result = run.simulate();
  ASSERT_TRUE(result) << run.errors;
  EXPECT_EQ(result->prefixHitTokens, 3 * 104u);
  EXPECT_EQ(result->hostHitTokens, 104u);
  EXPECT_EQ(result->evictedTokens, 0u);
  const std::vector<RequestRecord> &requests = result->requests;
  ASSERT_EQ(requests.size(), 6u);
  EXPECT_EQ(requests[4].conversation, 1u);
  EXPECT_DOUBLE_EQ(requests[4].firstToken, requests[3].finish + 105 + 2010);

  // Host memory too small for the context: it is dropped as without it.
  run.settings.offloadBytes = 100;
  std::optional<ServingResult> small = run.simulate();
  ASSERT_TRUE(small) << run.errors;
  EXPECT_EQ(small->hostHitTokens, 0u);
  EXPECT_EQ(small->evictedTokens, 104u);

  // Offloading needs a host link.
  run.deployment.hostBandwidth = 0;
  EXPECT_FALSE(run.simulate());
  EXPECT_NE(run.errors.find("KV offload needs"), std::string::npos)
      << run.errors;
}

TEST(ServeTest, AContextReadBackIsNotEvictedToMakeRoomForItself) {
  // Host memory for one context. The second client's context goes there
  // when the first client's turn needs room; its own next turn, 150 new
  // tokens, then needs the third client's context evicted too, which
  // takes the host's room: the turn's own context, already taken back,
  // is not the one dropped for it. Every context is read.
  ServingRun run = makeThreeConversations();
  run.workload.lengths = {{100, 5}, {100, 5}, {100, 5},
                          {150, 5}, {100, 5}, {100, 5}};
  run.settings.offloadBytes = 105;
  run.deployment.hostBandwidth = 1e6;
  std::optional<ServingResult> result = run.simulate();
  ASSERT_TRUE(result) << run.errors;
  EXPECT_EQ(result->prefixHitTokens, 3 * 104u);
  EXPECT_EQ(result->hostHitTokens, 2 * 104u);
  EXPECT_EQ(result->evictedTokens, 0u);
}

TEST(ServeTest, ConversationsArriveAtTheRateAndTheirTurnsFollow) {
  // Five requests of two turns at once: three conversations, the last
  // with one turn; each second turn follows its first.
  ServingRun run;
  run.workload.concurrency.reset();
  run.workload.requestRate = INFINITY;
  run.workload.turns = 2;
  run.workload.requests = 5;
  std::optional<ServingResult> result = run.simulate();
  ASSERT_TRUE(result) << run.errors;
  const std::vector<RequestRecord> &requests = result->requests;
  ASSERT_EQ(requests.size(), 5u);
  for (unsigned index : {0, 1, 2}) {
    EXPECT_EQ(requests[index].conversation, index);
    EXPECT_EQ(requests[index].turn, 0u);
    EXPECT_DOUBLE_EQ(requests[index].arrival, 0);
  }
  for (unsigned index : {3, 4}) {
    EXPECT_EQ(requests[index].turn, 1u);
    const RequestRecord &first = requests[requests[index].conversation];
    EXPECT_DOUBLE_EQ(requests[index].arrival, first.finish);
    EXPECT_EQ(requests[index].input, 205u);
  }
}

TEST(ServeTest, AConversationsTurnsTakeTheirLinesInTurn) {
  // Turn t of conversation c takes line c x 3 + t of two, cyclically:
  // conversation 0 lines 0, 1, 0 (prompts 100, 420, 570), conversation 1
  // lines 1, 0, 1 (300, 450, 770); then they repeat.
  std::vector<RequestLengths> lengths = {{100, 20}, {300, 50}};
  std::vector<std::pair<uint64_t, uint64_t>> turns;
  forEachTurn(lengths, 3, [&](uint64_t prompt, uint64_t output) {
    turns.emplace_back(prompt, output);
  });
  std::vector<std::pair<uint64_t, uint64_t>> expected = {
      {100, 20}, {420, 50}, {570, 20}, {300, 50}, {450, 20}, {770, 50}};
  EXPECT_EQ(turns, expected);
  EXPECT_EQ(getLongestContext(lengths, 3), 820u);
  EXPECT_EQ(getLongestContext(lengths, 1), 350u);
}

TEST(ServeTest, AConversationLongerThanASequenceMayHoldIsAnError) {
  ServingRun run;
  run.workload.lengths = {{MaxRequestTokens, MaxRequestTokens}};
  run.workload.turns = 9;
  EXPECT_FALSE(run.simulate());
  EXPECT_NE(run.errors.find("a conversation of 9 turns reaches"),
            std::string::npos)
      << run.errors;
}

TEST(ServeTest, DecodesCountedOrSteppedOneByOneAgree) {
  // Reserved caches let a replica count its decoding sequences' tokens by
  // its steps; on-demand blocks step each sequence. With room for all,
  // the two schedule alike: the same times, request by request, over
  // replicas, disaggregated pools, outputs of several lengths (some
  // finishing at one step), turns that arrive as others finish, and
  // batches mixed or not.
  for (auto [disaggregated, mixed] :
       {std::pair(false, true), std::pair(true, true),
        std::pair(false, false)}) {
    ServingRun counted;
    counted.settings.mixedBatches = mixed;
    counted.clock.replicas = 3;
    counted.workload.lengths = {{40, 7}, {25, 1}, {60, 12}, {10, 7}};
    counted.workload.concurrency = 9;
    counted.workload.turns = 2;
    counted.workload.requests = 60;
    counted.settings.limits.maxBatchedTokens = 96;
    if (disaggregated)
      counted.disaggregate();
    ServingRun stepped = counted;
    stepped.settings.kvAllocation = KVAllocation::OnDemand;
    std::optional<ServingResult> byCount = counted.simulate();
    std::optional<ServingResult> bySteps = stepped.simulate();
    ASSERT_TRUE(byCount && bySteps) << counted.errors << stepped.errors;
    EXPECT_EQ(bySteps->preemptions, 0u);
    ASSERT_EQ(byCount->requests.size(), bySteps->requests.size());
    for (size_t index = 0; index < byCount->requests.size(); ++index) {
      const RequestRecord &one = byCount->requests[index];
      const RequestRecord &other = bySteps->requests[index];
      EXPECT_EQ(one.conversation, other.conversation) << index;
      EXPECT_DOUBLE_EQ(one.arrival, other.arrival) << index;
      EXPECT_DOUBLE_EQ(one.firstToken, other.firstToken) << index;
      EXPECT_DOUBLE_EQ(one.finish, other.finish) << index;
    }
    ASSERT_EQ(byCount->iterations.size(), bySteps->iterations.size());
    for (size_t index = 0; index < byCount->iterations.size(); ++index) {
      EXPECT_EQ(byCount->iterations[index].decodeContext,
                bySteps->iterations[index].decodeContext)
          << index;
      EXPECT_EQ(byCount->iterations[index].decodeSequences,
                bySteps->iterations[index].decodeSequences)
          << index;
    }
  }
}

TEST(ServeTest, AttentionReplicasRunTheirSequencesSideBySide) {
  ServingRun run;
  run.clock.replicas = 2;
  run.workload.concurrency = 2;
  run.workload.requests = 2;
  std::optional<ServingResult> result = run.simulate();
  ASSERT_TRUE(result) << run.errors;
  // One on each replica: the iteration takes one replica's time, not two.
  EXPECT_DOUBLE_EQ(result->requests[0].firstToken, 2000);
  EXPECT_DOUBLE_EQ(result->requests[1].firstToken, 2000);
}

TEST(ServeTest, DisaggregatedDecodeWaitsForTheKVCacheToArrive) {
  ServingRun run;
  // 100 bytes of cache over 1e6 B/s: 100 us, plus 5 us of latency.
  run.disaggregate();
  std::optional<ServingResult> result = run.simulate();
  ASSERT_TRUE(result) << run.errors;
  const RequestRecord &request = result->requests[0];
  EXPECT_DOUBLE_EQ(request.firstToken, 2000);
  EXPECT_DOUBLE_EQ(request.transfer, 105);
  EXPECT_DOUBLE_EQ(request.finish, 2000 + 105 + 4 * 1010);
  EXPECT_EQ(result->engines.size(), 2u);
  EXPECT_EQ(result->gpus, 2u);
}

TEST(ServeTest, DisaggregatedPrefillEnginesKeepTheirPrompts) {
  // Two turns on a prefill and a decode pool: the prefill engine keeps the
  // first prompt it computed (100 tokens; the output was decoded
  // elsewhere), and the second turn, 205 tokens, goes back to it and
  // prefills 105 (2050 us). Its cache crosses whole: 205 bytes, 210 us.
  ServingRun run;
  run.disaggregate();
  run.workload.turns = 2;
  run.workload.requests = 2;
  std::optional<ServingResult> result = run.simulate();
  ASSERT_TRUE(result) << run.errors;
  EXPECT_EQ(result->prefixHitTokens, 100u);
  const RequestRecord &second = result->requests[1];
  EXPECT_DOUBLE_EQ(second.arrival, 2000 + 105 + 4 * 1010);
  EXPECT_DOUBLE_EQ(second.firstToken, second.arrival + 2050);
  EXPECT_DOUBLE_EQ(second.transfer, 210);
}

TEST(ServeTest, ArrivalsAtARateDependOnlyOnTheSeed) {
  auto arrivals = [](uint64_t seed) {
    ServingRun run;
    run.workload.concurrency.reset();
    run.workload.requestRate = 50;
    run.workload.requests = 20;
    run.workload.seed = seed;
    std::vector<double> times;
    if (std::optional<ServingResult> result = run.simulate())
      for (const RequestRecord &request : result->requests)
        times.push_back(request.arrival);
    return times;
  };
  std::vector<double> first = arrivals(7);
  ASSERT_EQ(first.size(), 20u);
  EXPECT_EQ(first, arrivals(7));
  EXPECT_NE(first, arrivals(8));
  EXPECT_TRUE(std::is_sorted(first.begin(), first.end()));
  // 19 gaps of 20 ms on average: the last arrival near 380 ms.
  EXPECT_GT(first.back(), 100e3);
  EXPECT_LT(first.back(), 1000e3);
}

TEST(ServeTest, ARequestRateOfZeroOrNaNIsAnError) {
  for (double rate : {0.0, -1.0, std::nan("")}) {
    ServingRun run;
    run.workload.concurrency.reset();
    run.workload.requestRate = rate;
    EXPECT_FALSE(run.simulate());
    EXPECT_NE(run.errors.find("request rate must be above 0"),
              std::string::npos)
        << run.errors;
  }
}

TEST(ServeTest, AnIterationAddsItsPartsAtItsOwnSizes) {
  IterationCostModel model;
  model.body = SampledCurve{{1, 1001}, {100, 1100}};   // 99 + 1 us a token
  model.top = SampledCurve{{1, 2}, {5, 10}};           // 5 us a sampled row
  model.prefillAttention = SampledCurve{{0, 100, 200}, {0, 1000, 4000}};
  model.decodeOne = SampledCurve{{16, 32}, {10, 10}};
  model.decodeMany = SampledCurve{{16, 32}, {50, 50}};
  model.manyBatch = 5;
  IterationWork work;
  work.decodeSequences = 3;
  work.decodeContext = 3 * 20;
  work.prefill = {{100, 100}, {100, 0}};
  work.sampled = 4;
  // Body at 203 tokens, top at 4 rows; the chunk after 100 tokens adds
  // A(200) - A(100), the fresh one A(100); three decodes lie halfway
  // between one (10) and five (50).
  double expected = (99 + 203) + 20 + (4000 - 1000) + 1000 + 30;
  EXPECT_DOUBLE_EQ(model.getMicros(work), expected);
  EXPECT_DOUBLE_EQ(model.getMicros(IterationWork()), 0);
}

TEST(ServeTest, AnIterationThatOnlyDecodesTakesTheDecodeBody) {
  IterationCostModel model;
  model.body = SampledCurve{{1, 1001}, {100, 1100}};       // 99 + 1 us a token
  model.decodeBody = SampledCurve{{1, 1001}, {200, 1200}}; // 199 + 1 us
  model.decodeOne = SampledCurve{{16, 32}, {10, 10}};
  model.decodeMany = SampledCurve{{16, 32}, {10, 10}};
  IterationWork decodes;
  decodes.decodeSequences = 4;
  decodes.decodeContext = 4 * 20;
  EXPECT_DOUBLE_EQ(model.getMicros(decodes), (199 + 4) + 10);
  // A prompt's chunk beside them: the body of a prefill.
  IterationWork mixed = decodes;
  mixed.prefill = {{6, 0}};
  EXPECT_DOUBLE_EQ(model.getMicros(mixed), (99 + 10) + 10);
  // No decode body of its own: the one body.
  model.decodeBody = SampledCurve();
  EXPECT_DOUBLE_EQ(model.getMicros(decodes), (99 + 4) + 10);
}

TEST(ServeTest, ADecodeBesideAnotherReplicasPromptTakesThePromptsBody) {
  // Two replicas: the first request decodes on one while the second,
  // arriving later, prefills on the other. The replicas meet in the
  // experts' exchanges, which run as a prompt's for both: the decoding
  // replica takes the prompts' body then, and its own only once no
  // replica prefills.
  ServingRun run;
  run.clock.replicas = 2;
  run.clock.decodeBody = makeLine(5000, 10);
  run.workload.concurrency.reset();
  run.workload.requests = 2;
  run.workload.arrivals = {0, 2500};
  std::optional<ServingResult> result = run.simulate();
  ASSERT_TRUE(result) << run.errors;
  ASSERT_GE(result->iterations.size(), 3u);
  // The first prefill alone (1000 + 10 x 100), then the first decode,
  // alone too: 5000 + 10.
  EXPECT_DOUBLE_EQ(result->iterations[0].micros, 2000);
  EXPECT_DOUBLE_EQ(result->iterations[1].micros, 5010);
  // The second's prompt came during it: its prefill, the slowest, beside
  // a decode priced as a prompt's (1010, not 5010).
  const IterationRecord &mixed = result->iterations[2];
  EXPECT_EQ(mixed.decodeSequences, 1u);
  EXPECT_EQ(mixed.prefillTokens, 100u);
  EXPECT_DOUBLE_EQ(mixed.micros, 2000);
}

TEST(ServeTest, ASpeculativeStepYieldsItsTokenAndTheAcceptedDrafts) {
  ServingRun run;
  run.clock.layers = 10;
  run.workload.lengths = {{100, 7}};
  run.settings.speculation.draftTokens = 2;
  run.settings.speculation.draftLayers = 1;
  // A step verifies 3 tokens (1000 + 30 us) after two drafts of a tenth
  // of the layers over the one sequence (2 x 101 us).
  IterationWork step;
  step.decodeSequences = 1;
  step.sampled = 1;
  step.draftTokens = 2;
  step.draftShare = 0.1;
  EXPECT_EQ(step.getTokens(), 3u);
  EXPECT_DOUBLE_EQ(run.clock.getMicros(step), 1030 + 2 * 101);

  // Every draft accepted: 3 tokens a step, the 6 after the first in 2.
  run.settings.speculation.acceptance = 1;
  std::optional<ServingResult> all = run.simulate();
  ASSERT_TRUE(all) << run.errors;
  EXPECT_DOUBLE_EQ(all->requests[0].firstToken, 2000);
  EXPECT_DOUBLE_EQ(all->requests[0].finish, 2000 + 2 * 1232);
  EXPECT_EQ(all->iterations.size(), 3u);
  // None: one token a step, each step paying for the drafts.
  run.settings.speculation.acceptance = 0;
  std::optional<ServingResult> none = run.simulate();
  ASSERT_TRUE(none) << run.errors;
  EXPECT_DOUBLE_EQ(none->requests[0].finish, 2000 + 6 * 1232);

  // Half: a step yields (1 - 0.5^3) / 0.5 = 1.75 tokens on average, drawn
  // from the seed: the same run twice, and about 2000 / 1.75 steps.
  run.settings.speculation.acceptance = 0.5;
  run.workload.lengths = {{100, 2001}};
  std::optional<ServingResult> half = run.simulate();
  std::optional<ServingResult> again = run.simulate();
  ASSERT_TRUE(half && again) << run.errors;
  EXPECT_EQ(half->requests[0].finish, again->requests[0].finish);
  double steps = double(half->iterations.size() - 1);
  EXPECT_NEAR(steps, 2000 / 1.75, 0.05 * 2000 / 1.75);
}
