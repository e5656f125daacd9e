//===- PlanWorkers.cpp - Evaluate plans on every core ---------------------===//

#include "stg/Search/PlanWorkers.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/raw_ostream.h"

#include <atomic>
#include <cerrno>
#include <cstring>
#include <numeric>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace stg;

/// The most plans a worker takes at a time: few enough that the last
/// batches, and those of a space with few families, spread over the
/// workers.
static constexpr size_t MaxBatch = 256;

/// A worker's result as the parent reads it: a fixed part, then the
/// reason's bytes. Binary, not JSON: the parent shares a core with the
/// workers, and the numbers come back exact without printing and parsing.
struct ResultRecord {
  uint64_t index;
  uint64_t memory[5]; ///< Weights, gradients, optimizer, activations, state.
  double inFlightMicrobatches;
  double numbers[6]; ///< Step, compute, exposed, bubble, MFU, tokens/s.
  uint32_t reasonSize;
  uint8_t status;
  uint8_t prunedByModel;
};

/// A record with this index ends a worker's round: it takes no batch of it
/// any more, so the next round's order may be written.
static constexpr uint64_t EndOfRound = ~uint64_t(0);

/// The longest reason a record may carry: a diagnostic's first line.
static constexpr uint32_t MaxReasonSize = 1 << 20;

static std::string encode(size_t index, const PlanResult &result) {
  const StageMemory &memory = result.memory;
  ResultRecord record{};
  record.index = index;
  uint64_t parts[5] = {memory.weights, memory.gradients, memory.optimizer,
                       memory.activations, memory.state};
  std::copy(std::begin(parts), std::end(parts), record.memory);
  record.inFlightMicrobatches = memory.inFlightMicrobatches;
  double numbers[6] = {result.stepMicros,
                       result.computeMicros,
                       result.exposedCommunicationMicros,
                       result.bubbleFraction,
                       result.mfu,
                       result.tokensPerSecondPerGPU};
  std::copy(std::begin(numbers), std::end(numbers), record.numbers);
  llvm::StringRef reason = result.reason;
  reason = reason.take_front(MaxReasonSize);
  record.reasonSize = reason.size();
  record.status = uint8_t(result.status);
  record.prunedByModel = result.prunedByModel;
  std::string bytes(reinterpret_cast<const char *>(&record), sizeof record);
  bytes.append(reason.begin(), reason.end());
  return bytes;
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
/// family of structures together and in it those of one structure (in
/// their order, the families and structures in the order of their first
/// plan), cut into the batches workers take: a family's plans, or
/// MaxBatch of them, so that a worker builds a family's programs about
/// once.
struct EvaluationOrder {
  std::vector<size_t> order;
  std::vector<size_t> batchBegin; ///< Positions in `order`, and its end.
  size_t getNumBatches() const { return batchBegin.size() - 1; }
};

static EvaluationOrder getEvaluationOrder(llvm::ArrayRef<Plan> plans) {
  // Each plan's family and structure, by the index of their first plan.
  llvm::StringMap<size_t> firstOfFamily, firstOfStructure;
  std::vector<std::pair<size_t, size_t>> group(plans.size());
  for (size_t index = 0; index < plans.size(); ++index)
    group[index] = {
        firstOfFamily.try_emplace(plans[index].getFamilyKey(), index)
            .first->second,
        firstOfStructure.try_emplace(plans[index].getStructureKey(), index)
            .first->second};
  EvaluationOrder evaluation;
  std::vector<size_t> &order = evaluation.order;
  order.resize(plans.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return group[a] < group[b]; });
  for (size_t position = 0; position < order.size(); ++position)
    if (position == 0 ||
        group[order[position]].first != group[order[position - 1]].first ||
        position - evaluation.batchBegin.back() == MaxBatch)
      evaluation.batchBegin.push_back(position);
  evaluation.batchBegin.push_back(order.size());
  return evaluation;
}

