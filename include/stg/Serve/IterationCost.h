//===- IterationCost.h - The time of one serving iteration -------*- C++ -*-===//
//
// A serving engine runs iterations: each one a decode step of the running
// sequences plus a budget of prefill tokens (chunked prefill), all through
// the same linear layers, with attention per sequence. The step clock
// prices fixed programs, so an IterationCostModel compiles the instance's
// programs at sampled sizes (prefills of n tokens, decode steps of b
// sequences at context c), prices each with the same replay as `stagec
// --report`, and splits each step into what grows with the tokens (the
// linear layers, their collectives), the attention (by the context each
// sequence reads) and the top-level work (embedding, LM head). An
// iteration's time adds the parts at its own sizes, interpolated between
// the samples (docs/serving.md).
//
//===----------------------------------------------------------------------===//

#ifndef STG_SERVE_ITERATIONCOST_H
#define STG_SERVE_ITERATIONCOST_H

#include "stg/Driver/Compile.h"
#include "stg/Perf/System.h"

#include "llvm/ADT/SmallVector.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace stg {

/// What the engine may run: bounds the samples and the memory kept for
/// activations.
struct ServingLimits {
  /// Prefill and decode tokens of one iteration (vLLM's
  /// max_num_batched_tokens, TensorRT-LLM's max_num_tokens).
  uint64_t maxBatchedTokens = 8192;
  /// Sequences running at once (max_num_seqs / max_batch_size).
  uint64_t maxBatch = 256;
  /// The longest sequence: input plus output tokens.
  uint64_t maxContext = 4096;
  /// Fraction of device memory the engine may use (gpu_memory_utilization).
  double memoryFraction = 0.9;
  /// Instead: the KV cache's fraction of what the weights and the
  /// activations leave (TensorRT-LLM's free_gpu_memory_fraction).
  std::optional<double> freeMemoryFraction;
  /// The engine reserves a sliding-window (or chunked) layer's cache for
  /// the whole sequence, as TensorRT-LLM sizes such a layer's blocks as
  /// full attention's; its attention still reads the window.
  bool wholeWindowCaches = false;
};

/// One prefill chunk: `tokens` new tokens of a sequence that has `context`
/// tokens in the KV cache already.
struct PrefillChunk {
  uint64_t tokens = 0;
  uint64_t context = 0;
};

/// The work of one iteration on one attention replica.
struct IterationWork {
  uint64_t decodeSequences = 0;
  uint64_t decodeContext = 0; ///< Summed over the decode sequences.
  llvm::SmallVector<PrefillChunk, 4> prefill;
  /// Sequences whose next token is sampled: decodes and finished prefills.
  uint64_t sampled = 0;
  /// Speculative decoding: the draft tokens each decode sequence verifies
  /// besides its own (0: plain decoding), each drafted by `draftShare` of
  /// the model's layers and its LM head, one after another.
  unsigned draftTokens = 0;
  double draftShare = 0;
  /// Some replica of the engine prefills in this iteration: the replicas
  /// meet in the experts' exchanges, which then run as a prompt's for all
  /// (SGLang picks DeepEP's mode for the whole batch), so even a replica
  /// that only decodes takes the prompts' body.
  bool enginePrefills = false;

  uint64_t getTokens() const;
};

/// A piecewise-linear function sampled at ascending points; linear beyond
/// the last two.
class SampledCurve {
public:
  SampledCurve() = default;
  SampledCurve(std::vector<double> x, std::vector<double> y);
  void add(double at, double value);
  double operator()(double at) const;
  bool empty() const { return x.empty(); }

private:
  std::vector<double> x, y;
  /// Each segment's slope, kept: a serving run evaluates the curves at
  /// every iteration.
  std::vector<double> slopes;
};

/// The parts of an iteration's time, sampled, and the instance's memory.
/// Built by `build`; tests may fill the fields by hand.
struct IterationCostModel {
  /// Compiles and prices the instance `base` (a model and plan; its mode is
  /// replaced) on `system` at the sizes `limits` allows. Problems go to
  /// `diags`, with a note naming the sample that failed.
  static std::optional<IterationCostModel>
  build(const CompileOptions &base, const SystemSpec &system,
        const ServingLimits &limits, DiagnosticEngine &diags);

  /// The iteration's time on one replica, microseconds, without the
  /// engine's own overhead.
  double getMicros(const IterationWork &work) const;

  /// Microseconds by tokens: the token-proportional work (linear layers,
  /// their collectives, pipeline sends), prefill attention of one sequence
  /// of that many tokens, and the top-level work (embedding, LM head).
  SampledCurve body, prefillAttention, top;
  /// The body of an iteration that only decodes, where its exchanges run
  /// otherwise than a prompt's: under `--deepep-mode auto` DeepEP's
  /// low-latency kernels (and two-batch overlap's turns for them), as
  /// SGLang runs a decode batch (an engine's iteration without a prompt on
  /// any replica). Empty where the two are alike: `body`.
  SampledCurve decodeBody;
  /// Microseconds of decode attention by context: of one sequence, and of
  /// `manyBatch` sequences (a batch in between is interpolated).
  SampledCurve decodeOne, decodeMany;
  unsigned manyBatch = 64;
  /// KV cache bytes of one sequence on one rank, by its tokens.
  SampledCurve kvBytes;
  /// Bytes one rank may give the KV cache: the usable memory less the
  /// weights and the activations of the largest iteration.
  double kvBudget = 0;
  uint64_t weightBytes = 0;
  /// Attention replicas (the plan's dp x ep: each holds its own sequences
  /// and their caches), pipeline stages, and GPUs of the instance.
  unsigned replicas = 1, stages = 1, gpus = 1;
  /// The model's layers (a draft's share of them prices it).
  unsigned layers = 1;
  /// The instance's mesh as its programs have it, and its pipeline axis
  /// (-1: none): what a window's pair of instances shares (PairMesh.h).
  Mesh mesh;
  int pipelineAxis = -1;
};

} // namespace stg

#endif // STG_SERVE_ITERATIONCOST_H
