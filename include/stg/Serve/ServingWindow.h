//===- ServingWindow.h - A serving run's iterations as programs -*- C++ -*-===//
//
// `stagec --mode serve -o DIR` writes a window of the serving run as a
// trace set, for ASTRA-sim: N iterations of the first instance (its decode
// batch, then its prefill chunks, each compiled as the decode step or the
// prefill of that size and chained in time order), or, disaggregated, N
// iterations of the first prefill instance and the first decode instance's
// over the same time as one mesh (PairMesh.h), with each sequence's KV
// cache sent from the prefill ranks to the decode ranks. The choice of
// iterations is deterministic (chooseServingWindow); docs/serving.md, "Traces
// of a serving window".
//
//===----------------------------------------------------------------------===//

#ifndef STG_SERVE_SERVINGWINDOW_H
#define STG_SERVE_SERVINGWINDOW_H

#include "stg/Driver/Compile.h"
#include "stg/Emit/Manifest.h"
#include "stg/Perf/System.h"
#include "stg/Serve/PairMesh.h"
#include "stg/Serve/ServingSimulation.h"

#include "llvm/Support/JSON.h"

#include <memory>
#include <optional>
#include <vector>

namespace stg {

/// The most iterations a window holds on each side.
constexpr unsigned MaxWindowIterations = 256;

/// One iteration of the window, as one attention replica runs it (the
/// programs are the same on every replica: the record's sums are split
/// evenly, rounded up).
struct WindowIteration {
  size_t record = 0;            ///< Index in ServingResult::iterations.
  uint64_t decodeSequences = 0; ///< The decode step's MB.
  uint64_t decodeContext = 0;   ///< Their mean context, rounded.
  /// The prefill's MB: its chunks, each of `prefillTokens` (S, the mean
  /// chunk rounded up).
  uint64_t prefillSequences = 0, prefillTokens = 0;
};

/// A sequence's KV cache, sent from the prefill ranks to the decode ranks.
struct WindowTransfer {
  uint32_t request = 0;
  /// The prefill side's iteration it finished in (index in the window).
  unsigned afterPrefill = 0;
  /// The decode side's first iteration that starts after it arrived in
  /// the serving run, which waits for it; none: it arrives after the
  /// window's last, and the decode ranks receive it at their end.
  std::optional<unsigned> beforeDecode;
  /// Of the cache, what one rank of the decode instance holds (the decode
  /// instance's IterationCostModel::kvBytes over its replicas).
  uint64_t bytesPerRank = 0;
};

struct ServingWindowPlan {
  /// The aggregated instance's iterations, or the prefill instance's.
  std::vector<WindowIteration> iterations;
  /// Disaggregated: the decode instance's.
  std::vector<WindowIteration> decodeIterations;
  std::vector<WindowTransfer> transfers;
  /// From the first iteration's start to the last one's end, in the run.
  double startMicros = 0, endMicros = 0;
  /// The iterations' times summed (over the stages, which run as many at
  /// once), of the side with the most: the window's time in the run without
  /// the engine's idle gaps, which a trace, its iterations back to back,
  /// does not have.
  double busyMicros = 0;
};

/// Picks `count` consecutive iterations of the first instance: from the
/// first one starting at or after the middle of the run (half its last
/// request's finish), moved back when fewer follow. Disaggregated, those
/// of the first prefill instance, and the first decode instance's that
/// start between the first one's start and the last one's end (at least
/// one, at most MaxWindowIterations).
ServingWindowPlan chooseServingWindow(const ServingDeployment &deployment,
                                      const ServingResult &result,
                                      unsigned count);

struct ServingWindow {
  ServingWindowPlan plan;
  /// The first program's module: the manifest's model and dims.
  std::unique_ptr<Module> module;
  /// One stage program per stage: the instance's, or disaggregated the
  /// prefill instance's stages, then the decode instance's (on the pipeline
  /// axis of a PairMesh); durations from the system's device.
  ProgramSet programs;
  /// Disaggregated: how the two instances share `programs.mesh`.
  std::optional<PairMesh> pair;
};

/// Compiles the window's programs and chains them. `instance` is the plan
/// of the aggregated or the prefill instance, `decodeInstance` that of the
/// decode instance when disaggregated, whose mesh must pair with the
/// prefill instance's (buildPairMesh).
std::optional<ServingWindow>
buildServingWindow(const ServingWindowPlan &plan,
                   const CompileOptions &instance,
                   const CompileOptions *decodeInstance,
                   const SystemSpec &system, DiagnosticEngine &diags);

/// The manifest's `serving_window`: the iterations with their sizes and
/// their times in the run, and the KV transfers.
llvm::json::Object describeServingWindow(const ServingWindowPlan &plan,
                                         const ServingResult &result);

/// The window's manifest: the trace set's (buildManifest) with the system,
/// `serving_window` and, for a pair, its `instances`.
llvm::json::Value buildWindowManifest(const ServingWindow &window,
                                      const ServingResult &result,
                                      const SystemSpec &system,
                                      const ManifestInputs &inputs,
                                      const StepEstimate &estimate);

} // namespace stg

#endif // STG_SERVE_SERVINGWINDOW_H
