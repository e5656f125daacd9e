//===- Manifest.cpp - What produced a trace set, and what it holds --------===//

#include "stg/Emit/Manifest.h"

#include "ManifestParts.h"

#include "stg/IR/ParamCount.h"

#include "stg/Emit/OutputDirectory.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <limits>

using namespace stg;

std::optional<long long> stg::getParameterCount(const Module &module,
                                                bool active) {
  std::optional<Expr> count = module.bindDims(
      active ? countActiveParameters(module) : countParameters(module));
  return count ? getIntegerValue(*count) : std::nullopt;
}

std::string stg::describeLayers(llvm::ArrayRef<unsigned> layers) {
  if (layers.empty())
    return "none";
  std::string text;
  llvm::raw_string_ostream os(text);
  size_t start = 0;
  for (size_t i = 1; i <= layers.size(); ++i) {
    if (i < layers.size() && layers[i] == layers[i - 1] + 1)
      continue;
    os << (start ? ", " : "") << layers[start] << ".." << layers[i - 1] + 1;
    start = i;
  }
  return text;
}

static llvm::json::Object memoryJson(const StageMemory &memory) {
  return llvm::json::Object{
      {"weights", int64_t(memory.weights)},
      {"gradients", int64_t(memory.gradients)},
      {"optimizer", int64_t(memory.optimizer)},
      {"activations", int64_t(memory.activations)},
      {"in_flight_microbatches", memory.inFlightMicrobatches},
      {"state", int64_t(memory.state)},
      {"total", int64_t(memory.total())}};
}

template <typename Map> static llvm::json::Object mapJson(const Map &map) {
  llvm::json::Object object;
  for (const auto &[key, value] : map)
    object[key] = int64_t(value);
  return object;
}

llvm::json::Value stg::buildManifest(const Module &module,
                                     const ProgramSet &programs,
                                     llvm::ArrayRef<StageSummary> summaries,
                                     const ManifestInputs &inputs,
                                     const StepEstimate *estimate) {
  llvm::json::Object bindings;
  for (const std::unique_ptr<Dim> &dim : module.getDims()) {
    // Instantiation checked that every dim binds to a positive integer.
    std::optional<Expr> value = module.bindAll(dim->symbol);
    if (std::optional<long long> number =
            value ? getIntegerValue(*value) : std::nullopt)
      bindings[dim->name] = int64_t(*number);
    else
      bindings[dim->name] = module.getPrinter().str(value.value_or(dim->symbol));
  }
  llvm::json::Object moduleOptions;
  for (const std::unique_ptr<Option> &option : module.getOptions()) {
    if (const bool *flag = std::get_if<bool>(&option->value))
      moduleOptions[option->name] = *flag;
    else if (const std::string *text = std::get_if<std::string>(&option->value))
      moduleOptions[option->name] = *text;
    else
      moduleOptions[option->name] =
          module.getPrinter().str(std::get<Expr>(option->value));
  }

  const Mesh &mesh = programs.mesh;
  llvm::json::Array axes, order, coordinates;
  for (const Mesh::AxisInfo &axis : mesh.getAxes()) {
    axes.push_back(llvm::json::Object{{"name", axis.name},
                                      {"degree", int64_t(axis.degree)}});
    order.push_back(axis.name);
  }
  for (unsigned rank = 0; rank < mesh.getNumRanks(); ++rank) {
    llvm::json::Array coordinate;
    for (unsigned axis = 0; axis < mesh.getAxes().size(); ++axis)
      coordinate.push_back(int64_t(mesh.getCoordinate(rank, axis)));
    coordinates.push_back(std::move(coordinate));
  }

  llvm::json::Array classes;
  for (const StageSummary &summary : summaries) {
    const StageProgram &program = programs.stages[summary.stage];
    classes.push_back(llvm::json::Object{
        {"stage", int64_t(summary.stage)},
        {"ranks", int64_t(summary.numRanks)},
        {"layers", describeLayers(summary.layers)},
        {"nodes", mapJson(summary.nodesByType)},
        {"flops", int64_t(summary.flops)},
        {"tensor_bytes", int64_t(summary.tensorBytes)},
        {"compute_micros", int64_t(summary.computeMicros)},
        {"comm_bytes", mapJson(summary.commBytes)},
        {"send_bytes", int64_t(summary.sendBytes)},
        {"recv_bytes", int64_t(summary.recvBytes)},
        {"memory", memoryJson(program.memory)}});
  }

  llvm::json::Object options;
  for (const auto &[name, value] : inputs.options)
    options[name] = value;
  llvm::json::Value step = nullptr;
  if (estimate) {
    llvm::json::Array stages;
    for (const StageTime &stage : estimate->stages)
      stages.push_back(llvm::json::Object{
          {"compute_micros", int64_t(std::llround(stage.computeMicros))},
          {"communication_micros",
           int64_t(std::llround(stage.communicationMicros))},
          {"finish_micros", int64_t(std::llround(stage.finishMicros))},
          {"pipeline_wait_micros",
           int64_t(std::llround(stage.pipelineWaitMicros))}});
    step = llvm::json::Object{
        {"step_micros", int64_t(std::llround(estimate->stepMicros))},
        {"stages", std::move(stages)}};
  }
  llvm::json::Object pipeline{
      {"stages", int64_t(programs.stages.size())},
      {"layers", int64_t(programs.numLayers)},
      {"virtual_stages", int64_t(programs.numVirtualStages)},
      {"chunk_layers", llvm::json::Array(programs.chunkLayers)},
      {"microbatches", int64_t(programs.numMicrobatches)},
      {"schedule", getPipelineScheduleName(programs.schedule)},
      {"training", programs.training}};
  // A folded dualpipe's second direction (ProgramSet::mirrorAxis).
  if (programs.mirrorAxis >= 0)
    pipeline["mirror_axis"] = mesh.getAxes()[programs.mirrorAxis].name;
  return llvm::json::Object{
      {"step_estimate", std::move(step)},
      {"generator", "stagec"},
      {"generator_version", inputs.toolVersion},
      {"chakra_schema_version", "0.0.4"},
      {"input", inputs.input},
      {"model", module.getModel()->getName()},
      {"parameters", int64_t(getParameterCount(module).value_or(-1))},
      {"active_parameters",
       int64_t(getParameterCount(module, /*active=*/true).value_or(-1))},
      {"prefix", inputs.prefix},
      {"options", std::move(options)},
      {"dims", std::move(bindings)},
      {"model_options", std::move(moduleOptions)},
      {"mesh", llvm::json::Object{{"axes", std::move(axes)},
                                  {"rank_order", std::move(order)},
                                  {"ranks", int64_t(mesh.getNumRanks())}}},
      {"pipeline", std::move(pipeline)},
      {"comm_groups", inputs.commGroupsFile},
      {"files", llvm::json::Array()},
      {"rank_classes", std::move(classes)},
      {"rank_coordinates", std::move(coordinates)}};
}

