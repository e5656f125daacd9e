//===- IterationCost.cpp - The time of one serving iteration --------------===//
//
// Samples the instance's prefill and decode programs and splits each priced
// step into its parts (IterationCost.h). The samples are prefills of one
// sequence of n tokens (n on a grid of 2^k and 3 x 2^k, up to the largest
// iteration and the longest context) and decode steps of one and of 64
// sequences at contexts 2^k; with two-batch overlap, the prefills also as
// two overlapped halves, whose step gives the body; under --deepep-mode
// auto, the prefills again with a decode step's exchanges, whose steps give
// the body of iterations that only decode. Per replica: the
// template splits the batch over dp and ep (attention data parallelism), so
// a sample of MB sequences is MB on each replica.
//
//===----------------------------------------------------------------------===//

#include "stg/Serve/IterationCost.h"

#include "stg/Perf/DeviceModel.h"
#include "stg/Perf/StepEstimate.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cassert>
#include <cmath>

using namespace stg;

uint64_t IterationWork::getTokens() const {
  uint64_t tokens = decodeSequences * (1 + uint64_t(draftTokens));
  for (const PrefillChunk &chunk : prefill)
    tokens += chunk.tokens;
  return tokens;
}

SampledCurve::SampledCurve(std::vector<double> atPoints,
                           std::vector<double> values) {
  assert(atPoints.size() == values.size() && "a value for each point");
  for (size_t index = 0; index < atPoints.size(); ++index)
    add(atPoints[index], values[index]);
}

void SampledCurve::add(double at, double value) {
  if (!x.empty())
    slopes.push_back((value - y.back()) / (at - x.back()));
  x.push_back(at);
  y.push_back(value);
}

double SampledCurve::operator()(double at) const {
  if (x.empty())
    return 0;
  if (x.size() == 1)
    return y.front();
  size_t high = std::upper_bound(x.begin(), x.end(), at) - x.begin();
  size_t low = std::clamp<size_t>(high, 1, x.size() - 1) - 1;
  return y[low] + slopes[low] * (at - x[low]);
}

namespace {

/// One priced sample: its step split into parts, and its memory.
struct Sample {
  double stepMicros = 0, attentionMicros = 0, topMicros = 0;
  uint64_t weights = 0, activations = 0, state = 0;
  unsigned layers = 0;
};

/// Points 1, 2, 3, 4, 6, 8, 12, ... up to `last`, with `last` itself.
std::vector<uint64_t> getTokenGrid(uint64_t last) {
  std::vector<uint64_t> grid;
  for (uint64_t power = 1; power <= last; power *= 2) {
    grid.push_back(power);
    if (power >= 2 && power + power / 2 <= last)
      grid.push_back(power + power / 2);
  }
  if (grid.back() != last)
    grid.push_back(last);
  return grid;
}

class Sampler {
public:
  Sampler(const CompileOptions &base, const SystemSpec &system,
          DiagnosticEngine &diags)
      : base(base), system(system), diags(diags) {}

  /// Checks what the model declares, once.
  bool inspect();
  /// A prefill of one sequence of `tokens`; `overlapped`: as two halves
  /// of two-batch overlap; `decodeExchanges`: its expert exchanges as a
  /// decode step runs them (IterationCostModel::decodeBody).
  std::optional<Sample> prefill(uint64_t tokens, bool overlapped = false,
                                bool decodeExchanges = false);
  std::optional<Sample> decode(uint64_t sequences, uint64_t context);

  /// The mesh the samples compiled to, and its pipeline axis.
  Mesh mesh;
  int pipelineAxis = -1;

private:
  std::optional<Sample> run(CompileOptions options, const llvm::Twine &what);

  const CompileOptions &base;
  const SystemSpec &system;
  DiagnosticEngine &diags;
  bool hasSequenceParallel = false;
};

} // namespace

bool Sampler::inspect() {
  std::unique_ptr<Module> module = loadModel(base, diags);
  if (!module)
    return false;
  if (!module->lookupDim("MB")) {
    diags.error(module->getModelLoc(),
                "--mode serve sets the sequences of a step through the dim "
                "MB (the micro-batch, as the templates declare `dim B = MB * "
                "dp * ep`); the model declares no MB");
    return false;
  }
  hasSequenceParallel = module->lookupOption("sequence_parallel") != nullptr;
  return true;
}

