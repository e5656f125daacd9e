//===- BoundPruning.cpp - Skip the plans that cannot win ------------------===//

#include "stg/Search/BoundPruning.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <tuple>

using namespace stg;

llvm::Expected<BoundedResults> stg::evaluatePlansWithinBounds(
    PlanEvaluator &evaluator, llvm::ArrayRef<Plan> plans,
    const ModelBounds &bounds, const BoundPruningOptions &options,
    unsigned jobs, const SearchProgress &progress) {
  BoundedResults bounded;
  std::vector<double> stepBound(plans.size());
  std::vector<size_t> order;
  std::optional<llvm::TimeRegion> bounding(options.boundTimer);
  for (size_t index = 0; index < plans.size(); ++index) {
    if (getMemoryLowerBound(bounds, plans[index], options.accounting) >
        options.memoryLimitBytes) {
      ++bounded.pruned[MemoryBoundReason];
      continue;
    }
    stepBound[index] = getStepLowerBound(bounds, plans[index], options.system);
    order.push_back(index);
  }
  // Ties keep the plans' order: the batches are the same on every run.
  llvm::sort(order, [&](size_t a, size_t b) {
    return std::tie(stepBound[a], a) < std::tie(stepBound[b], b);
  });
  bounding.reset();
  llvm::TimeRegion evaluating(options.evaluationTimer);
  size_t done = plans.size() - order.size();
  if (progress && done)
    progress(done, plans.size());
  double best = std::numeric_limits<double>::infinity();
  size_t batchSize = std::max<size_t>(1, options.batchSize);
  // One set of workers for every batch: each keeps what it built.
  PlanWorkerPool workers(evaluator, plans, jobs);
  for (size_t begin = 0; begin < order.size();) {
    // A plan is dropped only if it is slower than the best by a nanosecond
    // or more: the ranking counts whole nanoseconds, and a plan that ties
    // the best there could rank above it.
    std::vector<size_t> batch;
    size_t end = begin;
    bool rest = false;
    for (; end < order.size(); ++end) {
      size_t index = order[end];
      if (batch.size() >= batchSize)
        break;
      if (stepBound[index] > best + 1e-3) {
        rest = true;
        break;
      }
      batch.push_back(index);
    }
    if (batch.empty())
      break;
    SearchProgress batchProgress;
    if (progress)
      batchProgress = [&](size_t batchDone, size_t) {
        progress(done + batchDone, plans.size());
      };
    llvm::Expected<std::vector<PlanResult>> results =
        workers.evaluate(batch, batchProgress);
    if (!results)
      return results.takeError();
    done += batch.size();
    for (PlanResult &result : *results) {
      if (result.status == PlanStatus::Fits && std::isfinite(result.stepMicros))
        best = std::min(best, result.stepMicros);
      bounded.results.push_back(std::move(result));
    }
    begin = end;
    // The bounds ascend: once one exceeds the best, all the rest do.
    if (rest)
      break;
  }
  if (size_t skipped = plans.size() - done)
    bounded.pruned[StepBoundReason] = skipped;
  if (progress)
    progress(plans.size(), plans.size());
  return bounded;
}
