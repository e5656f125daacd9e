//===- stagec.cpp - STG model to per-rank Chakra execution traces ---------===//
//
// The driver: parse the model, set the mesh, run the pass pipeline of the
// chosen mode, instantiate one program per pipeline stage and stamp every
// rank's trace into a temporary directory that is renamed into place when
// complete. All logic lives in the libraries; this file maps flags to them.
//
//===----------------------------------------------------------------------===//

#include "ServeCommand.h"
#include "SideFiles.h"
#include "StagecOptions.h"
#include "TraceOutput.h"

#include "ProgressBar.h"

#include "stg/Driver/Compile.h"
#include "stg/Driver/Declarations.h"
#include "stg/Driver/ModelFlops.h"
#include "stg/Emit/AstraConfig.h"
#include "stg/Emit/Manifest.h"
#include "stg/Emit/OutputDirectory.h"
#include "stg/Emit/Timeline.h"
#include "stg/Emit/TraceEmitter.h"
#include "stg/Emit/WorkloadCard.h"
#include "stg/Import/HFImport.h"
#include "stg/Perf/DeviceModel.h"
#include "stg/Perf/StepMetrics.h"
#include "stg/Perf/System.h"
#include "stg/Perturb/Perturbation.h"
#include "stg/Perturb/VariantEstimate.h"
#include "stg/Support/LogicalResult.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FileUtilities.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/Signals.h"
#include "llvm/Support/raw_ostream.h"


using namespace stg;


/// Loads --system or --device (and --measured) into `system` and
/// `measured` and fills the kernel durations; reports a bad system, device
/// or table. `--device` alone is one scale-up domain holding every rank.
static LogicalResult applySystem(const StagecOptions &options,
                                 ProgramSet &programs,
                                 std::optional<SystemSpec> &system,
                                 std::optional<MeasuredKernels> &measured,
                                 DiagnosticEngine &diags) {
  if (!options.system.empty()) {
    llvm::Expected<SystemSpec> loaded = loadSystem(options.system);
    if (!loaded) {
      diags.error({}, "--system: " + llvm::toString(loaded.takeError()));
      return failure();
    }
    system = std::move(*loaded);
  } else if (!options.device.empty()) {
    llvm::Expected<DeviceSpec> loaded = loadDevice(options.device);
    if (!loaded) {
      diags.error({}, "--device: " + llvm::toString(loaded.takeError()));
      return failure();
    }
    system = makeSingleDomainSystem(*loaded, programs.mesh.getNumRanks());
  } else {
    return success();
  }
  if (std::optional<Precision> precision =
          findUnsupportedPrecision(programs, system->device)) {
    diags.error({}, (options.system.empty() ? "--device " + options.device
                                            : "--system " + options.system) +
                        ": the " + system->device.name + " has no " +
                        getPrecisionName(*precision) +
                        " unit, which the recipe's GEMMs run in (--precision)");
    return failure();
  }
  if (!options.measured.empty()) {
    llvm::Expected<MeasuredKernels> table =
        MeasuredKernels::load(options.measured);
    if (!table) {
      diags.error({}, "--measured: " + llvm::toString(table.takeError()));
      return failure();
    }
    measured = std::move(*table);
  }
  applyDeviceModel(programs, system->device, measured ? &*measured : nullptr);
  return success();
}

/// Warns where a stage's ranks need more memory than the device has: the
/// plan would not run as given, yet its traces and estimate are still what
/// a user studying it asked for.
static void warnIfOverMemory(const ProgramSet &programs,
                             const DeviceSpec &device, SourceLoc loc,
                             DiagnosticEngine &diags) {
  if (!device.memoryBytes)
    return;
  const StageProgram *largest = programs.getLargestMemoryStage();
  if (!largest || largest->memory.total() <= double(device.memoryBytes))
    return;
  diags.warning(loc,
                llvm::formatv("stage {0} needs {1:f1} GB a rank, more "
                              "than the {2}'s {3:f1} GB: the plan would "
                              "not run as given (more stages, "
                              "recomputation, weight sharding or smaller "
                              "micro-batches would fit it)",
                              largest->stage, largest->memory.total() / 1e9,
                              device.name, device.memoryBytes / 1e9)
                    .str());
}

