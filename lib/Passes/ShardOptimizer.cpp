//===- ShardOptimizer.cpp - ZeRO-1: a distributed optimizer step ----------===//
//
// Megatron-LM's distributed optimizer (ZeRO stage 1): instead of
// all-reducing a weight's gradient over its data-parallel axes and stepping
// the whole weight on every rank, each rank reduce-scatters the gradient,
// steps only its shard (so the fp32 master weights and the moments are
// divided by the data-parallel degree), and the updated shards are
// all-gathered back into the weight. The communication volume is the same as
// the all-reduce's; the optimizer state and work shrink.
//
// Runs after `optimizer`: each Adam step whose gradient comes from an
// all-reduce (the gradient synchronization) is rewritten to
//
//   %w.grad.reducescatter = reducescatter[dim=k, axes=A](%w.grad)
//   %w.shard = shard[dim=k, axes=A](%w)          // a view of the local part
//   %w.next.shard = adam(%w.shard, %w.grad.reducescatter)
//   %w.next = allgather[dim=k, axes=A](%w.next.shard)
//
// splitting the weight's largest dimension k (the first of equals; the
// first where the sizes are not bound) over the all-reduce's axes A (on
// top of any tensor-parallel split). Megatron-LM shards a flat buffer of
// the elements; the largest dimension stands for it, where dimension 0
// could be smaller than the ranks (an MoE layer's one local expert over
// dp = 2 would not shard at all). Steps whose gradient is already sharded
// (FSDP) or never reduced (one data-parallel rank) are left alone.
//
// When the bound numbers do not divide (a dimension of 4096 over 48
// data-parallel ranks), the shards pad it up to the next multiple, as
// Megatron-LM pads its gradient buffer: every rank holds ceil(4096/48) = 86
// rows, the reduce-scatter and all-gather move the padded buffer, and the
// optimizer state counts the padding. Dims without values stay symbolic and
// unpadded. The plan search runs the pass once for every plan's degrees
// (createShardOptimizerPassForAnyDegrees): the padding is then an
// expression of the degrees, `ceil(4096 / dp) * dp`, which each plan binds.
//
//===----------------------------------------------------------------------===//

#include "stg/IR/DistributionRules.h"
#include "stg/Passes/Passes.h"

using namespace stg;

#define DEBUG_TYPE "shard-optimizer"

namespace {

class ShardOptimizerPass : public Pass {
public:
  explicit ShardOptimizerPass(bool forAnyDegrees)
      : forAnyDegrees(forAnyDegrees) {}
  llvm::StringRef getName() const override { return DEBUG_TYPE; }
  LogicalResult run(Module &module, DiagnosticEngine &diags) override;

private:
  void shard(Op &step, Op &allReduce);

  Module *module = nullptr;
  bool forAnyDegrees;
};

} // namespace

/// The dimension of `type` the step shards: its largest by the bound
/// sizes, the first of equals; 0 where a size is not bound.
static unsigned getShardDim(const Module &module, const TensorType &type) {
  unsigned best = 0;
  long long largest = 0;
  for (unsigned d = 0; d < type.getRank(); ++d) {
    std::optional<Expr> extent = module.bindAll(type.getDim(d));
    std::optional<long long> size =
        extent ? getIntegerValue(*extent) : std::nullopt;
    if (!size)
      return 0;
    if (*size > largest) {
      largest = *size;
      best = d;
    }
  }
  return best;
}

/// `type` with dimension `dim` also split over `axes`, and padded to
/// `extent` if given.
static TensorType splitDim(const TensorType &type, unsigned dim,
                           llvm::ArrayRef<const Axis *> axes,
                           std::optional<Expr> extent = std::nullopt) {
  Distribution layout(type.getRank());
  const Distribution &from = type.getDistribution();
  for (unsigned d = 0; d < type.getRank(); ++d)
    for (const Axis *axis : from.getPartition(d))
      layout.addPartition(d, axis);
  for (const Axis *axis : axes)
    layout.addPartition(dim, axis);
  for (const Axis *axis : from.getPartialSum())
    layout.addPartialSum(axis);
  llvm::SmallVector<Expr, 4> shape(type.getShape().begin(),
                                   type.getShape().end());
  if (extent)
    shape[dim] = *extent;
  return TensorType(type.getElementType(), std::move(shape), layout);
}

/// Dimension `dim` of `type` rounded up to a multiple of its existing split
/// times the degrees of `axes`, when the numbers are bound and do not
/// divide; nothing when they divide or are symbolic. For any degrees: the
/// rounding as an expression of theirs, when the rows are bound.
static std::optional<Expr> getPaddedDim(const Module &module,
                                        const TensorType &type, unsigned dim,
                                        llvm::ArrayRef<const Axis *> axes,
                                        bool forAnyDegrees) {
  std::optional<Expr> extent = module.bindAll(type.getDim(dim));
  std::optional<long long> rows = extent ? getIntegerValue(*extent)
                                         : std::nullopt;
  long long degree = 1;
  Expr degrees = 1;
  auto multiply = [&](const Axis *axis) {
    if (const Axis *ranks = axis->resolve()) {
      degree *= ranks->size.value_or(1);
      degrees *= ranks->degree;
    }
  };
  llvm::for_each(type.getDistribution().getPartition(dim), multiply);
  llvm::for_each(axes, multiply);
  if (!rows || *rows <= 0)
    return std::nullopt;
  if (forAnyDegrees)
    return *makeFunction("ceil", {Expr(*rows) / degrees}) * degrees;
  if (degree <= 1 || *rows % degree == 0)
    return std::nullopt;
  return Expr((*rows + degree - 1) / degree * degree);
}

