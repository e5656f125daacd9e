//===- BackwardSplit.h - Input and weight gradients apart -------*- C++ -*-===//
//
// Zero-bubble schedules (Schedule.h) run a micro-batch's backward as two
// steps: B, the work the input gradient needs (the stage before waits for
// it), and W, the rest: the weight gradients, which nothing waits for until
// the optimizer. The split is read off the data flow, so every model and
// every pass's ops (recomputation, collectives, casts) fall on their side
// without a list of op kinds.
//
//===----------------------------------------------------------------------===//

#ifndef STG_LIB_INSTANTIATE_BACKWARDSPLIT_H
#define STG_LIB_INSTANTIATE_BACKWARDSPLIT_H

#include "stg/IR/Module.h"

#include "llvm/ADT/DenseSet.h"

namespace stg {

/// The backward ops of `module` that no input gradient depends on: those a
/// W step runs. The others are B's: an op is B's if a backward repeat's
/// body yields its result (the gradient carried to the layer below), if a
/// backward repeat starts from it, or if a B op reads it.
llvm::DenseSet<const Op *> findWeightGradientOps(const Module &module);

} // namespace stg

#endif // STG_LIB_INSTANTIATE_BACKWARDSPLIT_H
