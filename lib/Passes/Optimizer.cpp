//===- Optimizer.cpp - The optimizer step of a training step --------------===//
//
// Appends one Adam step per weight, on the rank's local shard of it, right
// after its gradient is final (reduced over the data-parallel axes): inside
// the backward repeat body for a layer's weights, at the end of the step for
// the others. The step reads the weight, its gradient, an fp32 master copy
// and the two fp32 moments, and costs 12 flops per element (see
// docs/cost-model.md); the memory pass counts the 12 bytes of optimizer
// state per element. With FSDP the weight and gradient are shards, so the
// step is too. Runs after match-collectives, when gradients have their
// final layout.
//
//===----------------------------------------------------------------------===//

#include "stg/IR/DistributionRules.h"
#include "stg/Passes/Passes.h"

using namespace stg;

#define DEBUG_TYPE "optimizer"

namespace {

class OptimizerPass : public Pass {
public:
  llvm::StringRef getName() const override { return DEBUG_TYPE; }
  LogicalResult run(Module &module, DiagnosticEngine &diags) override;
};

} // namespace

LogicalResult OptimizerPass::run(Module &module, DiagnosticEngine &diags) {
  Graph *model = module.getModel();
  if (!model)
    return success();
  if (module.getGradients().empty()) {
    bool hasWeights = false;
    model->walk([&](Op &op) { hasWeights |= op.getKind() == OpKind::Param; });
    // Said in the model's terms: the pipeline is the tool's business.
    diags.error(module.getModelLoc(),
                hasWeights
                    ? llvm::Twine("the optimizer needs weight gradients, so "
                                  "the autodiff pass must run before it")
                    : "model '" + model->getName() +
                          "' has no parameters to train: declare weights "
                          "with `param`, or compile an inference step "
                          "(--mode prefill)");
    return failure();
  }
  // Weights in program order, for a deterministic placement of the steps.
  std::vector<Value *> weights;
  model->walk([&](Op &op) {
    if (op.getKind() == OpKind::Param && module.getGradient(op.getResult()))
      weights.push_back(op.getResult());
  });
  unsigned errorsBefore = diags.getNumErrors();
  for (Value *weight : weights) {
    Value *gradient = module.getGradient(weight);
    if (resolveDistribution(gradient->getType().getDistribution()) !=
        resolveDistribution(weight->getType().getDistribution())) {
      diags.error(weight->getDefiningOp()->getLoc(),
                  "the gradient of '%" + weight->getName() +
                      "' does not have the weight's layout; run distribute "
                      "and match-collectives before optimizer");
      continue;
    }
    // The gradient's graph: after its last use there, the step can run.
    Graph *graph = gradient->getDefiningOp()->getParent();
    SourceLoc loc = weight->getDefiningOp()->getLoc();
    Op *step = graph->getTerminator()
                   ? graph->createOpBefore(graph->getTerminator(), OpKind::Adam,
                                           loc)
                   : graph->createOp(OpKind::Adam, loc);
    step->setPhase(Phase::Optimizer);
    // In its weight's layer: a pipeline stage updates the weights it holds.
    step->setBodyLayer(gradient->getDefiningOp()->getBodyLayer());
    step->addOperand(weight);
    step->addOperand(gradient);
    Value *updated = graph->createResult(
        step, module.makeUniqueName(weight->getName().str() + ".next"));
    updated->setType(weight->getType());
  }
  return success(diags.getNumErrors() == errorsBefore);
}

std::unique_ptr<Pass> stg::createOptimizerPass() {
  return std::make_unique<OptimizerPass>();
}
