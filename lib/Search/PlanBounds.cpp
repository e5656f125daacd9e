//===- PlanBounds.cpp - What a plan needs at least, before compiling ------===//
//
// The memory bound follows StageMemory.cpp's accounting and Placement's
// numbering (forward repeats in program order, a backward repeat on its
// forward repeat's layers; the work before the first repeat on the first
// stage, after the last layer on the last), counting only what is certain:
// a weight is charged to the one body layer whose op reads it first, an
// Adam step to its own body layer, a weight outside the layers only for
// the reads before and after all of them, and a weight whose extents
// depend on the plan not at all.
//
//===----------------------------------------------------------------------===//

#include "stg/Search/PlanBounds.h"

#include "stg/IR/Graph.h"
#include "stg/IR/Module.h"
#include "stg/Instantiate/Mesh.h"
#include "stg/Perf/StepEstimate.h"
#include "stg/Perf/System.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <set>

using namespace stg;

namespace {

using Bounds = ModelBounds;

/// As StageMemory.cpp: the `param` ops `value` is a view of.
void findParams(const Value *value, llvm::SmallVectorImpl<const Op *> &found) {
  const Op *def = value->getDefiningOp();
  if (!def)
    return;
  switch (def->getKind()) {
  case OpKind::Param:
    found.push_back(def);
    return;
  case OpKind::Layout:
  case OpKind::Reshape:
  case OpKind::Shard:
  case OpKind::DropoutMask:
  case OpKind::Yield:
    for (const Value *operand : def->getOperands())
      findParams(operand, found);
    return;
  default:
    return;
  }
}

/// Whether `expr` reads a degree or the micro-batch, through the dims it
/// names: such a weight's extents are not those of every plan.
bool dependsOnPlan(const Module &module, const Expr &expr, unsigned depth = 0) {
  if (depth > 32)
    return true;
  for (const std::string &name : getSymbolNames(expr)) {
    if (name == "MB" || module.lookupAxis(name))
      return true;
    if (const Dim *dim = module.lookupDim(name))
      if (dim->value && dependsOnPlan(module, *dim->value, depth + 1))
        return true;
  }
  return false;
}

class Reader {
public:
  Reader(const Module &module, const ModelShape &shape)
      : module(module), shape(shape) {}

