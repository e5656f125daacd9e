//===- PlanWorkers.cpp - Evaluate plans on every core ---------------------===//

#include "stg/Search/PlanWorkers.h"

#include "stg/Search/SearchResults.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/raw_ostream.h"

#include <atomic>
#include <cerrno>
#include <numeric>
#include <poll.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace stg;

/// The most plans a worker takes at a time: few enough that the last
/// batches spread over the workers.
static constexpr size_t MaxBatch = 64;

/// A worker's line: `INDEX PRUNED JSON`.
static std::string encode(size_t index, const PlanResult &result) {
  std::string line;
  llvm::raw_string_ostream os(line);
  os << index << ' ' << (result.prunedByModel ? 1 : 0) << ' '
     << toJSON(result) << '\n';
  return line;
}

static bool writeAll(int fd, llvm::StringRef data) {
  while (!data.empty()) {
    ssize_t written = ::write(fd, data.data(), data.size());
    if (written < 0 && errno == EINTR)
      continue;
    if (written <= 0)
      return false;
    data = data.drop_front(written);
  }
  return true;
}

/// The plans' indices in the order they are evaluated, those of one
/// structure together (in their order, the structures in the order of
/// their first plan), cut into the batches workers take: a structure's
/// plans, or MaxBatch of them, so that a worker builds a structure's
/// programs once.
struct EvaluationOrder {
  std::vector<size_t> order;
  std::vector<size_t> batchBegin; ///< Positions in `order`, and its end.
  size_t getNumBatches() const { return batchBegin.size() - 1; }
};

static EvaluationOrder getEvaluationOrder(llvm::ArrayRef<Plan> plans) {
  llvm::StringMap<size_t> firstOfKey;
  std::vector<size_t> group(plans.size());
  for (size_t index = 0; index < plans.size(); ++index)
    group[index] = firstOfKey.try_emplace(plans[index].getStructureKey(), index)
                       .first->second;
  EvaluationOrder evaluation;
  std::vector<size_t> &order = evaluation.order;
  order.resize(plans.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return group[a] < group[b]; });
  for (size_t position = 0; position < order.size(); ++position)
    if (position == 0 || group[order[position]] != group[order[position - 1]] ||
        position - evaluation.batchBegin.back() == MaxBatch)
      evaluation.batchBegin.push_back(position);
  evaluation.batchBegin.push_back(order.size());
  return evaluation;
}

[[noreturn]] static void runWorker(PlanEvaluator &evaluator,
                                   llvm::ArrayRef<Plan> plans,
                                   const EvaluationOrder &evaluation,
                                   std::atomic<size_t> &next, int fd) {
  for (;;) {
    size_t batch = next.fetch_add(1);
    if (batch >= evaluation.getNumBatches())
      _exit(0);
    for (size_t position = evaluation.batchBegin[batch];
         position < evaluation.batchBegin[batch + 1]; ++position) {
      size_t index = evaluation.order[position];
      if (!writeAll(fd, encode(index, evaluator.evaluate(plans[index]))))
        _exit(1);
    }
  }
}

/// Reads one worker line into `results`.
static llvm::Error decode(llvm::StringRef line,
                          std::vector<PlanResult> &results,
                          std::vector<bool> &returned) {
  auto [indexText, rest] = line.split(' ');
  auto [prunedText, json] = rest.split(' ');
  size_t index = 0;
  llvm::Expected<llvm::json::Value> value = llvm::json::parse(json);
  if (indexText.getAsInteger(10, index) || index >= results.size() || !value) {
    if (!value)
      llvm::consumeError(value.takeError());
    return llvm::createStringError(std::errc::protocol_error,
                                   "a search worker sent a malformed result");
  }
  llvm::Expected<PlanResult> result = parsePlanResult(*value);
  if (!result)
    return result.takeError();
  result->prunedByModel = prunedText == "1";
  results[index] = std::move(*result);
  returned[index] = true;
  return llvm::Error::success();
}

