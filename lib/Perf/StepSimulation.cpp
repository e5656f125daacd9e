//===- StepSimulation.cpp - A discrete-event simulation of one step -------===//
//
// Events are node completions, ordered by time and then by id; each stream
// runs its ready node with the lowest id. That rule does not change when
// every node of a window moves by one layer and the clock by one period, so
// a folded layer's copies (StepShape.h) settle into a period once what the
// copies do no longer depends on where they are: then the state at the end
// of copy k is the state at the end of copy k-1, moved by a copy and by
// the time between them. The simulation compares the two (node by node, in
// the copies still running) and, when they match, moves the state on by
// all but the last copy at once, adding the period's busy time for each
// copy jumped over. Whatever differs between layers (a prefix still
// running, a backlog on a stream that grows from layer to layer, a node
// every layer feeds) makes the states differ, and the simulation runs on
// node by node. The clock counts whole picoseconds, so the comparison is
// exact and the jump gives what simulating every copy gives; a clock of
// floating-point microseconds rounds differently in each copy, which
// breaks ties between layers differently and would make no two states
// equal.
//
//===----------------------------------------------------------------------===//

#include "StepShape.h"

#include "llvm/ADT/Hashing.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/Compiler.h"

#include <algorithm>
#include <cmath>
#include <optional>

using namespace stg;

void StepShape::clear() {
  for (auto *list : {&initialPending, &childBegin, &recvs, &sends})
    list->clear();
  streams.clear();
  picos.clear();
  children.clear();
  foldBegin = foldEnd = foldCopies = 0;
}

bool StepShape::operator==(const StepShape &other) const {
  return streams == other.streams && initialPending == other.initialPending &&
         childBegin == other.childBegin && children == other.children &&
         foldBegin == other.foldBegin && foldEnd == other.foldEnd &&
         foldCopies == other.foldCopies && picos == other.picos;
}

uint64_t StepShape::hash() const {
  uint64_t value = llvm::hash_combine(
      llvm::hash_combine_range(streams.begin(), streams.end()),
      llvm::hash_combine_range(childBegin.begin(), childBegin.end()),
      llvm::hash_combine_range(picos.begin(), picos.end()), foldBegin, foldEnd,
      foldCopies);
  // Field by field (a ShapeChild's padding is not part of it), and cheaply:
  // equal hashes are compared in full.
  uint64_t edges = 0;
  for (const ShapeChild &child : children)
    edges = edges * 0x100000001b3 + (uint64_t(child.slot) << 2 | child.kind);
  value = llvm::hash_combine(value, edges);
  return value >= ~uint64_t(0) - 1 ? 0 : value;
}

namespace {

enum NodeStatus : uint8_t { Waiting, Ready, Running, Done };

/// The most copies running at once for which a period is looked for.
constexpr uint32_t MaxWindowCopies = 8;

class StepSimulation {
public:
  StepSimulation(const StepShape &shape, llvm::ArrayRef<int64_t> arrivals,
                 bool recordTimes, SimulationScratch &scratch);
  StepOutcome run();

private:
  using Event = SimulationScratch::Event;
  bool inFold(uint32_t id) const {
    return id >= foldFirst && id < foldFirst + numCopies * foldSize;
  }
  uint32_t getCopy(uint32_t id) const { return (id - foldFirst) / foldSize; }
  void pushEvent(int64_t time, uint32_t id);
  void makeReady(uint32_t id, int64_t now);
  void issue(int64_t now);
  void release(uint32_t id, int64_t now, bool byEveryLayer);
  void complete(uint32_t id, int64_t now);
  /// Notes a change to node `id` for the period search.
  void touch(uint32_t id, bool byEveryLayer = false);
  /// Nothing runs, waits for a stream or is due to complete.
  bool isIdle() const {
    return events.empty() && llvm::none_of(busy, [](bool on) { return on; }) &&
           llvm::all_of(ready, [](const auto &queue) { return queue.empty(); });
  }
  // Which other arrivals give the same outcome (see sameFor).
  void watchReceives();
  void receiving(uint32_t recv, int64_t now);
  void received(uint32_t recv, int64_t now);
  void watchIssue(unsigned stream, uint32_t id, int64_t now, bool wasIdle);
  void watchReady(uint32_t id, int64_t now);
  void setSameFor();

