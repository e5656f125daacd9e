//===- Distribute.cpp - Tensor-level distribution -------------------------===//
//
// Propagates layouts through the graph in program order, GSPMD style
// (STAGE section IV-D1). Values whose type the user wrote (params, inputs,
// annotated results) are anchors. For every other op, the op's distribution
// rule (DistributionRules.cpp) decides from its operands' layouts how it
// runs: the layout each operand must have, and the layout its result comes
// out in. Where an operand's layout differs from the one needed, a `layout`
// op is inserted before the consumer; where a result's natural layout
// differs from the one the user wrote, the op keeps its natural layout and a
// `layout` op after it delivers the written one to every consumer. The same
// demand on the same value is met once and reused. A repeat's carried
// values keep their layout from one repetition to the next.
//
// The result is a graph where every value has a layout and every layout
// change is an explicit `layout` op, which `match-collectives` lowers.
// Last, each axis that splits grouped-query attention's key/value heads
// learns their extent: where it outnumbers them, a rank holds one whole
// head rather than a fraction (Axis::replicatedExtents).
//
//===----------------------------------------------------------------------===//

#include "stg/IR/DistributionRules.h"
#include "stg/Passes/Passes.h"

#include <map>

using namespace stg;

#define DEBUG_TYPE "distribute"

namespace {

class DistributePass : public Pass {
public:
  llvm::StringRef getName() const override { return DEBUG_TYPE; }
  LogicalResult run(Module &module, DiagnosticEngine &diags) override;

private:
  void distributeGraph(Graph &graph);
  void distributeOp(Op &op, Graph &graph);
  void distributeRepeat(Op &op);
  /// Lets each axis that splits grouped-query attention's key/value heads
  /// replicate them where it outnumbers them (Axis::replicatedExtents).
  void markReplicatedKeyHeads(Graph &graph);
  /// Returns `value` in layout `dist`, reusing an earlier conversion.
  Value *relayout(Value *value, const Distribution &dist, Op &consumer,
                  Graph &graph);
  std::optional<Distribution> resolved(const Value *value, SourceLoc loc);

  Module *module = nullptr;
  DiagnosticEngine *diags = nullptr;
  /// Conversions already made, visible in the graph that made them and the
  /// bodies nested in it.
  struct Conversion {
    Value *from;
    Distribution layout;
    Value *to;
    Graph *graph;
    Phase phase;
  };
  std::vector<Conversion> conversions;
  /// Forward conversions that only move a value's splits to other
  /// dimensions (all-to-alls): their copies are no larger than the value,
  /// so the backward reads them rather than exchanging again, as
  /// Transformer Engine keeps Ulysses' exchanged q, k and v.
  std::vector<Conversion> exchanges;
  /// An annotated result that runs in its natural layout, and the value
  /// that delivers its written layout to its users: its gradient arrives
  /// from them in the written layout, so that is the gradient's hint.
  llvm::DenseMap<const Value *, const Value *> deliveredAs;
};

} // namespace

LogicalResult DistributePass::run(Module &m, DiagnosticEngine &d) {
  module = &m;
  diags = &d;
  conversions.clear();
  exchanges.clear();
  deliveredAs.clear();
  Graph *model = m.getModel();
  if (!model)
    return success();
  if (!model->allValuesTyped()) {
    d.error({}, "'distribute' needs every value's shape: run shape-infer "
                "first (--passes=shape-infer,distribute)");
    return failure();
  }
  if (const Option *exchange = m.lookupOption("cp_comm_type")) {
    const auto *text = std::get_if<std::string>(&exchange->value);
    if (!text || (*text != "p2p" && *text != "all_gather" && *text != "a2a")) {
      d.error(exchange->loc, "option 'cp_comm_type' must name context "
                             "parallelism's exchange: p2p, all_gather or a2a");
      return failure();
    }
  }
  unsigned errorsBefore = d.getNumErrors();
  distributeGraph(*model);
  markReplicatedKeyHeads(*model);
  return success(d.getNumErrors() == errorsBefore);
}