std::optional<Sample> Sampler::run(CompileOptions options,
                                   const llvm::Twine &what) {
  // Serving engines split the linear layers over tp with all-reduces, not
  // Megatron's sequence parallelism.
  if (hasSequenceParallel)
    options.overrides.push_back({"sequence_parallel", "false"});
  options.foldLayers = true;
  std::optional<CompiledModel> compiled = compileModel(options, diags);
  if (!compiled) {
    diags.note({}, "while pricing the serving engine's " + what);
    return std::nullopt;
  }
  mesh = compiled->programs.mesh;
  pipelineAxis = compiled->programs.pipelineAxis;
  applyDeviceModel(compiled->programs, system.device, nullptr);
  llvm::Expected<StepEstimate> estimate =
      estimateStep(compiled->programs, system);
  if (!estimate) {
    diags.error({}, llvm::toString(estimate.takeError()));
    diags.note({}, "while pricing the serving engine's " + what);
    return std::nullopt;
  }
  Sample sample;
  sample.stepMicros = estimate->stepMicros;
  sample.layers = compiled->programs.numLayers;
  for (const StageProgram &stage : compiled->programs.stages) {
    forEachExecutedNode(stage, [&](const ProgramNode &node) {
      if (node.kind != ProgramNodeKind::Compute)
        return;
      if (llvm::StringRef(node.opType).startswith("attention"))
        sample.attentionMicros += double(node.durationMicros);
      else if (node.layer < 0)
        sample.topMicros += double(node.durationMicros);
    });
    sample.weights = std::max(sample.weights, stage.memory.weights);
    sample.activations = std::max(sample.activations, stage.memory.activations);
    sample.state = std::max(sample.state, stage.memory.state);
  }
  return sample;
}

std::optional<Sample> Sampler::prefill(uint64_t tokens, bool overlapped,
                                       bool decodeExchanges) {
  CompileOptions options = base;
  options.mode = "prefill";
  if (decodeExchanges)
    options.deepEpMode = CompileOptions::DeepEpMode::LowLatency;
  options.overrides.push_back({"MB", "1"});
  // Two-batch overlap: the tokens in two halves, run overlapped.
  options.twoBatchOverlap = overlapped;
  options.microbatches = overlapped ? 2 : 1;
  uint64_t perMicrobatch = overlapped ? (tokens + 1) / 2 : tokens;
  options.overrides.push_back({"S", std::to_string(perMicrobatch)});
  return run(options, "prefill of " + llvm::Twine(tokens) +
                          (tokens == 1 ? " token" : " tokens") +
                          (overlapped ? " in two overlapped halves" : ""));
}

std::optional<Sample> Sampler::decode(uint64_t sequences, uint64_t context) {
  CompileOptions options = base;
  options.mode = "decode";
  // Only attention is read off these: the sum of its kernels, overlapped
  // or not.
  options.twoBatchOverlap = false;
  options.microbatches = 1;
  options.context = unsigned(context);
  options.overrides.push_back({"MB", std::to_string(sequences)});
  return run(options, "decode step of " + llvm::Twine(sequences) +
                          " sequences at context " + llvm::Twine(context));
}

