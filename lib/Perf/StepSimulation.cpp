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

#include "StepSimulation.h"

#include "llvm/ADT/Hashing.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/Compiler.h"
#include "llvm/Support/MathExtras.h"

#include <algorithm>
#include <cmath>
#include <optional>

using namespace stg;

bool StepStructure::operator==(const StepStructure &other) const {
  return hash == other.hash && streams == other.streams &&
         initialPending == other.initialPending &&
         childBegin == other.childBegin && children == other.children &&
         foldBegin == other.foldBegin && foldEnd == other.foldEnd &&
         foldCopies == other.foldCopies;
}

void StepStructure::finish() {
  uint32_t total = getNumNodes();
  unfoldedSlots.clear();
  unfoldedSlots.reserve(total);
  unfoldedCopies.assign(total, 0);
  for (uint32_t slot = 0; slot < foldEnd; ++slot)
    unfoldedSlots.push_back(slot);
  for (uint32_t copy = 1; copy <= foldCopies; ++copy)
    for (uint32_t slot = foldBegin; slot < foldEnd; ++slot) {
      unfoldedCopies[unfoldedSlots.size()] = copy;
      unfoldedSlots.push_back(slot);
    }
  for (uint32_t slot = foldEnd; slot < getNumSlots(); ++slot)
    unfoldedSlots.push_back(slot);
  // The edges by unfolded node, each copy's mapped to its nodes: the
  // simulation follows them at every completion.
  releasedBegin.assign(1, 0);
  released.clear();
  for (uint32_t id = 0; id < total; ++id) {
    uint32_t slot = unfoldedSlots[id], copy = unfoldedCopies[id];
    for (const ShapeChild &child : getChildren(slot)) {
      switch (child.kind) {
      case ShapeChild::Plain:
        released.push_back(getId(child.slot, isTemplate(slot) ? copy : 0));
        break;
      case ShapeChild::NextCopy:
        if (copy < foldCopies)
          released.push_back(getId(child.slot, copy + 1));
        break;
      case ShapeChild::LastCopyOnly:
        if (copy == foldCopies)
          released.push_back(getId(child.slot, 0));
        break;
      case ShapeChild::AllCopies:
        for (uint32_t each = 0; each <= foldCopies; ++each)
          released.push_back(getId(child.slot, each) | ReleasedByEveryCopy);
        break;
      }
    }
    releasedBegin.push_back(released.size());
  }
  unfoldedPending.resize(total);
  unfoldedStreams.resize(total);
  initiallyReady.clear();
  for (uint32_t id = 0; id < total; ++id) {
    unfoldedPending[id] = initialPending[unfoldedSlots[id]];
    unfoldedStreams[id] = streams[unfoldedSlots[id]];
    if (!unfoldedPending[id])
      initiallyReady.push_back(id);
  }

  // Field by field (a ShapeChild's padding is not part of it), and cheaply:
  // equal hashes are compared in full.
  uint64_t edges = 0;
  for (const ShapeChild &child : children)
    edges = edges * 0x100000001b3 + (uint64_t(child.slot) << 2 | child.kind);
  hash = llvm::hash_combine(
      llvm::hash_combine_range(streams.begin(), streams.end()),
      llvm::hash_combine_range(childBegin.begin(), childBegin.end()), edges,
      foldBegin, foldEnd, foldCopies);
  findConcurrentStreams();
}

bool StepShape::operator==(const StepShape &other) const {
  return picos == other.picos && sharesLinks == other.sharesLinks &&
         transferBegin == other.transferBegin && transfers == other.transfers &&
         heldUnits == other.heldUnits && computeUnits == other.computeUnits &&
         unitUse == other.unitUse &&
         (structure == other.structure || *structure == *other.structure);
}

uint64_t StepShape::hash() const {
  uint64_t value = llvm::hash_combine(
      structure->hash, llvm::hash_combine_range(picos.begin(), picos.end()),
      llvm::hash_combine_range(heldUnits.begin(), heldUnits.end()),
      computeUnits);
  for (const UnitUse &use : unitUse)
    value = llvm::hash_combine(value, use.busy, use.unbound);
  // Field by field (a ShapeTransfer's padding is not part of it), and
  // cheaply: equal hashes are compared in full.
  for (const ShapeTransfer &transfer : transfers)
    value =
        (value ^ uint64_t(transfer.picos) << 1 ^ transfer.tier) * 0x100000001b3;
  return value >= ~uint64_t(0) - 1 ? 0 : value;
}

/// The most copies running at once for which a period is looked for.
constexpr uint32_t MaxWindowCopies = 8;