/// Reads the worker's records at the front of `bytes` into `results`, each
/// plan's at its position in the round, counting in `ended` the end of its
/// round; the bytes read, or an error. A record cut short stays for the
/// next read.
static llvm::Expected<size_t>
decode(llvm::StringRef bytes, llvm::ArrayRef<Plan> plans,
       llvm::ArrayRef<uint32_t> positions, std::vector<PlanResult> &results,
       std::vector<bool> &returned, size_t &count, size_t &ended) {
  size_t used = 0;
  while (bytes.size() - used >= sizeof(ResultRecord)) {
    ResultRecord record;
    std::memcpy(&record, bytes.data() + used, sizeof record);
    if (record.index == EndOfRound && record.reasonSize == 0) {
      ++ended;
      used += sizeof record;
      continue;
    }
    if (record.index >= positions.size() ||
        positions[record.index] >= results.size() ||
        returned[positions[record.index]] ||
        record.status > uint8_t(PlanStatus::Failed) ||
        record.reasonSize > MaxReasonSize)
      return llvm::createStringError(std::errc::protocol_error,
                                     "a search worker sent a malformed result");
    if (bytes.size() - used - sizeof record < record.reasonSize)
      break;
    size_t position = positions[record.index];
    PlanResult &result = results[position];
    result.plan = plans[record.index];
    result.status = PlanStatus(record.status);
    result.prunedByModel = record.prunedByModel;
    result.reason = bytes.substr(used + sizeof record, record.reasonSize).str();
    StageMemory &memory = result.memory;
    memory.weights = record.memory[0];
    memory.gradients = record.memory[1];
    memory.optimizer = record.memory[2];
    memory.activations = record.memory[3];
    memory.state = record.memory[4];
    memory.inFlightMicrobatches = record.inFlightMicrobatches;
    result.stepMicros = record.numbers[0];
    result.computeMicros = record.numbers[1];
    result.exposedCommunicationMicros = record.numbers[2];
    result.bubbleFraction = record.numbers[3];
    result.mfu = record.numbers[4];
    result.tokensPerSecondPerGPU = record.numbers[5];
    returned[position] = true;
    used += sizeof record + record.reasonSize;
    ++count;
  }
  return used;
}

/// What the parent and its workers share: the round's evaluation order and
/// the counter of its batches workers take, then the order's plan indices
/// and batch beginnings (room for every plan of the pool).
struct PlanWorkerPool::SharedRound {
  std::atomic<size_t> next{0};
  size_t numBatches = 0;

  size_t *getOrder() { return reinterpret_cast<size_t *>(this + 1); }
  size_t *getBatchBegin(size_t numPlans) { return getOrder() + numPlans; }
  static size_t getBytes(size_t numPlans) {
    return sizeof(SharedRound) + sizeof(size_t) * (2 * numPlans + 1);
  }
};

PlanWorkerPool::PlanWorkerPool(PlanEvaluator &evaluator,
                               llvm::ArrayRef<Plan> plans, unsigned jobs)
    : evaluator(evaluator), plans(plans), jobs(std::max(1u, jobs)),
      positions(plans.size(), ~0u) {}

PlanWorkerPool::~PlanWorkerPool() {
  // A worker reads the end of its socket as the word to leave.
  for (int fd : sockets)
    close(fd);
  for (pid_t pid : workers)
    waitpid(pid, nullptr, 0);
  if (shared)
    munmap(shared, SharedRound::getBytes(plans.size()));
}

[[noreturn]] void PlanWorkerPool::runWorker(int fd) {
  // A round's records go out a batch at a time, in one write: a write per
  // plan woke the parent, which shares the cores, 179,000 times on a large
  // space. Each round starts with a byte from the parent; the end of the
  // socket ends the worker.
  std::string records;
  size_t *order = shared->getOrder();
  size_t *batchBegin = shared->getBatchBegin(plans.size());
  for (;;) {
    char command;
    ssize_t got = read(fd, &command, 1);
    if (got < 0 && errno == EINTR)
      continue;
    if (got <= 0)
      _exit(0);
    for (;;) {
      size_t batch = shared->next.fetch_add(1);
      if (batch >= shared->numBatches)
        break;
      records.clear();
      for (size_t position = batchBegin[batch];
           position < batchBegin[batch + 1]; ++position) {
        size_t index = order[position];
        records += encode(index, evaluator.evaluate(plans[index]));
      }
      if (!writeAll(fd, records))
        _exit(1);
    }
    // Past the last batch: the parent may now reset the counter.
    ResultRecord end{};
    end.index = EndOfRound;
    if (!writeAll(fd, llvm::StringRef(reinterpret_cast<const char *>(&end),
                                      sizeof end)))
      _exit(1);
  }
}

llvm::Error PlanWorkerPool::start() {
  if (!workers.empty() || broken)
    return broken ? llvm::createStringError(std::errc::io_error,
                                            "the search workers stopped")
                  : llvm::Error::success();
  void *memory =
      mmap(nullptr, SharedRound::getBytes(plans.size()), PROT_READ | PROT_WRITE,
           MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (memory == MAP_FAILED)
    return llvm::createStringError(
        std::error_code(errno, std::generic_category()),
        "cannot share the plans' order with the search workers");
  shared = new (memory) SharedRound();
  llvm::outs().flush();
  llvm::errs().flush();
  for (unsigned job = 0; job < jobs; ++job) {
    int fds[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0)
      break;
    pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      for (int other : sockets)
        close(other);
      runWorker(fds[1]);
    }
    close(fds[1]);
    if (pid < 0) {
      close(fds[0]);
      break;
    }
    workers.push_back(pid);
    sockets.push_back(fds[0]);
  }
  if (workers.empty()) {
    broken = true;
    return llvm::createStringError(std::errc::resource_unavailable_try_again,
                                   "cannot start search workers");
  }
  return llvm::Error::success();
}