llvm::json::Value stg::describeSystem(const SystemSpec &system) {
  auto tier = [](const NetworkTier &tier) {
    return llvm::json::Object{
        {"bandwidth_gbps", tier.bandwidth / 1e9},
        {"efficiency", tier.efficiency},
        {"latency_ns", tier.latency * 1e9},
        {"topology", getTopologyName(tier.topology)},
        {"algorithm", getAlgorithmName(tier.algorithm)}};
  };
  return llvm::json::Object{
      {"name", system.name},
      {"accelerator", system.device.name},
      {"peak_tflops", system.device.peakFlops / 1e12},
      {"memory_bandwidth_gbps", system.device.memoryBandwidth / 1e9},
      {"gpus_per_node", int64_t(system.gpusPerNode)},
      {"scale_up", tier(system.scaleUp)},
      {"scale_out", tier(system.scaleOut)}};
}

/// A finite number, or null: the JSON never holds NaN or infinity.
static llvm::json::Value number(double value) {
  if (!std::isfinite(value))
    return nullptr;
  return value;
}
static llvm::json::Value number(std::optional<double> value) {
  return value ? number(*value) : llvm::json::Value(nullptr);
}
static std::optional<double> scaled(std::optional<double> value,
                                    double factor) {
  if (!value)
    return std::nullopt;
  return *value * factor;
}

const char *stg::getBandwidthKey(CollectiveKind kind) {
  switch (kind) {
  case CollectiveKind::AllReduce:
    return "bw_allreduce";
  case CollectiveKind::AllGather:
    return "bw_allgather";
  case CollectiveKind::ReduceScatter:
    return "bw_reducescatter";
  case CollectiveKind::AllToAll:
    return "bw_alltoall";
  }
  return "bw_allreduce";
}