  /// The state after copy `copy`'s first node completed, the copies before
  /// `low` done and those after `high` not started.
  struct Snapshot {
    uint32_t copy = 0, low = 0, high = 0;
    int64_t now = 0, computePicos = 0, communicationPicos = 0;
    uint64_t outsideChanges = 0;
    std::vector<uint8_t> status;
    std::vector<uint32_t> pending;
    std::vector<int64_t> ends; ///< Of running nodes, from `now`.
    std::vector<uint8_t> moves;
  };
  void takeSnapshot(uint32_t copy, int64_t now, Snapshot &into) const;
  bool repeats(const Snapshot &before, const Snapshot &after) const;
  /// Moves the state of `after` on by `copies` copies of its period.
  void jump(const Snapshot &before, const Snapshot &after, uint32_t copies);

  const StepShape &shape;
  llvm::ArrayRef<int64_t> arrivals;
  bool recordTimes;
  std::vector<Event> &events;
  std::array<std::vector<uint32_t>, NumReplayStreams> &ready;
  std::vector<uint32_t> &slots, &pending;
  std::vector<uint8_t> &status;
  std::vector<int64_t> &arrival, &starts, &done;
  std::array<bool, NumReplayStreams> busy{};
  /// Per receive (of shape.recvs): what bounds the arrivals of its
  /// message that give the same outcome.
  struct RecvWatch {
    uint32_t id = 0;
    int64_t ready = 0;  ///< When it waited for its message.
    bool exact = false; ///< Only its own arrival is known to.
    bool done = false;
    bool idle = false; ///< Came into an idle step.
  };
  /// A child of a receive. Before the receive completes: the last time
  /// the child, had it been ready, would have started. After: when it
  /// started, if the receive released it into a queue, or when it was
  /// ready, if it waited for another parent.
  struct ChildWatch {
    uint32_t id = 0, recv = 0;
    unsigned stream = 0;
    int64_t lastOpen = -1, released = -1, issued = -1, readyLater = -1;
    bool resolved = false; ///< Its receive's bounds are known.
  };
  llvm::SmallVector<RecvWatch, 2> recvWatch;
  llvm::SmallVector<ChildWatch, 4> childWatch;
  uint32_t unresolved = 0; ///< Children still watched.
  void resolve(ChildWatch &child) {
    if (!child.resolved) {
      child.resolved = true;
      --unresolved;
    }
  }
  // Which completions move with the arrival of the last message to come
  // (`movingCandidate`): its receive's completion, and what it causes.
  // Another arrival moves them alike as long as every completion keeps its
  // place in the order of completions: [lowShift, highShift) picoseconds.
  void trackReceive(uint32_t id, int64_t now, int64_t at);
  void trackPop(int64_t time, uint32_t id);
  int32_t movingCandidate = -1;
  uint32_t movingId = ~0u;
  bool tracking = false;
  uint8_t currentMoves = 0; ///< Of the completion being processed.
  int64_t lowShift = INT64_MIN, highShift = INT64_MAX;
  Event previous{0, 0};
  uint8_t previousMoves = 0;
  bool havePrevious = false;
  std::vector<uint8_t> &moves;

  /// The stream the current event freed, if any: another that issues was
  /// idle before. The first issues come before any completion, whenever
  /// messages arrive: no stream's decision then is watched.
  int freedStream = -1;
  bool watchingIssues = false;
  int64_t finish = 0, computePicos = 0, communicationPicos = 0;
  StepOutcome outcome;

  // The period search, when the step folds a layer into enough copies.
  bool searching = false;
  uint32_t foldFirst = 0, foldSize = 1, numCopies = 0; ///< Template: copy 0.
  std::vector<uint32_t> doneInCopy;
  uint32_t lowCopy = 0, highCopy = 0;
  uint64_t outsideChanges = 0;
  uint32_t outsideRunning = 0;
  std::optional<uint32_t> markerCopy; ///< A copy's first node completed.
  Snapshot snapshots[2];
  bool haveBefore = false;
};

} // namespace

