//===- MatchCollectives.cpp - Layout changes to collectives ---------------===//
//
// Lowers every `layout` op into the communication that turns its operand's
// layout into its result's (STAGE section IV-D2, Table IV). Per mesh axis,
// the producer's layout is "pulled" (Duplicated: nothing, Partition: gather,
// PartialSum: reduce) and the consumer's "pushed" (Duplicated: nothing,
// Partition: scatter), fused into the collective that does both:
//
//   PartialSum   -> Duplicated     AllReduce
//   PartialSum   -> Partition(d)   ReduceScatter(d)
//   Partition(d) -> Duplicated     AllGather(d)
//   Partition(d) -> Partition(e)   AllToAll(d -> e)
//   Duplicated   -> Partition(d)   a local slice (`shard`), no communication
//   not partial  -> PartialSum     impossible: a located error
//
// Axes that need the same collective (on the same dimension) are merged into
// one collective over their product group, e.g. an AllReduce over (dp, ep).
// When several kinds are needed they run in the order that moves the fewest
// bytes: local slices, reduce-scatters, all-reduces, all-to-alls, then
// all-gathers (the composites of Table IV, such as ReduceScatter then
// AllToAll, or AllReduce then AllGather). A layout op that changes nothing is
// removed. Every collective, inserted or written by the user, records the
// bytes each rank contributes: its input buffer, as nccl-tests count it; an
// all-gather that only low-precision GEMMs read moves their format.
//
//===----------------------------------------------------------------------===//

#include "stg/IR/Cost.h"
#include "stg/IR/DistributionRules.h"
#include "stg/IR/GradOp.h"
#include "stg/Passes/Passes.h"

#include "llvm/ADT/STLExtras.h"

using namespace stg;

#define DEBUG_TYPE "match-collectives"

namespace {

/// One collective (or local slice) of a lowering, before it is built.
struct Step {
  Step(OpKind kind, unsigned dim = 0, unsigned toDim = 0)
      : kind(kind), dim(dim), toDim(toDim) {}
  OpKind kind;
  unsigned dim = 0;   ///< AllGather/ReduceScatter/Shard dim; AllToAll source.
  unsigned toDim = 0; ///< AllToAll destination.
  llvm::SmallVector<const Axis *, 2> axes;
};

class MatchCollectivesPass : public Pass {
public:
  llvm::StringRef getName() const override { return DEBUG_TYPE; }
  LogicalResult run(Module &module, DiagnosticEngine &diags) override;

private:
  void lower(Op &layout);
  /// The steps from `from` to `to`, in execution order; false on an
  /// impossible change (reported).
  bool plan(const Distribution &from, const Distribution &to, const Op &layout,
            llvm::SmallVectorImpl<Step> &steps);
  static Distribution apply(const Distribution &dist, const Step &step);

  Module *module = nullptr;
  DiagnosticEngine *diags = nullptr;
};

const char *describeKind(const Distribution &dist, const Axis *axis) {
  switch (dist.on(axis).kind) {
  case Distribution::Kind::Duplicated:
    return "Duplicated";
  case Distribution::Kind::Partition:
    return "partitioned";
  case Distribution::Kind::PartialSum:
    return "PartialSum";
  }
  llvm_unreachable("unknown distribution kind");
}

/// The precision every user of a gathered value reads it in, if they are
/// all GEMMs of one low precision.
std::optional<Precision>
getGatheredPrecision(llvm::ArrayRef<const Op *> users) {
  std::optional<Precision> common;
  for (const Op *user : users) {
    std::optional<Precision> precision;
    if (user->getKind() == OpKind::Einsum)
      precision = getLowPrecision(*user);
    if (!precision || (common && *common != *precision))
      return std::nullopt;
    common = precision;
  }
  return common;
}

} // namespace

