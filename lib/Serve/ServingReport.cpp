//===- ServingReport.cpp - What a serving run measured --------------------===//

#include "stg/Serve/ServingReport.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cmath>
#include <numeric>

using namespace stg;

LatencySummary stg::summarizeLatencies(std::vector<double> values) {
  LatencySummary summary;
  if (values.empty())
    return summary;
  llvm::sort(values);
  summary.mean =
      std::accumulate(values.begin(), values.end(), 0.0) / double(values.size());
  auto percentile = [&](double q) {
    double rank = q / 100 * double(values.size() - 1);
    size_t low = size_t(rank);
    size_t high = std::min(low + 1, values.size() - 1);
    return values[low] + (values[high] - values[low]) * (rank - double(low));
  };
  summary.p50 = percentile(50);
  summary.p90 = percentile(90);
  summary.p99 = percentile(99);
  return summary;
}

ServingSummary stg::summarizeServing(const ServingResult &result,
                                     uint64_t warmup, const ServingSLO &slo) {
  ServingSummary summary;
  summary.gpus = result.gpus;
  summary.warmup = std::min<uint64_t>(warmup, result.requests.size());
  summary.requests = result.requests.size() - summary.warmup;
  summary.iterations = result.iterations.size();
  std::vector<double> ttft, tpot, e2e, queue;
  std::vector<std::vector<double>> ttftByTurn;
  double first = INFINITY, last = 0, userSpeed = 0;
  uint64_t outputTokens = 0, decoding = 0;
  uint64_t withinTTFT = 0, withinTPOT = 0, withinE2E = 0, good = 0;
  auto within = [](std::optional<double> bound, double value) {
    return !bound || value <= *bound;
  };
  for (const RequestRecord &record :
       llvm::ArrayRef(result.requests).drop_front(summary.warmup)) {
    first = std::min(first, record.arrival);
    last = std::max(last, record.finish);
    outputTokens += record.output;
    ttft.push_back((record.firstToken - record.arrival) / 1e3);
    queue.push_back((record.admitted - record.arrival) / 1e3);
    if (ttftByTurn.size() <= record.turn)
      ttftByTurn.resize(record.turn + 1);
    ttftByTurn[record.turn].push_back(ttft.back());
    e2e.push_back((record.finish - record.arrival) / 1e3);
    double requestTPOT = 0;
    if (record.output > 1) {
      double decodeMicros = record.finish - record.firstToken;
      requestTPOT = decodeMicros / double(record.output - 1) / 1e3;
      tpot.push_back(requestTPOT);
      if (decodeMicros > 0) {
        userSpeed += double(record.output - 1) / (decodeMicros / 1e6);
        ++decoding;
      }
    }
    bool ttftMet = within(slo.ttftMs, ttft.back());
    bool tpotMet = within(slo.tpotMs, requestTPOT);
    bool e2eMet = within(slo.e2eMs, e2e.back());
    withinTTFT += ttftMet;
    withinTPOT += tpotMet;
    withinE2E += e2eMet;
    good += ttftMet && tpotMet && e2eMet;
  }
  summary.ttft = summarizeLatencies(std::move(ttft));
  if (ttftByTurn.size() > 1)
    for (std::vector<double> &values : ttftByTurn)
      summary.ttftByTurn.push_back(summarizeLatencies(std::move(values)));
  summary.queue = summarizeLatencies(std::move(queue));
  summary.tpot = summarizeLatencies(std::move(tpot));
  summary.e2e = summarizeLatencies(std::move(e2e));
  double duration = summary.requests ? (last - first) / 1e6 : 0;
  summary.durationSeconds = duration;
  if (duration > 0) {
    summary.requestsPerSecond = double(summary.requests) / duration;
    summary.outputTokensPerSecond = double(outputTokens) / duration;
    summary.outputTokensPerSecondPerGPU =
        summary.outputTokensPerSecond / std::max(1u, result.gpus);
  }
  if (decoding)
    summary.outputTokensPerSecondPerUser = userSpeed / double(decoding);
  if (!slo.empty() && summary.requests) {
    SLOAttainment &attained = summary.slo.emplace();
    attained.bounds = slo;
    attained.good = good;
    double measured = double(summary.requests);
    attained.attainment = double(good) / measured;
    attained.ttft = double(withinTTFT) / measured;
    attained.tpot = double(withinTPOT) / measured;
    attained.e2e = double(withinE2E) / measured;
    if (duration > 0)
      attained.goodput = double(good) / duration;
  }
  // Occupancy weighted by each iteration's time, over the engines.
  double busy = 0, batch = 0, kv = 0;
  for (const IterationRecord &iteration : result.iterations) {
    busy += iteration.micros;
    batch += double(iteration.running) * iteration.micros;
    kv += iteration.kvUsed * iteration.micros;
    summary.peakKVUsed = std::max(summary.peakKVUsed, iteration.kvUsed);
  }
  if (busy > 0) {
    summary.meanBatch = batch / busy;
    summary.meanKVUsed = kv / busy;
  }
  return summary;
}