  /// `value`'s tensor, or nothing where its size is not certain.
  std::optional<Bounds::Tensor> getTensor(const Value &value, bool adam) const;

private:
  std::optional<Bounds::Split> getSplit(const Axis *axis, bool &never) const;
  const Module &module;
  const ModelShape &shape;
};

std::optional<Bounds::Split> Reader::getSplit(const Axis *axis,
                                              bool &never) const {
  Bounds::Split split;
  for (unsigned hops = 0; axis && hops < 16; ++hops) {
    if (!axis->condition.empty()) {
      Bounds::Split::Condition condition;
      if (axis->condition == "weight_sharded" && shape.hasWeightSharding) {
        condition.kind = Bounds::Split::Switch::WeightSharded;
        condition.wanted = !axis->negated;
      } else if (axis->condition == "sequence_parallel" &&
                 shape.hasSequenceParallel) {
        condition.kind = Bounds::Split::Switch::SequenceParallel;
        condition.wanted = !axis->negated;
      } else if (!axis->active) {
        never = true; // Off for every plan.
        return std::nullopt;
      }
      if (condition.kind != Bounds::Split::Switch::Fixed)
        split.conditions.push_back(condition);
    }
    if (axis->alias) {
      axis = axis->alias;
      continue;
    }
    for (unsigned index = 0; index < PlanAxes.size(); ++index)
      if (axis->name == PlanAxes[index]) {
        split.axis = index;
        return split;
      }
    return std::nullopt; // An axis the search does not set.
  }
  return std::nullopt;
}

std::optional<Bounds::Tensor> Reader::getTensor(const Value &value,
                                                bool adam) const {
  const TensorType &type = value.getType();
  Bounds::Tensor tensor;
  tensor.adam = adam;
  tensor.elementBytes = getElementTypeBytes(type.getElementType());
  uint64_t elements = 1;
  for (const Expr &extent : type.getShape()) {
    if (dependsOnPlan(module, extent))
      return std::nullopt;
    std::optional<Expr> bound = module.bindAll(extent);
    std::optional<long long> number =
        bound ? getIntegerValue(*bound) : std::nullopt;
    if (!number || *number < 0 ||
        (*number && elements > (1ull << 50) / uint64_t(*number)))
      return std::nullopt;
    elements *= uint64_t(*number);
  }
  tensor.elements = elements;
  const Distribution &layout = type.getDistribution();
  for (unsigned dim = 0; dim < layout.getRank(); ++dim)
    for (const Axis *axis : layout.getPartition(dim)) {
      bool never = false;
      std::optional<Bounds::Split> split = getSplit(axis, never);
      if (split)
        tensor.splits.push_back(*split);
      else if (!never)
        return std::nullopt;
    }
  return tensor;
}

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

/// `options`' model compiled with micro-batches of one and two sequences
/// (what the second adds is what a sequence costs), into `compiled`; false,
/// with the diagnostics in `errors`, if either does not compile.
bool compileOneAndTwoSequences(const CompileOptions &options,
                               std::optional<CompiledModel> (&compiled)[2],
                               std::string &errors) {
  for (unsigned mb : {1u, 2u}) {
    CompileOptions sized = options;
    sized.overrides.push_back({"MB", std::to_string(mb)});
    llvm::raw_string_ostream os(errors);
    DiagnosticEngine diags(os);
    diags.setProgramName("stage-search");
    compiled[mb - 1] = compileModel(sized, diags);
    if (!compiled[mb - 1])
      return false;
  }
  return true;
}

/// Calls `fn(stage, layer)` for each layer of `plan`'s split into `chunks`,
/// placed as its schedule places them.
template <typename Fn>
void forEachStageLayer(const std::vector<unsigned> &chunks, const Plan &plan,
                       Fn fn) {
  unsigned stages = plan.getDegree("pp"), layer = 0;
  ChunkPlacement placement = getChunkPlacement(plan.schedule);
  for (unsigned chunk = 0; chunk < chunks.size(); ++chunk)
    for (unsigned end = layer + chunks[chunk]; layer < end; ++layer)
      fn(getChunkStage(placement, chunk, stages), layer);
}

/// What each layer saves and moves per sequence (readLayers).
struct LayerReading {
  std::vector<double> activations;
  /// The bytes of its forward and backward collectives over tp, by kind.
  std::vector<Bounds::CollectiveBytes> tensorParallelBytes;
};

/// What each layer saves and moves per sequence, from the model split one
/// layer a stage, one micro-batch in flight (GPipe over one): the first
/// and last layer with the work before and after the layers, as their
/// stages hold it in any split. Nothing where the split does not come out
/// one layer a stage or the model is too deep to split so. Over `tp` x
/// `ep` ranks a stage, with `sequenceParallel` set where given.
std::optional<LayerReading>
readLayers(const CompileOptions &base, llvm::StringRef recompute,
           unsigned layers, unsigned tp = 1,
           std::optional<bool> sequenceParallel = {}, unsigned ep = 1) {
  if (layers < 2 || layers > 256)
    return std::nullopt;
  CompileOptions options = getOneGPUOptions(base, recompute);
  for (auto &[axis, degree] : options.degrees) {
    if (axis == "pp")
      degree = layers;
    if (axis == "tp")
      degree = tp;
    if (axis == "ep")
      degree = ep;
  }
  if (sequenceParallel)
    options.overrides.push_back(
        {"sequence_parallel", *sequenceParallel ? "true" : "false"});
  options.schedule = PipelineSchedule::GPipe;
  std::optional<CompiledModel> compiled[2];
  std::string errors;
  if (!compileOneAndTwoSequences(options, compiled, errors) ||
      compiled[0]->programs.stages.size() != layers ||
      compiled[1]->programs.stages.size() != layers)
    return std::nullopt;
  LayerReading reading;
  reading.activations.resize(layers);
  reading.tensorParallelBytes.resize(layers);
  int tpAxis = compiled[0]->programs.mesh.findAxis("tp");
  for (unsigned layer = 0; layer < layers; ++layer) {
    const StageProgram *stages[2] = {&compiled[0]->programs.stages[layer],
                                     &compiled[1]->programs.stages[layer]};
    reading.activations[layer] =
        std::max(0.0, double(stages[1]->memory.activations) -
                          double(stages[0]->memory.activations));
    if (tpAxis < 0)
      continue;
    for (int sequences : {0, 1})
      for (const ProgramNode &node : stages[sequences]->nodes)
        if (node.kind == ProgramNodeKind::Collective &&
            node.group == AxisMask(1u << tpAxis) && node.layer == int(layer) &&
            (node.phase == Phase::Forward || node.phase == Phase::Backward))
          reading.tensorParallelBytes[layer][unsigned(node.commType)] +=
              (sequences ? 1.0 : -1.0) * double(node.commBytes);
    for (double &bytes : reading.tensorParallelBytes[layer])
      bytes = std::max(0.0, bytes);
  }
  return reading;
}

/// FLOPs of the forward and backward per layer (and of the rest) of one
/// micro-batch of `programs`.
Bounds::Flops countFlops(const ProgramSet &programs, unsigned layers) {
  Bounds::Flops flops;
  flops.layers.assign(layers, 0);
  for (const StageProgram &stage : programs.stages)
    for (const ProgramNode &node : stage.nodes) {
      if (node.kind != ProgramNodeKind::Compute ||
          (node.phase != Phase::Forward && node.phase != Phase::Backward))
        continue;
      if (node.layer >= 0 && unsigned(node.layer) < layers)
        flops.layers[node.layer] += double(node.numOps);
      else
        flops.other += double(node.numOps);
    }
  return flops;
}

/// The layer groups and the weights outside the layers, from the model
/// compiled on one GPU; leaves `bounds` without them where the numbering
/// does not come out as Placement's.
void readMemory(const Module &module, const ModelShape &shape, Bounds &bounds) {
  const Graph &model = *module.getModel();
  Reader reader(module, shape);
  llvm::DenseMap<std::pair<const Op *, unsigned>, uint32_t> groupOf;
  auto getGroup = [&](const Op *repeat, unsigned bodyLayer) {
    auto [it, added] =
        groupOf.try_emplace({repeat, bodyLayer}, bounds.groups.size());
    if (added)
      bounds.groups.emplace_back();
    return it->second;
  };
  std::vector<uint32_t> layerGroup;
  const Op *lastForward = nullptr;
  llvm::SmallVector<const Op *, 2> found;
  for (const std::unique_ptr<Op> &op : model.getOps()) {
    if (op->getKind() != OpKind::Repeat || op->getForwardRepeat())
      continue;
    std::optional<Expr> count = module.bindAll(op->getAttr("count")->expr);
    std::optional<long long> value =
        count ? getIntegerValue(*count) : std::nullopt;
    const Graph &body = *op->getBody();
    unsigned period = std::max(1u, body.getNumLayers());
    if (!value || *value < 0 || uint64_t(*value) * period > 1000000)
      return;
    for (long long repetition = 0; repetition < *value; ++repetition)
      for (unsigned layer = 0; layer < period; ++layer)
        layerGroup.push_back(getGroup(op.get(), layer));
    if (*value)
      lastForward = op.get();
    // Each weight of the body, charged to the first body layer that reads
    // it.
    llvm::DenseSet<const Op *> charged;
    for (const std::unique_ptr<Op> &inner : body.getOps()) {
      if (inner->getKind() == OpKind::Repeat || inner->getBodyLayer() >= period)
        continue;
      for (const Value *operand : inner->getOperands()) {
        found.clear();
        findParams(operand, found);
        for (const Op *param : found) {
          if (param->getParent() != &body || !charged.insert(param).second)
            continue;
          if (auto tensor = reader.getTensor(*param->getResult(), false))
            bounds.groups[getGroup(op.get(), inner->getBodyLayer())].push_back(
                *tensor);
        }
      }
    }
  }
  if (layerGroup.size() != shape.layers || !lastForward) {
    bounds.groups.clear();
    return;
  }
  bounds.layerGroup = std::move(layerGroup);
  // The Adam steps of a backward repeat run on its forward repeat's layers.
  for (const std::unique_ptr<Op> &op : model.getOps()) {
    const Op *forward = op->getForwardRepeat();
    if (op->getKind() != OpKind::Repeat || !forward)
      continue;
    for (const std::unique_ptr<Op> &inner : op->getBody()->getOps()) {
      auto group = groupOf.find({forward, inner->getBodyLayer()});
      if (inner->getKind() != OpKind::Adam || group == groupOf.end())
        continue;
      if (auto tensor = reader.getTensor(*inner->getResult(), true))
        bounds.groups[group->second].push_back(*tensor);
    }
  }
  // Weights read before any repeat (the first stage), and between the last
  // forward repeat and the next repeat (the last stage).
  llvm::MapVector<const Op *, Bounds::TopWeight> top;
  enum { Before, Between, Other } window = Before;
  for (const std::unique_ptr<Op> &op : model.getOps()) {
    if (op->getKind() == OpKind::Repeat) {
      window = op.get() == lastForward ? Between : Other;
      continue;
    }
    if (window == Other || op->getPhase() == Phase::GradientSync ||
        op->getPhase() == Phase::Optimizer)
      continue;
    for (const Value *operand : op->getOperands()) {
      found.clear();
      findParams(operand, found);
      for (const Op *param : found) {
        if (param->getParent() != &model)
          continue;
        auto [it, added] = top.insert({param, Bounds::TopWeight()});
        if (added) {
          auto tensor = reader.getTensor(*param->getResult(), false);
          if (!tensor) {
            it->second.tensor.elements = 0; // Counts nothing.
          } else {
            it->second.tensor = *tensor;
          }
        }
        (window == Before ? it->second.first : it->second.last) = true;
      }
    }
  }
  for (auto &entry : top)
    if (entry.second.tensor.elements)
      bounds.topWeights.push_back(entry.second);
}

/// The product of the degrees `tensor` is split over in `plan`, and which
/// axes split it.
uint64_t getDivisor(const Bounds::Tensor &tensor, const Plan &plan,
                    unsigned &axes) {
  uint64_t divisor = 1;
  axes = 0;
  for (const Bounds::Split &split : tensor.splits) {
    bool active = llvm::all_of(split.conditions, [&](const auto &condition) {
      switch (condition.kind) {
      case Bounds::Split::Switch::WeightSharded:
        return (plan.sharding == WeightSharding::FSDP) == condition.wanted;
      case Bounds::Split::Switch::SequenceParallel:
        return plan.sequenceParallel == condition.wanted;
      case Bounds::Split::Switch::Fixed:
        return condition.wanted;
      }
      return true;
    });
    if (!active)
      continue;
    divisor *= plan.degrees[split.axis];
    axes |= 1u << split.axis;
  }
  return divisor;
}

/// The bytes StageMemory counts at least for `tensor` on a rank of `plan`.
uint64_t getTensorBytes(const Bounds::Tensor &tensor, const Plan &plan,
                        MemoryAccounting accounting) {
  unsigned axes = 0;
  uint64_t divisor = getDivisor(tensor, plan, axes);
  if (tensor.adam) {
    // A distributed optimizer slices the step over the axes its gradient
    // is reduced over: at most all those that do not split it already.
    if (plan.sharding == WeightSharding::DistributedOptimizer)
      for (unsigned index = 0; index < PlanAxes.size(); ++index)
        if (!(axes & (1u << index)))
          divisor *= plan.degrees[index];
    return 12 * (tensor.elements / divisor);
  }
  uint64_t bytes = tensor.elements * tensor.elementBytes / divisor;
  bool mainGradients =
      accounting == MemoryAccounting::Megatron && tensor.elementBytes < 4;
  return bytes + (mainGradients ? bytes / tensor.elementBytes * 4 : bytes);
}

/// The layers of each model chunk of `plan`, or nothing.
std::optional<std::vector<unsigned>> getChunkLayers(unsigned layers,
                                                    const Plan &plan) {
  std::string error;
  return splitLayers(layers, plan.getDegree("pp"), plan.virtualStages,
                     getPipelineSplit(plan, layers), error,
                     getChunkPlacement(plan.schedule));
}

} // namespace

