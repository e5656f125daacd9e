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
#include <sys/types.h>
#include <vector>

namespace stg {

/// Called as results arrive: plans done, of how many.
using SearchProgress = std::function<void(size_t done, size_t total)>;

/// Worker processes that evaluate plans of a list, round after round: the
/// plan search evaluates a batch at a time, and a worker keeps what it
/// built for one batch (modules, programs) for the next, as a process
/// forked for each would not. Forked at the first round of more than one
/// job; they leave with the pool.
class PlanWorkerPool {
public:
  PlanWorkerPool(PlanEvaluator &evaluator, llvm::ArrayRef<Plan> plans,
                 unsigned jobs);
  ~PlanWorkerPool();
  PlanWorkerPool(const PlanWorkerPool &) = delete;
  PlanWorkerPool &operator=(const PlanWorkerPool &) = delete;

  /// Evaluates the plans at `indices` (into the pool's plans), those of
  /// one structure one after the other; the results in the order of
  /// `indices`. Fails, and fails every later round, if a worker dies.
  llvm::Expected<std::vector<PlanResult>>
  evaluate(llvm::ArrayRef<size_t> indices, const SearchProgress &progress);

private:
  struct SharedRound;
  llvm::Error start();
  [[noreturn]] void runWorker(int fd);
  /// Ends the workers after one failed; the error says how.
  llvm::Error stopWorkers(llvm::ArrayRef<Plan> round,
                          const std::vector<bool> &returned);

  PlanEvaluator &evaluator;
  llvm::ArrayRef<Plan> plans;
  unsigned jobs;
  /// Each plan's position in the round, ~0u outside it.
  std::vector<uint32_t> positions;
  SharedRound *shared = nullptr;
  std::vector<pid_t> workers;
  std::vector<int> sockets; ///< The parent's end of each worker's.
  bool broken = false;
};

/// Evaluates `plans` with `jobs` worker processes (1: in this process),
/// the plans of one structure (Plan::getStructureKey) one after
/// the other; the results are in the order of `plans`. Fails if a worker
/// dies.
llvm::Expected<std::vector<PlanResult>>
evaluatePlans(PlanEvaluator &evaluator, llvm::ArrayRef<Plan> plans,
              unsigned jobs, const SearchProgress &progress);

} // namespace stg

#endif // STG_SEARCH_PLANWORKERS_H