llvm::Expected<std::vector<PlanResult>>
PlanWorkerPool::evaluate(llvm::ArrayRef<size_t> indices,
                         const SearchProgress &progress) {
  std::vector<PlanResult> results(indices.size());
  std::vector<Plan> round;
  round.reserve(indices.size());
  for (size_t index : indices)
    round.push_back(plans[index]);
  EvaluationOrder evaluation = getEvaluationOrder(round);
  if (jobs == 1) {
    for (size_t position = 0; position < round.size(); ++position) {
      size_t at = evaluation.order[position];
      results[at] = evaluator.evaluate(round[at]);
      if (progress)
        progress(position + 1, round.size());
    }
    return results;
  }
  if (round.empty())
    return results;
  if (llvm::Error error = start())
    return error;
  for (size_t at = 0; at < indices.size(); ++at)
    positions[indices[at]] = at;
  size_t *order = shared->getOrder();
  for (size_t position = 0; position < round.size(); ++position)
    order[position] = indices[evaluation.order[position]];
  std::copy(evaluation.batchBegin.begin(), evaluation.batchBegin.end(),
            shared->getBatchBegin(plans.size()));
  shared->numBatches = evaluation.getNumBatches();
  shared->next.store(0);
  // Workers past the batches there are wait for the next round at once.
  std::vector<pollfd> pipes;
  for (int fd : sockets) {
    char command = 'r';
    if (send(fd, &command, 1, MSG_NOSIGNAL) != 1)
      broken = true;
    pipes.push_back({fd, POLLIN, 0});
  }

  llvm::Error error = llvm::Error::success();
  std::vector<std::string> pending(pipes.size());
  std::vector<bool> returned(round.size());
  // Every result, and every worker past its last batch: a worker still
  // taking one would take the next round's with this round's count.
  size_t done = 0, ended = 0;
  while ((done < round.size() || ended < pipes.size()) && !broken) {
    if (poll(pipes.data(), pipes.size(), -1) < 0) {
      if (errno == EINTR)
        continue;
      broken = true;
      break;
    }
    for (size_t i = 0; i < pipes.size(); ++i) {
      if (!(pipes[i].revents & (POLLIN | POLLHUP)))
        continue;
      char buffer[65536];
      ssize_t got = read(pipes[i].fd, buffer, sizeof buffer);
      if (got < 0 && errno == EINTR)
        continue;
      if (got <= 0) {
        broken = true; // A worker left in the middle of a round.
        break;
      }
      pending[i].append(buffer, got);
      size_t before = done;
      llvm::Expected<size_t> used =
          decode(pending[i], plans, positions, results, returned, done, ended);
      if (!used) {
        error = used.takeError();
        broken = true;
        break;
      }
      pending[i].erase(0, *used);
      if (progress && done != before)
        progress(done, round.size());
    }
  }
  for (size_t index : indices)
    positions[index] = ~0u;
  if (error)
    return error;
  if (broken)
    return stopWorkers(round, returned);
  return results;
}

llvm::Error PlanWorkerPool::stopWorkers(llvm::ArrayRef<Plan> round,
                                        const std::vector<bool> &returned) {
  // A worker that dies (the kernel's out-of-memory killer, say) leaves
  // plans without a result; the first of them begins the batch (a
  // family's plans, or MaxBatch of them) that likely killed it.
  auto missing = llvm::find(returned, false);
  std::string first = missing == returned.end()
                          ? std::string()
                          : "; the first plan without a result: " +
                                round[missing - returned.begin()].getLabel();
  for (int fd : sockets)
    close(fd);
  sockets.clear();
  std::string how = "failed";
  for (pid_t pid : workers) {
    int status = 0;
    waitpid(pid, &status, 0);
    if (WIFSIGNALED(status))
      how = "was killed by signal " + std::to_string(WTERMSIG(status));
    else if (WIFEXITED(status) && WEXITSTATUS(status) != 0)
      how = "failed";
  }
  workers.clear();
  return llvm::createStringError(
      std::errc::io_error, "a search worker %s before its plans were done%s",
      how.c_str(), first.c_str());
}

llvm::Expected<std::vector<PlanResult>>
stg::evaluatePlans(PlanEvaluator &evaluator, llvm::ArrayRef<Plan> plans,
                   unsigned jobs, const SearchProgress &progress) {
  PlanWorkerPool pool(evaluator, plans, jobs);
  std::vector<size_t> indices(plans.size());
  std::iota(indices.begin(), indices.end(), 0);
  return pool.evaluate(indices, progress);
}