llvm::Expected<ModelBounds>
stg::readModelBounds(const CompileOptions &base,
                     llvm::ArrayRef<std::string> recompute,
                     const ModelShape &shape) {
  ModelBounds bounds;
  bounds.layers = shape.layers;
  bounds.training = base.mode == "train";
  if (!bounds.training)
    return bounds;
  std::vector<std::string> modes{"none"};
  for (const std::string &mode : recompute)
    if (!llvm::is_contained(modes, mode))
      modes.push_back(mode);
  for (const std::string &mode : modes) {
    std::optional<CompiledModel> compiled[2];
    std::string errors;
    if (!compileOneAndTwoSequences(getOneGPUOptions(base, mode), compiled,
                                   errors))
      return llvm::createStringError(std::errc::invalid_argument, "%s",
                                     errors.c_str());
    if (compiled[0]->programs.numLayers != shape.layers)
      continue; // Not numbered as the search's plans: no step bound.
    // What a micro-batch of one more sequence adds: work that does not grow
    // with the batch (a gradient accumulated once per micro-batch) is not
    // counted per sequence.
    Bounds::Flops one = countFlops(compiled[0]->programs, shape.layers);
    Bounds::Flops two = countFlops(compiled[1]->programs, shape.layers);
    Bounds::Flops &perSequence = bounds.flops[mode];
    perSequence.layers.resize(shape.layers);
    for (unsigned layer = 0; layer < shape.layers; ++layer)
      perSequence.layers[layer] =
          std::max(0.0, two.layers[layer] - one.layers[layer]);
    perSequence.other = std::max(0.0, two.other - one.other);
    // Likewise the activations a sequence adds (the first stage's only:
    // one GPU holds one stage).
    bounds.activationsPerSequence[mode] = std::max(
        0.0, double(compiled[1]->programs.stages[0].memory.activations) -
                 double(compiled[0]->programs.stages[0].memory.activations));
    std::optional<LayerReading> layers = readLayers(base, mode, shape.layers);
    if (layers)
      bounds.layerActivationsPerSequence[mode] = layers->activations;
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
      std::optional<LayerReading> halves;
      if (!layers || (experts && !shape.splits[4]) || // ep
          !(halves = readLayers(base, mode, shape.layers, 2, setting,
                                experts ? 2 : 1)))
        continue;
      bounds.tensorParallelBytes[{mode, sequenceParallel, experts}] =
          halves->tensorParallelBytes;
      if (sequenceParallel || experts || !shape.hasSequenceParallel)
        continue;
      // Without sequence parallelism, a layer's activations are a part tp
      // splits and a part every tp rank holds whole (a + b / tp): tp 2
      // gives a = 2 x (what tp 2 saves) - (what one GPU saves).
      std::vector<double> &whole = bounds.layerReplicatedPerSequence[mode];
      whole.resize(shape.layers);
      for (unsigned layer = 0; layer < shape.layers; ++layer)
        whole[layer] = std::clamp(2 * halves->activations[layer] -
                                      layers->activations[layer],
                                  0.0, layers->activations[layer]);
    }
    if (mode == "none") {
      const Module &module = *compiled[0]->module;
      bounds.ownPrecision = module.lookupOption("precision") != nullptr;
      readMemory(module, shape, bounds);
    }
  }
  return bounds;
}

