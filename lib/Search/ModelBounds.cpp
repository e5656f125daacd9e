//===- ModelBounds.cpp - What the plan bounds read from the model ---------===//
//
// readModelBounds compiles the model a few times, once per search: on one
// GPU with micro-batches of one and two sequences (work by kind of kernel
// and activations per sequence), split one layer a stage (each layer's
// activations), and so again over tp 2 (the collectives tp adds; and ep 2 where
// the model has experts), over cp 2 (context parallelism's exchanges) and over
// dp 2 with FSDP (the weights a micro-batch gathers). The memory bound's
// weights are read from the module itself (WeightBounds.cpp).
//
//===----------------------------------------------------------------------===//

#include "stg/Search/PlanBounds.h"

#include "WeightBounds.h"

#include "stg/IR/Module.h"
#include "stg/Instantiate/Mesh.h"
#include "stg/Passes/DivisibilityCheck.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <map>

using namespace stg;

namespace {

using Bounds = ModelBounds;

/// Options that compile `base`'s model on one GPU.
CompileOptions getOneGPUOptions(const CompileOptions &base,
                                llvm::StringRef recompute) {
  CompileOptions options = base;
  options.degrees.clear();
  for (const char *axis : PlanAxes)
    options.degrees.push_back({axis, 1});
  options.microbatches = 1;
  options.recompute = recompute.str();
  return options;
}

/// Compiles the model as compileModel would, but parses it and runs the
/// passes once for each recomputation, weight sharding and sequence
/// parallelism asked for (prepareModel), binding that module for each
/// split and micro-batch size: the readings compile the model some fifty
/// times, of a few modules.
class SplitCompiler {
public:
  /// `options`' model compiled with micro-batches of one and two sequences
  /// (what the second adds is what a sequence costs), into `programs`; the
  /// module, left bound as the first's, or null, with the diagnostics in
  /// `errors`, if either does not compile.
  Module *compileOneAndTwoSequences(const CompileOptions &options,
                                    std::optional<ProgramSet> (&programs)[2],
                                    std::string &errors) {
    std::string key = options.recompute + (options.fsdp ? " fsdp" : "");
    if (options.precision)
      key += " " + getPrecisionName(*options.precision).str();
    for (const auto &[name, value] : options.overrides)
      key += " " + name + "=" + value;
    auto [found, fresh] = modules.try_emplace(key);
    Split &split = found->second;
    if (fresh) {
      CompileOptions sized = options;
      sized.overrides.push_back({"MB", "1"});
      split.prepared = prepareModel(sized, "stage-search");
      // Its extents, collected once for every binding (as the evaluator).
      if (split.prepared.module)
        split.divisibility =
            std::make_unique<DivisibilityCheck>(*split.prepared.module);
    }
    if (!split.prepared.module) {
      errors = split.prepared.log->str();
      return nullptr;
    }
    Module &module = *split.prepared.module;
    llvm::raw_string_ostream os(errors);
    DiagnosticEngine diags(os);
    diags.setProgramName("stage-search");
    for (unsigned mb : {2u, 1u}) {
      module.lookupDim("MB")->value = Expr(mb);
      std::optional<Mesh> mesh = bindPlan(module, options, diags);
      if (!mesh || failed(split.divisibility->check(diags)))
        return nullptr;
      programs[mb - 1] = instantiateModel(module, *mesh, options, diags);
      if (!programs[mb - 1])
        return nullptr;
    }
    return &module;
  }

private:
  struct Split {
    PreparedModel prepared;
    std::unique_ptr<DivisibilityCheck> divisibility;
  };
  std::map<std::string, Split> modules;
};

/// The work of a compute node, by the kind of kernel that prices it.
Bounds::Work getNodeWork(const ProgramNode &node) {
  Bounds::Work work;
  auto flops = double(node.numOps), bytes = double(node.tensorBytes);
  work.kernels = node.numOps > 0 || node.tensorBytes > 0;
  switch (NodeKernel kernel = getNodeKernel(node)) {
  case NodeKernel::Sequential: // Products, then softmax over the scores.
    work.gemmFlops = flops;
    work.otherBytes = bytes;
    break;
  case NodeKernel::Gemm:
    work.gemmFlops = flops;
    break;
  case NodeKernel::Attention:
  case NodeKernel::AttentionBackward:
    work.attentionFlops = flops;
    (kernel == NodeKernel::Attention ? work.forwardRows : work.backwardRows) =
        double(node.attentionRows);
    break;
  case NodeKernel::Other:
    work.otherFlops = flops;
    work.otherBytes = bytes;
    break;
  }
  return work;
}

/// The work of the forward and backward per layer (and of the rest) of
/// one micro-batch of `programs`.
Bounds::ModelWork countWork(const ProgramSet &programs, unsigned layers) {
  Bounds::ModelWork work;
  work.layers.assign(layers, {});
  work.forwardLayers.assign(layers, {});
  for (const StageProgram &stage : programs.stages)
    for (const ProgramNode &node : stage.nodes) {
      if (node.kind != ProgramNodeKind::Compute ||
          (node.phase != Phase::Forward && node.phase != Phase::Backward))
        continue;
      if (node.layer < 0 || unsigned(node.layer) >= layers) {
        work.other += getNodeWork(node);
        continue;
      }
      work.layers[node.layer] += getNodeWork(node);
      if (node.phase == Phase::Forward)
        work.forwardLayers[node.layer] += getNodeWork(node);
    }
  return work;
}

/// The activations a stage saves for a micro-batch of two sequences
/// (`two`) beyond one of one (`one`): what a sequence adds.
double getActivationGrowth(const StageProgram &one, const StageProgram &two) {
  return std::max(0.0, double(two.memory.activations) -
                           double(one.memory.activations));
}

/// How readLayers splits each stage: ranks on tp, ep and cp (2 on the
/// axis whose collectives it reads), sequence parallelism where set.
struct SplitToRead {
  unsigned tp = 1, ep = 1, cp = 1, dp = 1;
  std::optional<bool> sequenceParallel;
  bool fsdp = false;
  llvm::StringRef collectivesOver = "tp";
};

/// What each layer saves and moves per sequence (readLayers).
struct LayerReading {
  std::vector<double> activations;
  /// The bytes of its forward and backward collectives over the split's
  /// axis, by kind; and a micro-batch's that do not grow with its
  /// sequences (weights gathered for it).
  std::vector<Bounds::CollectiveBytes> collectiveBytes, fixedCollectiveBytes;
  /// Those of its expert exchanges, and what they are (none: some differ).
  std::vector<double> exchangeBytes;
  std::optional<Bounds::Exchange> exchange;
  bool mixedExchanges = false;
  /// The work outside the layers on the first stage and on the last.
  Bounds::Work beforeLayers, afterLayers;
};

/// The work of the compute nodes of `stage` outside the layers.
Bounds::Work countWorkOutsideLayers(const StageProgram &stage,
                                    unsigned layers) {
  Bounds::Work work;
  for (const ProgramNode &node : stage.nodes)
    if (node.kind == ProgramNodeKind::Compute &&
        (node.phase == Phase::Forward || node.phase == Phase::Backward) &&
        (node.layer < 0 || unsigned(node.layer) >= layers))
      work += getNodeWork(node);
  return work;
}

/// What each layer saves and moves per sequence, from the model split one
/// layer a stage, one micro-batch in flight (GPipe over one): the first
/// and last layer with the work before and after the layers, as their
/// stages hold it in any split. Nothing where the split does not come out
/// one layer a stage or the model is too deep to split so.
std::optional<LayerReading> readLayers(SplitCompiler &compiler,
                                       const CompileOptions &base,
                                       llvm::StringRef recompute,
                                       unsigned layers,
                                       const SplitToRead &split = {}) {
  if (layers < 2 || layers > 256)
    return std::nullopt;
  CompileOptions options = getOneGPUOptions(base, recompute);
  for (auto &[axis, degree] : options.degrees) {
    if (axis == "pp")
      degree = layers;
    if (axis == "tp")
      degree = split.tp;
    if (axis == "ep")
      degree = split.ep;
    if (axis == "cp")
      degree = split.cp;
    if (axis == "dp")
      degree = split.dp;
  }
  options.fsdp = split.fsdp;
  if (split.sequenceParallel)
    options.overrides.push_back(
        {"sequence_parallel", *split.sequenceParallel ? "true" : "false"});
  options.schedule = PipelineSchedule::GPipe;
  std::optional<ProgramSet> compiled[2];
  std::string errors;
  if (!compiler.compileOneAndTwoSequences(options, compiled, errors) ||
      compiled[0]->stages.size() != layers ||
      compiled[1]->stages.size() != layers)
    return std::nullopt;
  LayerReading reading;
  reading.activations.resize(layers);
  reading.collectiveBytes.resize(layers);
  reading.fixedCollectiveBytes.resize(layers);
  reading.exchangeBytes.resize(layers);
  auto outside = [&](unsigned stage) {
    return countWorkOutsideLayers(compiled[1]->stages[stage], layers)
        .getGrowthOver(
            countWorkOutsideLayers(compiled[0]->stages[stage], layers));
  };
  reading.beforeLayers = outside(0);
  reading.afterLayers = outside(layers - 1);
  const Mesh &mesh = compiled[0]->mesh;
  int readAxis = mesh.findAxis(split.collectivesOver),
      epAxis = mesh.findAxis("ep");
  for (unsigned layer = 0; layer < layers; ++layer) {
    const StageProgram *stages[2] = {&compiled[0]->stages[layer],
                                     &compiled[1]->stages[layer]};
    reading.activations[layer] = getActivationGrowth(*stages[0], *stages[1]);
    for (int sequences : {0, 1})
      for (const ProgramNode &node : stages[sequences]->nodes) {
        if (node.kind != ProgramNodeKind::Collective ||
            node.layer != int(layer) ||
            (node.phase != Phase::Forward && node.phase != Phase::Backward))
          continue;
        double sign = sequences ? 1.0 : -1.0;
        if (readAxis >= 0 && node.group == AxisMask(1u << readAxis)) {
          double bytes = double(node.commBytes);
          reading.collectiveBytes[layer][unsigned(node.commType)] +=
              sign * bytes;
          // One sequence's less what a second adds.
          reading.fixedCollectiveBytes[layer][unsigned(node.commType)] +=
              sequences ? -bytes : 2 * bytes;
        }
        if (epAxis < 0 || node.commType != CollectiveKind::AllToAll ||
            !(node.group & (1u << epAxis)))
          continue;
        reading.exchangeBytes[layer] += sign * double(node.commBytes);
        Bounds::Exchange exchange;
        for (unsigned axis = 0; axis < mesh.getAxes().size(); ++axis)
          if (node.group & (1u << axis))
            exchange.axes.push_back(mesh.getAxes()[axis].name);
        exchange.mode = node.expertExchange;
        exchange.tokenCopies = node.tokenCopies;
        exchange.experts = node.experts;
        if (!reading.exchange)
          reading.exchange = exchange;
        reading.mixedExchanges |= !(*reading.exchange == exchange);
      }
    for (double &bytes : reading.collectiveBytes[layer])
      bytes = std::max(0.0, bytes);
    for (double &bytes : reading.fixedCollectiveBytes[layer])
      bytes = std::max(0.0, bytes);
    reading.exchangeBytes[layer] = std::max(0.0, reading.exchangeBytes[layer]);
  }
  return reading;
}

/// Without sequence parallelism, a layer's activations are a part tp
/// splits and a part every tp rank holds whole (a + b / tp): the split at
/// tp 2 (`halves`) gives a = 2 x (what tp 2 saves) - (what one GPU saves).
std::vector<double> getReplicatedActivations(const LayerReading &whole,
                                             const LayerReading &halves) {
  std::vector<double> replicated(whole.activations.size());
  for (size_t layer = 0; layer < replicated.size(); ++layer)
    replicated[layer] =
        std::clamp(2 * halves.activations[layer] - whole.activations[layer],
                   0.0, whole.activations[layer]);
  return replicated;
}

/// The activations of `options`' model (a low-precision recipe's) per
/// sequence, as readModelBounds reads them in the model's own precision:
/// the whole model on one GPU, each layer split one a stage, and the part
/// tp leaves whole without sequence parallelism; into `bounds` under `key`.
/// Nothing where a reading does not compile.
void readActivations(SplitCompiler &compiler, const CompileOptions &options,
                     const std::string &mode, const ModelShape &shape,
                     const std::string &key, Bounds &bounds) {
  std::optional<ProgramSet> compiled[2];
  std::string errors;
  if (!compiler.compileOneAndTwoSequences(getOneGPUOptions(options, mode),
                                          compiled, errors))
    return;
  bounds.activationsPerSequence[key] =
      getActivationGrowth(compiled[0]->stages[0], compiled[1]->stages[0]);
  std::optional<LayerReading> layers =
      readLayers(compiler, options, mode, shape.layers);
  if (!layers)
    return;
  bounds.layerActivationsPerSequence[key] = layers->activations;
  if (!shape.hasSequenceParallel)
    return;
  SplitToRead split;
  split.tp = 2;
  split.sequenceParallel = false;
  if (std::optional<LayerReading> halves =
          readLayers(compiler, options, mode, shape.layers, split))
    bounds.layerReplicatedPerSequence[key] =
        getReplicatedActivations(*layers, *halves);
}

} // namespace

