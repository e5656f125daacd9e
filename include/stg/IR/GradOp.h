//===- GradOp.h - Looking through a grad op to its forward op ---*- C++ -*-===//
//
// A `grad[of=KIND]` op (built by autodiff) is costed and distributed by the
// rules of its forward op. These helpers name that kind and rebuild a
// detached stand-in of the forward op, with the grad op's forward operands
// and results typed like its incoming gradients, to ask those rules.
//
//===----------------------------------------------------------------------===//

#ifndef STG_IR_GRADOP_H
#define STG_IR_GRADOP_H

#include "stg/IR/Graph.h"

#include <memory>
#include <vector>

namespace stg {

/// The kind a grad op differentiates (its `of` attribute).
OpKind getGradForwardKind(const Op &grad);

/// A detached forward op for a grad op; lives as long as this object.
class ForwardStandIn {
public:
  explicit ForwardStandIn(const Op &grad);
  const Op &get() const { return op; }

private:
  Op op;
  std::vector<std::unique_ptr<Value>> results;
};

} // namespace stg

#endif // STG_IR_GRADOP_H