uint64_t stg::getMemoryLowerBound(const ModelBounds &bounds, const Plan &plan,
                                  MemoryAccounting accounting) {
  if (!bounds.training || bounds.layerGroup.empty())
    return 0;
  std::optional<std::vector<unsigned>> chunks =
      getChunkLayers(bounds.layers, plan);
  if (!chunks)
    return 0;
  std::vector<uint64_t> groupBytes(bounds.groups.size());
  for (size_t group = 0; group < groupBytes.size(); ++group)
    for (const ModelBounds::Tensor &tensor : bounds.groups[group])
      groupBytes[group] += getTensorBytes(tensor, plan, accounting);
  unsigned stages = plan.getDegree("pp");
  std::vector<uint64_t> stageBytes(stages);
  forEachStageLayer(*chunks, plan, [&](unsigned stage, unsigned layer) {
    stageBytes[stage] += groupBytes[bounds.layerGroup[layer]];
  });
  for (const ModelBounds::TopWeight &weight : bounds.topWeights) {
    uint64_t bytes = getTensorBytes(weight.tensor, plan, accounting);
    if (weight.first)
      stageBytes.front() += bytes;
    if (weight.last && !(weight.first && stages == 1))
      stageBytes.back() += bytes;
  }
  // Activations, a micro-batch's over tp x cp at best (ep and dp move
  // tokens, not their count). A low-precision recipe may save them smaller
  // than the model's precision the numbers were read in: it counts the
  // weights alone. A tenth is left for the values a pipeline split saves
  // differently.
  auto activations = bounds.activationsPerSequence.find(plan.recompute);
  if (activations == bounds.activationsPerSequence.end() ||
      isLowPrecision(plan.precision))
    return *std::max_element(stageBytes.begin(), stageBytes.end());
  double perSequence = 0.9 * plan.microBatchSize /
                       (double(plan.getDegree("tp")) * plan.getDegree("cp"));
  // The busiest rank holds at least the stages' average, and every stage
  // at least one micro-batch's activations of its layers: together, at
  // least a micro-batch's activations of the whole model.
  double average = activations->second * perSequence;
  for (uint64_t bytes : stageBytes)
    average += double(bytes);
  average /= stages;
  // A stage holds its schedule's micro-batches in flight, each with every
  // layer's activations.
  auto layerActivations =
      bounds.layerActivationsPerSequence.find(plan.recompute);
  auto replicated = bounds.layerReplicatedPerSequence.find(plan.recompute);
  bool replicates = !plan.sequenceParallel && plan.getDegree("tp") > 1 &&
                    replicated != bounds.layerReplicatedPerSequence.end();
  if (layerActivations != bounds.layerActivationsPerSequence.end()) {
    std::vector<double> stageActivations(stages);
    forEachStageLayer(*chunks, plan, [&](unsigned stage, unsigned layer) {
      double bytes = layerActivations->second[layer] * perSequence;
      if (replicates) // What tp does not split, over cp alone.
        bytes += replicated->second[layer] * perSequence *
                 (plan.getDegree("tp") - 1);
      stageActivations[stage] += bytes;
    });
    for (unsigned stage = 0; stage < stages; ++stage)
      stageBytes[stage] += uint64_t(
          stageActivations[stage] *
          getMaxInFlightMicrobatches(plan.schedule, stage, stages,
                                     plan.microbatches, plan.virtualStages));
  }
  uint64_t busiest = *std::max_element(stageBytes.begin(), stageBytes.end());
  return std::max<uint64_t>(busiest, uint64_t(average));
}