std::string stg::getActivationKey(llvm::StringRef recompute,
                                  Precision precision) {
  if (!isLowPrecision(precision))
    return recompute.str();
  return (recompute + " " + getPrecisionName(precision)).str();
}

ModelBounds::Work &ModelBounds::Work::operator+=(const Work &other) {
  gemmFlops += other.gemmFlops;
  attentionFlops += other.attentionFlops;
  forwardRows += other.forwardRows;
  backwardRows += other.backwardRows;
  otherFlops += other.otherFlops;
  otherBytes += other.otherBytes;
  kernels += other.kernels;
  return *this;
}

ModelBounds::Work ModelBounds::Work::getGrowthOver(const Work &other) const {
  auto grow = [](double to, double from) { return std::max(0.0, to - from); };
  Work growth;
  growth.gemmFlops = grow(gemmFlops, other.gemmFlops);
  growth.attentionFlops = grow(attentionFlops, other.attentionFlops);
  growth.forwardRows = grow(forwardRows, other.forwardRows);
  growth.backwardRows = grow(backwardRows, other.backwardRows);
  growth.otherFlops = grow(otherFlops, other.otherFlops);
  growth.otherBytes = grow(otherBytes, other.otherBytes);
  growth.kernels = std::min(kernels, other.kernels);
  return growth;
}

