//===- GradOp.cpp - Looking through a grad op to its forward op -----------===//

#include "stg/IR/GradOp.h"

using namespace stg;

OpKind stg::getGradForwardKind(const Op &grad) {
  llvm::StringRef of = grad.getAttr("of")->text;
  for (const OpInfo &info : getAllOpInfos())
    if (info.name == of)
      return info.kind;
  llvm_unreachable("grad op of an unknown kind");
}

ForwardStandIn::ForwardStandIn(const Op &grad)
    : op(getGradForwardKind(grad), grad.getLoc()) {
  // The grad op's own attributes are `of`, `outs`, `wrt`; the rest are the
  // forward op's.
  for (const NamedAttribute &attr : grad.getAttrs())
    if (!grad.getInfo().findAttr(attr.name))
      op.setAttr(attr.name, attr.value);
  unsigned outs = *getIntegerValue(grad.getAttr("outs")->expr);
  for (unsigned k = outs; k < grad.getOperands().size(); ++k)
    op.addOperand(grad.getOperand(k));
  for (unsigned k = 0; k < outs; ++k) {
    results.push_back(std::make_unique<Value>("", &op, k));
    results.back()->setType(grad.getOperand(k)->getType());
    op.addResult(results.back().get());
  }
}
