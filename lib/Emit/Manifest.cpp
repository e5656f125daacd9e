//===- Manifest.cpp - What produced a trace set, and what it holds --------===//

#include "stg/Emit/Manifest.h"

#include "stg/IR/ParamCount.h"

#include "stg/Emit/OutputDirectory.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <limits>

using namespace stg;

/// The model's parameter count (or that of one token, `active`), if its
/// dims are bound.
static std::optional<long long> getParameterCount(const Module &module,
                                                  bool active = false) {
  std::optional<Expr> count = module.bindDims(
      active ? countActiveParameters(module) : countParameters(module));
  return count ? getIntegerValue(*count) : std::nullopt;
}

/// `0..4` for layers 0-3, `0..2, 4..6` for interleaved chunks (half-open).
static std::string describeLayers(llvm::ArrayRef<unsigned> layers) {
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

/// The `bw_*` key of a collective kind, as CCL-Bench names it.
static const char *getBandwidthKey(CollectiveKind kind) {
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

static const CollectiveKind AllCollectiveKinds[] = {
    CollectiveKind::AllReduce, CollectiveKind::AllGather,
    CollectiveKind::ReduceScatter, CollectiveKind::AllToAll};

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
  for (CollectiveKind kind : AllCollectiveKinds)
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
  for (CollectiveKind kind : AllCollectiveKinds)
    units[getBandwidthKey(kind)] = "GB/s";
  return units;
}

llvm::json::Value stg::describeCollectiveTraffic(const StepMetrics &metrics) {
  llvm::json::Object traffic;
  for (CollectiveKind kind : AllCollectiveKinds) {
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

/// `F0 F1 B0 F2 B1 ...` (W0: a weight-gradient step): a stage's schedule
/// steps, with the model chunk after a dot when stages hold several, and
/// `&` joining a step to the one it overlaps (`F7.0&B3.1`).
static std::string describeSchedule(const StageProgram &program,
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

/// `1.23 T` style: three significant digits and an SI prefix.
static std::string human(double value, llvm::StringRef unit) {
  const char *prefixes[] = {"", "K", "M", "G", "T", "P", "E"};
  unsigned index = 0;
  while (value >= 1000 && index < 6) {
    value /= 1000;
    ++index;
  }
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::format(value < 10 ? "%.2f" : value < 100 ? "%.1f" : "%.0f",
                     value)
     << ' ' << prefixes[index] << unit;
  return text;
}

/// `812 us`, `4.10 ms`, `1.23 s`.
static std::string duration(double micros) {
  std::string text;
  llvm::raw_string_ostream os(text);
  if (micros < 1e3)
    os << llvm::format("%.0f us", micros);
  else if (micros < 1e6)
    os << llvm::format("%.2f ms", micros / 1e3);
  else
    os << llvm::format("%.2f s", micros / 1e6);
  return text;
}

/// `41.2 %`.
static std::string percent(double fraction) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::format("%.1f %%", 100 * fraction);
  return text;
}

/// The metrics part of the report: one line per metric, its CCL-Bench key
/// first.
static void printMetrics(llvm::raw_ostream &os, const MetricsReport &report) {
  const StepMetrics &metrics = report.metrics;
  const SystemSpec &system = report.system;
  auto line = [&](llvm::StringRef key) -> llvm::raw_ostream & {
    return os << "  " << llvm::left_justify(key, 26) << ' ';
  };
  os << "\nmetrics (CCL-Bench's keys; docs/metrics.md):\n";
  line("avg_step_time") << duration(metrics.stepMicros) << "\n";
  line("mfu") << percent(metrics.mfu) << " (model "
              << human(metrics.modelFlops, "FLOP") << " a step over "
              << human(system.device.peakFlops, "FLOP/s") << " x "
              << metrics.gpus << (metrics.gpus == 1 ? " GPU)\n" : " GPUs)\n");
  line("hfu") << percent(metrics.hfu) << " (executed "
              << human(metrics.hardwareFlops, "FLOP")
              << ": recomputation and repeated work included)\n";
  if (metrics.tokensPerSecondPerGPU)
    line("tokens/s per GPU")
        << llvm::format("%.1f", *metrics.tokensPerSecondPerGPU) << "\n";
  line("communication_fraction")
      << percent(metrics.communicationFraction) << " of busy time\n";
  line("total_communication_time")
      << duration(metrics.exposedCommunicationMicros) << " exposed per rank\n";
  if (metrics.computeCommOverlap)
    line("compute_comm_overlap") << percent(*metrics.computeCommOverlap)
                                 << " of communication hidden by compute\n";
  line("pipeline bubble") << percent(metrics.bubbleFraction)
                          << " of the step\n";
  if (metrics.loadImbalanceRatio)
    line("load_imbalance_ratio")
        << llvm::format("%.3f", *metrics.loadImbalanceRatio)
        << " (busiest stage over idlest)\n";
  for (CollectiveKind kind : AllCollectiveKinds) {
    const CollectiveTraffic &traffic = metrics.collectives[unsigned(kind)];
    if (std::optional<double> bandwidth = traffic.getBusBandwidth())
      line(getBandwidthKey(kind))
          << human(*bandwidth, "B/s") << " bus bandwidth (" << traffic.count
          << " per rank, " << human(traffic.busBytes, "B") << " in "
          << duration(traffic.micros) << ")\n";
  }
  if (metrics.ttftMicros)
    line("ttft") << duration(*metrics.ttftMicros) << " (the prefill step)\n";
  if (metrics.tpotMicros)
    line("tpot") << duration(*metrics.tpotMicros) << " (one decode step)\n";

  const ResourceUtility &utility = report.utility;
  os << "utility of doubling a resource (step time saved, CCL-Bench 4.2):\n";
  line("scale_up_bw_utility")
      << percent(utility.scaleUpBandwidth) << " (scale-up "
      << human(system.scaleUp.bandwidth, "B/s") << " -> "
      << human(2 * system.scaleUp.bandwidth, "B/s")
      << " a GPU: " << duration(utility.scaleUpBandwidthMicros) << ")\n";
  line("scale_out_bw_utility")
      << percent(utility.scaleOutBandwidth) << " (scale-out "
      << human(system.scaleOut.bandwidth, "B/s") << " -> "
      << human(2 * system.scaleOut.bandwidth, "B/s")
      << " a GPU: " << duration(utility.scaleOutBandwidthMicros) << ")\n";
  line("scale_up_domain_utility")
      << percent(utility.scaleUpDomain) << " (" << system.gpusPerNode << " -> "
      << doubleResource(system, ClusterResource::ScaleUpDomain).gpusPerNode
      << " GPUs a node: " << duration(utility.scaleUpDomainMicros) << ")\n";
}

void stg::printReport(llvm::raw_ostream &os, const Module &module,
                      const ProgramSet &programs,
                      llvm::ArrayRef<StageSummary> summaries,
                      const StepEstimate *estimate,
                      const MetricsReport *metrics) {
  os << "model: " << module.getModel()->getName();
  if (std::optional<long long> parameters = getParameterCount(module)) {
    os << ", " << *parameters << " parameters ("
       << llvm::format("%.2f", *parameters / 1e9) << " B)";
    std::optional<long long> active = getParameterCount(module, true);
    if (active && *active != *parameters)
      os << ", " << *active << " active per token ("
         << llvm::format("%.2f", *active / 1e9) << " B)";
  }
  os << "\nmesh: " << programs.mesh.describe() << " ("
     << programs.mesh.getNumRanks() << " ranks); "
     << (programs.training ? "training" : "inference") << ", "
     << programs.numMicrobatches << " micro-batch"
     << (programs.numMicrobatches == 1 ? "" : "es");
  if (programs.stages.size() > 1)
    os << ", " << getPipelineScheduleName(programs.schedule) << " over "
       << programs.stages.size() << " stages";
  else if (programs.schedule == PipelineSchedule::Combined1F1B)
    os << ", " << getPipelineScheduleName(programs.schedule); // Pairs steps.
  if (programs.numVirtualStages > 1)
    os << " of " << programs.numVirtualStages << " model chunks";
  if (programs.mirrorAxis >= 0) {
    unsigned stages = programs.getGivenDegree(programs.pipelineAxis);
    os << "\n  (DualPipe over " << stages << " stages, "
       << programs.getGivenMicrobatches() << " micro-batches, as "
       << programs.stages.size() << " stages in a V twice: "
       << programs.mesh.getAxes()[programs.mirrorAxis].name
       << "'s upper half runs the second direction, stage s there is "
          "DualPipe's "
       << stages - 1 << "-s)";
  }
  os << "\n";
  std::string split =
      describePipelineSplit(programs.pipelineSplit, programs.numLayers,
                            programs.stages.size(), programs.chunkLayers);
  if (!split.empty())
    os << "pipeline split: " << split << "\n";
  for (const StageSummary &summary : summaries) {
    const StageMemory &memory = programs.stages[summary.stage].memory;
    os << "\nstage " << summary.stage << ": " << summary.numRanks
       << " ranks, layers " << describeLayers(summary.layers);
    // A split of its own says what each of the stage's chunks holds.
    if (!split.empty())
      os << "; layers a model chunk: "
         << describeStageChunks(programs.pipelineSplit, summary.stage,
                                programs.stages.size(), programs.chunkLayers,
                                getChunkPlacement(programs.schedule));
    os << "\n";
    if (programs.stages.size() > 1 || programs.numMicrobatches > 1)
      os << "  schedule: "
         << describeSchedule(programs.stages[summary.stage],
                             programs.numVirtualStages)
         << "\n";
    os << "  nodes:";
    for (const auto &[type, count] : summary.nodesByType)
      os << "  " << type << " " << count;
    os << "\n  compute: " << human(summary.flops, "FLOP") << ", "
       << human(summary.tensorBytes, "B") << " accessed";
    if (summary.computeMicros)
      os << ", " << duration(summary.computeMicros) << " modelled";
    os << "\n";
    for (const auto &[what, bytes] : summary.commBytes)
      os << "  " << what << ": " << human(bytes, "B") << "\n";
    if (summary.sendBytes || summary.recvBytes)
      os << "  pipeline: send " << human(summary.sendBytes, "B") << ", recv "
         << human(summary.recvBytes, "B") << "\n";
    os << "  memory per rank: " << human(memory.total(), "B") << " (weights "
       << human(memory.weights, "B") << ", gradients "
       << human(memory.gradients, "B") << ", optimizer "
       << human(memory.optimizer, "B") << ", activations "
       << human(memory.activations, "B") << " for "
       << llvm::format(memory.inFlightMicrobatches ==
                               std::floor(memory.inFlightMicrobatches)
                           ? "%.0f"
                           : "%.2f",
                       memory.inFlightMicrobatches)
       << " in flight, state "
       << human(memory.state, "B") << ")\n";
  }
  if (!estimate)
    return;
  os << "\nestimated step: " << duration(estimate->stepMicros)
     << " (streams per rank: compute, forward/backward collectives, "
        "gradient collectives, pipeline sends; alpha-beta collectives by "
        "where each group sits)\n";
  for (unsigned stage = 0; stage < estimate->stages.size(); ++stage) {
    const StageTime &time = estimate->stages[stage];
    double idle = estimate->stepMicros - time.computeMicros;
    os << "  stage " << stage << ": compute " << duration(time.computeMicros)
       << ", communication " << duration(time.communicationMicros)
       << ", compute idle " << duration(std::max(0.0, idle)) << " ("
       << llvm::format("%.0f", 100 * std::max(0.0, idle) /
                                   std::max(1.0, estimate->stepMicros))
       << " %)\n";
  }
  if (metrics)
    printMetrics(os, *metrics);
}

/// `1.23`, `12.3`, `123`: three significant digits without an exponent;
/// `0` for what would print as zero.
static std::string significant(double value) {
  if (std::fabs(value) < 5e-4)
    return "0";
  double magnitude = std::fabs(value);
  const char *format = magnitude >= 100  ? "%.0f"
                       : magnitude >= 10 ? "%.1f"
                       : magnitude >= 1  ? "%.2f"
                                         : "%.3f";
  std::string text;
  llvm::raw_string_ostream os(text);
  os << llvm::format(format, value);
  return text;
}

/// `1.23 GPU-s`, `4.10 GPU-ms`, `812 GPU-us`: GPU time as `duration`
/// writes time.
static std::string gpuTime(double micros) {
  std::string text = duration(micros);
  size_t unit = text.rfind(' ');
  return text.substr(0, unit + 1) + "GPU-" + text.substr(unit + 1);
}

/// The relative slowdown of each variant and the GPU-seconds each wastes.
static void getVariantLosses(const VariantSteps &steps,
                             std::vector<double> &slowdowns,
                             std::vector<double> &wastedGpuSeconds) {
  for (double micros : steps.variantMicros) {
    double lost = micros - steps.cleanMicros;
    slowdowns.push_back(steps.cleanMicros > 0 ? lost / steps.cleanMicros : 0.0);
    wastedGpuSeconds.push_back(steps.gpus * lost / 1e6);
  }
}

/// The share of the variants' GPU time spent waiting: all lost time over
/// all step time.
static double getWastedFraction(const VariantSteps &steps) {
  double lost = 0, total = 0;
  for (double micros : steps.variantMicros) {
    lost += micros - steps.cleanMicros;
    total += micros;
  }
  return total > 0 ? lost / total : 0.0;
}

void stg::printVariantReport(llvm::raw_ostream &os, const VariantSteps &steps) {
  if (steps.variantMicros.empty())
    return;
  std::vector<double> slowdowns, wasted;
  getVariantLosses(steps, slowdowns, wasted);
  auto line = [&](llvm::StringRef key) -> llvm::raw_ostream & {
    return os << "  " << llvm::left_justify(key, 26) << ' ';
  };
  auto spread = [&](const Percentiles &p,
                    llvm::function_ref<std::string(double)> show) {
    os << "min " << show(p.min) << ", median " << show(p.median) << ", p90 "
       << show(p.p90) << ", p99 " << show(p.p99) << ", max " << show(p.max);
  };
  size_t count = steps.variantMicros.size();
  os << "\nwhat-if: " << count << " variant" << (count == 1 ? "" : "s")
     << " of " << steps.spec << ", seed " << steps.seed
     << ", estimated (nearest-rank percentiles; docs/perturbation.md):\n";
  line("clean step") << duration(steps.cleanMicros);
  if (steps.scale != 1.0)
    os << " (scaled by the spec's scale, " << llvm::format("%g", steps.scale)
       << ")";
  os << "\n";
  line("step time");
  spread(getPercentiles(steps.variantMicros), duration);
  os << "\n";
  line("slowdown");
  spread(getPercentiles(slowdowns),
         [](double fraction) { return significant(100 * fraction) + " %"; });
  os << "\n";
  Percentiles lost = getPercentiles(wasted);
  line("GPU time wasted waiting")
      << "median " << gpuTime(1e6 * lost.median) << " a step, p99 "
      << gpuTime(1e6 * lost.p99) << ", mean " << gpuTime(1e6 * lost.mean)
      << " (" << steps.gpus << (steps.gpus == 1 ? " GPU" : " GPUs")
      << " x (variant - clean step)); "
      << significant(100 * getWastedFraction(steps)) << " % of the GPU time\n";
  unsigned perReplica = steps.replicas ? steps.gpus / steps.replicas : 0;
  line("replicas") << steps.replicas << " of " << perReplica << " GPU"
                   << (perReplica == 1 ? "" : "s")
                   << " (each runs in step; the step waits for the slowest)\n";
}

llvm::json::Value stg::describeVariants(const VariantSteps &steps) {
  std::vector<double> slowdowns, wasted;
  getVariantLosses(steps, slowdowns, wasted);
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
      {"gpu_time_wasted_fraction", number(100 * getWastedFraction(steps))},
      {"units", llvm::json::Object{{"clean_step_time", "s"},
                                   {"step_time", "s"},
                                   {"slowdown", "%"},
                                   {"gpu_time_wasted", "GPU-s"},
                                   {"gpu_time_wasted_fraction", "%"},
                                   {"step_times", "s"}}},
      {"step_times", std::move(stepTimes)}};
}