StepSimulation::StepSimulation(const StepShape &shape,
                               llvm::ArrayRef<int64_t> arrivals,
                               bool recordTimes, SimulationScratch &scratch)
    : shape(shape), structure(*shape.structure), arrivals(arrivals),
      recordTimes(recordTimes), events(scratch.events), ready(scratch.ready),
      slots(structure.unfoldedSlots), copyOf(structure.unfoldedCopies),
      pending(scratch.pending), status(scratch.status),
      arrival(scratch.arrival), starts(scratch.starts), done(scratch.done),
      moves(scratch.moves), transfer(scratch.transfer),
      endsAlone(scratch.endsAlone), remaining(scratch.remaining),
      transferEnds(scratch.transferEnds), snapshots(scratch.snapshots) {
  uint32_t total = structure.getNumNodes();
  events.clear();
  for (std::vector<uint32_t> &queue : ready)
    queue.clear();
  pending = structure.unfoldedPending;
  arrival.assign(structure.getNumSlots(), 0);
  for (size_t i = 0; i < structure.recvs.size(); ++i)
    arrival[structure.recvs[i]] = arrivals[i] * 1000;
  done.assign(total, 0);
  watchReceives();
  if (!recordTimes)
    for (uint32_t recv = 0; recv < structure.recvs.size(); ++recv)
      if (!structure.isTemplate(structure.recvs[recv]) &&
          (movingCandidate < 0 || arrivals[recv] >= arrivals[movingCandidate]))
        movingCandidate = recv;
  if (movingCandidate >= 0) {
    tracking = true;
    movingId = structure.getId(structure.recvs[movingCandidate], 0);
    moves.assign(total, 0);
  }
  sharing = shape.sharesLinks;
  contending = !shape.heldUnits.empty();
  if (recordTimes)
    starts.assign(total, 0);
  if (sharing) {
    // Each is written when its node starts, before it is read.
    starts.resize(std::max<size_t>(starts.size(), total));
    transfer.resize(std::max<size_t>(transfer.size(), total));
    endsAlone.resize(std::max<size_t>(endsAlone.size(), total));
    remaining.resize(std::max<size_t>(remaining.size(), total));
    transferEnds.resize(std::max<size_t>(transferEnds.size(), total));
  }
  // A jump needs a period seen twice and a copy left after it.
  searching = !recordTimes && structure.foldCopies >= 3;
  if (searching) {
    foldFirst = structure.foldBegin;
    foldSize = structure.getFoldSize();
    numCopies = structure.foldCopies + 1;
    foldLast = foldFirst + numCopies * foldSize;
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
  ReplayStream stream = structure.unfoldedStreams[id];
  if (stream == ReplayStream::None) {
    uint32_t slot = slots[id];
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
  queued |= 1u << unsigned(stream);
}

LLVM_ATTRIBUTE_ALWAYS_INLINE void StepSimulation::issue(int64_t now) {
  // The idle streams with ready nodes, lowest first.
  for (unsigned issuing = idle & queued; issuing; issuing &= issuing - 1) {
    unsigned stream = llvm::countTrailingZeros(issuing);
    std::vector<uint32_t> &queue = ready[stream];
    std::pop_heap(queue.begin(), queue.end(), std::greater<>());
    uint32_t id = queue.back();
    queue.pop_back();
    if (queue.empty())
      queued &= ~(1u << stream);
    int64_t duration = shape.picos[slots[id]];
    bool compute = ReplayStream(stream) == ReplayStream::Compute;
    // Compute beside held units is counted once it ends (HeldUnits.cpp).
    if (!compute)
      communicationPicos += duration;
    else if (LLVM_LIKELY(!contending))
      computePicos += duration;
    if (LLVM_UNLIKELY(unresolved) && watchingIssues)
      watchIssue(stream, id, now, int(stream) != freedStream);
    idle &= ~(1u << stream);
    if (recordTimes)
      starts[id] = now;
    touch(id);
    if (LLVM_UNLIKELY(sharing) && hasTransfers(id)) {
      pushEvent(now, id); // Its time follows from its tier's members.
      startTransfers(id, now);
    } else if (LLVM_UNLIKELY(contending) && compute) {
      pushEvent(startCompute(id, now, duration), id);
    } else {
      pushEvent(now + duration, id);
    }
    if (LLVM_UNLIKELY(contending) && !compute && getHeldUnits(id))
      changeHeldUnits(getHeldUnits(id), now);
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
  uint32_t copy = copyOf[id];
  if (searching) {
    status[id] = Done;
    if (inFold(id)) {
      if (++doneInCopy[copy] == foldSize)
        while (lowCopy < numCopies && doneInCopy[lowCopy] == foldSize)
          ++lowCopy;
      if (slot == structure.foldBegin)
        markerCopy = copy;
    } else {
      ++outsideChanges;
      --outsideRunning;
    }
  }
  const uint32_t *released = structure.released.data();
  const uint32_t *child = released + structure.releasedBegin[id];
  const uint32_t *last = released + structure.releasedBegin[id + 1];
  for (; child != last; ++child)
    release(*child & ~StepStructure::ReleasedByEveryCopy, now,
            *child & StepStructure::ReleasedByEveryCopy);
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
  if (sharing) {
    into.transfer.clear();
    into.remaining.clear();
    for (uint32_t id = begin; id < end; ++id) {
      std::pair<uint8_t, int64_t> state{0, 0};
      if (status[id] == Running && hasTransfers(id))
        state = getTransferState(id, now);
      into.transfer.push_back(state.first);
      into.remaining.push_back(state.second);
    }
  }
  bool computing = contending && computeNode != NoNode;
  into.computeLeft = computing ? computeLeft : 0;
  into.computeSince = computing ? now - computeSettled : 0;
}

bool StepSimulation::repeats(const Snapshot &before,
                             const Snapshot &after) const {
  if (after.copy != before.copy + 1 ||
      after.low - after.copy != before.low - before.copy ||
      after.high - after.copy != before.high - before.copy ||
      after.outsideChanges != before.outsideChanges || outsideRunning ||
      after.status != before.status || after.pending != before.pending ||
      after.ends != before.ends || after.moves != before.moves ||
      after.transfer != before.transfer ||
      after.remaining != before.remaining ||
      after.computeLeft != before.computeLeft ||
      after.computeSince != before.computeSince)
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
  if (sharing)
    jumpTransfers(begin, end, shift, copies * period);
  // The running compute node is the window's (nothing outside it runs).
  if (contending && computeNode != NoNode) {
    computeNode += shift;
    computeSettled += copies * period;
    computeStart += copies * period;
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
  for (std::vector<uint32_t> &queue : ready)
    llvm::erase_if(
        queue, [&](uint32_t id) { return id >= begin && id < end + shift; });
  for (uint32_t id = begin + shift; id < end + shift; ++id)
    if (status[id] == Ready)
      ready[unsigned(structure.unfoldedStreams[id])].push_back(id);
  queued = 0;
  for (unsigned stream = 0; stream < NumReplayStreams; ++stream) {
    std::make_heap(ready[stream].begin(), ready[stream].end(),
                   std::greater<>());
    if (!ready[stream].empty())
      queued |= 1u << stream;
  }
  computePicos += copies * (after.computePicos - before.computePicos);
  communicationPicos +=
      copies * (after.communicationPicos - before.communicationPicos);
  outcome.jumpedCopies += copies;
}

StepOutcome StepSimulation::run() {
  for (uint32_t id : structure.initiallyReady)
    makeReady(id, 0);
  issue(0);
  watchingIssues = true;
  while (!events.empty()) {
    // The earliest completion, the lowest id first: a few nodes run at
    // once (one a stream, and the receives), so a scan beats a heap.
    auto earliest = std::min_element(events.begin(), events.end());
    auto [now, id] = *earliest;
    *earliest = events.back();
    events.pop_back();
    if (tracking)
      trackPop(now, id);
    if (LLVM_UNLIKELY(sharing) && hasTransfers(id) &&
        !completesTransfers(id, now))
      continue; // One of its transfers ended: it runs on.
    ReplayStream stream = structure.unfoldedStreams[id];
    if (stream != ReplayStream::None)
      idle |= 1u << unsigned(stream);
    if (LLVM_UNLIKELY(contending)) {
      if (id == computeNode) {
        computePicos += now - computeStart;
        computeNode = NoNode;
      } else if (stream != ReplayStream::None && getHeldUnits(id)) {
        changeHeldUnits(-int32_t(getHeldUnits(id)), now);
      }
    }
    finish = std::max(finish, now);
    freedStream = stream == ReplayStream::None ? -1 : int(stream);
    if (stream == ReplayStream::None) {
      uint32_t recv = 0;
      while (recvWatch[recv].id != id)
        ++recv;
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
    // of many copies is a backlog that grows: no period to find, and none
    // looked for in the rest of the step, whose every node the search's
    // bookkeeping would slow.
    if (highCopy - lowCopy >= MaxWindowCopies) {
      markerCopy.reset();
      haveBefore = false;
      searching = false;
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
  outcome.computePicos = computePicos;
  outcome.communicationPicos = communicationPicos;
  for (uint32_t slot : structure.sends)
    outcome.sendDonePicos.push_back(done[structure.getId(slot, 0)]);
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