llvm::json::Object stg::getLatencyJSON(const LatencySummary &summary) {
  return llvm::json::Object{{"mean", summary.mean},
                            {"p50", summary.p50},
                            {"p90", summary.p90},
                            {"p99", summary.p99}};
}

void stg::printServingReport(llvm::raw_ostream &os,
                             const ServingSummary &summary,
                             const ServingResult &result) {
  os << "serving: " << summary.requests << " requests";
  if (summary.warmup)
    os << " after " << summary.warmup << " of warm-up";
  os << " on " << summary.gpus
     << " GPUs in " << llvm::formatv("{0:F2}", summary.durationSeconds)
     << " s, " << summary.iterations << " iterations\n";
  for (const EngineRecord &engine : result.engines)
    os << "  engine " << engine.name << ": "
       << (engine.prefill && engine.decode ? "prefill and decode"
           : engine.prefill                ? "prefill"
                                           : "decode")
       << ", KV cache of " << engine.kvTokens << " tokens\n";
  auto latency = [&](llvm::StringRef name, const LatencySummary &value) {
    os << llvm::formatv("  {0,-27}mean {1:F2}  p50 {2:F2}  p90 {3:F2}  "
                        "p99 {4:F2}\n",
                        name, value.mean, value.p50, value.p90, value.p99);
  };
  latency("ttft (ms)", summary.ttft);
  latency("  of it queued", summary.queue);
  for (size_t turn = 0; turn < summary.ttftByTurn.size(); ++turn)
    latency(llvm::formatv("  turn {0}", turn + 1).str(),
            summary.ttftByTurn[turn]);
  latency("tpot (ms)", summary.tpot);
  latency("e2e latency (ms)", summary.e2e);
  os << llvm::formatv("  {0,-27}{1:F1}\n", "output tokens/s per GPU",
                      summary.outputTokensPerSecondPerGPU);
  os << llvm::formatv("  {0,-27}{1:F1}\n", "output tokens/s per user",
                      summary.outputTokensPerSecondPerUser);
  os << llvm::formatv("  {0,-27}{1:F2}\n", "requests/s",
                      summary.requestsPerSecond);
  os << llvm::formatv("  {0,-27}{1:F1} running, KV cache {2:F1} % "
                      "(peak {3:F1} %)\n",
                      "mean batch", summary.meanBatch,
                      100 * summary.meanKVUsed, 100 * summary.peakKVUsed);
  if (const std::optional<SLOAttainment> &slo = summary.slo) {
    os << llvm::formatv("  {0,-27}{1:F1} % of requests within",
                        "slo attainment", 100 * slo->attainment);
    llvm::StringRef separator = " ";
    auto bound = [&](llvm::StringRef name, std::optional<double> limit,
                     double fraction) {
      if (!limit)
        return;
      os << separator << name << " <= " << llvm::format("%g", *limit)
         << llvm::formatv(" ms ({0:F1} %)", 100 * fraction);
      separator = ", ";
    };
    bound("ttft", slo->bounds.ttftMs, slo->ttft);
    bound("tpot", slo->bounds.tpotMs, slo->tpot);
    bound("e2e", slo->bounds.e2eMs, slo->e2e);
    os << llvm::formatv("\n  {0,-27}{1:F2} requests/s ({2} good)\n", "goodput",
                        slo->goodput, slo->good);
  }
  if (result.preemptions)
    os << llvm::formatv("  {0,-27}{1} (sequences evicted to recompute)\n",
                        "preemptions", result.preemptions);
  if (result.prefixHitTokens || result.evictedTokens) {
    uint64_t promptTokens = 0;
    for (const RequestRecord &record : result.requests)
      promptTokens += record.input;
    os << llvm::formatv("  {0,-27}{1} prompt tokens read from the cache, "
                        "not prefilled ({2:F1} % of the prompts')",
                        "prefix cache", result.prefixHitTokens,
                        100.0 * double(result.prefixHitTokens) /
                            double(std::max<uint64_t>(1, promptTokens)));
    if (result.hostHitTokens)
      os << "; " << result.hostHitTokens
         << " of them read back from host memory";
    if (result.evictedTokens)
      os << "; " << result.evictedTokens
         << " tokens of conversations' contexts dropped before their next "
            "turn";
    os << "\n";
  }
}

