//===- ServeTraces.cpp - `stagec --mode serve -o DIR` ---------------------===//

#include "ServeTraces.h"

#include "SideFiles.h"
#include "TraceOutput.h"

#include "stg/Emit/AstraConfig.h"
#include "stg/Emit/Manifest.h"
#include "stg/Emit/OutputDirectory.h"
#include "stg/Emit/TraceEmitter.h"
#include "stg/Perf/StepEstimate.h"
#include "stg/Serve/ServingWindow.h"

#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Signals.h"
#include "llvm/Support/raw_ostream.h"


using namespace stg;

LogicalResult stg::checkServeOutput(const StagecOptions &options,
                                    DiagnosticEngine &diags) {
  if (options.outputDir.empty())
    return success();
  if (llvm::Error err = OutputDirectory::checkTarget(options.outputDir)) {
    diags.error({}, llvm::toString(std::move(err)));
    return failure();
  }
  return success();
}

/// `window: 8 iterations of serve.0.0 from 3.1205 s, estimated ...`.
static void printWindow(llvm::raw_ostream &os, const ServingWindowPlan &plan,
                        const ServingResult &result, double estimateMicros,
                        double overheadMicros) {
  auto engineOf = [&](const std::vector<WindowIteration> &iterations) {
    return result.engines[result.iterations[iterations.front().record].engine]
        .name;
  };
  os << "window: " << plan.iterations.size() << " iterations of "
     << engineOf(plan.iterations);
  if (!plan.decodeIterations.empty())
    os << " and " << plan.decodeIterations.size() << " of "
       << engineOf(plan.decodeIterations) << ", " << plan.transfers.size()
       << " KV cache" << (plan.transfers.size() == 1 ? "" : "s") << " sent";
  os << llvm::formatv(" from {0:F4} s, estimated {1:F2} ms (in the serving "
                      "run: {2:F2} ms busy, with the engine's own {4:F2} ms "
                      "an iteration that the traces leave out; {3:F2} ms "
                      "with idle time)\n",
                      plan.startMicros / 1e6, estimateMicros / 1e3,
                      plan.busyMicros / 1e3,
                      (plan.endMicros - plan.startMicros) / 1e3,
                      overheadMicros / 1e3);
}

int stg::writeServeTraces(const StagecOptions &options,
                          const ServingDeployment &deployment,
                          const ServingResult &result, const SystemSpec &system,
                          const CompileOptions &instance,
                          const CompileOptions *decodeInstance,
                          DiagnosticEngine &diags) {
  ServingWindowPlan plan =
      chooseServingWindow(deployment, result, options.serve.window);
  std::optional<ServingWindow> window =
      buildServingWindow(plan, instance, decodeInstance, system, diags);
  if (!window)
    return 1;
  const ProgramSet &programs = window->programs;
  const Mesh &mesh = programs.mesh;
  if (failed(checkSelectedRanks(options, mesh, "window's mesh", diags)))
    return 1;
  llvm::Expected<StepEstimate> estimate = estimateStep(programs, system);
  if (!estimate) {
    diags.error({}, llvm::toString(estimate.takeError()));
    return 1;
  }
  if (options.report)
    printWindow(llvm::outs(), plan, result, estimate->stepMicros,
                options.serve.iterationOverheadMicros);

  ManifestInputs inputs = getManifestInputs(options, *window->module);
  llvm::json::Value manifest =
      buildWindowManifest(*window, result, system, inputs, *estimate);
  llvm::json::Object &fields = *manifest.getAsObject();

  CommGroups groups(mesh, programs.getUsedMasks());
  EmitOptions emitOptions = getEmitOptions(options, inputs.prefix);

  // As the training path: an interrupt from here on removes what was
  // written.
  llvm::sys::SetInterruptFunction([] { traceWritingInterrupted = true; });
  auto output = OutputDirectory::create(options.outputDir);
  if (!output) {
    diags.error({}, llvm::toString(output.takeError()));
    return 1;
  }
  auto fail = [&](llvm::Error err) {
    diags.error({}, llvm::toString(std::move(err)));
    (*output)->discard();
    return traceWritingInterrupted ? 130 : 1;
  };
  if (llvm::Error err = checkDiskSpace(
          (*output)->getPath(), estimateTraceBytes(programs, emitOptions),
          "write fewer ranks (--ranks), use --gzip, a smaller --window, or "
          "choose another -o"))
    return fail(std::move(err));
  if (!options.system.empty())
    if (llvm::Error err = writeAstraSetup(
            (*output)->getPath(), (*output)->getTarget(), system,
            mesh.getNumRanks(), emitOptions.prefix, fields))
      return fail(std::move(err));
  if (llvm::Error err = writeTraceSet((*output)->getPath(), programs, groups,
                                      emitOptions, manifest))
    return fail(std::move(err));
  if (traceWritingInterrupted)
    return fail(llvm::createStringError(std::errc::interrupted, "interrupted"));
  if (llvm::Error err = (*output)->commit())
    return fail(std::move(err));
  if (!options.quiet)
    llvm::errs() << "stagec: wrote "
                 << getSelectedRanks(emitOptions, mesh.getNumRanks()).size()
                 << " "
                 << (emitOptions.format == TraceFormat::Chakra ? "traces"
                                                               : "files")
                 << " of the serving window to " << (*output)->getTarget()
                 << " (" << mesh.describe() << ")\n";
  printAstraCommand(options, fields);
  return 0;
}
