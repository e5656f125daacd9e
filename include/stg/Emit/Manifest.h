//===- Manifest.h - What produced a trace set, and what it holds -*- C++ -*-===//
//
// `P.manifest.json` records everything needed to reproduce and to read a
// trace set: the input, every dim's value, the mesh and rank order with the
// coordinates of every rank, the options, the tool's version, the files, and
// a summary per rank class (the ranks of one pipeline stage run the same
// program, so they share one summary): node counts by type, FLOPs,
// communication bytes by collective and group axes, per-rank memory.
// The same summary prints as the `--report` table, and `--report-json`
// writes it as JSON. With a system, all three add the step estimate and its
// metrics under CCL-Bench's keys (StepMetrics.h, docs/metrics.md), and the
// report the step times of perturbed variants (VariantEstimate.h).
//
//===----------------------------------------------------------------------===//

#ifndef STG_EMIT_MANIFEST_H
#define STG_EMIT_MANIFEST_H

#include "stg/Emit/TraceEmitter.h"
#include "stg/IR/Module.h"
#include "stg/Instantiate/Program.h"
#include "stg/Perf/StepEstimate.h"
#include "stg/Perf/StepMetrics.h"
#include "stg/Perf/System.h"
#include "stg/Perturb/VariantEstimate.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <map>
#include <string>
#include <vector>

namespace stg {

/// The summary of the ranks of one stage.
struct StageSummary {
  unsigned stage = 0;
  unsigned numRanks = 0;
  std::vector<unsigned> layers;
  std::map<std::string, uint64_t> nodesByType;
  uint64_t flops = 0;
  uint64_t tensorBytes = 0;
  /// Bytes by `TYPE over (axes)`, e.g. `ALL_REDUCE over (dp, cp)`.
  std::map<std::string, uint64_t> commBytes;
  uint64_t sendBytes = 0, recvBytes = 0;
  uint64_t computeMicros = 0; ///< Sum of durations, with a device model.
};

std::vector<StageSummary> summarize(const ProgramSet &programs);

struct ManifestInputs {
  std::string input;
  std::string prefix;
  std::string toolVersion;
  /// `--dp 8`, `--schedule 1f1b`, ...: the options as given.
  std::vector<std::pair<std::string, std::string>> options;
  std::string commGroupsFile;
};

llvm::json::Value buildManifest(const Module &module,
                                const ProgramSet &programs,
                                llvm::ArrayRef<StageSummary> summaries,
                                const ManifestInputs &inputs,
                                const StepEstimate *estimate = nullptr);

/// The system's figures, for the manifest: accelerator, GPUs per node and
/// each network tier.
llvm::json::Value describeSystem(const SystemSpec &system);

/// What a run with a system adds to the report: its step's metrics and the
/// utility of doubling each resource of the system it ran on.
struct MetricsReport {
  StepMetrics metrics;
  ResourceUtility utility;
  SystemSpec system;
};

/// The `metrics` object: CCL-Bench's metric keys in its units (seconds,
/// per cent, GB/s), null where a metric does not apply.
llvm::json::Value describeMetrics(const MetricsReport &report);
/// The `metric_units` object: the unit of each key of `metrics`.
llvm::json::Value describeMetricUnits();
/// Each collective kind's count, bus bytes and time per rank, by its
/// Chakra name: what the `bw_*` metrics divide.
llvm::json::Value describeCollectiveTraffic(const StepMetrics &metrics);

/// Adds the metrics to a manifest built with the estimate: `metrics`,
/// `metric_units` and the estimate's `collectives`.
void setManifestMetrics(llvm::json::Value &manifest,
                        const MetricsReport &report);

/// What marks a file as an earlier `--report-json` document, which a new
/// one may replace (OutputFile).
inline constexpr const char *ReportJsonMarker = "\"kind\": \"stagec-report\"";

/// The `--report-json` document: the manifest's description of the run
/// (model, plan, stages, estimate, metrics) without what only a trace set
/// has (files, rank coordinates), with each stage's schedule.
llvm::json::Value buildReportJson(const llvm::json::Value &manifest,
                                  const ProgramSet &programs);

/// Sets the manifest's `files`: each written file's name, node count and
/// size in bytes.
void setManifestFiles(llvm::json::Value &manifest,
                      llvm::ArrayRef<WrittenFile> written);

/// Writes one complete trace set into `directory`: the rank files, the
/// comm-group file `P.json` and the manifest `P.manifest.json`, with the
/// files' node counts and sizes.
llvm::Error writeTraceSet(llvm::StringRef directory, const ProgramSet &programs,
                          const CommGroups &groups,
                          const EmitOptions &emitOptions,
                          llvm::json::Value manifest);

/// The `--report` table, with the step-time estimate and its metrics when
/// there are.
void printReport(llvm::raw_ostream &os, const Module &module,
                 const ProgramSet &programs,
                 llvm::ArrayRef<StageSummary> summaries,
                 const StepEstimate *estimate = nullptr,
                 const MetricsReport *metrics = nullptr);

/// The what-if section of `--report`, after the metrics: the step-time
/// distribution of the variants (nearest-rank percentiles), the slowdown
/// against the clean step and the GPU time wasted waiting.
void printVariantReport(llvm::raw_ostream &os, const VariantSteps &steps);

/// The `variants` object of the report JSON: the same in seconds, per cent
/// and GPU-seconds, with every variant's step time.
llvm::json::Value describeVariants(const VariantSteps &steps);

} // namespace stg

#endif // STG_EMIT_MANIFEST_H
