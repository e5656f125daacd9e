//===- fuzz_requests.cpp - libFuzzer target for request-lengths files -----===//
//
// The bytes are a `--lengths` file (CSV: lengths, and a header that may name
// an arrival column: seconds, milliseconds or Azure's date and time; or JSON
// lines as Mooncake's traces, with timestamps and the prompts' blocks),
// parsed as stagec parses it, blocks of 16 tokens. A file that parses is
// served on the unit tests' hand clock (ServingTestClock.h) with a cache of
// 10^6 bytes (and 10^5 of host memory) for its first 32 requests, at their
// arrivals or by four clients, on two engines routed by load, by the KV
// router or by SGLang's (the input's size picks), so the arrival times, the
// lengths, the blocks' caching, offload and routing and the scheduler's
// arithmetic on them run too. Errors are expected; the fuzzer looks for crashes, sanitizer
// reports, leaks and hangs.
//
//===----------------------------------------------------------------------===//

#include "FuzzSupport.h"
#include "ServingTestClock.h"

#include "stg/Serve/RequestLengths.h"

#include <algorithm>

using namespace stg;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  DiagnosticEngine diags(llvm::nulls());
  std::optional<RequestTrace> trace =
      parseRequestTrace(fuzz::asText(data, size), "requests.csv", diags, 16);
  if (!trace)
    return 0;
  ServingRun run;
  run.clock.kvBudget = 1e6;
  // Blocks the device evicts wait in 10^5 bytes of host memory.
  run.deployment.hostBandwidth = 1e6;
  run.settings.offloadBytes = 1e5;
  run.deployment.decode.instances = 2;
  const Router routers[] = {Router::Load, Router::KVAware, Router::CacheAware};
  run.settings.router = routers[size % 3];
  run.settings.cacheAware.balanceAbsolute = 2;
  run.settings.limits.maxContext = getLongestContext(trace->lengths, 1);
  ServingWorkload &workload = run.workload;
  workload.lengths = std::move(trace->lengths);
  workload.promptBlocks = std::move(trace->blocks);
  workload.requests = std::min<uint64_t>(32, workload.lengths.size());
  if (!trace->arrivals.empty()) {
    workload.concurrency.reset();
    workload.arrivals = std::move(trace->arrivals);
    workload.arrivals.resize(workload.requests);
  } else {
    workload.concurrency = 4;
  }
  (void)run.simulate();
  return 0;
}