llvm::ArrayRef<CollectiveKind> stg::getCollectiveKinds() {
  static const CollectiveKind kinds[] = {
      CollectiveKind::AllReduce, CollectiveKind::AllGather,
      CollectiveKind::ReduceScatter, CollectiveKind::AllToAll};
  return kinds;
}

llvm::json::Value stg::describeMetrics(const MetricsReport &report) {
  const StepMetrics &metrics = report.metrics;
  const ResourceUtility &utility = report.utility;
  llvm::json::Object object{
      {"avg_step_time", number(metrics.stepMicros / 1e6)},
      {"mfu", number(100 * metrics.mfu)},
      {"hfu", number(100 * metrics.hfu)},
      {"model_flops", number(metrics.modelFlops)},
      {"hardware_flops", number(metrics.hardwareFlops)},
      {"tokens_per_second_per_gpu", number(metrics.tokensPerSecondPerGPU)},
      {"communication_fraction", number(100 * metrics.communicationFraction)},
      {"total_communication_time",
       number(metrics.exposedCommunicationMicros / 1e6)},
      {"compute_comm_overlap", number(scaled(metrics.computeCommOverlap, 100))},
      {"pipeline_bubble_fraction", number(100 * metrics.bubbleFraction)},
      {"load_imbalance_ratio", number(metrics.loadImbalanceRatio)},
      {"ttft", number(scaled(metrics.ttftMicros, 1e-6))},
      {"tpot", number(scaled(metrics.tpotMicros, 1e-6))},
      {"scale_up_bw_utility", number(100 * utility.scaleUpBandwidth)},
      {"scale_out_bw_utility", number(100 * utility.scaleOutBandwidth)},
      {"scale_up_domain_utility", number(100 * utility.scaleUpDomain)}};
  for (CollectiveKind kind : getCollectiveKinds())
    object[getBandwidthKey(kind)] = number(
        scaled(metrics.collectives[unsigned(kind)].getBusBandwidth(), 1e-9));
  return object;
}

llvm::json::Value stg::describeMetricUnits() {
  llvm::json::Object units{{"avg_step_time", "s"},
                           {"mfu", "%"},
                           {"hfu", "%"},
                           {"model_flops", "FLOP"},
                           {"hardware_flops", "FLOP"},
                           {"tokens_per_second_per_gpu", "tokens/s"},
                           {"communication_fraction", "%"},
                           {"total_communication_time", "s"},
                           {"compute_comm_overlap", "%"},
                           {"pipeline_bubble_fraction", "%"},
                           {"load_imbalance_ratio", "ratio"},
                           {"ttft", "s"},
                           {"tpot", "s"},
                           {"scale_up_bw_utility", "%"},
                           {"scale_out_bw_utility", "%"},
                           {"scale_up_domain_utility", "%"}};
  for (CollectiveKind kind : getCollectiveKinds())
    units[getBandwidthKey(kind)] = "GB/s";
  return units;
}

llvm::json::Value stg::describeCollectiveTraffic(const StepMetrics &metrics) {
  llvm::json::Object traffic;
  for (CollectiveKind kind : getCollectiveKinds()) {
    const CollectiveTraffic &each = metrics.collectives[unsigned(kind)];
    traffic[getCollectiveName(kind)] =
        llvm::json::Object{{"count", int64_t(each.count)},
                           {"bus_bytes", number(each.busBytes)},
                           {"micros", number(each.micros)}};
  }
  return traffic;
}

void stg::setManifestMetrics(llvm::json::Value &manifest,
                             const MetricsReport &report) {
  llvm::json::Object &fields = *manifest.getAsObject();
  fields["metrics"] = describeMetrics(report);
  fields["metric_units"] = describeMetricUnits();
  if (llvm::json::Object *step = fields.getObject("step_estimate"))
    (*step)["collectives"] = describeCollectiveTraffic(report.metrics);
}

std::string stg::describeSchedule(const StageProgram &program,
                                  unsigned numVirtualStages) {
  std::string text;
  llvm::raw_string_ostream os(text);
  for (const ScheduleStep &step : program.schedule) {
    os << (text.empty()            ? ""
           : step.overlapsPrevious ? "&"
                                   : " ")
       << getStepLetter(step) << step.microbatch;
    if (numVirtualStages > 1)
      os << '.' << step.chunk;
  }
  return text;
}

