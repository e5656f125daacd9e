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
// In a body of several layers (a layer pattern's period) each layer replays
// its own ops at the start of its backward, from its own saved input, as a
// pipeline stage holding only some of the layers would.
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
  // Where each layer's backward starts (the body runs its layers last to
  // first); a layer with no backward op replays before the next one down.
  unsigned numLayers = body.getNumLayers();
  std::vector<Op *> starts(numLayers + 1, nullptr);
  starts[numLayers] = body.getTerminator();
  for (const auto &op : body.getOps())
    if (op->getKind() != OpKind::Yield && !starts[op->getBodyLayer()])
      starts[op->getBodyLayer()] = op.get();
  if (!starts[0])
    starts[0] = starts[numLayers];
  for (unsigned layer = 1; layer < numLayers; ++layer)
    if (!starts[layer])
      starts[layer] = starts[layer - 1];

  llvm::DenseMap<Value *, Value *> replayed;
  // A layer reads what other layers computed as saved, not replayed.
  auto replayedIn = [&](Value *value, unsigned layer) -> Value * {
    Value *again = replayed.lookup(value);
    return again && again->getDefiningOp()->getBodyLayer() == layer ? again
                                                                    : nullptr;
  };
  std::vector<Op *> forwardOps;
  for (const auto &op : forwardBody.getOps())
    forwardOps.push_back(op.get());
  for (Op *op : forwardOps) {
    if (!replays(*op))
      continue;
    unsigned layer = op->getBodyLayer();
    Op *start = starts[layer];
    Op *copy = start ? body.createOpBefore(start, op->getKind(), op->getLoc())
                     : body.createOp(op->getKind(), op->getLoc());
    copy->setPhase(Phase::Backward);
    copy->setBodyLayer(layer);
    for (const NamedAttribute &attr : op->getAttrs())
      copy->setAttr(attr.name, attr.value);
    for (Value *operand : op->getOperands()) {
      Value *again = replayedIn(operand, layer);
      copy->addOperand(again ? again : operand);
    }
    for (Value *result : op->getResults()) {
      Value *again = body.createResult(
          copy, module.makeUniqueName(result->getName().str() + ".recompute"));
      again->setType(result->getType());
      again->setAnnotated(result->isAnnotated());
      replayed[result] = again;
    }
  }
  // The backward ops now read the replayed values of their layer.
  for (const auto &op : body.getOps())
    for (unsigned k = 0; k < op->getOperands().size(); ++k)
      if (Value *again = replayedIn(op->getOperand(k), op->getBodyLayer()))
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
