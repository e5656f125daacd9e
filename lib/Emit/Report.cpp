//===- Report.cpp - The text of stagec --report ------------------------===//
//
// What `--report` prints: each stage's nodes, work, traffic and memory, the
// estimated step and CCL-Bench's metrics, and the what-if variants'
// spread. The same numbers as JSON are Manifest.cpp's.
//
//===----------------------------------------------------------------------===//

#include "stg/Emit/Manifest.h"

#include "ManifestParts.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>

using namespace stg;

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
  os << llvm::format(value < 10    ? "%.2f"
                     : value < 100 ? "%.1f"
                                   : "%.0f",
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
  for (CollectiveKind kind : getCollectiveKinds()) {
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
       << " in flight, state " << human(memory.state, "B") << ")\n";
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

void stg::printVariantReport(llvm::raw_ostream &os, const VariantSteps &steps) {
  if (steps.variantMicros.empty())
    return;
  std::vector<double> slowdowns = steps.getSlowdowns(),
                      wasted = steps.getWastedGpuSeconds();
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
      << significant(100 * steps.getWastedFraction()) << " % of the GPU time\n";
  unsigned perReplica = steps.replicas ? steps.gpus / steps.replicas : 0;
  line("replicas") << steps.replicas << " of " << perReplica << " GPU"
                   << (perReplica == 1 ? "" : "s")
                   << " (each runs in step; the step waits for the slowest)\n";
}
