//===- ServeTraces.h - `stagec --mode serve -o DIR` -------------*- C++ -*-===//
//
// The trace set of a serving window (stg/Serve/ServingWindow.h): the
// window's programs, their step estimate (printed with --report), and the
// files the training path writes for them: per-rank traces, comm groups,
// the manifest (with the window's iterations) and ASTRA-sim's configs.
//
//===----------------------------------------------------------------------===//

#ifndef STG_TOOLS_STAGEC_SERVETRACES_H
#define STG_TOOLS_STAGEC_SERVETRACES_H

#include "StagecOptions.h"

#include "stg/Serve/ServingSimulation.h"
#include "stg/Support/Diagnostics.h"
#include "stg/Support/LogicalResult.h"

namespace stg {

/// Fails if -o could not be replaced: checked before the run's work.
LogicalResult checkServeOutput(const StagecOptions &options,
                               DiagnosticEngine &diags);

/// Builds the window of `result` and writes its trace set into -o;
/// nothing is left on error. `instance` is the plan of the aggregated (or
/// prefill) instance, `decodeInstance` the decode instance's when
/// disaggregated. Returns the exit status.
int writeServeTraces(const StagecOptions &options,
                     const ServingDeployment &deployment,
                     const ServingResult &result, const SystemSpec &system,
                     const CompileOptions &instance,
                     const CompileOptions *decodeInstance,
                     DiagnosticEngine &diags);

} // namespace stg

#endif // STG_TOOLS_STAGEC_SERVETRACES_H
