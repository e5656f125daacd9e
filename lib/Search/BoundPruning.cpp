//===- BoundPruning.cpp - Skip the plans that cannot win ------------------===//

#include "stg/Search/BoundPruning.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <queue>
#include <sys/mman.h>
#include <sys/wait.h>
#include <tuple>
#include <unistd.h>

using namespace stg;

/// The step lower bound of plans [begin, end) into `steps`, NaN for a
/// plan whose memory lower bound exceeds the limit.
static void boundPlans(const ModelBounds &bounds, llvm::ArrayRef<Plan> plans,
                       const BoundPruningOptions &options, size_t begin,
                       size_t end, double *steps) {
  for (size_t index = begin; index < end; ++index) {
    if (getMemoryLowerBound(bounds, plans[index], options.accounting) >
        options.memoryLimitBytes) {
      steps[index] = std::nan("");
      continue;
    }
    double step = getStepLowerBound(bounds, plans[index], options.system);
    steps[index] = std::isnan(step) ? 0 : step;
  }
}

/// boundPlans of every plan, a share each in `jobs` processes (forked, as
/// the workers: GiNaC is not thread-safe) that write into memory they
/// share; the same numbers whatever the count. A share whose process
/// fails is bounded here.
static std::vector<double> computeStepBounds(const ModelBounds &bounds,
                                             llvm::ArrayRef<Plan> plans,
                                             const BoundPruningOptions &options,
                                             unsigned jobs) {
  size_t count = plans.size();
  std::vector<double> steps(count);
  size_t bytes = std::max<size_t>(1, count) * sizeof(double);
  void *memory = jobs > 1 && count > 1
                     ? mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                            MAP_SHARED | MAP_ANONYMOUS, -1, 0)
                     : MAP_FAILED;
  if (memory == MAP_FAILED) {
    boundPlans(bounds, plans, options, 0, count, steps.data());
    return steps;
  }
  auto *shared = static_cast<double *>(memory);
  auto share = [&](unsigned job) { return count * job / jobs; };
  std::vector<std::pair<pid_t, unsigned>> children;
  llvm::outs().flush();
  llvm::errs().flush();
  for (unsigned job = 1; job < jobs; ++job) {
    pid_t pid = fork();
    if (pid == 0) {
      boundPlans(bounds, plans, options, share(job), share(job + 1), shared);
      _exit(0);
    }
    if (pid > 0)
      children.push_back({pid, job});
    else
      boundPlans(bounds, plans, options, share(job), share(job + 1), shared);
  }
  boundPlans(bounds, plans, options, 0, share(1), shared);
  for (auto [pid, job] : children) {
    int status = 0;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
        WEXITSTATUS(status) != 0)
      boundPlans(bounds, plans, options, share(job), share(job + 1), shared);
  }
  std::copy(shared, shared + count, steps.begin());
  munmap(memory, bytes);
  return steps;
}

llvm::Expected<BoundedResults> stg::evaluatePlansWithinBounds(
    PlanEvaluator &evaluator, llvm::ArrayRef<Plan> plans,
    const ModelBounds &bounds, const BoundPruningOptions &options,
    unsigned jobs, const SearchProgress &progress) {
  BoundedResults bounded;
  std::optional<llvm::TimeRegion> bounding(options.boundTimer);
  std::vector<double> stepBound =
      computeStepBounds(bounds, plans, options, jobs);
  std::vector<size_t> order;
  for (size_t index = 0; index < plans.size(); ++index) {
    if (std::isnan(stepBound[index])) {
      ++bounded.pruned[MemoryBoundReason];
      continue;
    }
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
  // The `keep` best fitting steps found, the slowest on top: a plan whose
  // bound exceeds it cannot rank among them.
  std::priority_queue<double> kept;
  size_t keep = std::max<size_t>(1, options.keep);
  auto getThreshold = [&] {
    return kept.size() < keep ? std::numeric_limits<double>::infinity()
                              : kept.top();
  };
  size_t batchSize = std::max<size_t>(1, options.batchSize);
  // One set of workers for every batch: each keeps what it built.
  PlanWorkerPool workers(evaluator, plans, jobs);
  for (size_t begin = 0; begin < order.size();) {
    // A plan is dropped only if it is slower than the keep-th best by a
    // nanosecond or more: the ranking counts whole nanoseconds, and a plan
    // that ties it there could rank above it.
    double threshold = getThreshold();
    std::vector<size_t> batch;
    size_t end = begin;
    bool rest = false;
    for (; end < order.size(); ++end) {
      size_t index = order[end];
      // The first batch is a quarter: the best step it finds prunes the
      // rest, whose larger batches cost fewer rounds.
      if (batch.size() >= (begin ? batchSize : (batchSize + 3) / 4))
        break;
      if (stepBound[index] > threshold + 1e-3) {
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
      if (result.status == PlanStatus::Fits &&
          std::isfinite(result.stepMicros)) {
        kept.push(result.stepMicros);
        if (kept.size() > keep)
          kept.pop();
      }
      bounded.results.push_back(std::move(result));
    }
    begin = end;
    // The bounds ascend: once one exceeds the threshold, all the rest do.
    if (rest)
      break;
  }
  if (size_t skipped = plans.size() - done)
    bounded.pruned[StepBoundReason] = skipped;
  if (progress)
    progress(plans.size(), plans.size());
  return bounded;
}
