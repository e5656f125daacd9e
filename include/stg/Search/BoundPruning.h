//===- BoundPruning.h - Skip the plans that cannot win ----------*- C++ -*-===//
//
// Evaluates a search's plans but those its bounds (PlanBounds.h) rule out:
// a plan whose memory bound exceeds the limit is not compiled, and the
// others are evaluated in the order of their step bound, in batches of a
// fixed size; before each batch, the plans whose step bound exceeds the
// best step of a fitting plan of the batches before are dropped. The
// batches and the best step depend on the plans alone, not on the worker
// count or timing, so the plans kept, and each one's result, are the same
// whatever -j.
//
//===----------------------------------------------------------------------===//

#ifndef STG_SEARCH_BOUNDPRUNING_H
#define STG_SEARCH_BOUNDPRUNING_H

#include "stg/Search/PlanBounds.h"
#include "stg/Search/PlanWorkers.h"

#include "llvm/Support/Timer.h"

#include <map>
#include <string>

namespace stg {

/// The reasons bound pruning counts plans under.
inline constexpr const char *MemoryBoundReason =
    "memory lower bound exceeds the limit";
inline constexpr const char *StepBoundReason =
    "step lower bound exceeds the best step found";

struct BoundPruningOptions {
  uint64_t memoryLimitBytes = 0;
  MemoryAccounting accounting = MemoryAccounting::Megatron;
  SystemSpec system;
  /// Plans per batch, the first a quarter: small enough that the best step
  /// found early prunes most of the space, large enough that a batch keeps
  /// every worker busy and builds each family's programs for several of
  /// its plans.
  size_t batchSize = 4096;
  /// The best plans that rank as they would without pruning: a plan is
  /// dropped once its step bound exceeds the keep-th best fitting step
  /// found (the plans the search prints, emits and verifies).
  size_t keep = 1;
  /// If set, the time spent bounding the plans, and evaluating them
  /// (stage-search --time-phases).
  llvm::Timer *boundTimer = nullptr, *evaluationTimer = nullptr;
};

struct BoundedResults {
  std::vector<PlanResult> results;        ///< The plans evaluated, in no order.
  std::map<std::string, uint64_t> pruned; ///< Plans not compiled, by why.
};

/// Evaluates the plans of `plans` that the bounds do not rule out, with
/// `jobs` workers (evaluatePlans); `progress` counts the pruned plans as
/// done.
llvm::Expected<BoundedResults>
evaluatePlansWithinBounds(PlanEvaluator &evaluator, llvm::ArrayRef<Plan> plans,
                          const ModelBounds &bounds,
                          const BoundPruningOptions &options, unsigned jobs,
                          const SearchProgress &progress);

} // namespace stg

#endif // STG_SEARCH_BOUNDPRUNING_H
