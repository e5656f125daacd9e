//===- Passes.h - Factories of the built-in passes --------------*- C++ -*-===//

#ifndef STG_PASSES_PASSES_H
#define STG_PASSES_PASSES_H

#include "stg/Passes/Pass.h"

namespace stg {

#define STAGE_PASS(NAME, FACTORY, DESCRIPTION) std::unique_ptr<Pass> FACTORY();
#include "stg/Passes/Passes.def"

/// shard-optimizer for a module whose degrees are bound later, plan by plan
/// (the search): a shard's first dimension is padded as `ceil(rows / D) * D`
/// over the degrees' symbols D, which binds to what the pass gives with the
/// degrees bound.
std::unique_ptr<Pass> createShardOptimizerPassForAnyDegrees();

} // namespace stg

#endif // STG_PASSES_PASSES_H