void DistributePass::markReplicatedKeyHeads(Graph &graph) {
  graph.walk([&](Op &op) {
    if (op.getKind() != OpKind::Attention)
      return;
    const TensorType &queries = op.getOperand(0)->getType();
    const TensorType &keys = op.getOperand(1)->getType();
    unsigned rank = queries.getRank();
    if (rank < 3 || keys.getRank() != rank)
      return;
    const Expr &keyHeads = keys.getDim(rank - 2);
    if (keyHeads.is_equal(queries.getDim(rank - 2)))
      return; // One key head a query head: they split alike.
    for (const Axis *axis : keys.getDistribution().getPartition(rank - 2))
      if (const Axis *ranks = axis->resolve())
        if (!ranks->mayReplicate(keyHeads))
          module->lookupAxis(ranks->name)
              ->replicatedExtents.push_back(keyHeads);
  });
}

std::optional<Distribution> DistributePass::resolved(const Value *value,
                                                     SourceLoc loc) {
  const Axis *conflict = nullptr;
  Distribution dist =
      resolveDistribution(value->getType().getDistribution(), &conflict);
  if (conflict) {
    diags->error(loc, "the layout of '%" + value->getName() +
                          "' uses the ranks of axis '" + conflict->name +
                          "' twice (an alias of it is on)");
    return std::nullopt;
  }
  return dist;
}

void DistributePass::distributeGraph(Graph &graph) {
  // Snapshot: ops inserted while distributing are already consistent.
  std::vector<Op *> ops;
  for (const auto &op : graph.getOps())
    ops.push_back(op.get());
  size_t marker = conversions.size();
  for (Op *op : ops) {
    bool operandsKnown = llvm::all_of(
        op->getOperands(), [](const Value *v) { return v->hasType(); });
    if (!operandsKnown)
      continue; // Shape inference failed here and said so.
    if (op->getKind() == OpKind::Repeat)
      distributeRepeat(*op);
    else if (op->getKind() != OpKind::Yield)
      distributeOp(*op, graph);
  }
  conversions.resize(marker);
}

/// Whether `to` splits a value over the axes `from` does, only along other
/// dimensions: an all-to-all, whose copy is no larger than the value.
static bool movesSplitsOnly(const Distribution &from, const Distribution &to) {
  auto axesOf = [](const Distribution &dist) {
    llvm::SmallVector<const Axis *, 4> axes;
    for (unsigned d = 0; d < dist.getRank(); ++d)
      llvm::append_range(axes, dist.getPartition(d));
    llvm::sort(axes);
    return axes;
  };
  return from != to && from.getPartialSum().empty() &&
         to.getPartialSum().empty() && axesOf(from) == axesOf(to);
}

Value *DistributePass::relayout(Value *value, const Distribution &dist,
                                Op &consumer, Graph &graph) {
  // Reuse a conversion only within one phase: the backward pass gathers a
  // sharded weight or activation again rather than keep the forward copy
  // alive (ZeRO-3, Megatron-SP). An exchange it keeps (above).
  for (const Conversion &c : conversions)
    if (c.from == value && c.layout == dist && c.phase == consumer.getPhase())
      return c.to;
  if (consumer.getPhase() == Phase::Backward)
    for (const Conversion &c : exchanges)
      if (c.from == value && c.layout == dist)
        return c.to;
  const TensorType &type = value->getType();
  Op *layout = graph.createOpBefore(&consumer, OpKind::Layout,
                                    consumer.getLoc());
  layout->setPhase(consumer.getPhase());
  layout->addOperand(value);
  Value *converted = graph.createResult(
      layout, module->makeUniqueName(value->getName().str() + ".relayout"));
  converted->setType(type.withDistribution(dist));
  conversions.push_back({value, dist, converted, &graph, consumer.getPhase()});
  if (consumer.getPhase() == Phase::Forward &&
      movesSplitsOnly(resolveDistribution(type.getDistribution()), dist))
    exchanges.push_back(conversions.back());
  return converted;
}