/// What a stage of `plan` spends at least on its collectives over tp: a
/// rank's forward and backward collectives run one at a time on their
/// stream, and each takes at least getCollectiveMicros of its bytes (a sum
/// of bytes costs no more than its parts: the latency counts once). Plans
/// with ep > 1 count those read at ep 2; plans whose tp collectives differ
/// from those read count nothing: a low-precision recipe may gather in FP8,
/// Ulysses trades them for all-to-alls.
static double getTensorParallelBound(const Bounds &bounds, const Plan &plan,
                                     const SystemSpec &system,
                                     const std::vector<unsigned> &chunks) {
  unsigned tp = plan.getDegree("tp");
  auto read = bounds.tensorParallelBytes.find(
      {plan.recompute, plan.sequenceParallel, plan.getDegree("ep") > 1});
  if (tp < 2 || isLowPrecision(plan.precision) ||
      plan.cpExchange == CpExchange::AllToAll ||
      read == bounds.tensorParallelBytes.end())
    return 0;
  // The plan's mesh, as PlanEvaluator lays its ranks out.
  std::vector<Mesh::AxisInfo> axes;
  llvm::SmallVector<llvm::StringRef, 8> names;
  std::string order = plan.getRankOrder();
  llvm::StringRef(order).split(names, ',');
  for (llvm::StringRef name : names)
    axes.push_back({name.str(), plan.getDegree(name)});
  Mesh mesh(std::move(axes));
  int tpAxis = mesh.findAxis("tp"), ppAxis = mesh.findAxis("pp");
  if (tpAxis < 0 || ppAxis < 0)
    return 0;
  std::vector<Bounds::CollectiveBytes> stageBytes(plan.getDegree("pp"));
  forEachStageLayer(chunks, plan, [&](unsigned stage, unsigned layer) {
    for (size_t kind = 0; kind < stageBytes[stage].size(); ++kind)
      stageBytes[stage][kind] += read->second[layer][kind];
  });
  // Read at tp 2: a gather's input is a rank's shard, 2 / tp of it here.
  double perSequence = double(plan.microBatchSize) / plan.getDegree("cp");
  double busiest = 0;
  for (unsigned stage = 0; stage < stageBytes.size(); ++stage) {
    unsigned rank = mesh.withCoordinate(0, ppAxis, stage);
    GroupSpan span =
        getGroupSpan(mesh, system, rank, AxisMask(1u << unsigned(tpAxis)));
    double micros = 0;
    for (size_t kind = 0; kind < stageBytes[stage].size(); ++kind) {
      double bytes = stageBytes[stage][kind] * perSequence;
      if (CollectiveKind(kind) == CollectiveKind::AllGather)
        bytes *= 2.0 / tp;
      if (bytes > 0)
        micros +=
            getCollectiveMicros(CollectiveKind(kind), bytes, span, system);
    }
    busiest = std::max(busiest, micros * plan.microbatches);
  }
  return busiest;
}

