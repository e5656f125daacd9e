//===- WeightBounds.h - The weights the memory bound reads ------*- C++ -*-===//
//
// Part of readModelBounds (ModelBounds.cpp), apart because it reads the
// module, not compiled programs.
//
//===----------------------------------------------------------------------===//

#ifndef STG_LIB_SEARCH_WEIGHTBOUNDS_H
#define STG_LIB_SEARCH_WEIGHTBOUNDS_H

#include "stg/Search/PlanBounds.h"

namespace stg {

class Module;

/// The layer groups and the weights outside the layers of `module` (the
/// model compiled on one GPU) into `bounds`; leaves `bounds` without them
/// where the numbering does not come out as Placement's.
void readWeightBounds(const Module &module, const ModelShape &shape,
                      ModelBounds &bounds);

} // namespace stg

#endif // STG_LIB_SEARCH_WEIGHTBOUNDS_H