StepSimulation::StepSimulation(const StepShape &shape,
                               llvm::ArrayRef<int64_t> arrivals,
                               bool recordTimes, SimulationScratch &scratch)
    : shape(shape), arrivals(arrivals), recordTimes(recordTimes),
      events(scratch.events), ready(scratch.ready), slots(scratch.slots),
      pending(scratch.pending), status(scratch.status),
      arrival(scratch.arrival), starts(scratch.starts), done(scratch.done),
      moves(scratch.moves) {
  uint32_t total = shape.getNumNodes();
  events.clear();
  for (std::vector<uint32_t> &queue : ready)
    queue.clear();
  // Each node's slot, in the order of the unfolded ids.
  slots.clear();
  slots.reserve(total);
  for (uint32_t slot = 0; slot < shape.foldEnd; ++slot)
    slots.push_back(slot);
  for (uint32_t copy = 1; copy <= shape.foldCopies; ++copy)
    for (uint32_t slot = shape.foldBegin; slot < shape.foldEnd; ++slot)
      slots.push_back(slot);
  for (uint32_t slot = shape.foldEnd; slot < shape.getNumSlots(); ++slot)
    slots.push_back(slot);
  pending.resize(total);
  for (uint32_t id = 0; id < total; ++id)
    pending[id] = shape.initialPending[slots[id]];
  arrival.assign(shape.getNumSlots(), 0);
  for (size_t i = 0; i < shape.recvs.size(); ++i)
    arrival[shape.recvs[i]] = arrivals[i] * 1000;
  done.assign(total, 0);
  watchReceives();
  if (!recordTimes)
    for (uint32_t recv = 0; recv < shape.recvs.size(); ++recv)
      if (!shape.isTemplate(shape.recvs[recv]) &&
          (movingCandidate < 0 || arrivals[recv] >= arrivals[movingCandidate]))
        movingCandidate = recv;
  if (movingCandidate >= 0) {
    tracking = true;
    movingId = shape.getId(shape.recvs[movingCandidate], 0);
    moves.assign(total, 0);
  }
  if (recordTimes)
    starts.assign(total, 0);
  // A jump needs a period seen twice and a copy left after it.
  searching = !recordTimes && shape.foldCopies >= 3;
  if (searching) {
    foldFirst = shape.foldBegin;
    foldSize = shape.getFoldSize();
    numCopies = shape.foldCopies + 1;
    doneInCopy.assign(numCopies, 0);
    status.assign(total, Waiting);
  }
}

LLVM_ATTRIBUTE_ALWAYS_INLINE void StepSimulation::touch(uint32_t id,
                                                        bool byEveryLayer) {
  if (!searching)
    return;
  if (!inFold(id))
    ++outsideChanges;
  else if (!byEveryLayer) // Else the same for every copy.
    highCopy = std::max(highCopy, getCopy(id));
}

LLVM_ATTRIBUTE_ALWAYS_INLINE void StepSimulation::pushEvent(int64_t time,
                                                            uint32_t id) {
  events.push_back({time, id});
  std::push_heap(events.begin(), events.end(), std::greater<>());
  done[id] = time;
  if (tracking)
    moves[id] = currentMoves;
  if (searching) {
    status[id] = Running;
    if (!inFold(id))
      ++outsideRunning;
  }
}

LLVM_ATTRIBUTE_ALWAYS_INLINE void StepSimulation::makeReady(uint32_t id,
                                                            int64_t now) {
  if (LLVM_UNLIKELY(unresolved))
    watchReady(id, now);
  uint32_t slot = slots[id];
  ReplayStream stream = shape.streams[slot];
  if (stream == ReplayStream::None) {
    if (recordTimes)
      starts[id] = now;
    for (RecvWatch &recv : recvWatch)
      if (recv.id == id)
        recv.ready = now;
    pushEvent(std::max(now, arrival[slot]), id);
    if (tracking)
      trackReceive(id, now, arrival[slot]);
    return;
  }
  if (searching)
    status[id] = Ready;
  std::vector<uint32_t> &queue = ready[unsigned(stream)];
  queue.push_back(id);
  std::push_heap(queue.begin(), queue.end(), std::greater<>());
}

