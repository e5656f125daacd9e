//===- WeightBounds.cpp - The weights the memory bound reads --------------===//
//
// The memory bound's weights follow StageMemory.cpp's accounting and
// Placement's numbering (forward repeats in program order, a backward
// repeat on its forward repeat's layers; the work before the first repeat
// on the first stage, after the last layer on the last), counting only
// what is certain: a weight is charged to the one body layer whose op reads
// it first, an Adam step to its own body layer, a weight outside the layers
// only for the reads before and after all of them, and a weight whose
// extents depend on the plan not at all.
//
//===----------------------------------------------------------------------===//

#include "WeightBounds.h"

#include "stg/IR/Graph.h"
#include "stg/IR/Module.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"

#include <algorithm>

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
  /// The axes of `step`'s gradient all-reduce, each as a split, or nothing
  /// where its gradient comes otherwise or an axis is not the search's.
  std::optional<llvm::SmallVector<Bounds::Split, 4>>
  getReducedAxes(const Op &step) const;

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

std::optional<llvm::SmallVector<Bounds::Split, 4>>
Reader::getReducedAxes(const Op &step) const {
  const Op *reduce = step.getOperands().size() > 1
                         ? step.getOperand(1)->getDefiningOp()
                         : nullptr;
  if (!reduce || reduce->getKind() != OpKind::AllReduce)
    return std::nullopt;
  llvm::SmallVector<Bounds::Split, 4> splits;
  for (const Axis *axis : reduce->getAttr("axes")->axes) {
    bool never = false;
    std::optional<Bounds::Split> split = getSplit(axis, never);
    if (split)
      splits.push_back(*split);
    else if (!never)
      return std::nullopt;
  }
  return splits;
}

} // namespace

void stg::readWeightBounds(const Module &module, const ModelShape &shape,
                           ModelBounds &bounds) {
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
      if (auto tensor = reader.getTensor(*inner->getResult(), true)) {
        tensor->reducedOver = reader.getReducedAxes(*inner);
        bounds.groups[group->second].push_back(*tensor);
      }
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
