//===- ServingReport.h - What a serving run measured -------------*- C++ -*-===//
//
// The figures serving benchmarks print (vLLM's benchmark_serving,
// TensorRT-LLM's trtllm-bench, NVIDIA's genai-perf), from a run's records:
// time to first token, time per output token and end-to-end latency with
// their mean and percentiles, throughput per GPU and per user, and the
// batch and KV cache occupancy. As text, as the `serving` object of
// `--report-json`, and as Chrome trace events of the iterations.
//
//===----------------------------------------------------------------------===//

#ifndef STG_SERVE_SERVINGREPORT_H
#define STG_SERVE_SERVINGREPORT_H

#include "stg/Serve/ServingSimulation.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>

namespace stg {

/// Mean and percentiles of one latency over the requests, milliseconds.
struct LatencySummary {
  double mean = 0, p50 = 0, p90 = 0, p99 = 0;
};

/// `values`' mean and percentiles, interpolated between the nearest ranks
/// (numpy's default, which the benchmarks use).
LatencySummary summarizeLatencies(std::vector<double> values);

/// `{mean, p50, p90, p99}`, as `ttft_ms` and its kin are written.
llvm::json::Object getLatencyJSON(const LatencySummary &summary);

/// Per-request service-level objectives (vLLM benchmark_serving's
/// `--goodput`, DistServe's SLO attainment): a request is good when each
/// latency given is within its bound, in milliseconds.
struct ServingSLO {
  std::optional<double> ttftMs, tpotMs, e2eMs;
  bool empty() const { return !ttftMs && !tpotMs && !e2eMs; }
};

/// How many measured requests met the SLOs.
struct SLOAttainment {
  ServingSLO bounds;
  uint64_t good = 0; ///< Requests within every bound.
  /// Fractions of the measured requests: within every bound, and within
  /// each (1 for a bound not given).
  double attainment = 0, ttft = 0, tpot = 0, e2e = 0;
  double goodput = 0; ///< Good requests a second over the run's duration.
};

struct ServingSummary {
  LatencySummary ttft, tpot, e2e; ///< Milliseconds.
  /// Of the time to first token, what a request waited before an engine
  /// admitted it (vLLM's queue time).
  LatencySummary queue;
  /// Multi-turn conversations: the time to first token of each turn's
  /// requests (turn 1 first), which the conversation's cached context
  /// shortens; empty for single requests.
  std::vector<LatencySummary> ttftByTurn;
  double durationSeconds = 0;     ///< First arrival to last finish.
  double requestsPerSecond = 0;
  double outputTokensPerSecond = 0;
  double outputTokensPerSecondPerGPU = 0;
  /// A request's decode speed, (output - 1) / (finish - first token),
  /// averaged over the requests with more than one output token.
  double outputTokensPerSecondPerUser = 0;
  double meanBatch = 0;   ///< Running sequences, averaged over time.
  double meanKVUsed = 0;  ///< Fraction reserved, averaged over time.
  double peakKVUsed = 0;
  uint64_t requests = 0, warmup = 0, iterations = 0;
  unsigned gpus = 0;
  std::optional<SLOAttainment> slo; ///< With SLOs to check.
};

/// The figures over the requests after the first `warmup` sent: the run's
/// steady state, from the first measured arrival to the last finish; with
/// SLOs, how many requests met them. A request of one output token has no
/// time per output token and meets any bound on it, as in vLLM.
ServingSummary summarizeServing(const ServingResult &result,
                                uint64_t warmup = 0,
                                const ServingSLO &slo = {});

void printServingReport(llvm::raw_ostream &os, const ServingSummary &summary,
                        const ServingResult &result);

/// The `serving` object: the keys above under their documented names
/// (`ttft_ms`, `tpot_ms`, `output_tokens_per_s_per_gpu`, ...).
llvm::json::Object getServingJSON(const ServingSummary &summary,
                                  const ServingResult &result);

/// The engine's settings as the reports name them (`max_batched_tokens`,
/// `kv_allocation`, `router`, ...), `max_batch` being the caller's: the
/// `engine` object of stagec's serving report and of `deployments.json`.
llvm::json::Object getEngineSettingsJSON(const ServingEngineSettings &settings);

/// CCL-Bench's inference keys (docs/metrics.md) of the run: `ttft` and
/// `tpot`, their means in seconds, and `tokens_per_second_per_gpu`, output
/// tokens; with `units`, the `metric_units` object beside them.
llvm::json::Object getServingMetricsJSON(const ServingSummary &summary);
llvm::json::Object getServingMetricUnitsJSON();

/// Chrome trace events: one track per engine, an event per iteration
/// (its batch in `args`), and counters of running sequences and KV use.
llvm::json::Value getServingTimeline(const ServingResult &result);

} // namespace stg

#endif // STG_SERVE_SERVINGREPORT_H
