//===- ArrivalRanges.cpp - Arrivals that give a step the same outcome -----===//
//
// The replay simulates a step once per distinct arrival of its messages,
// and a pipeline's steady state often sends each message a little later or
// earlier into its step than the last. These hooks of the simulation work
// out, while it runs, which other arrivals would give the same outcome, or
// the same moved (StepOutcome::sameFor, movingRecv), so that the replay
// can reuse it. Each bound is one the simulation itself depends on; the
// unit tests compare every reuse with a simulation afresh.
//
//===----------------------------------------------------------------------===//

#include "StepSimulation.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>

using namespace stg;

// A receive's completion changes no other event as long as it comes
// before each child that it released into a queue started
// and after the last decision of that child's stream that would have
// picked the child (an issue after the stream was idle, or of a node with
// a higher id), and before each child that waited for another parent was
// ready. Strictly: at equal times the order of completions (by id) could
// differ. A receive in a folded layer's template, with children in every
// copy, of no stream, or shared with another receive, is left exact.

void StepSimulation::watchReceives() {
  for (uint32_t slot : structure.recvs) {
    uint32_t recv = recvWatch.size();
    recvWatch.push_back({structure.getId(slot, 0)});
    llvm::ArrayRef<ShapeChild> children = structure.getChildren(slot);
    if (structure.isTemplate(slot) || children.empty() || children.size() > 4 ||
        llvm::any_of(children, [&](const ShapeChild &child) {
          return child.kind != ShapeChild::Plain ||
                 structure.streams[child.slot] == ReplayStream::None;
        })) {
      recvWatch.back().exact = true;
      continue;
    }
    for (const ShapeChild &child : children)
      childWatch.push_back({structure.getId(child.slot, 0), recv,
                            unsigned(structure.streams[child.slot])});
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
    // Its completion, in picoseconds, must lie in (after, before).
    int64_t after = -1, before = INT64_MAX;
    bool exact = watch.exact;
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
  // what follows from it (tracked while simulating): one that comes into
  // an idle step moves all that is left, for any later arrival. Not when
  // what moves shared a tier with what stays: moving it would change how
  // long they overlap (LinkSharing.cpp); nor when compute ran slowed beside
  // held units (HeldUnits.cpp), for the same reason.
  if (!tracking || mixedSharing || slowedCompute ||
      outcome.sameFor[movingCandidate].second -
              outcome.sameFor[movingCandidate].first >
          1)
    return;
  int64_t at = arrivals[movingCandidate];
  auto ceilDiv = [](int64_t picos) {
    return picos >= 0 ? (picos + 999) / 1000 : -(-picos / 1000);
  };
  int64_t first =
      lowShift == INT64_MIN ? 0 : std::max<int64_t>(0, at + ceilDiv(lowShift));
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
  for (uint32_t slot : structure.sends)
    outcome.sendMoves.push_back(moves[structure.getId(slot, 0)]);
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
    // The one that moves must stay on its side of the other, strictly:
    // then no completion that moves ties with one that does not, and
    // completions pop in time order, so every pair keeps its order (a tie
    // broken by ids could reorder a pair further apart).
    if (previousMoves)
      highShift = std::min(highShift, time - previous.first);
    else
      lowShift = std::max(lowShift, previous.first - time + 1);
  }
  previous = {time, id};
  previousMoves = moving;
  havePrevious = true;
  currentMoves = moving;
}
