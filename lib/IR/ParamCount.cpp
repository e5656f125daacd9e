//===- ParamCount.cpp - Trainable parameters of a model -------------------===//

#include "stg/IR/ParamCount.h"

#include "stg/IR/Graph.h"
#include "stg/IR/Module.h"

#include "llvm/ADT/SmallPtrSet.h"

using namespace stg;

/// The elements of a param op's logical shape.
static Expr getElementCount(const Op &param) {
  Expr elements = 1;
  for (const Expr &extent : param.getResult()->getType().getShape())
    elements = elements * extent;
  return elements;
}

/// The parameter elements of `graph`, a repeat's body times its count;
/// with `perToken`, a routed expert's weight counts topk/experts of it
/// (countActiveParameters).
static Expr countGraphParameters(const Graph &graph, bool perToken) {
  std::vector<const Op *> routes;
  if (perToken)
    for (const auto &op : graph.getOps())
      if (op->getKind() == OpKind::Route)
        routes.push_back(op.get());
  Expr total = 0;
  for (const auto &op : graph.getOps()) {
    if (const Graph *body = op->getBody()) {
      // A backward repeat reruns the forward body's weights; it declares
      // none of its own, so counting every body is safe.
      total = total + op->getAttr("count")->expr *
                          countGraphParameters(*body, perToken);
      continue;
    }
    if (op->getKind() != OpKind::Param)
      continue;
    Expr elements = getElementCount(*op);
    llvm::ArrayRef<Expr> shape = op->getResult()->getType().getShape();
    for (const Op *route : routes) {
      const Expr &experts = route->getAttr("experts")->expr;
      if (shape.size() >= 2 && (shape.front() - experts).expand().is_zero()) {
        elements = elements * route->getAttr("topk")->expr / experts;
        break;
      }
    }
    total = total + elements;
  }
  return total.expand();
}

Expr stg::countParameters(const Graph &graph) {
  return countGraphParameters(graph, /*perToken=*/false);
}

Expr stg::countParameters(const Module &module) {
  if (const Graph *model = module.getModel())
    return countParameters(*model);
  return 0;
}

/// The param op `value` comes from, through ops that only move or convert
/// it (layouts, shards, collectives), or null.
static const Op *getSourceParam(const Value *value) {
  for (const Op *def = value->getDefiningOp(); def;
       def = def->getOperands().empty() ? nullptr
                                        : def->getOperand(0)->getDefiningOp()) {
    if (def->getKind() == OpKind::Param)
      return def;
    bool movesData = def->getKind() == OpKind::Layout ||
                     def->getKind() == OpKind::Shard ||
                     def->getInfo().has(Collective);
    if (!movesData || def->getOperands().size() != 1)
      return nullptr;
  }
  return nullptr;
}

Expr stg::countEmbeddingParameters(const Module &module) {
  const Graph *model = module.getModel();
  if (!model)
    return 0;
  llvm::SmallPtrSet<const Op *, 4> tables;
  Expr total = 0;
  model->walk([&](Op &op) {
    if (op.getKind() != OpKind::Embedding || op.getOperands().size() < 2)
      return;
    const Op *table = getSourceParam(op.getOperand(1));
    if (!table || !tables.insert(table).second)
      return;
    Expr elements = getElementCount(*table);
    // A table inside a repeat body is one per repetition.
    for (const Graph *body = table->getParent(); body && body->getParentOp();
         body = body->getParentOp()->getParent())
      elements = elements * body->getParentOp()->getAttr("count")->expr;
    total = total + elements;
  });
  return total.expand();
}

Expr stg::countActiveParameters(const Module &module) {
  if (const Graph *model = module.getModel())
    return countGraphParameters(*model, /*perToken=*/true);
  return 0;
}