llvm::json::Object
stg::getEngineSettingsJSON(const ServingEngineSettings &settings) {
  llvm::json::Object engine{
      {"max_batched_tokens", int64_t(settings.limits.maxBatchedTokens)},
      {"kv_memory_fraction", settings.limits.memoryFraction},
      {"kv_free_memory_fraction",
       settings.limits.freeMemoryFraction
           ? llvm::json::Value(*settings.limits.freeMemoryFraction)
           : llvm::json::Value(nullptr)},
      {"kv_block_tokens", int64_t(settings.blockTokens)},
      {"iteration_overhead_us", settings.iterationOverheadMicros},
      {"kv_allocation", getKVAllocationName(settings.kvAllocation)},
      {"chunked_prefill", settings.chunkedPrefill},
      {"mixed_batches", settings.mixedBatches},
      {"kv_window_cache",
       settings.limits.wholeWindowCaches ? "whole" : "window"},
      {"router", getRouterName(settings.router)},
      {"kv_overlap_weight", settings.kvOverlapWeight},
      {"cache_threshold", settings.cacheAware.cacheThreshold},
      {"balance_abs_threshold", int64_t(settings.cacheAware.balanceAbsolute)},
      {"balance_rel_threshold", settings.cacheAware.balanceRelative},
      {"prefix_caching", settings.prefixCaching},
      {"kv_offload_gb", settings.offloadBytes / 1e9}};
  if (const SpeculativeDecoding &speculation = settings.speculation;
      speculation.draftTokens)
    engine["speculative_decoding"] =
        llvm::json::Object{{"draft_tokens", int64_t(speculation.draftTokens)},
                           {"acceptance_rate", speculation.acceptance},
                           {"draft_layers", int64_t(speculation.draftLayers)}};
  return engine;
}

