//===- Compile.h - From a .stg file to per-stage programs -------*- C++ -*-===//
//
// The whole front half of stagec as one call, for the driver, the benchmark
// and any program embedding the compiler: parse the model with its
// overrides, set the mesh degrees on its axes, run the pass pipeline of the
// mode (training: autodiff, recompute, distribution, collectives, optimizer;
// prefill: the forward pass; decode: one token against a KV cache), check
// the numbers fit the mesh and instantiate one program per pipeline stage.
//
//===----------------------------------------------------------------------===//

#ifndef STG_DRIVER_COMPILE_H
#define STG_DRIVER_COMPILE_H

#include "stg/IR/Module.h"
#include "stg/IR/Precision.h"
#include "stg/Instantiate/Instantiate.h"
#include "stg/Support/Diagnostics.h"

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace stg {

struct CompileOptions {
  std::string input;
  std::vector<std::string> includeDirs;
  /// `--set NAME=VALUE`, applied after the files' own `set`s.
  std::vector<std::pair<std::string, std::string>> overrides;
  /// Mesh degrees by axis name (`tp` -> 8). The pipeline axis need not be
  /// declared by the model.
  std::vector<std::pair<std::string, unsigned>> degrees;
  std::optional<ElementType> elementType; ///< `--dtype`, over the model's.
  /// `--precision`: the recipe, over the model's `precision` option.
  std::optional<Precision> precision;
  /// `--low-precision-attention`: the attention core in the recipe's
  /// precision too (Transformer Engine's FP8 dot-product attention).
  bool lowPrecisionAttention = false;
  /// `--weight-precision`: inference's weight-only quantization (the
  /// model's `weight_precision` option): the linear layers' weights served
  /// in this format and dequantized in their GEMMs, which compute in the
  /// recipe's precision (W4A16: mxfp4 weights, bf16 GEMMs). BF16: none,
  /// whatever the model's checkpoint_format says.
  std::optional<Precision> weightPrecision;
  /// With weightPrecision: only the experts' weights (gpt-oss's MXFP4
  /// checkpoint), not attention's and the dense layers'.
  bool weightPrecisionExpertsOnly = false;
  /// `--linear-kernels fused`: inference's linear GEMMs that read the same
  /// input (q, k, v; gate, up) run as one kernel, as engines load their
  /// weights (the model's option `linear_kernels`).
  bool fusedLinearKernels = false;
  std::string rankOrder = DefaultRankOrder;
  std::string mode = "train";    ///< `train`, `prefill` or `decode`.
  /// Decode: the context length (the KV cache's), over the model's CTX.
  std::optional<unsigned> context;
  /// `--kv-cache-dtype`: the KV cache's element type (the model's option
  /// kv_cache_dtype), over the model's.
  std::optional<ElementType> kvCacheType;
  /// Decode: sliding-window and chunked attentions cache (and read) the
  /// whole context (the model's option kv_window_cache = "whole"), as an
  /// engine that reserves it; serving takes the cache's size alone from it.
  bool wholeWindowCaches = false;
  std::string recompute = "none"; ///< `none`, `full` or `selective`.
  /// ZeRO-1: shard the optimizer step over the data-parallel axes.
  bool distributedOptimizer = false;
  /// FSDP: set the model's `weight_sharded` option.
  bool fsdp = false;
  unsigned microbatches = 0;      ///< 0: one per pipeline stage.
  unsigned virtualStages = 1;     ///< Model chunks per stage (interleaving).
  /// How the layers split into model chunks (`--pp-layers`, Megatron-LM's
  /// `--account-for-*-in-pipeline-split` and `--decoder-first/last-
  /// pipeline-num-layers`); default even.
  PipelineSplit pipelineSplit;
  double gradientBucketMB = 0;    ///< Gradient-reduction buckets; 0: none.
  MemoryAccounting memoryAccounting = MemoryAccounting::Megatron;
  bool overlapGradientReduction = true; ///< `--grad-reduce overlap`.
  /// `--tp-comm-overlap`: tensor-parallel gathers and reduce-scatters
  /// beside their GEMMs (on) or before and after them (off). Unset: the
  /// mode's default, on in training (NVIDIA's recipes), off in inference
  /// (serving engines reduce after each GEMM, on its critical path).
  std::optional<bool> tensorParallelOverlap;
  /// `--overlap-param-gather on`: the distributed optimizer's weight
  /// gathers beside the next step's forward, as NVIDIA's recipes run them.
  bool overlapParamGather = true;
  /// `--cp-comm-type p2p` (Megatron's default): context parallelism as a
  /// ring, its exchanges beside attention; `all_gather`: before it.
  bool contextParallelRing = true;
  /// `--cp-comm-type a2a` (Ulysses): all-to-alls trade the sequence split
  /// for a head split around attention (the model's `cp_comm_type`).
  bool contextParallelAllToAll = false;
  PipelineSchedule schedule = PipelineSchedule::OneFOneB;
  /// `--deepep-mode`: how the experts' all-to-alls run (ExpertExchange);
  /// Auto runs a decode step's with the low-latency kernels and any
  /// other's with the normal ones, as SGLang's `--deepep-mode auto`.
  enum class DeepEpMode { Off, Normal, LowLatency, Auto };
  DeepEpMode deepEpMode = DeepEpMode::Off;
  /// `--deepep-sms`: the SMs DeepEP's normal kernels hold while they run,
  /// taken from the compute they overlap (InstantiateOptions).
  uint16_t deepEpUnits = 20;
  /// `--two-batch-overlap`: inference runs its micro-batches in overlapped
  /// pairs (InstantiateOptions::twoBatchOverlap).
  bool twoBatchOverlap = false;
  /// Programs for the step estimate only (InstantiateOptions).
  bool foldMicrobatches = false;
  bool foldLayers = false;
};

/// `off`, `normal`, `low-latency` or `auto`, as --deepep-mode names them.
std::optional<CompileOptions::DeepEpMode> parseDeepEpMode(llvm::StringRef name);
llvm::StringRef getDeepEpModeName(CompileOptions::DeepEpMode mode);

/// Rewrites a dualpipe plan as instantiation runs it (Schedule.h): its
/// `pp` = 2P stages and `dp` = D replicas become DualPipeV's V over P
/// stages, two chunks each, with data parallelism 2D, whose upper half runs
/// the second direction, and half the micro-batches (DeepSeek's num_chunks,
/// both directions', an even count of at least twice the stages). Returns
/// why the plan cannot run so, in the flags' terms, or nothing; does
/// nothing to another schedule's plan. compileModel folds the options it
/// is given; callers of its parts fold them first.
std::optional<std::string> foldDualPipe(CompileOptions &options);

/// The pass pipeline of a mode, as a `--passes` string.
std::string getPassPipeline(const CompileOptions &options);

struct CompiledModel {
  std::unique_ptr<Module> module;
  ProgramSet programs;
};

/// Runs everything up to and including instantiation. Problems are
/// reported through `diags`; the result is then empty.
std::optional<CompiledModel> compileModel(const CompileOptions &options,
                                          DiagnosticEngine &diags);

// compileModel's parts, for callers that compile many plans of one model
// (the plan search): the passes but check-divisibility and shard-optimizer
// do not read the degrees (and createShardOptimizerPassForAnyDegrees need
// not), so one module serves every plan of a structure.

/// Parses the model with the options' overrides and switches.
std::unique_ptr<Module> loadModel(const CompileOptions &options,
                                  DiagnosticEngine &diags);

/// A model parsed with `options` and run through the passes of their
/// pipeline that do not read the degrees (all but check-divisibility, and
/// shard-optimizer for any degrees): one module serves every compile that
/// differs from `options` in the degrees and the dims' values alone
/// (bindPlan, DivisibilityCheck, instantiateModel). It keeps the engine
/// that parsed it, where its locations point, and that engine's messages.
struct PreparedModel {
  std::unique_ptr<std::string> logText; ///< Heap-held: the struct moves.
  std::unique_ptr<llvm::raw_string_ostream> log;
  std::unique_ptr<DiagnosticEngine> sources;
  std::unique_ptr<Module> module; ///< Null if parsing or a pass failed.
};
PreparedModel prepareModel(const CompileOptions &options,
                           llvm::StringRef programName);

/// Sets the options' degrees (and decode context) on the module and builds
/// the mesh of the run.
std::optional<Mesh> bindPlan(Module &module, const CompileOptions &options,
                             DiagnosticEngine &diags);
/// What `options` ask of instantiation on `mesh`.
InstantiateOptions getInstantiateOptions(const Mesh &mesh,
                                         const CompileOptions &options);
/// Instantiates a module that has been through the passes (`numbers` and
/// `sources` as `instantiate` takes them).
std::optional<ProgramSet> instantiateModel(const Module &module,
                                           const Mesh &mesh,
                                           const CompileOptions &options,
                                           DiagnosticEngine &diags,
                                           OpNumberCache *numbers = nullptr,
                                           ProgramSources *sources = nullptr);

} // namespace stg

#endif // STG_DRIVER_COMPILE_H