void ShardOptimizerPass::shard(Op &step, Op &allReduce) {
  Graph &graph = *step.getParent();
  SourceLoc loc = step.getLoc();
  llvm::SmallVector<const Axis *, 2> axes(allReduce.getAttr("axes")->axes);
  Value *weight = step.getOperand(0);
  Value *partial = allReduce.getOperand(0);
  unsigned dim = getShardDim(*module, weight->getType());
  auto setCollectiveAttrs = [&](Op &op, const TensorType &input) {
    op.setAttr("dim", Attribute::getExpr(AttrKind::Int, dim));
    op.setAttr("axes", Attribute::getAxes(axes));
    op.setAttr("bytes", Attribute::getExpr(AttrKind::Expr, input.getLocalBytes()));
  };

  // The gradient: reduce-scattered where it was all-reduced, from a buffer
  // padded to split evenly.
  std::optional<Expr> padded =
      getPaddedDim(*module, weight->getType(), dim, axes, forAnyDegrees);
  TensorType scattered = partial->getType();
  if (padded)
    scattered = splitDim(scattered, dim, {}, padded);
  Op *scatter = graph.createOpBefore(&allReduce, OpKind::ReduceScatter,
                                     allReduce.getLoc());
  scatter->setPhase(allReduce.getPhase());
  scatter->addOperand(partial);
  setCollectiveAttrs(*scatter, scattered);
  Value *gradShard = graph.createResult(
      scatter, module->makeUniqueName(partial->getName().str() +
                                      ".reducescatter"));
  gradShard->setType(
      splitDim(allReduce.getResult()->getType(), dim, axes, padded));

  // The step on the local shard, then the updated shards gathered.
  Op *view = graph.createOpBefore(&step, OpKind::Shard, loc);
  view->setPhase(Phase::Optimizer);
  view->addOperand(weight);
  view->setAttr("dim", Attribute::getExpr(AttrKind::Int, dim));
  view->setAttr("axes", Attribute::getAxes(axes));
  Value *weightShard = graph.createResult(
      view, module->makeUniqueName(weight->getName().str() + ".shard"));
  weightShard->setType(splitDim(weight->getType(), dim, axes, padded));

  Op *shardStep = graph.createOpBefore(&step, OpKind::Adam, loc);
  shardStep->setPhase(Phase::Optimizer);
  shardStep->addOperand(weightShard);
  shardStep->addOperand(gradShard);
  Value *updatedShard = graph.createResult(
      shardStep,
      module->makeUniqueName(step.getResult()->getName().str() + ".shard"));
  updatedShard->setType(weightShard->getType());

  Op *gather = graph.createOpBefore(&step, OpKind::AllGather, loc);
  gather->setPhase(Phase::Optimizer);
  gather->addOperand(updatedShard);
  setCollectiveAttrs(*gather, updatedShard->getType());
  Value *updated = graph.createResult(
      gather, module->makeUniqueName(step.getResult()->getName().str() +
                                     ".allgather"));
  updated->setType(step.getResult()->getType());

  module->replaceUsesOf(step.getResult(), updated);
  module->replaceUsesOf(allReduce.getResult(), gradShard);
  graph.eraseOp(&step);
  allReduce.getParent()->eraseOp(&allReduce);
}

LogicalResult ShardOptimizerPass::run(Module &m, DiagnosticEngine &diags) {
  module = &m;
  Graph *model = m.getModel();
  if (!model)
    return success();
  llvm::SmallVector<std::pair<Op *, Op *>, 16> steps;
  model->walk([&](Op &op) {
    if (op.getKind() != OpKind::Adam)
      return;
    Op *reduce = op.getOperand(1)->getDefiningOp();
    if (reduce && reduce->getKind() == OpKind::AllReduce &&
        reduce->getPhase() == Phase::GradientSync)
      steps.push_back({&op, reduce});
  });
  bool sawAdam = false;
  model->walk([&](Op &op) { sawAdam |= op.getKind() == OpKind::Adam; });
  if (!sawAdam) {
    diags.error(m.getModelLoc(), "'shard-optimizer' needs optimizer steps: "
                                 "run it after 'optimizer'");
    return failure();
  }
  for (auto &entry : steps) {
    // Named, not a structured binding: the lambda captures them.
    Op *step = entry.first, *reduce = entry.second;
    // Only the step reads the reduced gradient; it can be a shard.
    bool onlyUse = true;
    model->walk([&](Op &op) {
      if (&op != step && llvm::is_contained(op.getOperands(),
                                            reduce->getResult()))
        onlyUse = false;
    });
    if (onlyUse)
      shard(*step, *reduce);
  }
  return success();
}

std::unique_ptr<Pass> stg::createShardOptimizerPass() {
  return std::make_unique<ShardOptimizerPass>(false);
}

std::unique_ptr<Pass> stg::createShardOptimizerPassForAnyDegrees() {
  return std::make_unique<ShardOptimizerPass>(true);
}