llvm::json::Value stg::buildReportJson(const llvm::json::Value &manifest,
                                       const ProgramSet &programs) {
  llvm::json::Object report = *manifest.getAsObject();
  for (llvm::StringRef traceSetOnly :
       {"files", "rank_coordinates", "comm_groups", "prefix",
        "chakra_schema_version", "astra_sim"})
    report.erase(traceSetOnly);
  report["kind"] = "stagec-report";
  if (llvm::json::Array *classes = report.getArray("rank_classes"))
    for (llvm::json::Value &entry : *classes)
      if (llvm::json::Object *summary = entry.getAsObject())
        if (llvm::Optional<int64_t> stage = summary->getInteger("stage"))
          if (*stage >= 0 && size_t(*stage) < programs.stages.size())
            (*summary)["schedule"] = describeSchedule(
                programs.stages[*stage], programs.numVirtualStages);
  if (!report.get("metrics"))
    report["metrics"] = nullptr;
  if (!report.get("system"))
    report["system"] = nullptr;
  if (!report.get("variants"))
    report["variants"] = nullptr;
  return report;
}

void stg::setManifestFiles(llvm::json::Value &manifest,
                           llvm::ArrayRef<WrittenFile> written) {
  llvm::json::Array files;
  for (const WrittenFile &file : written)
    files.push_back(llvm::json::Object{{"name", file.name},
                                       {"nodes", int64_t(file.nodes)},
                                       {"bytes", int64_t(file.bytes)}});
  (*manifest.getAsObject())["files"] = std::move(files);
}

llvm::Error stg::writeTraceSet(llvm::StringRef directory,
                               const ProgramSet &programs,
                               const CommGroups &groups,
                               const EmitOptions &emitOptions,
                               llvm::json::Value manifest) {
  std::vector<WrittenFile> written;
  if (llvm::Error err =
          emitTraces(programs, groups, directory, emitOptions, &written))
    return err;
  setManifestFiles(manifest, written);
  if (llvm::Error err = writeTextFile(
          directory, emitOptions.prefix + ".json",
          [&](llvm::raw_ostream &os) { groups.writeJson(os); }))
    return err;
  return writeTextFile(directory, emitOptions.prefix + ".manifest.json",
                       [&](llvm::raw_ostream &os) {
                         os << llvm::formatv("{0:2}", manifest) << "\n";
                       });
}

llvm::json::Value stg::describeVariants(const VariantSteps &steps) {
  std::vector<double> slowdowns = steps.getSlowdowns(),
                      wasted = steps.getWastedGpuSeconds();
  auto spread = [](llvm::ArrayRef<double> values, double factor) {
    if (values.empty())
      return llvm::json::Value(nullptr);
    Percentiles p = getPercentiles(values);
    return llvm::json::Value(
        llvm::json::Object{{"min", number(factor * p.min)},
                           {"median", number(factor * p.median)},
                           {"p90", number(factor * p.p90)},
                           {"p99", number(factor * p.p99)},
                           {"max", number(factor * p.max)},
                           {"mean", number(factor * p.mean)}});
  };
  llvm::json::Array stepTimes;
  for (double micros : steps.variantMicros)
    stepTimes.push_back(number(micros / 1e6));
  llvm::json::Value seed = getSeedJSON(steps.seed);
  // Percentiles of the values in seconds, not seconds of the percentiles
  // in microseconds, so that each is exactly one of `step_times`.
  std::vector<double> stepSeconds;
  for (double micros : steps.variantMicros)
    stepSeconds.push_back(micros / 1e6);
  return llvm::json::Object{
      {"spec", steps.spec},
      {"seed", std::move(seed)},
      {"count", int64_t(steps.variantMicros.size())},
      {"scale", number(steps.scale)},
      {"gpus", int64_t(steps.gpus)},
      {"replicas", int64_t(steps.replicas)},
      {"percentiles", "nearest-rank"},
      {"clean_step_time", number(steps.cleanMicros / 1e6)},
      {"step_time", spread(stepSeconds, 1)},
      {"slowdown", spread(slowdowns, 100)},
      {"gpu_time_wasted", spread(wasted, 1)},
      {"gpu_time_wasted_fraction", number(100 * steps.getWastedFraction())},
      {"units", llvm::json::Object{{"clean_step_time", "s"},
                                   {"step_time", "s"},
                                   {"slowdown", "%"},
                                   {"gpu_time_wasted", "GPU-s"},
                                   {"gpu_time_wasted_fraction", "%"},
                                   {"step_times", "s"}}},
      {"step_times", std::move(stepTimes)}};
}
