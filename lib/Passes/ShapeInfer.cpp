//===- ShapeInfer.cpp - Shape propagation ---------------------------------===//
//
// Gives every value its logical shape and element type, in program order,
// from the shape rule of the op that defines it (ShapeRules.cpp). A value
// whose type the user wrote keeps it, but the rule's shape must agree with
// it: a disagreement is an error at the op, showing both shapes. A repeat's
// body is inferred once with the carried values' types, and what it yields
// must have those same shapes, since the next repetition starts from it.
// Distributions are left to the `distribute` pass.
//
//===----------------------------------------------------------------------===//

#include "stg/IR/ShapeRules.h"
#include "stg/Passes/Passes.h"

using namespace stg;

#define DEBUG_TYPE "shape-infer"

namespace {

class ShapeInferPass : public Pass {
public:
  llvm::StringRef getName() const override { return DEBUG_TYPE; }
  LogicalResult run(Module &module, DiagnosticEngine &diags) override;

private:
  void inferGraph(Graph &graph);
  void inferOp(Op &op);
  void inferRepeat(Op &op);
  bool sameShape(const TensorType &a, const TensorType &b) const;

  Module *module = nullptr;
  DiagnosticEngine *diags = nullptr;
  std::unique_ptr<ExtentComparator> extents;
};

} // namespace

LogicalResult ShapeInferPass::run(Module &m, DiagnosticEngine &d) {
  module = &m;
  diags = &d;
  extents = std::make_unique<ExtentComparator>(m);
  unsigned errorsBefore = d.getNumErrors();
  if (Graph *model = m.getModel())
    inferGraph(*model);
  return success(d.getNumErrors() == errorsBefore);
}

bool ShapeInferPass::sameShape(const TensorType &a, const TensorType &b) const {
  if (a.getRank() != b.getRank())
    return false;
  for (unsigned i = 0; i < a.getRank(); ++i)
    if (!extents->equal(a.getDim(i), b.getDim(i)))
      return false;
  return true;
}

void ShapeInferPass::inferGraph(Graph &graph) {
  for (const auto &op : graph.getOps()) {
    bool operandsKnown = llvm::all_of(
        op->getOperands(), [](const Value *v) { return v->hasType(); });
    if (!operandsKnown)
      continue; // An earlier error; do not report its consequences.
    if (op->getKind() == OpKind::Repeat)
      inferRepeat(*op);
    else if (op->getKind() != OpKind::Yield)
      inferOp(*op);
  }
}

void ShapeInferPass::inferOp(Op &op) {
  llvm::SmallVector<TensorType, 1> types;
  if (failed(inferResultTypes(op, *module, *extents, *diags, types)))
    return;
  ExprPrinter printer = module->getPrinter();
  for (unsigned i = 0; i < types.size(); ++i) {
    Value *result = op.getResult(i);
    if (!result->isAnnotated()) {
      result->setType(types[i]);
      continue;
    }
    if (!sameShape(types[i], result->getType()))
      diags->error(op.getLoc(),
                   "'" + op.getKindName() + "' computes '%" +
                       result->getName() + "' with shape " +
                       formatShape(types[i].getShape(), printer) +
                       " but its type says " +
                       formatShape(result->getType().getShape(), printer));
  }
}

void ShapeInferPass::inferRepeat(Op &op) {
  Graph &body = *op.getBody();
  for (unsigned i = 0; i < body.getArguments().size(); ++i)
    body.getArguments()[i]->setType(op.getOperand(i)->getType());
  inferGraph(body);
  Op *yield = body.getTerminator();
  ExprPrinter printer = module->getPrinter();
  for (unsigned i = 0; i < op.getResults().size(); ++i) {
    const TensorType &carried = op.getOperand(i)->getType();
    Value *next = yield->getOperand(i);
    if (!next->hasType())
      continue;
    if (!sameShape(carried, next->getType())) {
      // Point at the op that computes the new value: that is the mistake.
      Op *producer = next->getDefiningOp();
      diags->error(producer ? producer->getLoc() : yield->getLoc(),
                   "loop-carried '%" + op.getOperand(i)->getName() +
                       "' enters the repeat with shape " +
                       formatShape(carried.getShape(), printer) +
                       " but this makes it " +
                       formatShape(next->getType().getShape(), printer) +
                       "; it must keep its shape from one repetition to the "
                       "next");
      continue;
    }
    op.getResult(i)->setType(carried);
  }
}

std::unique_ptr<Pass> stg::createShapeInferPass() {
  return std::make_unique<ShapeInferPass>();
}