LogicalResult MatchCollectivesPass::run(Module &m, DiagnosticEngine &d) {
  module = &m;
  diags = &d;
  Graph *model = m.getModel();
  if (!model)
    return success();
  unsigned errorsBefore = d.getNumErrors();
  std::vector<Op *> layouts;
  model->walk([&](Op &op) {
    if (op.getKind() == OpKind::Layout)
      layouts.push_back(&op);
  });
  for (Op *layout : layouts)
    lower(*layout);
  // A collective whose axes all have degree 1 (an alias that is off) moves
  // nothing: drop it.
  std::vector<Op *> idle;
  model->walk([&](Op &op) {
    if (op.getInfo().has(Collective) &&
        llvm::none_of(op.getAttr("axes")->axes,
                      [](const Axis *axis) { return axis->resolve(); }))
      idle.push_back(&op);
  });
  // The gradient of a layout change or a collective is the conjugate
  // collective the layout op before it became; the grad op itself is then
  // the identity.
  model->walk([&](Op &op) {
    if (op.getKind() != OpKind::Grad || op.getResults().size() != 1)
      return;
    OpKind of = getGradForwardKind(op);
    if (of == OpKind::Layout || of == OpKind::Shard ||
        getOpInfo(of).has(Collective))
      idle.push_back(&op);
  });
  for (Op *op : idle) {
    module->replaceUsesOf(op->getResult(), op->getOperand(0), op);
    op->getParent()->eraseOp(op);
  }
  // Record every collective's per-rank bytes: its input buffer. A gather
  // that only low-precision GEMMs read moves their quantized copy (the
  // operand is cast before it is gathered, as Transformer Engine does with
  // sequence parallelism).
  Graph::Users users = model->collectUsers();
  model->walk([&](Op &op) {
    if (!op.getInfo().has(Collective))
      return;
    const TensorType &input = op.getOperand(0)->getType();
    std::optional<Precision> precision;
    if (op.getKind() == OpKind::AllGather)
      precision = getGatheredPrecision(users.lookup(op.getResult()));
    if (!precision) {
      op.setAttr("bytes",
                 Attribute::getExpr(AttrKind::Expr, input.getLocalBytes()));
      return;
    }
    op.setAttr("precision", Attribute::getText(
                                AttrKind::Ident,
                                getPrecisionName(*precision).str()));
    op.setAttr("bytes", Attribute::getExpr(
                            AttrKind::Expr,
                            input.getLocalNumElements() *
                                getExactPrecisionBytes(*precision)));
  });
  return success(d.getNumErrors() == errorsBefore);
}

bool MatchCollectivesPass::plan(const Distribution &from,
                                const Distribution &to, const Op &layout,
                                llvm::SmallVectorImpl<Step> &steps) {
  llvm::SmallVector<Step, 4> shards, reduceScatters, allToAlls, allGathers;
  Step allReduce(OpKind::AllReduce);
  auto addTo = [](llvm::SmallVectorImpl<Step> &group, Step step,
                  const Axis *axis) {
    for (Step &existing : group)
      if (existing.dim == step.dim && existing.toDim == step.toDim) {
        existing.axes.push_back(axis);
        return;
      }
    step.axes.push_back(axis);
    group.push_back(step);
  };
  using Kind = Distribution::Kind;
  for (const auto &axis : module->getAxes()) {
    if (axis->resolve() != axis.get())
      continue; // Aliases are resolved to the axis whose ranks they use.
    auto src = from.on(axis.get()), dst = to.on(axis.get());
    if (src.kind == dst.kind && (src.kind != Kind::Partition || src.dim == dst.dim))
      continue;
    if (dst.kind == Kind::PartialSum) {
      diags->error(layout.getLoc(),
                   "'%" + layout.getOperand(0)->getName() + "' is " +
                       describeKind(from, axis.get()) + " on " + axis->name +
                       " but a PartialSum over " + axis->name +
                       " is needed here; communication cannot produce one");
      return false;
    }
    if (src.kind == Kind::PartialSum && dst.kind == Kind::Duplicated)
      allReduce.axes.push_back(axis.get());
    else if (src.kind == Kind::PartialSum)
      addTo(reduceScatters, Step(OpKind::ReduceScatter, dst.dim), axis.get());
    else if (src.kind == Kind::Duplicated)
      addTo(shards, Step(OpKind::Shard, dst.dim), axis.get());
    else if (dst.kind == Kind::Duplicated)
      addTo(allGathers, Step(OpKind::AllGather, src.dim), axis.get());
    else
      addTo(allToAlls, Step(OpKind::AllToAll, src.dim, dst.dim), axis.get());
  }
  steps.append(shards.begin(), shards.end());
  steps.append(reduceScatters.begin(), reduceScatters.end());
  if (!allReduce.axes.empty())
    steps.push_back(allReduce);
  steps.append(allToAlls.begin(), allToAlls.end());
  steps.append(allGathers.begin(), allGathers.end());
  return true;
}

