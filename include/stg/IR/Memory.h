//===- Memory.h - What one rank keeps in device memory ----------*- C++ -*-===//
//
// The bytes one rank holds during a training step, by kind, as expressions
// over dims and axis degrees. Computed by the `memory` pass and printed with
// the module.
//
//===----------------------------------------------------------------------===//

#ifndef STG_IR_MEMORY_H
#define STG_IR_MEMORY_H

#include "stg/IR/Expr.h"

namespace stg {

struct MemoryBreakdown {
  Expr weights = 0;     ///< Local weight shards, in their element type.
  Expr gradients = 0;   ///< One gradient per local weight element.
  Expr optimizer = 0;   ///< fp32 master weights and two fp32 moments: 12 B.
  Expr activations = 0; ///< Forward values the backward pass reads.
  Expr state = 0;       ///< Persistent non-trainable tensors (KV cache).

  Expr total() const {
    return weights + gradients + optimizer + activations + state;
  }
};

} // namespace stg

#endif // STG_IR_MEMORY_H