/// Writes `count` perturbed variants as `variant-K/` beside the clean set.
/// They share the scaled programs; each perturbed rank gets its own.
static llvm::Error
writeVariants(llvm::StringRef directory, const ProgramSet &programs,
              const CommGroups &groups, const EmitOptions &emitOptions,
              const llvm::json::Value &manifest, const PerturbationSpec &spec,
              unsigned count, const DeviceSpec *device) {
  ProgramSet scaled = scalePrograms(programs, spec.scale);
  for (unsigned variant = 0; variant < count; ++variant) {
    std::string variantDirectory =
        (directory + "/variant-" + llvm::Twine(variant)).str();
    if (std::error_code ec = llvm::sys::fs::create_directory(variantDirectory))
      return llvm::createStringError(ec, "cannot create %s",
                                     variantDirectory.c_str());
    Perturber perturber(spec, scaled, variant, device);
    std::vector<std::vector<PerturbationRecord>> records(
        programs.mesh.getNumRanks());
    EmitOptions variantOptions = emitOptions;
    variantOptions.rankProgram = [&](unsigned rank) {
      return perturber.perturb(rank, records[rank]);
    };
    llvm::json::Object variantManifest = *manifest.getAsObject();
    variantManifest["variant"] = int64_t(variant);
    variantManifest["perturbation_spec"] = spec.path;
    if (llvm::Error err =
            writeTraceSet(variantDirectory, scaled, groups, variantOptions,
                          llvm::json::Value(std::move(variantManifest))))
      return err;
    if (llvm::Error err = writeTextFile(
            variantDirectory, "perturbations.json", [&](llvm::raw_ostream &os) {
              writePerturbationRecords(os, spec, variant, records);
            }))
      return err;
  }
  return llvm::Error::success();
}

/// Reads --perturb's spec, checked against the run.
static std::optional<PerturbationSpec>
loadPerturbation(const StagecOptions &options, const ProgramSet &programs,
                 DiagnosticEngine &diags) {
  llvm::Expected<PerturbationSpec> spec =
      loadPerturbationSpec(options.perturb, programs.mesh.getNumRanks(),
                           programs.numLayers, programs.numMicrobatches);
  if (!spec) {
    diags.error({}, "--perturb: " + llvm::toString(spec.takeError()));
    return std::nullopt;
  }
  if (options.seed)
    spec->seed = *options.seed;
  if (llvm::Error err = checkLinkRules(*spec, programs)) {
    diags.error({}, "--perturb: " + llvm::toString(std::move(err)));
    return std::nullopt;
  }
  if (spec->needsDevice() && options.device.empty() && options.system.empty()) {
    diags.error({}, "--perturb: nic_slowdown rules need --device or --system: "
                    "a delay is a share of the message's time on the links");
    return std::nullopt;
  }
  return std::move(*spec);
}