llvm::Expected<ModelBounds> stg::readModelBounds(
    const CompileOptions &base, llvm::ArrayRef<std::string> recompute,
    const ModelShape &shape, llvm::ArrayRef<Precision> precisions) {
  ModelBounds bounds;
  bounds.layers = shape.layers;
  bounds.training = base.mode == "train";
  bounds.lowPrecisionAttention = base.lowPrecisionAttention;
  if (!bounds.training)
    return bounds;
  std::vector<std::string> modes{"none"};
  for (const std::string &mode : recompute)
    if (!llvm::is_contained(modes, mode))
      modes.push_back(mode);
  bool exchangesDiffer = false;
  SplitCompiler compiler;
  for (const std::string &mode : modes) {
    std::optional<ProgramSet> compiled[2];
    std::string errors;
    const Module *oneGPU = compiler.compileOneAndTwoSequences(
        getOneGPUOptions(base, mode), compiled, errors);
    if (!oneGPU)
      return llvm::createStringError(std::errc::invalid_argument, "%s",
                                     errors.c_str());
    // The weights, while the module is bound as on one GPU.
    if (mode == "none") {
      bounds.ownPrecision = oneGPU->lookupOption("precision") != nullptr;
      readWeightBounds(*oneGPU, shape, bounds);
      unsigned widest = 0;
      for (const std::vector<Bounds::Tensor> &group : bounds.groups)
        for (const Bounds::Tensor &tensor : group)
          widest = std::max(widest, tensor.elementBytes);
      for (const Bounds::TopWeight &weight : bounds.topWeights)
        widest = std::max(widest, weight.tensor.elementBytes);
      if (widest)
        bounds.elementBytes = widest;
    }
    if (compiled[0]->numLayers != shape.layers)
      continue; // Not numbered as the search's plans: no step bound.
    // What a micro-batch of one more sequence adds: work that does not grow
    // with the batch (a gradient accumulated once per micro-batch) is not
    // counted per sequence.
    Bounds::ModelWork one = countWork(*compiled[0], shape.layers);
    Bounds::ModelWork two = countWork(*compiled[1], shape.layers);
    Bounds::ModelWork &perSequence = bounds.work[mode];
    perSequence.layers.resize(shape.layers);
    perSequence.forwardLayers.resize(shape.layers);
    for (unsigned layer = 0; layer < shape.layers; ++layer) {
      perSequence.layers[layer] =
          two.layers[layer].getGrowthOver(one.layers[layer]);
      perSequence.forwardLayers[layer] =
          two.forwardLayers[layer].getGrowthOver(one.forwardLayers[layer]);
    }
    perSequence.other = two.other.getGrowthOver(one.other);
    // Likewise the activations a sequence adds (the first stage's only:
    // one GPU holds one stage).
    bounds.activationsPerSequence[mode] =
        getActivationGrowth(compiled[0]->stages[0], compiled[1]->stages[0]);
    std::optional<LayerReading> layers =
        readLayers(compiler, base, mode, shape.layers);
    if (layers) {
      bounds.layerActivationsPerSequence[mode] = layers->activations;
      perSequence.beforeLayers = layers->beforeLayers;
      perSequence.afterLayers = layers->afterLayers;
    }
    // A low-precision recipe saves some activations in its format.
    for (Precision precision : precisions) {
      std::string key = getActivationKey(mode, precision);
      if (key == mode || bounds.activationsPerSequence.count(key))
        continue;
      CompileOptions recipe = base;
      recipe.precision = precision;
      readActivations(compiler, recipe, mode, shape, key, bounds);
    }
    // Over cp 2: context parallelism's exchanges of keys and values.
    SplitToRead contextSplit;
    contextSplit.cp = 2;
    contextSplit.collectivesOver = "cp";
    if (layers && shape.splits[3]) // cp
      if (std::optional<LayerReading> halves =
              readLayers(compiler, base, mode, shape.layers, contextSplit))
        bounds.contextParallelBytes[mode] = halves->collectiveBytes;
    // Over dp 2 with FSDP: the weights each micro-batch gathers.
    SplitToRead shardedSplit;
    shardedSplit.dp = 2;
    shardedSplit.fsdp = true;
    shardedSplit.collectivesOver = "dp";
    if (layers && shape.hasWeightSharding)
      if (std::optional<LayerReading> halves =
              readLayers(compiler, base, mode, shape.layers, shardedSplit)) {
        bounds.shardedWeightBytes[mode] = halves->fixedCollectiveBytes;
        // And at ep 2, where experts split: what ep divides.
        shardedSplit.ep = 2;
        if (shape.splits[4]) // ep
          if (std::optional<LayerReading> experts =
                  readLayers(compiler, base, mode, shape.layers, shardedSplit))
            bounds.shardedExpertSplitBytes[mode] =
                experts->fixedCollectiveBytes;
      }
    // The split again over tp 2, with sequence parallelism and without
    // where the model has the switch: the collectives tp adds, and without
    // sequence parallelism the activations it leaves whole.
    for (auto [sequenceParallel, experts] : {std::pair(true, false),
                                             {false, false},
                                             {true, true},
                                             {false, true}}) {
      std::optional<bool> setting;
      if (shape.hasSequenceParallel)
        setting = sequenceParallel;
      else if (sequenceParallel)
        continue;
      SplitToRead split;
      split.tp = 2;
      split.ep = experts ? 2 : 1;
      split.sequenceParallel = setting;
      std::optional<LayerReading> halves;
      if (!layers || (experts && !shape.splits[4]) || // ep
          !(halves = readLayers(compiler, base, mode, shape.layers, split)))
        continue;
      bounds.tensorParallelBytes[{mode, sequenceParallel, experts}] =
          halves->collectiveBytes;
      // Every reading's exchanges alike, or none counts.
      if (halves->exchange && !halves->mixedExchanges &&
          (!bounds.exchange || *bounds.exchange == *halves->exchange)) {
        bounds.exchange = halves->exchange;
        bounds.exchangeBytes[{mode, sequenceParallel}] = halves->exchangeBytes;
      } else if (halves->exchange) {
        exchangesDiffer = true;
      }
      if (sequenceParallel || experts || !shape.hasSequenceParallel)
        continue;
      bounds.layerReplicatedPerSequence[mode] =
          getReplicatedActivations(*layers, *halves);
    }
  }
  if (exchangesDiffer) {
    bounds.exchange.reset();
    bounds.exchangeBytes.clear();
  }
  return bounds;
}