Distribution MatchCollectivesPass::apply(const Distribution &dist,
                                         const Step &step) {
  Distribution next(dist.getRank());
  auto moved = [&](const Axis *axis) {
    return llvm::is_contained(step.axes, axis);
  };
  for (unsigned d = 0; d < dist.getRank(); ++d) {
    for (const Axis *axis : dist.getPartition(d))
      if (!moved(axis))
        next.addPartition(d, axis);
    bool gainsAxes =
        (step.kind == OpKind::AllToAll && d == step.toDim) ||
        ((step.kind == OpKind::ReduceScatter || step.kind == OpKind::Shard) &&
         d == step.dim);
    if (gainsAxes)
      for (const Axis *axis : step.axes)
        next.addPartition(d, axis);
  }
  for (const Axis *axis : dist.getPartialSum())
    if (!moved(axis))
      next.addPartialSum(axis);
  return next;
}

void MatchCollectivesPass::lower(Op &layout) {
  Graph &graph = *layout.getParent();
  Value *source = layout.getOperand(0);
  Value *target = layout.getResult();
  Distribution from = resolveDistribution(source->getType().getDistribution());
  Distribution to = resolveDistribution(target->getType().getDistribution());
  llvm::SmallVector<Step, 4> steps;
  if (!plan(from, to, layout, steps))
    return;

  Value *current = source;
  Distribution dist = from;
  for (size_t i = 0; i < steps.size(); ++i) {
    const Step &step = steps[i];
    Op *op = graph.createOpBefore(&layout, step.kind, layout.getLoc());
    op->setPhase(layout.getPhase());
    op->addOperand(current);
    llvm::SmallVector<const Axis *, 2> axes(step.axes.begin(), step.axes.end());
    if (step.kind == OpKind::AllToAll) {
      op->setAttr("from_dim", Attribute::getExpr(AttrKind::Int, step.dim));
      op->setAttr("to_dim", Attribute::getExpr(AttrKind::Int, step.toDim));
    } else if (step.kind != OpKind::AllReduce) {
      op->setAttr("dim", Attribute::getExpr(AttrKind::Int, step.dim));
    }
    op->setAttr("axes", Attribute::getAxes(axes));
    if (step.kind != OpKind::Shard)
      op->setAttr("bytes", Attribute::getExpr(AttrKind::Expr, 0));
    dist = apply(dist, step);
    Value *result = graph.createResult(
        op, module->makeUniqueName(source->getName().str() + "." +
                                   op->getKindName().str()));
    if (i + 1 == steps.size()) {
      result->setType(target->getType()); // The written layout and names.
      result->setAnnotated(target->isAnnotated());
    } else {
      result->setType(source->getType().withDistribution(dist));
    }
    current = result;
  }
  module->replaceUsesOf(target, current, &layout);
  graph.eraseOp(&layout);
}

std::unique_ptr<Pass> stg::createMatchCollectivesPass() {
  return std::make_unique<MatchCollectivesPass>();
}