/// The step times of --variants perturbed variants, estimated without
/// writing them (VariantEstimate.h). Unless a rule selects micro-batches,
/// the variants replay folded programs (Program.h), which give the step of
/// the written ones for a fraction of the nodes.
static std::optional<VariantSteps>
estimateWhatIf(const StagecOptions &options, const CompiledModel &compiled,
               const SystemSpec &system, const MeasuredKernels *measured,
               const PerturbationSpec &spec, DiagnosticEngine &diags) {
  const ProgramSet &programs = compiled.programs;
  std::optional<ProgramSet> folded;
  bool selectsMicrobatches =
      llvm::any_of(spec.rules, [](const PerturbationRule &rule) {
        return rule.microbatches.has_value();
      });
  if (!selectsMicrobatches && programs.numMicrobatches > 2) {
    CompileOptions foldOptions = options.compile;
    foldOptions.foldMicrobatches = true;
    folded =
        instantiateModel(*compiled.module, programs.mesh, foldOptions, diags);
    if (!folded)
      return std::nullopt;
    applyDeviceModel(*folded, system.device, measured);
  }
  ProgressBar bar("variants");
  VariantEstimateOptions estimateOptions;
  estimateOptions.jobs = options.jobs;
  auto progress = [&bar](unsigned done, unsigned total) {
    bar.update(done, total);
  };
  if (!options.quiet && llvm::sys::Process::StandardErrIsDisplayed())
    estimateOptions.progress = progress;
  llvm::Expected<VariantSteps> steps =
      estimateVariants(spec, folded ? *folded : programs, system,
                       options.variants, estimateOptions);
  if (!steps) {
    diags.error({}, "--perturb: " + llvm::toString(steps.takeError()));
    return std::nullopt;
  }
  return std::move(*steps);
}

/// The metrics of the estimated step: the model's FLOPs from a compile on
/// one GPU a pipeline stage, the tokens from the model's dims, and the step
/// re-estimated with each resource of the system doubled.
static std::optional<MetricsReport> measureStep(const StagecOptions &options,
                                                const CompiledModel &compiled,
                                                const StepEstimate &estimate,
                                                const SystemSpec &system,
                                                DiagnosticEngine &diags) {
  llvm::Expected<double> modelFlops =
      countModelFlops(options.compile, compiled);
  if (!modelFlops) {
    diags.error({}, llvm::toString(modelFlops.takeError()));
    return std::nullopt;
  }
  StepWork work;
  llvm::StringRef mode = options.compile.mode;
  work.phase = mode == "prefill"  ? StepPhase::Prefill
               : mode == "decode" ? StepPhase::Decode
                                  : StepPhase::Training;
  work.modelFlops = *modelFlops;
  work.tokens =
      countStepTokens(*compiled.module, compiled.programs).value_or(0);
  MetricsReport report;
  report.system = system;
  report.metrics =
      computeStepMetrics(compiled.programs, estimate, system, work);
  llvm::Expected<ResourceUtility> utility =
      estimateResourceUtility(compiled.programs, system, estimate.stepMicros);
  if (!utility) {
    diags.error({}, llvm::toString(utility.takeError()));
    return std::nullopt;
  }
  report.utility = *utility;
  return report;
}

/// `--emit-stg FILE`: the STG program of a config, checked by the front end
/// before it is written whole (or not at all).
static int emitImportedSource(const StagecOptions &options,
                              DiagnosticEngine &diags) {
  const std::string &input = options.compile.input;
  if (!isModelConfigPath(input)) {
    diags.error({}, "--emit-stg writes the STG program of a Hugging Face "
                    "config (a .json file); " +
                        input + " is already STG");
    return 1;
  }
  std::optional<ImportedModel> imported = importModelConfig(input, diags);
  if (!imported || !loadModel(options.compile, diags))
    return 1;
  if (options.emitStg == "-") {
    llvm::outs() << imported->source;
    return 0;
  }
  if (llvm::Error err =
          llvm::writeFileAtomically(options.emitStg + ".tmp%%%%%%",
                                    options.emitStg, imported->source)) {
    diags.error({}, "--emit-stg " + options.emitStg + ": " +
                        llvm::toString(std::move(err)));
    return 1;
  }
  return 0;
}