LLVM_ATTRIBUTE_ALWAYS_INLINE void StepSimulation::issue(int64_t now) {
  for (unsigned stream = 0; stream < NumReplayStreams; ++stream) {
    std::vector<uint32_t> &queue = ready[stream];
    if (busy[stream] || queue.empty())
      continue;
    std::pop_heap(queue.begin(), queue.end(), std::greater<>());
    uint32_t id = queue.back();
    queue.pop_back();
    int64_t duration = shape.picos[slots[id]];
    (ReplayStream(stream) == ReplayStream::Compute ? computePicos
                                                   : communicationPicos) +=
        duration;
    if (LLVM_UNLIKELY(unresolved) && watchingIssues)
      watchIssue(stream, id, now, int(stream) != freedStream);
    busy[stream] = true;
    if (recordTimes)
      starts[id] = now;
    touch(id);
    pushEvent(now + duration, id);
  }
}

LLVM_ATTRIBUTE_ALWAYS_INLINE void
StepSimulation::release(uint32_t id, int64_t now, bool byEveryLayer) {
  touch(id, byEveryLayer);
  if (--pending[id] == 0)
    makeReady(id, now);
}

LLVM_ATTRIBUTE_ALWAYS_INLINE void StepSimulation::complete(uint32_t id,
                                                           int64_t now) {
  uint32_t slot = slots[id];
  bool isTemplate = shape.isTemplate(slot);
  uint32_t copy = isTemplate ? (id - shape.foldBegin) / shape.getFoldSize() : 0;
  if (searching) {
    status[id] = Done;
    if (inFold(id)) {
      if (++doneInCopy[copy] == foldSize)
        while (lowCopy < numCopies && doneInCopy[lowCopy] == foldSize)
          ++lowCopy;
      if (slot == shape.foldBegin)
        markerCopy = copy;
    } else {
      ++outsideChanges;
      --outsideRunning;
    }
  }
  for (const ShapeChild &child : shape.getChildren(slot)) {
    switch (child.kind) {
    case ShapeChild::Plain:
      release(shape.getId(child.slot, isTemplate ? copy : 0), now, false);
      break;
    case ShapeChild::NextCopy:
      if (copy < shape.foldCopies)
        release(shape.getId(child.slot, copy + 1), now, false);
      break;
    case ShapeChild::LastCopyOnly:
      if (copy == shape.foldCopies)
        release(shape.getId(child.slot, 0), now, false);
      break;
    case ShapeChild::AllCopies:
      for (uint32_t each = 0; each <= shape.foldCopies; ++each)
        release(shape.getId(child.slot, each), now, true);
      break;
    }
  }
}

void StepSimulation::takeSnapshot(uint32_t copy, int64_t now,
                                  Snapshot &into) const {
  into.copy = copy;
  into.low = lowCopy;
  into.high = highCopy;
  into.now = now;
  into.computePicos = computePicos;
  into.communicationPicos = communicationPicos;
  into.outsideChanges = outsideChanges;
  uint32_t begin = foldFirst + lowCopy * foldSize;
  uint32_t end = foldFirst + (highCopy + 1) * foldSize;
  into.status.assign(status.begin() + begin, status.begin() + end);
  into.pending.assign(pending.begin() + begin, pending.begin() + end);
  into.ends.clear();
  for (uint32_t id = begin; id < end; ++id)
    into.ends.push_back(status[id] == Running ? done[id] - now : 0);
  if (tracking)
    into.moves.assign(moves.begin() + begin, moves.begin() + end);
}

