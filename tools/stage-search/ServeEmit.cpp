//===- ServeEmit.cpp - The best serving runs' windows as traces -----------===//
//
// Each run is replayed, its window chosen and built as stagec's -o does
// (chooseServingWindow, buildServingWindow), and written as a trace set
// whose manifest names the run (`deployment`, `stagec`: its flags).
//
//===----------------------------------------------------------------------===//

#include "ServeEmit.h"

#include "stg/Emit/Manifest.h"
#include "stg/Emit/OutputDirectory.h"
#include "stg/Emit/TraceEmitter.h"
#include "stg/Perf/StepEstimate.h"
#include "stg/Serve/DeploymentReplay.h"
#include "stg/Serve/ServingWindow.h"

#include "llvm/Support/FormatVariadic.h"

using namespace stg;

/// `8xtp2 -> 6xtp8 at concurrency 1024`: the run, as the summary shows it.
static std::string describeRun(const DeploymentTable &table,
                               const DeploymentRun &run) {
  std::string label = getDeploymentLabel(table, run.deployment);
  if (run.concurrency)
    return label + " at concurrency " + std::to_string(*run.concurrency);
  return label + " at " + formatShortest(*run.requestRate) + " requests/s";
}

/// What the diagnostics said, without their first prefix.
static llvm::Error fail(const DeploymentRun &run, llvm::StringRef printed) {
  printed = printed.trim();
  printed.consume_front("stage-search: error: ");
  return llvm::createStringError(std::errc::invalid_argument,
                                 "--emit-top: rank %u's window: %s", run.rank,
                                 printed.str().c_str());
}

llvm::Error stg::emitTopWindows(const DeploymentTable &table,
                                const DeploymentSearchOptions &options,
                                const SystemSpec &system, unsigned count,
                                unsigned iterations, llvm::StringRef directory,
                                llvm::StringRef target,
                                const std::atomic<bool> *cancel,
                                std::vector<EmittedPlan> &emitted) {
  for (const DeploymentRun &run : table.runs) {
    if (!run.rank || run.rank > count)
      continue;
    if (cancel && *cancel)
      break;
    std::string errors;
    llvm::raw_string_ostream os(errors);
    DiagnosticEngine diags(os);
    diags.setProgramName("stage-search");
    std::optional<ReplayedRun> replay =
        replayDeploymentRun(table, run, options, system, diags);
    if (!replay)
      return fail(run, os.str());
    ServingWindowPlan plan =
        chooseServingWindow(replay->deployment, replay->result, iterations);
    const CompileOptions &first =
        replay->prefillInstance ? *replay->prefillInstance : replay->instance;
    std::optional<ServingWindow> window = buildServingWindow(
        plan, first, replay->prefillInstance ? &replay->instance : nullptr,
        system, diags);
    if (!window)
      return fail(run, os.str());
    const ProgramSet &programs = window->programs;
    llvm::Expected<StepEstimate> estimate = estimateStep(programs, system);
    if (!estimate)
      return estimate.takeError();

    EmitOptions emitOptions;
    emitOptions.prefix = window->module->getModel()->getName().str();
    emitOptions.cancel = cancel;
    std::string label = describeRun(table, run);
    ManifestInputs inputs =
        getEmittedInputs(options.base.input, emitOptions.prefix,
                         {{"deployment", label},
                          {"stagec", getStagecFlags(table, run, options)},
                          {"window", std::to_string(iterations)}});
    llvm::json::Value manifest =
        buildWindowManifest(*window, replay->result, system, inputs, *estimate);
    if (llvm::Error err = writeEmittedSet(
            directory, target,
            {run.rank, label, "", "", 0, estimate->stepMicros}, programs,
            system, emitOptions, std::move(manifest),
            "emit fewer windows (--emit-top), use a smaller --window or "
            "choose another -o",
            emitted))
      return err;
  }
  return llvm::Error::success();
}

llvm::Error stg::verifyTopWindows(llvm::ArrayRef<EmittedPlan> windows,
                                  llvm::StringRef simulator,
                                  llvm::StringRef directory,
                                  unsigned timeoutSeconds,
                                  llvm::raw_ostream &os) {
  if (windows.empty())
    os << "\nno run meets the SLOs: no window to run through ASTRA-sim\n";
  else
    os << "\nthe best "
       << (windows.size() == 1
               ? std::string("run's window")
               : std::to_string(windows.size()) + " runs' windows")
       << " on ASTRA-sim (" << simulator
       << "):\n rank  stagec window  ASTRA-sim window  stagec/ASTRA-sim  "
          "ranks  run\n";
  llvm::json::Array rows;
  for (const EmittedPlan &window : windows) {
    llvm::Expected<uint64_t> nanos =
        simulateTraceSet(window, simulator, timeoutSeconds);
    if (!nanos)
      return nanos.takeError();
    double stagec = window.stepMicros, astra = double(*nanos) / 1000.0;
    double ratio = astra > 0 ? stagec / astra : 0;
    os << llvm::formatv(" {0,4}  {1,10:f2} ms  {2,13:f2} ms  {3,16:f3}  "
                        "{4,5}  {5}\n",
                        window.rank, stagec / 1e3, astra / 1e3, ratio,
                        window.ranks, window.label);
    rows.push_back(llvm::json::Object{{"rank", int64_t(window.rank)},
                                      {"run", window.label},
                                      {"stagec_window_micros", stagec},
                                      {"astra_sim_window_micros", astra},
                                      {"stagec_over_astra_sim", ratio},
                                      {"ranks", int64_t(window.ranks)}});
  }
  llvm::json::Object document{{"simulator", simulator.str()},
                              {"windows", std::move(rows)}};
  return writeTextFile(directory, "verify.json", [&](llvm::raw_ostream &out) {
    out << llvm::formatv("{0:2}", llvm::json::Value(std::move(document)))
        << "\n";
  });
}