int main(int argc, char **argv) {
  StagecOptions options;
  if (std::optional<int> exit = parseStagecOptions(argc, argv, options))
    return *exit;

  DiagnosticEngine diags(llvm::errs());
  diags.setProgramName("stagec");
  if (!options.emitStg.empty())
    return emitImportedSource(options, diags);
  if (options.printDims) {
    std::unique_ptr<Module> module = loadModel(options.compile, diags);
    if (!module || !bindPlan(*module, options.compile, diags))
      return 1;
    printDeclarations(llvm::outs(), *module, diags);
    return 0;
  }
  if (options.compile.mode == "serve")
    return runServe(options, diags);
  if (failed(checkSideFile(options, "--report-json", options.reportJson,
                           ReportJsonMarker, diags)) ||
      failed(checkSideFile(options, "--timeline", options.timeline,
                           TimelineMarker, diags)))
    return 1;
  if (!options.outputDir.empty())
    if (llvm::Error err = OutputDirectory::checkTarget(options.outputDir)) {
      diags.error({}, llvm::toString(std::move(err)));
      return 1;
    }
  std::optional<CompiledModel> compiled = compileModel(options.compile, diags);
  if (!compiled)
    return 1;
  const Module &module = *compiled->module;
  std::optional<SystemSpec> system;
  std::optional<MeasuredKernels> measured;
  if (failed(applySystem(options, compiled->programs, system, measured, diags)))
    return 1;
  const ProgramSet &programs = compiled->programs;
  const Mesh &mesh = programs.mesh;
  if (system)
    warnIfOverMemory(programs, system->device, module.getModelLoc(), diags);
  if (failed(checkSelectedRanks(options, mesh, "mesh", diags)))
    return 1;
  // Read before the work: a bad spec is an error whatever else was asked.
  std::optional<PerturbationSpec> perturbation;
  if (!options.perturb.empty()) {
    perturbation = loadPerturbation(options, programs, diags);
    if (!perturbation)
      return 1;
  }

  std::vector<StageSummary> summaries = summarize(programs);
  std::optional<StepEstimate> estimate;
  StepTimeline timeline;
  if (system) {
    llvm::Expected<StepEstimate> replayed = estimateStep(
        programs, *system, options.timeline.empty() ? nullptr : &timeline);
    if (!replayed) {
      diags.error({}, llvm::toString(replayed.takeError()));
      return 1;
    }
    estimate = std::move(*replayed);
  }
  std::optional<MetricsReport> metrics;
  if (estimate) {
    metrics = measureStep(options, *compiled, *estimate, *system, diags);
    if (!metrics)
      return 1;
  }
  std::optional<VariantSteps> whatIf;
  if (perturbation && system &&
      (options.report || !options.reportJson.empty())) {
    whatIf = estimateWhatIf(options, *compiled, *system,
                            measured ? &*measured : nullptr, *perturbation,
                            diags);
    if (!whatIf)
      return 1;
  }
  if (options.report) {
    printReport(llvm::outs(), module, programs, summaries,
                estimate ? &*estimate : nullptr, metrics ? &*metrics : nullptr);
    if (whatIf)
      printVariantReport(llvm::outs(), *whatIf);
  }
  if (options.outputDir.empty() && options.reportJson.empty() &&
      options.timeline.empty())
    return 0;

  ManifestInputs inputs = getManifestInputs(options, module);
  llvm::json::Value manifest = buildManifest(
      module, programs, summaries, inputs, estimate ? &*estimate : nullptr);
  if (system)
    (*manifest.getAsObject())["system"] = describeSystem(*system);
  if (metrics)
    setManifestMetrics(manifest, *metrics);

  // Written now, renamed into place last: an error before leaves nothing.
  std::vector<std::unique_ptr<OutputFile>> sideFiles;
  if (failed(createSideFile(
          "--report-json", options.reportJson, ReportJsonMarker,
          [&](llvm::raw_ostream &os) {
            llvm::json::Value report = buildReportJson(manifest, programs);
            if (whatIf)
              (*report.getAsObject())["variants"] = describeVariants(*whatIf);
            os << llvm::formatv("{0:2}", report) << "\n";
          },
          sideFiles, diags)) ||
      failed(createSideFile(
          "--timeline", options.timeline, TimelineMarker,
          [&](llvm::raw_ostream &os) {
            writeChromeTimeline(os, programs, timeline, estimate->stepMicros,
                                module.getModel()->getName());
          },
          sideFiles, diags)))
    return 1;
  auto commitReport = [&]() -> int {
    for (const std::unique_ptr<OutputFile> &file : sideFiles)
      if (llvm::Error err = file->commit()) {
        diags.error({}, llvm::toString(std::move(err)));
        return 1;
      }
    return 0;
  };
  if (options.outputDir.empty())
    return commitReport();

  CommGroups groups(mesh, programs.getUsedMasks());
  EmitOptions emitOptions = getEmitOptions(options, inputs.prefix);
  ProgressBar bar("ranks");
  if (!options.quiet && llvm::sys::Process::StandardErrIsDisplayed())
    emitOptions.progress = [&bar](unsigned done, unsigned total) {
      bar.update(done, total);
    };

  // From here on an interrupt stops the writers and removes what they
  // wrote; before, nothing is on disk and the default action is right.
  llvm::sys::SetInterruptFunction([] { traceWritingInterrupted = true; });
  auto output = OutputDirectory::create(options.outputDir);
  if (!output) {
    diags.error({}, llvm::toString(output.takeError()));
    return 1;
  }
  if (llvm::Error err = checkDiskSpace(
          (*output)->getPath(),
          estimateTraceBytes(programs, emitOptions) *
              (1 + (perturbation ? options.variants : 0)),
          "write fewer ranks (--ranks), use --gzip, or choose another -o")) {
    diags.error({}, llvm::toString(std::move(err)));
    return 1;
  }
  auto fail = [&](llvm::Error err) {
    diags.error({}, llvm::toString(std::move(err)));
    (*output)->discard();
    return traceWritingInterrupted ? 130 : 1;
  };

  std::vector<unsigned> ranks =
      getSelectedRanks(emitOptions, mesh.getNumRanks());
  if (system && !options.system.empty())
    if (llvm::Error err = writeAstraSetup(
            (*output)->getPath(), (*output)->getTarget(), *system,
            mesh.getNumRanks(), emitOptions.prefix, *manifest.getAsObject()))
      return fail(std::move(err));
  if (llvm::Error err = writeTraceSet((*output)->getPath(), programs, groups,
                                      emitOptions, manifest))
    return fail(std::move(err));
  WorkloadCardInputs card;
  card.input = options.compile.input;
  card.mode = options.compile.mode;
  card.traceFormat = options.format;
  card.toolVersion = inputs.toolVersion;
  if (llvm::Error err =
          writeTextFile((*output)->getPath(), "workload_card.yaml",
                        [&](llvm::raw_ostream &os) {
                          writeWorkloadCard(os, module, programs, card,
                                            system ? &*system : nullptr);
                        }))
    return fail(std::move(err));

  if (perturbation)
    if (llvm::Error err =
            writeVariants((*output)->getPath(), programs, groups, emitOptions,
                          manifest, *perturbation, options.variants,
                          system ? &system->device : nullptr))
      return fail(std::move(err));

  if (traceWritingInterrupted)
    return fail(llvm::createStringError(std::errc::interrupted, "interrupted"));
  if (llvm::Error err = (*output)->commit())
    return fail(std::move(err));
  if (int status = commitReport())
    return status;
  if (!options.quiet) {
    llvm::errs() << "stagec: wrote " << ranks.size() << " "
                 << (emitOptions.format == TraceFormat::Chakra ? "traces"
                                                               : "files")
                 << " to " << (*output)->getTarget() << " (" << mesh.describe()
                 << ")";
    if (perturbation)
      llvm::errs() << ", and " << options.variants << " perturbed variant"
                   << (options.variants == 1 ? "" : "s");
    llvm::errs() << "\n";
  }
  // The report ends with how to check the estimate in the simulator.
  printAstraCommand(options, *manifest.getAsObject());
  return 0;
}