llvm::json::Object stg::getServingJSON(const ServingSummary &summary,
                                       const ServingResult &result) {
  llvm::json::Array engines;
  for (const EngineRecord &engine : result.engines)
    engines.push_back(llvm::json::Object{
        {"name", engine.name},
        {"prefill", engine.prefill},
        {"decode", engine.decode},
        {"kv_cache_tokens", int64_t(engine.kvTokens)}});
  llvm::json::Array byTurn;
  for (const LatencySummary &turn : summary.ttftByTurn)
    byTurn.push_back(getLatencyJSON(turn));
  llvm::json::Object serving{
      {"requests", int64_t(summary.requests)},
      {"warmup_requests", int64_t(summary.warmup)},
      {"gpus", int64_t(summary.gpus)},
      {"iterations", int64_t(summary.iterations)},
      {"duration_s", summary.durationSeconds},
      {"ttft_ms", getLatencyJSON(summary.ttft)},
      {"queue_ms", getLatencyJSON(summary.queue)},
      {"tpot_ms", getLatencyJSON(summary.tpot)},
      {"e2e_latency_ms", getLatencyJSON(summary.e2e)},
      {"requests_per_s", summary.requestsPerSecond},
      {"output_tokens_per_s", summary.outputTokensPerSecond},
      {"output_tokens_per_s_per_gpu", summary.outputTokensPerSecondPerGPU},
      {"output_tokens_per_s_per_user", summary.outputTokensPerSecondPerUser},
      {"mean_batch", summary.meanBatch},
      {"mean_kv_cache_used", summary.meanKVUsed},
      {"peak_kv_cache_used", summary.peakKVUsed},
      {"preemptions", int64_t(result.preemptions)},
      {"prefix_cache_hit_tokens", int64_t(result.prefixHitTokens)},
      {"prefix_cache_host_hit_tokens", int64_t(result.hostHitTokens)},
      {"prefix_cache_evicted_tokens", int64_t(result.evictedTokens)},
      {"engines", std::move(engines)}};
  if (!byTurn.empty())
    serving["ttft_ms_by_turn"] = std::move(byTurn);
  if (const std::optional<SLOAttainment> &slo = summary.slo) {
    llvm::json::Object object{{"attainment", slo->attainment},
                              {"good_requests", int64_t(slo->good)},
                              {"request_goodput", slo->goodput}};
    auto bound = [&](llvm::StringRef name, std::optional<double> limit,
                     double fraction) {
      if (!limit)
        return;
      object[(name + "_ms").str()] = *limit;
      object[(name + "_attainment").str()] = fraction;
    };
    bound("ttft", slo->bounds.ttftMs, slo->ttft);
    bound("tpot", slo->bounds.tpotMs, slo->tpot);
    bound("e2e_latency", slo->bounds.e2eMs, slo->e2e);
    serving["slo"] = std::move(object);
  }
  return serving;
}

llvm::json::Object stg::getServingMetricsJSON(const ServingSummary &summary) {
  return llvm::json::Object{
      {"ttft", summary.ttft.mean / 1e3},
      {"tpot", summary.tpot.mean / 1e3},
      {"tokens_per_second_per_gpu", summary.outputTokensPerSecondPerGPU}};
}

llvm::json::Object stg::getServingMetricUnitsJSON() {
  return llvm::json::Object{{"ttft", "s"},
                            {"tpot", "s"},
                            {"tokens_per_second_per_gpu", "tokens/s"}};
}

llvm::json::Value stg::getServingTimeline(const ServingResult &result) {
  llvm::json::Array events;
  for (size_t index = 0; index < result.engines.size(); ++index)
    events.push_back(llvm::json::Object{
        {"name", "process_name"},
        {"ph", "M"},
        {"pid", int64_t(index)},
        {"args", llvm::json::Object{{"name", result.engines[index].name}}}});
  for (const IterationRecord &iteration : result.iterations) {
    int64_t pid = iteration.engine;
    events.push_back(llvm::json::Object{
        {"name", !iteration.prefillTokens    ? "decode"
                 : iteration.decodeSequences ? "mixed"
                                             : "prefill"},
        {"ph", "X"},
        {"pid", pid},
        {"tid", 0},
        {"ts", iteration.start},
        {"dur", iteration.micros},
        {"args", llvm::json::Object{
                     {"decode_sequences", int64_t(iteration.decodeSequences)},
                     {"prefill_tokens", int64_t(iteration.prefillTokens)},
                     {"waiting", int64_t(iteration.waiting)}}}});
    events.push_back(llvm::json::Object{
        {"name", "occupancy"},
        {"ph", "C"},
        {"pid", pid},
        {"ts", iteration.start},
        {"args", llvm::json::Object{
                     {"running", int64_t(iteration.running)},
                     {"kv_cache_percent", 100 * iteration.kvUsed}}}});
  }
  return llvm::json::Object{{"displayTimeUnit", "ms"},
                            {"traceEvents", std::move(events)}};
}
