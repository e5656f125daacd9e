//===- ParamCount.cpp - Trainable parameters of a model -------------------===//

#include "stg/IR/ParamCount.h"

#include "stg/IR/Graph.h"
#include "stg/IR/Module.h"

using namespace stg;

Expr stg::countParameters(const Graph &graph) {
  Expr total = 0;
  for (const auto &op : graph.getOps()) {
    if (const Graph *body = op->getBody()) {
      // A backward repeat reruns the forward body's weights; it declares
      // none of its own, so counting every body is safe.
      total = total + op->getAttr("count")->expr * countParameters(*body);
      continue;
    }
    if (op->getKind() != OpKind::Param)
      continue;
    Expr elements = 1;
    for (const Expr &extent : op->getResult()->getType().getShape())
      elements = elements * extent;
    total = total + elements;
  }
  return total.expand();
}

Expr stg::countParameters(const Module &module) {
  if (const Graph *model = module.getModel())
    return countParameters(*model);
  return 0;
}
