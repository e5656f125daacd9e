//===- BackwardSplit.cpp - A backward's input and weight gradients --------===//

#include "BackwardSplit.h"

#include "llvm/ADT/STLExtras.h"

using namespace stg;

/// Adds the backward ops of `graph` that nothing in `needed` depends on to
/// `weightOps`, walking it last op first; `needed` holds the values input
/// gradients read and grows with the operands of each op found to be B's.
static void splitGraph(const Graph &graph,
                       llvm::DenseSet<const Value *> &needed,
                       llvm::DenseSet<const Op *> &weightOps) {
  for (const std::unique_ptr<Op> &op : llvm::reverse(graph.getOps())) {
    if (op->getPhase() != Phase::Backward)
      continue;
    if (op->getKind() == OpKind::Repeat) {
      // The layer below starts from what the repeat is given.
      needed.insert(op->getOperands().begin(), op->getOperands().end());
      llvm::DenseSet<const Value *> inBody;
      if (const Op *yield = op->getBody()->getTerminator())
        inBody.insert(yield->getOperands().begin(), yield->getOperands().end());
      splitGraph(*op->getBody(), inBody, weightOps);
      continue;
    }
    if (op->getKind() == OpKind::Yield)
      continue;
    bool input = llvm::any_of(op->getResults(), [&](const Value *result) {
      return needed.count(result) > 0;
    });
    if (input)
      needed.insert(op->getOperands().begin(), op->getOperands().end());
    else
      weightOps.insert(op.get());
  }
}

llvm::DenseSet<const Op *> stg::findWeightGradientOps(const Module &module) {
  llvm::DenseSet<const Op *> weightOps;
  llvm::DenseSet<const Value *> needed;
  splitGraph(*module.getModel(), needed, weightOps);
  return weightOps;
}
