//===- Passes.h - Factories of the built-in passes --------------*- C++ -*-===//

#ifndef STG_PASSES_PASSES_H
#define STG_PASSES_PASSES_H

#include "stg/Passes/Pass.h"

namespace stg {

#define STAGE_PASS(NAME, FACTORY, DESCRIPTION) std::unique_ptr<Pass> FACTORY();
#include "stg/Passes/Passes.def"

} // namespace stg

#endif // STG_PASSES_PASSES_H