std::optional<IterationCostModel>
IterationCostModel::build(const CompileOptions &base, const SystemSpec &system,
                          const ServingLimits &limits,
                          DiagnosticEngine &diags) {
  if (!system.device.memoryBytes) {
    diags.error({}, "the " + system.device.name +
                        "'s memory is not known (`memory_gb` in its device "
                        "file): serving needs it to size the KV cache");
    return std::nullopt;
  }
  Sampler sampler(base, system, diags);
  if (!sampler.inspect())
    return std::nullopt;
  IterationCostModel model;
  bool expertsOverRanks = false;
  for (const auto &[axis, degree] : base.degrees) {
    model.gpus *= degree;
    if (axis == "dp" || axis == "ep")
      model.replicas *= degree;
    if (axis == "pp")
      model.stages = degree;
    expertsOverRanks |= axis == "ep" && degree > 1;
  }

  uint64_t largestPrefill = std::max(limits.maxBatchedTokens, limits.maxContext);
  uint64_t activations = 0;
  for (uint64_t tokens : getTokenGrid(largestPrefill)) {
    std::optional<Sample> sample = sampler.prefill(tokens);
    if (!sample)
      return std::nullopt;
    // With two-batch overlap the body is the overlapped halves' (a single
    // token is not split); attention stays the whole sequence's, whose
    // second half attends to the first.
    std::optional<Sample> body = sample;
    if (base.twoBatchOverlap && tokens > 1)
      body = sampler.prefill(tokens, /*overlapped=*/true);
    if (!body)
      return std::nullopt;
    double n = double(tokens);
    model.prefillAttention.add(n, sample->attentionMicros);
    model.top.add(n, sample->topMicros);
    model.body.add(n, std::max(0.0, body->stepMicros - body->attentionMicros -
                                        body->topMicros));
    model.weightBytes = sample->weights;
    model.layers = std::max(1u, sample->layers);
    if (tokens <= limits.maxBatchedTokens)
      activations = std::max(activations, sample->activations);
  }
  // Under --deepep-mode auto an engine moves a decode batch's tokens with
  // DeepEP's low-latency kernels and a batch with a prompt in it with the
  // normal ones (SGLang by the batch's forward mode): iterations that only
  // decode get a body of their own, on the same grid.
  if (base.deepEpMode == CompileOptions::DeepEpMode::Auto && expertsOverRanks)
    for (uint64_t tokens : getTokenGrid(largestPrefill)) {
      std::optional<Sample> sample =
          sampler.prefill(tokens, base.twoBatchOverlap && tokens > 1,
                          /*decodeExchanges=*/true);
      if (!sample)
        return std::nullopt;
      model.decodeBody.add(double(tokens),
                           std::max(0.0, sample->stepMicros -
                                             sample->attentionMicros -
                                             sample->topMicros));
    }

  // A fixed batch, whatever the cap: the model of an instance is the same
  // for every cap (larger batches extend the line through it).
  model.manyBatch = 64;
  std::vector<uint64_t> contexts;
  for (uint64_t context = 16; context < limits.maxContext; context *= 2)
    contexts.push_back(context);
  contexts.push_back(limits.maxContext);
  // An engine that reserves window layers' caches whole: their size from
  // steps that cache the whole context, their time from the windowed ones.
  CompileOptions wholeBase = base;
  wholeBase.wholeWindowCaches = true;
  std::optional<Sampler> whole;
  if (limits.wholeWindowCaches &&
      !whole.emplace(wholeBase, system, diags).inspect())
    return std::nullopt;
  for (uint64_t context : contexts) {
    std::optional<Sample> one = sampler.decode(1, context);
    std::optional<Sample> many =
        one ? sampler.decode(model.manyBatch, context) : std::nullopt;
    if (!many)
      return std::nullopt;
    double c = double(context);
    model.decodeOne.add(c, one->attentionMicros);
    model.decodeMany.add(c, many->attentionMicros);
    if (!limits.wholeWindowCaches) {
      model.kvBytes.add(c, double(many->state) / model.manyBatch);
      continue;
    }
    std::optional<Sample> reserved = whole->decode(1, context);
    if (!reserved)
      return std::nullopt;
    model.kvBytes.add(c, double(reserved->state));
  }

  double memory = double(system.device.memoryBytes);
  if (limits.freeMemoryFraction) {
    // TensorRT-LLM measures what is free once the weights are loaded and a
    // forward pass has run, and gives the cache its share of that.
    double free = memory - double(model.weightBytes) - double(activations);
    model.kvBudget = *limits.freeMemoryFraction * std::max(0.0, free);
  } else {
    double usable = limits.memoryFraction * memory;
    model.kvBudget = usable - double(model.weightBytes) - double(activations);
  }
  model.mesh = sampler.mesh;
  model.pipelineAxis = sampler.pipelineAxis;
  return model;
}

double IterationCostModel::getMicros(const IterationWork &work) const {
  uint64_t tokens = work.getTokens();
  if (!tokens)
    return 0;
  // A speculative step verifies each decode sequence's drafts with its
  // own token: their logits too.
  uint64_t drafts = work.decodeSequences * uint64_t(work.draftTokens);
  bool decodesOnly = work.prefill.empty() && !work.enginePrefills;
  const SampledCurve &tokenWork =
      decodesOnly && !decodeBody.empty() ? decodeBody : body;
  double micros =
      tokenWork(double(tokens)) + top(double(work.sampled + drafts));
  for (const PrefillChunk &chunk : work.prefill) {
    double before = double(chunk.context);
    double after = before + double(chunk.tokens);
    // The chunk's queries against the keys before it and its own: what a
    // prefill of the whole adds over one of the context.
    micros += chunk.context ? prefillAttention(after) - prefillAttention(before)
                            : prefillAttention(after);
  }
  if (uint64_t b = work.decodeSequences) {
    // The verified tokens read the cache once, as one decode token does.
    double mean = double(work.decodeContext) / double(b);
    double one = decodeOne(mean), many = decodeMany(mean);
    double attention =
        one + (many - one) * double(b - 1) / double(manyBatch - 1);
    micros += attention;
    // Each draft token: the draft's layers over the batch, then its LM
    // head, before the next one.
    double draft =
        work.draftShare * (tokenWork(double(b)) + attention) + top(double(b));
    micros += double(work.draftTokens) * draft;
  }
  return micros;
}
