//===- Memory.cpp - Per-rank memory of a training step --------------------===//
//
// Sums what one rank keeps, by kind, for one micro-batch: its weight shards,
// a gradient per weight element, Adam's fp32 master weights and moments
// (12 bytes per element), `state` tensors (a decode step's KV caches and
// recurrent states), and the activations the backward pass reads: every
// forward value used by a backward op. A value inside a repeat body counts
// once per repetition, since each layer keeps its own.
// Recomputation therefore lowers the activations (the backward reads
// replayed values instead), and FSDP divides weights, gradients and
// optimizer state by the data-parallel degree (the shards are smaller).
// Values whose layout is still unknown count with their written type. The
// schedule-aware peak (in-flight micro-batches under 1F1B) builds on this.
//
//===----------------------------------------------------------------------===//

#include "stg/IR/Cost.h"
#include "stg/Passes/Passes.h"

#include "llvm/ADT/DenseSet.h"

using namespace stg;

#define DEBUG_TYPE "memory"

namespace {

class MemoryPass : public Pass {
public:
  llvm::StringRef getName() const override { return DEBUG_TYPE; }
  LogicalResult run(Module &module, DiagnosticEngine &diags) override;

private:
  void count(const Graph &graph, const Expr &times,
             const llvm::DenseSet<const Value *> &saved,
             MemoryBreakdown &memory);
};

} // namespace

void MemoryPass::count(const Graph &graph, const Expr &times,
                       const llvm::DenseSet<const Value *> &saved,
                       MemoryBreakdown &memory) {
  auto add = [&](Expr &into, const Expr &bytes) { into = into + times * bytes; };
  for (const Value *arg : graph.getArguments())
    if (saved.count(arg))
      add(memory.activations, getLocalBytes(*arg));
  for (const auto &op : graph.getOps()) {
    if (const Graph *body = op->getBody()) {
      // A backward body's values are transient; only forward bodies save.
      if (!op->getForwardRepeat())
        count(*body, times * op->getAttr("count")->expr, saved, memory);
      continue;
    }
    if (op->getKind() == OpKind::Param) {
      const Value &weight = *op->getResult();
      Expr elements = weight.getType().getLocalNumElements();
      add(memory.weights, getLocalBytes(weight));
      add(memory.gradients, getLocalBytes(weight));
      add(memory.optimizer, 12 * elements);
      continue;
    }
    if (op->getKind() == OpKind::State) {
      add(memory.state, getLocalBytes(*op->getResult()));
      continue;
    }
    for (const Value *result : op->getResults())
      if (saved.count(result))
        add(memory.activations, getLocalBytes(*result));
  }
}

LogicalResult MemoryPass::run(Module &module, DiagnosticEngine &diags) {
  Graph *model = module.getModel();
  if (!model)
    return success();
  if (!model->allValuesTyped()) {
    diags.error({}, "'memory' needs every value's shape: run shape-infer first");
    return failure();
  }
  // Forward values that some backward op reads stay alive until then.
  llvm::DenseSet<const Value *> saved;
  model->walk([&](Op &op) {
    if (op.getPhase() == Phase::Forward)
      return;
    for (const Value *operand : op.getOperands()) {
      const Op *def = operand->getDefiningOp();
      bool forwardArg = !def && operand->hasType();
      if ((def && def->getPhase() == Phase::Forward &&
           def->getKind() != OpKind::Param && def->getKind() != OpKind::State &&
           def->getKind() != OpKind::Input) ||
          forwardArg)
        saved.insert(operand);
    }
  });
  // Arguments of backward bodies are gradients, not saved activations.
  model->walk([&](Op &op) {
    if (op.getForwardRepeat())
      for (const Value *arg : op.getBody()->getArguments())
        saved.erase(arg);
  });
  MemoryBreakdown memory;
  count(*model, 1, saved, memory);
  module.setMemory(memory);
  return success();
}

std::unique_ptr<Pass> stg::createMemoryPass() {
  return std::make_unique<MemoryPass>();
}