llvm::Expected<std::vector<PlanResult>>
stg::evaluatePlans(PlanEvaluator &evaluator, llvm::ArrayRef<Plan> plans,
                   unsigned jobs, const SearchProgress &progress) {
  std::vector<PlanResult> results(plans.size());
  EvaluationOrder evaluation = getEvaluationOrder(plans);
  const std::vector<size_t> &order = evaluation.order;
  jobs = std::max(1u,
                  unsigned(std::min<size_t>(jobs, evaluation.getNumBatches())));
  if (jobs == 1) {
    for (size_t position = 0; position < plans.size(); ++position) {
      size_t index = order[position];
      results[index] = evaluator.evaluate(plans[index]);
      if (progress)
        progress(position + 1, plans.size());
    }
    return results;
  }

  void *shared = mmap(nullptr, sizeof(std::atomic<size_t>),
                      PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1,
                      0);
  if (shared == MAP_FAILED)
    return llvm::createStringError(std::error_code(errno, std::generic_category()),
                                   "cannot share the plan counter");
  auto *next = new (shared) std::atomic<size_t>(0);
  llvm::outs().flush();
  llvm::errs().flush();
  std::vector<pid_t> workers;
  std::vector<pollfd> pipes;
  for (unsigned job = 0; job < jobs; ++job) {
    int fds[2];
    if (pipe(fds) != 0)
      break;
    pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      for (const pollfd &other : pipes)
        close(other.fd);
      runWorker(evaluator, plans, evaluation, *next, fds[1]);
    }
    close(fds[1]);
    if (pid < 0) {
      close(fds[0]);
      break;
    }
    workers.push_back(pid);
    pipes.push_back({fds[0], POLLIN, 0});
  }

  llvm::Error error = llvm::Error::success();
  if (workers.empty())
    error = llvm::createStringError(std::errc::resource_unavailable_try_again,
                                    "cannot start search workers");
  std::vector<std::string> pending(pipes.size());
  std::vector<bool> returned(plans.size());
  size_t done = 0, open = pipes.size();
  while (open) {
    if (poll(pipes.data(), pipes.size(), -1) < 0) {
      if (errno == EINTR)
        continue;
      break;
    }
    for (size_t i = 0; i < pipes.size(); ++i) {
      if (pipes[i].fd < 0 || !(pipes[i].revents & (POLLIN | POLLHUP)))
        continue;
      char buffer[65536];
      ssize_t got = read(pipes[i].fd, buffer, sizeof buffer);
      if (got < 0 && errno == EINTR)
        continue;
      if (got <= 0) {
        close(pipes[i].fd);
        pipes[i].fd = -1;
        --open;
        continue;
      }
      pending[i].append(buffer, got);
      size_t end;
      while ((end = pending[i].find('\n')) != std::string::npos) {
        if (!error)
          error = decode(llvm::StringRef(pending[i]).take_front(end), results,
                         returned);
        pending[i].erase(0, end + 1);
        ++done;
        if (progress)
          progress(done, plans.size());
      }
    }
  }
  // A worker that dies (the kernel's out-of-memory killer, say) leaves
  // plans without a result; the first of them is likely what killed it.
  auto firstMissing = [&] {
    auto missing = llvm::find(returned, false);
    return missing == returned.end()
               ? std::string()
               : "; the first plan without a result: " +
                     plans[missing - returned.begin()].getLabel();
  };
  for (pid_t pid : workers) {
    int status = 0;
    waitpid(pid, &status, 0);
    if (error || (WIFEXITED(status) && WEXITSTATUS(status) == 0))
      continue;
    std::string how = WIFSIGNALED(status)
                          ? "was killed by signal " +
                                std::to_string(WTERMSIG(status))
                          : "failed";
    error = llvm::createStringError(
        std::errc::io_error, "a search worker %s before its plans were done%s",
        how.c_str(), firstMissing().c_str());
  }
  munmap(shared, sizeof(std::atomic<size_t>));
  if (error)
    return error;
  if (done != plans.size())
    return llvm::createStringError(std::errc::io_error,
                                   "search workers returned %zu of %zu plans",
                                   done, plans.size());
  return results;
}