bool StepSimulation::repeats(const Snapshot &before,
                             const Snapshot &after) const {
  if (after.copy != before.copy + 1 ||
      after.low - after.copy != before.low - before.copy ||
      after.high - after.copy != before.high - before.copy ||
      after.outsideChanges != before.outsideChanges || outsideRunning ||
      after.status != before.status || after.pending != before.pending ||
      after.ends != before.ends || after.moves != before.moves)
    return false;
  return true;
}

void StepSimulation::jump(const Snapshot &before, const Snapshot &after,
                          uint32_t copies) {
  int64_t period = after.now - before.now;
  uint32_t shift = copies * foldSize;
  uint32_t begin = foldFirst + after.low * foldSize;
  uint32_t end = foldFirst + (after.high + 1) * foldSize;
  // The running copies move on; those they leave behind are done. Copies
  // past the new window stay as they are, as every copy past the old one.
  for (uint32_t id = end; id-- > begin;) {
    status[id + shift] = status[id];
    pending[id + shift] = pending[id];
    done[id + shift] = done[id] + copies * period;
    if (tracking)
      moves[id + shift] = moves[id];
  }
  // The completion just processed is the marker's, of the window.
  previous.first += copies * period;
  previous.second += shift;
  for (uint32_t id = begin; id < begin + shift; ++id) {
    status[id] = Done;
    pending[id] = 0;
  }
  for (uint32_t copy = after.high + copies; copy >= after.low + copies; --copy)
    doneInCopy[copy] = doneInCopy[copy - copies];
  for (uint32_t copy = after.low; copy < after.low + copies; ++copy)
    doneInCopy[copy] = foldSize;
  lowCopy = after.low + copies;
  highCopy = after.high + copies;
  // Every event is a running node of the window (the state repeats only
  // when nothing outside it runs).
  for (Event &event : events) {
    event.first += copies * period;
    event.second += shift;
  }
  std::make_heap(events.begin(), events.end(), std::greater<>());
  for (std::vector<uint32_t> &queue : ready)
    llvm::erase_if(
        queue, [&](uint32_t id) { return id >= begin && id < end + shift; });
  for (uint32_t id = begin + shift; id < end + shift; ++id)
    if (status[id] == Ready)
      ready[unsigned(shape.streams[slots[id]])].push_back(id);
  for (std::vector<uint32_t> &queue : ready)
    std::make_heap(queue.begin(), queue.end(), std::greater<>());
  computePicos += copies * (after.computePicos - before.computePicos);
  communicationPicos +=
      copies * (after.communicationPicos - before.communicationPicos);
  outcome.jumpedCopies += copies;
}

// A receive's message may come later without changing the outcome but for
// a shift when it comes into an idle step: nothing else then runs or
// waits for a stream, so the rest of the step is the receive's work alone,
// started whenever it comes. Else its completion changes no other event as
// long as it comes before each child that it released into a queue started
// and after the last decision of that child's stream that would have
// picked the child (an issue after the stream was idle, or of a node with
// a higher id), and before each child that waited for another parent was
// ready. Strictly: at equal times the order of completions (by id) could
// differ. A receive in a folded layer's template, with children in every
// copy, of no stream, or shared with another receive, is left exact.

void StepSimulation::watchReceives() {
  for (uint32_t slot : shape.recvs) {
    uint32_t recv = recvWatch.size();
    recvWatch.push_back({shape.getId(slot, 0)});
    llvm::ArrayRef<ShapeChild> children = shape.getChildren(slot);
    if (shape.isTemplate(slot) || children.empty() || children.size() > 4 ||
        llvm::any_of(children, [&](const ShapeChild &child) {
          return child.kind != ShapeChild::Plain ||
                 shape.streams[child.slot] == ReplayStream::None;
        })) {
      recvWatch.back().exact = true;
      continue;
    }
    for (const ShapeChild &child : children)
      childWatch.push_back({shape.getId(child.slot, 0), recv,
                            unsigned(shape.streams[child.slot])});
  }
  for (ChildWatch &child : childWatch)
    if (llvm::count_if(childWatch, [&](const ChildWatch &other) {
          return other.id == child.id;
        }) > 1)
      recvWatch[child.recv].exact = true;
  unresolved = childWatch.size();
}

