//===- StagecOptions.h - stagec's command line -------------------*- C++ -*-===//
//
// The flags of `stagec`, parsed with CLI11 into one struct, grouped in
// `--help` as a user looks for them: the model, the parallel plan, the
// training step, the output.
//
//===----------------------------------------------------------------------===//

#ifndef STG_TOOLS_STAGEC_STAGECOPTIONS_H
#define STG_TOOLS_STAGEC_STAGECOPTIONS_H

#include "PrecisionFlags.h"
#include "ServingFlags.h"

#include "stg/Driver/Compile.h"
#include "stg/Serve/ServingSimulation.h"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace stg {

/// `--mode serve`'s flags (ServeCommand.h).
struct ServeFlags {
  uint64_t inputTokens = 0, outputTokens = 0; ///< `--isl`, `--osl`.
  std::string lengths;                        ///< `--lengths FILE.csv`.
  /// `--trace-block-tokens`: what a trace's hash id stands for.
  std::optional<uint64_t> traceBlockTokens;
  std::optional<uint64_t> concurrency;
  std::string requestRate; ///< Requests/s, or `inf`.
  double burstiness = 1;   ///< `--burstiness`: the gaps' gamma shape.
  double arrivalSpeedup = 1; ///< `--arrival-speedup`: a trace's times over it.
  std::optional<uint64_t> requests;
  uint64_t warmupRequests = 0;
  uint64_t maxBatch = 256, maxBatchedTokens = 8192;
  double kvMemoryFraction = 0.9;
  /// `--kv-free-memory-fraction`: the cache's share of what is left.
  std::optional<double> kvFreeMemoryFraction;
  bool wholeWindowCaches = false; ///< `--kv-window-cache whole`.
  unsigned kvBlockTokens = 16;
  double iterationOverheadMicros = DefaultIterationOverheadMicros;
  unsigned instances = 1;
  std::string prefillPool, decodePool; ///< `COUNTxPLAN`: `2xtp4`.
  unsigned window = 8; ///< `--window`: iterations of the traces (-o).
  /// `--speculative-tokens`, `--acceptance-rate`, `--draft-layers`.
  SpeculativeDecoding speculation;
  std::string kvAllocation = "reserve"; ///< `--kv-allocation`.
  bool chunkedPrefill = true;           ///< `--chunked-prefill`.
  bool mixedBatches = true;             ///< `--mixed-batches`.
  std::vector<std::string> router{"load"}; ///< `--router`: one name.
  double kvOverlapWeight = 1;           ///< `--kv-overlap-weight`.
  /// `--cache-threshold`, `--balance-abs-threshold`, `--balance-rel-threshold`.
  CacheAwareRouting cacheAware;
  PrefixCachingFlags prefixCaching; ///< `--shared-prefix`, `--prefix-caching`.
  /// `--slo-ttft-ms`, `--slo-tpot-ms`, `--slo-e2e-ms`: per-request bounds.
  std::optional<double> sloTTFTMs, sloTPOTMs, sloE2EMs;
};

struct StagecOptions {
  CompileOptions compile;
  ServeFlags serve;
  std::string schedule = "1f1b";
  std::string memoryAccounting = "megatron";
  std::string gradReduce = "overlap";
  std::string tpCommOverlap;              ///< Empty: the mode's default.
  std::string linearKernels = "separate"; ///< `--linear-kernels`.
  std::string cpCommType = "p2p";
  std::string deepEpMode = "off";
  std::string overlapParamGather = "on";
  std::string dtype;
  std::string precision; ///< `--precision`: the recipe.
  /// `--weight-precision`, `--weight-precision-scope`: weight-only
  /// quantization in inference.
  WeightPrecisionFlags weightPrecision;
  std::string device;   ///< Built-in name or YAML file; empty: no durations.
  std::string system;   ///< Built-in name or YAML file: the cluster.
  std::string measured; ///< CSV of measured kernel durations.

  std::string perturb;           ///< Perturbation spec (YAML).
  std::optional<uint64_t> seed;  ///< Overrides the spec's seed.
  unsigned variants = 1;

  std::string outputDir;
  std::string prefix;
  std::string format = "chakra";
  std::string orderingDeps = "data";
  bool gzip = false;
  std::vector<unsigned> ranks;
  unsigned jobs = 0;
  bool report = false;
  bool printDims = false; ///< `--print-dims`: list the declarations, exit.
  /// `--emit-stg FILE`: write an imported config's STG program, exit.
  std::string emitStg;
  std::string reportJson; ///< `--report-json FILE`: the report as JSON.
  std::string timeline;   ///< `--timeline FILE`: the step as trace events.
  bool quiet = false;

  /// The options as given, for the manifest: (`--tp`, `4`), ...
  std::vector<std::pair<std::string, std::string>> describe() const;
};

/// Parses the command line into `options`. Returns an exit status when the
/// program should stop now (`--help`, a bad flag).
std::optional<int> parseStagecOptions(int argc, char **argv,
                                      StagecOptions &options);

} // namespace stg

#endif // STG_TOOLS_STAGEC_STAGECOPTIONS_H
