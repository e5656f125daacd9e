//===- fuzz_requests.cpp - libFuzzer target for request-lengths files -----===//
//
// The bytes are a `--lengths` file (CSV: lengths, and a header that may name
// an arrival column: seconds, milliseconds or Azure's date and time), parsed
// as stagec parses it. A file that parses is served on a cost model filled
// by hand (an iteration 1 ms plus 10 us a token, a byte of cache a token, in
// 10^6 bytes) for its first 32 requests, at their arrivals or by four
// clients, so the arrival times, the lengths and the scheduler's arithmetic
// on them run too. Errors are expected; the fuzzer looks for crashes,
// sanitizer reports, leaks and hangs.
//
//===----------------------------------------------------------------------===//

#include "FuzzSupport.h"

#include "stg/Serve/RequestLengths.h"

#include "llvm/Support/raw_ostream.h"

#include <algorithm>

using namespace stg;

namespace {

SampledCurve makeLine(double at0, double slope) {
  return SampledCurve{{1, 2}, {at0 + slope, at0 + 2 * slope}};
}

IterationCostModel makeClock() {
  IterationCostModel model;
  model.body = makeLine(1000, 10);
  model.prefillAttention = makeLine(0, 0);
  model.top = makeLine(0, 0);
  model.decodeOne = makeLine(0, 0);
  model.decodeMany = makeLine(0, 0);
  model.kvBytes = makeLine(0, 1);
  model.kvBudget = 1e6;
  return model;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  DiagnosticEngine diags(llvm::nulls());
  std::optional<RequestTrace> trace =
      parseRequestTrace(fuzz::asText(data, size), "requests.csv", diags);
  if (!trace)
    return 0;
  static const IterationCostModel clock = makeClock();
  ServingDeployment deployment;
  deployment.decode.cost = &clock;
  ServingEngineSettings settings;
  settings.limits.maxContext = getLongestContext(trace->lengths, 1);
  ServingWorkload workload;
  workload.lengths = std::move(trace->lengths);
  workload.requests = std::min<uint64_t>(32, workload.lengths.size());
  if (trace->arrivals.empty()) {
    workload.concurrency = 4;
  } else {
    workload.arrivals = std::move(trace->arrivals);
    workload.arrivals.resize(workload.requests);
  }
  (void)simulateServing(deployment, settings, workload, diags);
  return 0;
}
