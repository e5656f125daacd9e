//===- Recompute.cpp - Activation recomputation ---------------------------===//
//
// Trades compute for memory the way Megatron-LM does, per repeated layer: the
// backward body of each repeat first replays forward work, and the backward
// ops use the replayed values instead of activations saved by the forward
// pass. Two passes share this file:
//
//   recompute-full       replays the whole forward body; only the layer's
//                        input (the repeat's carried value) stays saved
//   recompute-selective  replays only the attention core (`attention` ops),
//                        whose output is large and cheap to recompute
//
// A replayed op keeps its forward attributes and written types, so
// `distribute` and `match-collectives` give it the same collectives as the
// forward (an all-gathered input is gathered again). Runs after autodiff and
// before distribute.
//
//===----------------------------------------------------------------------===//

#include "stg/Passes/Passes.h"

#include "llvm/ADT/DenseMap.h"

using namespace stg;

namespace {

class RecomputePass : public Pass {
public:
  explicit RecomputePass(bool full) : full(full) {}
  llvm::StringRef getName() const override {
    return full ? "recompute-full" : "recompute-selective";
  }
  LogicalResult run(Module &module, DiagnosticEngine &diags) override;

private:
  bool replays(const Op &op) const {
    if (full)
      return op.getKind() != OpKind::Param && op.getKind() != OpKind::State &&
             op.getKind() != OpKind::Yield && !op.getBody();
    return op.getKind() == OpKind::Attention;
  }
  void replay(Op &backward, Module &module);

  bool full;
};

} // namespace

void RecomputePass::replay(Op &backward, Module &module) {
  Graph &forwardBody = *backward.getForwardRepeat()->getBody();
  Graph &body = *backward.getBody();
  Op *first = body.getOps().empty() ? nullptr : body.getOps().front().get();
  llvm::DenseMap<Value *, Value *> replayed;
  std::vector<Op *> forwardOps;
  for (const auto &op : forwardBody.getOps())
    forwardOps.push_back(op.get());
  for (Op *op : forwardOps) {
    if (!replays(*op))
      continue;
    Op *copy = first ? body.createOpBefore(first, op->getKind(), op->getLoc())
                     : body.createOp(op->getKind(), op->getLoc());
    copy->setPhase(Phase::Backward);
    for (const NamedAttribute &attr : op->getAttrs())
      copy->setAttr(attr.name, attr.value);
    for (Value *operand : op->getOperands())
      copy->addOperand(replayed.lookup(operand) ? replayed.lookup(operand)
                                                : operand);
    for (Value *result : op->getResults()) {
      Value *again = body.createResult(
          copy, module.makeUniqueName(result->getName().str() + ".recompute"));
      again->setType(result->getType());
      again->setAnnotated(result->isAnnotated());
      replayed[result] = again;
    }
  }
  // The backward ops now read the replayed values.
  for (const auto &op : body.getOps())
    for (unsigned k = 0; k < op->getOperands().size(); ++k)
      if (Value *again = replayed.lookup(op->getOperand(k)))
        if (again->getDefiningOp() != op.get())
          op->setOperand(k, again);
}

LogicalResult RecomputePass::run(Module &module, DiagnosticEngine &diags) {
  Graph *model = module.getModel();
  if (!model)
    return success();
  std::vector<Op *> backwardRepeats;
  model->walk([&](Op &op) {
    if (op.getForwardRepeat())
      backwardRepeats.push_back(&op);
  });
  if (backwardRepeats.empty()) {
    bool anyRepeat = false;
    model->walk([&](Op &op) { anyRepeat |= op.getKind() == OpKind::Repeat; });
    if (anyRepeat) {
      diags.error({}, "'" + getName() + "' replays forward layers in the "
                      "backward pass: run autodiff first");
      return failure();
    }
  }
  for (Op *op : backwardRepeats)
    replay(*op, module);
  return success();
}

std::unique_ptr<Pass> stg::createRecomputeFullPass() {
  return std::make_unique<RecomputePass>(/*full=*/true);
}

std::unique_ptr<Pass> stg::createRecomputeSelectivePass() {
  return std::make_unique<RecomputePass>(/*full=*/false);
}
