//===- ServingTestClock.h - A serving clock to work out on paper -*- C++
//-*-===//
//
// The cost model the serving tests fill by hand: an iteration costs 1000 us
// plus 10 us a token, attention and top-level work nothing, and a
// sequence's KV cache one byte a token; and a run of one engine on it.
//
//===----------------------------------------------------------------------===//

#ifndef STG_TEST_UNIT_SERVINGTESTCLOCK_H
#define STG_TEST_UNIT_SERVINGTESTCLOCK_H

#include "stg/Serve/ServingSimulation.h"

#include "llvm/Support/raw_ostream.h"

#include <optional>
#include <string>

namespace stg {

/// A straight line through (1, at0 + slope) and (2, at0 + 2 x slope).
inline SampledCurve makeLine(double at0, double slope) {
  return SampledCurve{{1, 2}, {at0 + slope, at0 + 2 * slope}};
}

inline IterationCostModel makeClock(double kvBudget = 1e9) {
  IterationCostModel model;
  model.body = makeLine(1000, 10);
  model.prefillAttention = makeLine(0, 0);
  model.top = makeLine(0, 0);
  model.decodeOne = makeLine(0, 0);
  model.decodeMany = makeLine(0, 0);
  model.kvBytes = makeLine(0, 1);
  model.kvBudget = kvBudget;
  return model;
}

struct ServingRun {
  IterationCostModel clock = makeClock();
  IterationCostModel prefillClock = makeClock();
  ServingDeployment deployment;
  ServingEngineSettings settings;
  ServingWorkload workload;
  std::string errors;

  ServingRun() {
    settings.blockTokens = 1;
    workload.lengths = {{100, 5}};
    workload.concurrency = 1;
    workload.requests = 1;
  }
  /// A prefill pool of one engine beside the decode one, the KV cache
  /// crossing at 1e6 B/s after 5 us.
  void disaggregate() {
    deployment.prefill = EnginePool{&prefillClock, 1, "tp1"};
    deployment.transferBandwidth = 1e6;
    deployment.transferLatencyMicros = 5;
  }
  std::optional<ServingResult> simulate() {
    deployment.decode.cost = &clock;
    if (deployment.prefill)
      deployment.prefill->cost = &prefillClock;
    llvm::raw_string_ostream os(errors);
    DiagnosticEngine diags(os);
    return simulateServing(deployment, settings, workload, diags);
  }
};

} // namespace stg

#endif // STG_TEST_UNIT_SERVINGTESTCLOCK_H