double stg::getStepLowerBound(const ModelBounds &bounds, const Plan &plan,
                              const SystemSpec &system) {
  const DeviceSpec &device = system.device;
  auto flops = bounds.flops.find(plan.recompute);
  auto plain = bounds.flops.find("none");
  if (!bounds.training || flops == bounds.flops.end() ||
      plain == bounds.flops.end())
    return 0;
  std::optional<std::vector<unsigned>> chunks =
      getChunkLayers(bounds.layers, plan);
  if (!chunks)
    return 0;
  // The fastest any node can run: the highest peak among the precisions
  // its nodes may take, at the highest efficiency of any kind of kernel.
  double peak = device.peakFlops;
  for (unsigned index = 0; index < NumPrecisions; ++index) {
    auto precision = Precision(index);
    bool possible = bounds.ownPrecision || precision == plan.precision ||
                    !isLowPrecision(precision);
    if (possible)
      peak = std::max(peak, device.getPeakFlops(precision));
  }
  double efficiency =
      std::max({device.computeEfficiency, device.attentionEfficiency,
                device.lowPrecisionEfficiency});
  double rate = peak * efficiency;
  if (!(rate > 0))
    return 0;
  // Microseconds per FLOP of a sequence on one rank: its micro-batch's
  // work is split over tp x cp ranks at best.
  double scale = double(plan.microBatchSize) /
                 (double(plan.getDegree("tp")) * plan.getDegree("cp")) / rate *
                 1e6;
  unsigned stages = plan.getDegree("pp");
  std::vector<double> stageMicros(stages), chainMicros(chunks->size());
  double layerFlops = 0;
  unsigned layer = 0;
  ChunkPlacement placement = getChunkPlacement(plan.schedule);
  for (unsigned chunk = 0; chunk < chunks->size(); ++chunk)
    for (unsigned end = layer + (*chunks)[chunk]; layer < end; ++layer) {
      double all = flops->second.layers[layer];
      layerFlops += all;
      stageMicros[getChunkStage(placement, chunk, stages)] += all * scale;
      // Recomputation may run before the gradient arrives: the chain
      // counts the forward and backward alone.
      chainMicros[chunk] += std::min(all, plain->second.layers[layer]) * scale;
    }
  double microbatches = plan.microbatches, bound = 0, before = 0;
  for (unsigned stage = 0; stage < stages; ++stage) {
    // The first micro-batch's forward through the chunks before the
    // stage's first, then its work, then the last one's backward back
    // through them. Zero bubble runs weight gradients meanwhile: its
    // stages count their work alone.
    bound = std::max(bound, microbatches * stageMicros[stage] + before);
    if (plan.schedule == PipelineSchedule::OneFOneB)
      before += chainMicros[stage];
  }
  // The busiest rank does at least the average share of all the work.
  double average =
      microbatches * (layerFlops + flops->second.other) * scale / stages;
  double communication = getTensorParallelBound(bounds, plan, system, *chunks);
  // A margin for the rounding of the sums, far below the microsecond the
  // estimate counts in.
  return std::max({bound, average, communication}) * (1 - 1e-9);
}