void StepSimulation::watchIssue(unsigned stream, uint32_t id, int64_t now,
                                bool wasIdle) {
  for (ChildWatch &child : childWatch) {
    if (child.stream != stream)
      continue;
    if (child.id == id) {
      child.issued = now;
      resolve(child);
    } else if (!recvWatch[child.recv].done && (wasIdle || id > child.id))
      child.lastOpen = now;
  }
}

void StepSimulation::watchReady(uint32_t id, int64_t now) {
  for (ChildWatch &child : childWatch)
    if (child.id == id && recvWatch[child.recv].done && child.released < 0) {
      child.readyLater = now;
      resolve(child);
    }
}

void StepSimulation::receiving(uint32_t recv, int64_t now) {
  RecvWatch &watch = recvWatch[recv];
  if (now != arrival[slots[watch.id]] || !isIdle() ||
      llvm::any_of(recvWatch, [&](const RecvWatch &other) {
        return pending[other.id] > 0;
      }))
    return;
  // Every other receive is done (none is due or waits), so a node not done
  // has a parent not done: this receive, or a node that waits for it.
  watch.idle = true;
  outcome.movingRecv = recv;
  outcome.movingFrom = arrivals[recv];
  outcome.sendMoves.clear();
  for (uint32_t slot : shape.sends)
    outcome.sendMoves.push_back(pending[shape.getId(slot, 0)] > 0);
}

void StepSimulation::received(uint32_t recv, int64_t now) {
  recvWatch[recv].done = true;
  for (ChildWatch &child : childWatch)
    if (child.recv == recv && pending[child.id] == 0)
      child.released = now;
}

void StepSimulation::setSameFor() {
  for (uint32_t recv = 0; recv < recvWatch.size(); ++recv) {
    const RecvWatch &watch = recvWatch[recv];
    int64_t at = arrivals[recv];
    if (watch.idle) {
      outcome.sameFor.push_back({at, INT64_MAX});
      continue;
    }
    // Its completion, in picoseconds, must lie in (after, before).
    int64_t after = -1, before = INT64_MAX;
    bool exact = watch.exact || outcome.movingRecv >= 0;
    for (const ChildWatch &child : childWatch) {
      if (child.recv != recv)
        continue;
      if (child.released >= 0) {
        after = std::max(after, child.lastOpen);
        // Started when released: the stream was free for it.
        exact |= child.issued <= child.released;
        before = std::min(before, child.issued);
      } else {
        exact |= child.readyLater < 0;
        before = std::min(before, child.readyLater);
      }
    }
    // It completes at its readiness or its message, the later.
    exact |= watch.ready >= before;
    if (exact) {
      outcome.sameFor.push_back({at, at + 1});
      continue;
    }
    int64_t first = watch.ready > after ? 0 : after / 1000 + 1;
    outcome.sameFor.push_back({first, (before + 999) / 1000});
  }
  // A message no range above lets come at another time may still move
  // what follows from it (tracked while simulating).
  if (outcome.movingRecv >= 0 || !tracking ||
      outcome.sameFor[movingCandidate].second -
              outcome.sameFor[movingCandidate].first >
          1)
    return;
  int64_t at = arrivals[movingCandidate];
  auto ceilDiv = [](int64_t picos) {
    return picos >= 0 ? (picos + 999) / 1000 : -(-picos / 1000);
  };
  int64_t first = lowShift == INT64_MIN ? 0 : std::max<int64_t>(0, at + ceilDiv(lowShift));
  int64_t last = highShift == INT64_MAX ? INT64_MAX : at + ceilDiv(highShift);
  if (last - first <= 1)
    return;
  for (uint32_t recv = 0; recv < recvWatch.size(); ++recv)
    outcome.sameFor[recv] = {arrivals[recv], arrivals[recv] + 1};
  outcome.sameFor[movingCandidate] = {first, last};
  outcome.movingRecv = movingCandidate;
  outcome.movingFrom = at;
  outcome.finishMoves = previousMoves;
  outcome.sendMoves.clear();
  for (uint32_t slot : shape.sends)
    outcome.sendMoves.push_back(moves[shape.getId(slot, 0)]);
}

