//===- CollectiveCensus.h - An example pass outside stagec ------*- C++ -*-===//
//
// Counts the collectives of a distributed module by kind and group, and
// prints the per-rank bytes each kind moves, as an expression.
//
//===----------------------------------------------------------------------===//

#ifndef COLLECTIVE_CENSUS_H
#define COLLECTIVE_CENSUS_H

#include "stg/Passes/Pass.h"

#include <memory>

std::unique_ptr<stg::Pass> createCollectiveCensusPass(llvm::raw_ostream &os);

#endif // COLLECTIVE_CENSUS_H