/// The layout a gradient's primal suggests for `op`'s result, minus its
/// PartialSum (a gradient of a partial value is whole). When `op` sums
/// gradient contributions that are all partial over an axis (the input
/// gradients of q, k and v projections), the sum stays partial over it: one
/// reduction after the sum, as Megatron-LM does, instead of one per term.
static Distribution getHintedLayout(const Op &op, const Value &hint) {
  Distribution layout =
      resolveDistribution(hint.getType().getDistribution()).withoutPartialSum();
  if (op.getKind() != OpKind::Add || op.getOperands().empty())
    return layout;
  auto distributionOf = [](const Value *value) {
    return resolveDistribution(value->getType().getDistribution());
  };
  for (const Axis *axis :
       distributionOf(op.getOperand(0)).getPartialSum())
    if (llvm::all_of(op.getOperands(), [&](const Value *operand) {
          return distributionOf(operand).on(axis).kind ==
                 Distribution::Kind::PartialSum;
        }))
      layout = layout.withoutAxis(axis);
  return layout;
}

void DistributePass::distributeOp(Op &op, Graph &graph) {
  // The written layouts, or a gradient's primal's layout as a hint (minus
  // its PartialSum: a gradient of a partial value is whole).
  llvm::SmallVector<std::optional<Distribution>, 1> declared;
  for (const Value *result : op.getResults()) {
    declared.push_back(std::nullopt);
    if (result->isAnnotated()) {
      if (!(declared.back() = resolved(result, op.getLoc())))
        return;
    } else if (const Value *hint = result->getLayoutHint()) {
      if (auto delivered = deliveredAs.find(hint);
          delivered != deliveredAs.end())
        hint = delivered->second;
      if (hint->hasType() && hint->getType().getRank() ==
                                 result->getType().getRank())
        declared.back() = getHintedLayout(op, *hint);
    }
  }
  for (const Value *operand : op.getOperands())
    if (!resolved(operand, op.getLoc()))
      return;

  OpDistribution plan;
  if (failed(inferOpDistribution(op, *module, declared, *diags, plan)))
    return;

  for (unsigned k = 0; k < op.getOperands().size(); ++k) {
    Value *operand = op.getOperand(k);
    if (*resolved(operand, op.getLoc()) != plan.operands[k])
      op.setOperand(k, relayout(operand, plan.operands[k], op, graph));
  }

  for (unsigned i = 0; i < op.getResults().size(); ++i) {
    Value *result = op.getResult(i);
    const TensorType &type = result->getType();
    TensorType natural = type.withDistribution(plan.results[i]);
    if (!result->isAnnotated()) {
      result->setType(natural);
      continue;
    }
    if (*declared[i] == plan.results[i] || op.getKind() == OpKind::Layout)
      continue; // Keeps the written type, with the user's axis names.
    // Run the op in its natural layout; deliver the written one after it.
    TensorType written = type;
    result->setType(natural);
    result->setAnnotated(false);
    Op *layout = graph.createOpAfter(&op, OpKind::Layout, op.getLoc());
    layout->setPhase(op.getPhase());
    layout->addOperand(result);
    Value *converted = graph.createResult(
        layout, module->makeUniqueName(result->getName().str() + ".relayout"));
    converted->setType(written);
    converted->setAnnotated(true);
    module->replaceUsesOf(result, converted, layout);
    deliveredAs[result] = converted;
  }
}

void DistributePass::distributeRepeat(Op &op) {
  Graph &body = *op.getBody();
  for (unsigned i = 0; i < body.getArguments().size(); ++i)
    body.getArguments()[i]->setType(op.getOperand(i)->getType());
  distributeGraph(body);
  // What the body yields must have the carried layout, since the next
  // repetition starts from it.
  Op *yield = body.getTerminator();
  size_t marker = conversions.size();
  for (unsigned i = 0; i < yield->getOperands().size(); ++i) {
    Value *next = yield->getOperand(i);
    if (!next->hasType())
      continue;
    auto want = resolved(op.getOperand(i), op.getLoc());
    auto have = resolved(next, yield->getLoc());
    if (want && have && *want != *have)
      yield->setOperand(i, relayout(next, *want, *yield, body));
    op.getResult(i)->setType(op.getOperand(i)->getType());
  }
  conversions.resize(marker);
}

std::unique_ptr<Pass> stg::createDistributePass() {
  return std::make_unique<DistributePass>();
}
