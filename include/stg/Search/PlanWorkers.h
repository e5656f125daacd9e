//===- PlanWorkers.h - Evaluate plans on every core -------------*- C++ -*-===//
//
// Plans are evaluated in worker processes, not threads: GiNaC's expressions
// share reference-counted constants that are not thread-safe. Workers take
// a structure's plans at a time from a shared counter (so that each builds
// a structure's programs once) and send their results back as binary
// records, the numbers exact. A plan's result depends on the plan alone, so
// the results are the same whatever the number of workers.
//
//===----------------------------------------------------------------------===//

#ifndef STG_SEARCH_PLANWORKERS_H
#define STG_SEARCH_PLANWORKERS_H

#include "stg/Search/PlanEvaluator.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"

#include <functional>
#include <vector>

namespace stg {

/// Called as results arrive: plans done, of how many.
using SearchProgress = std::function<void(size_t done, size_t total)>;

/// Evaluates `plans` with `jobs` worker processes (1: in this process),
/// the plans of one structure (Plan::getStructureKey) one after
/// the other; the results are in the order of `plans`. Fails if a worker
/// dies.
llvm::Expected<std::vector<PlanResult>>
evaluatePlans(PlanEvaluator &evaluator, llvm::ArrayRef<Plan> plans,
              unsigned jobs, const SearchProgress &progress);

} // namespace stg

#endif // STG_SEARCH_PLANWORKERS_H
