//===- ParamGatherOverlap.cpp - Weight gathers beside the next forward ----===//
//
// Megatron's distributed optimizer steps each rank's shard of the weights
// and all-gathers the updated shards back (shard-optimizer). With
// --overlap-param-gather, as NVIDIA's recipes run it, the gathers are not
// waited for after the optimizer: each bucket's is issued before the next
// step's forward and the forward of a layer waits only for its own
// weights', so the gathers run beside the forward of the layers before.
//
// A step's program is one iteration in its steady state, so the gathers of
// the updated weights move to the start of micro-batch 0's forward of each
// model chunk: they depend on nothing (the optimizer of the step before
// has finished), run on the gradient stream in their group's order, and
// the first forward op that reads a weight waits for its gather. They come
// before the step's barrier, as its preamble: a folded set's other
// micro-batches replay micro-batch 0's forward without them
// (ProgramSources::ScheduleSource::preamble), since only the first forward
// after the optimizer gathers. Without the overlap the gathers stay in the
// optimizer's step, after every shard has stepped, as Megatron issues them
// once the optimizer's step is done.
//
//===----------------------------------------------------------------------===//

#include "StageBuilder.h"

#include <algorithm>

using namespace stg;

/// The weight whose updated shard `gather` collects: shard-optimizer's
/// allgather(adam(shard(w), ...)), or null.
static const Value *getRefilledWeight(const Op &gather) {
  if (gather.getKind() != OpKind::AllGather ||
      gather.getPhase() != Phase::Optimizer)
    return nullptr;
  const Op *step = gather.getOperand(0)->getDefiningOp();
  if (!step || step->getKind() != OpKind::Adam)
    return nullptr;
  const Op *view = step->getOperand(0)->getDefiningOp();
  if (!view || view->getKind() != OpKind::Shard)
    return nullptr;
  const Value *weight = view->getOperand(0);
  return weight->isParam() ? weight : nullptr;
}

/// `value` past the views of it that emit no node (layout changes of a
/// weight), as `placement` sees them.
static const Value *getViewedValue(const Value *value,
                                   const Placement &placement) {
  while (const Op *def = value->getDefiningOp()) {
    if (def->getKind() == OpKind::Param || def->getOperands().empty() ||
        !placement.isFloating(def))
      break;
    value = def->getOperand(0);
  }
  return value;
}

void StageBuilder::findParamGathers() {
  if (!shared.training)
    return;
  forEachInstanceOnStage(shared.module, placement, stage,
                         [&](const Op &op, int) {
                           if (const Value *weight = getRefilledWeight(op)) {
                             paramGathers[weight] = &op;
                             paramGatherOps.insert(&op);
                           }
                         });
  // A top-level weight's gather goes before the layers' if the forward
  // reads it before them (the embedding), else after (the LM head).
  bool pastLayers = false;
  for (const std::unique_ptr<Op> &op : shared.module.getModel()->getOps()) {
    pastLayers |= op->getKind() == OpKind::Repeat;
    if (op->getPhase() != Phase::Forward)
      continue;
    for (const Value *operand : op->getOperands()) {
      const Value *weight = getViewedValue(operand, placement);
      if (paramGathers.count(weight))
        topLevelGatherAfterLayers.try_emplace(weight, pastLayers);
    }
  }
}

AxisMask StageBuilder::getGroupMask(const Op &op) const {
  AxisMask mask = 0;
  for (const Axis *axis : op.getAttr("axes")->axes) {
    const Axis *base = axis->resolve();
    int index = base ? shared.mesh.findAxis(base->name) : -1;
    if (index >= 0 && shared.mesh.getDegree(index) > 1)
      mask |= 1u << index;
  }
  return mask;
}

bool StageBuilder::isOverExpertAxis(const Op &op) const {
  return llvm::any_of(op.getAttr("axes")->axes, [&](const Axis *axis) {
    const Axis *base = axis->resolve();
    return base && base->name == shared.options.expertAxis;
  });
}

void StageBuilder::buildParamGathers(unsigned chunk) {
  // In the order the forward first reads the weights: their group runs
  // them one after another.
  struct Gather {
    int64_t order;
    const Op *op;
    int layer;
  };
  std::vector<Gather> gathers;
  forEachInstanceOnStage(
      shared.module, placement, stage, [&](const Op &op, int layer) {
        if (!paramGatherOps.count(&op) ||
            placement.getChunk(&op, layer) != chunk)
          return;
        int64_t order = layer;
        if (layer < 0)
          order = topLevelGatherAfterLayers.lookup(getRefilledWeight(op))
                      ? INT64_MAX
                      : -1;
        gathers.push_back({order, &op, layer});
      });
  std::stable_sort(gathers.begin(), gathers.end(),
                   [](const Gather &a, const Gather &b) {
                     return a.order < b.order;
                   });
  for (const Gather &gather : gathers) {
    const Op &op = *gather.op;
    int layer = gather.layer;
    if (failed)
      return;
    AxisMask mask = getGroupMask(op);
    if (!mask)
      continue;
    uint32_t query = 0;
    const OpNumbers *numbers = getNumbers(op, query);
    if (!numbers)
      return;
    ProgramNode node;
    node.kind = ProgramNodeKind::Collective;
    node.name = getInstanceName(op, op.getResult()->getName(), layer, -1);
    node.phase = op.getPhase();
    node.layer = getModelLayer(op, layer);
    node.commType = CollectiveKind::AllGather;
    node.commBytes = numbers->commBytes;
    node.group = mask;
    uint32_t id = addNode(std::move(node), &op, query);
    stepParamGathers[{getRefilledWeight(op), layer}] = id;
  }
}

void StageBuilder::addParamGatherDeps(const Op &op, int layer,
                                      llvm::SmallVectorImpl<uint32_t> &deps) {
  for (const Value *operand : op.getOperands()) {
    // Through the views of a weight (a layout change) to the weight.
    ValueInstance source = placement.resolve(operand, layer);
    const Value *value = getViewedValue(source.value, placement);
    auto gather = stepParamGathers.find({value, source.layer});
    if (gather != stepParamGathers.end() &&
        !llvm::is_contained(deps, gather->second))
      deps.push_back(gather->second);
  }
}