void StepSimulation::trackReceive(uint32_t id, int64_t now, int64_t at) {
  // It completes at its readiness or its message, the later: its
  // readiness moves with the completion that caused it, its message if it
  // is the moving one's.
  uint8_t readyMoves = currentMoves, messageMoves = id == movingId;
  if (readyMoves == messageMoves)
    return;
  if (messageMoves) {
    moves[id] = at >= now;
    if (at >= now)
      lowShift = std::max(lowShift, now - at);
    else
      highShift = std::min(highShift, now - at + 1);
  } else {
    moves[id] = now >= at;
    if (now >= at)
      lowShift = std::max(lowShift, at - now);
    else
      highShift = std::min(highShift, at - now + 1);
  }
}

void StepSimulation::trackPop(int64_t time, uint32_t id) {
  uint8_t moving = moves[id];
  if (havePrevious && moving != previousMoves) {
    // The one that moves must stay on its side of the other: by time, then
    // by id.
    if (previousMoves)
      highShift = std::min(highShift,
                           time - previous.first + (previous.second < id));
    else
      lowShift = std::max(lowShift,
                          previous.first - time + !(previous.second < id));
  }
  previous = {time, id};
  previousMoves = moving;
  havePrevious = true;
  currentMoves = moving;
}

StepOutcome StepSimulation::run() {
  for (uint32_t id = 0; id < pending.size(); ++id)
    if (!pending[id])
      makeReady(id, 0);
  issue(0);
  watchingIssues = true;
  while (!events.empty()) {
    std::pop_heap(events.begin(), events.end(), std::greater<>());
    auto [now, id] = events.back();
    events.pop_back();
    if (tracking)
      trackPop(now, id);
    ReplayStream stream = shape.streams[slots[id]];
    if (stream != ReplayStream::None)
      busy[unsigned(stream)] = false;
    finish = std::max(finish, now);
    freedStream = stream == ReplayStream::None ? -1 : int(stream);
    if (stream == ReplayStream::None) {
      uint32_t recv = 0;
      while (recvWatch[recv].id != id)
        ++recv;
      receiving(recv, now);
      complete(id, now);
      received(recv, now);
    } else {
      complete(id, now);
    }
    issue(now);
    if (!markerCopy)
      continue;
    // The state after a copy's first node: compare it with the copy
    // before's, and jump over the copies that would repeat it. A window
    // of many copies is a backlog that grows: no period to find.
    if (highCopy - lowCopy >= MaxWindowCopies) {
      markerCopy.reset();
      haveBefore = false;
      continue;
    }
    Snapshot &after = snapshots[1], &before = snapshots[0];
    takeSnapshot(*markerCopy, now, after);
    markerCopy.reset();
    if (haveBefore && repeats(before, after) && after.high + 2 < numCopies) {
      jump(before, after, numCopies - 2 - after.high);
      haveBefore = false;
      continue;
    }
    std::swap(before, after);
    haveBefore = true;
  }
  auto micros = [](int64_t picos) { return double(picos) / 1e6; };
  outcome.finishPicos = finish;
  setSameFor();
  outcome.computeMicros = micros(computePicos);
  outcome.communicationMicros = micros(communicationPicos);
  for (uint32_t slot : shape.sends)
    outcome.sendDonePicos.push_back(done[shape.getId(slot, 0)]);
  if (recordTimes)
    for (uint32_t id = 0; id < done.size(); ++id) {
      outcome.starts.push_back(micros(starts[id]));
      outcome.ends.push_back(micros(done[id]));
    }
  return std::move(outcome);
}

StepOutcome stg::simulateStep(const StepShape &shape,
                              llvm::ArrayRef<int64_t> arrivals,
                              bool recordTimes, SimulationScratch &scratch) {
  return StepSimulation(shape, arrivals, recordTimes, scratch).run();
}
