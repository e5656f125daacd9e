//===- LinkSharing.cpp - Streams of a rank that share a tier's links ------===//
//
// A rank's communication streams (forward and backward collectives,
// gradient collectives, pipeline sends) each run one node at a time, but
// two streams may move bytes over the same tier at once: a tensor-parallel
// all-gather and an FSDP reduce-scatter over NVLink, a data-parallel
// all-reduce and a pipeline send through the NICs. They share the tier's
// bandwidth (processor sharing): while k transfers are in flight on a tier,
// each progresses at 1/k of its full rate, and the rates change whenever
// one starts or ends. A node's transfers run one after another (a
// hierarchical all-reduce: in the node, across nodes, in the node; their
// times from CommunicationCost.h, in picoseconds in the step's shape), then
// its latency, which no other stream slows. A node alone on its tiers takes
// the time it always did, and one alone in its last transfer has one event,
// its end: it leaves the tier when another joins after its transfer ended
// (endsAlone), as nothing's rate changed when it did.
//
// The clock stays exact: a tier has at most three members (one per
// communication stream), so remainders are kept in sixths of a picosecond
// and a picosecond's progress at 1/k is a whole number of them; an end
// that falls inside a picosecond is rounded up to its end. Everything is
// translation-invariant, so a folded layer's copies still repeat a period
// (the transfers' remainders are part of the state compared), and a step's
// outcome still depends only on its shape and its messages' arrivals. The
// replay's reuse of an outcome for other arrivals holds as it did, but an
// outcome moved with a message whose consequences shared a tier with what
// does not move (mixedSharing) is not moved, and a transfer's end that was
// no event keeps its place before a later start like a completion.
//
// Only steps in which two streams that may run at once (neither's nodes
// wait for the other's through the step's edges) have transfers on one tier
// take this path (StepShape::sharesLinks); the others simulate as before.
//
//===----------------------------------------------------------------------===//

#include "StepSimulation.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <cassert>

using namespace stg;

static_assert(NumReplayStreams - 1 <= 3,
              "a tier's members divide ShareUnit: at most three streams");

/// The most pipeline nodes of a step whose ancestors and descendants are
/// looked for; a step with more is taken to run them beside the others.
constexpr size_t MaxPipelineNodes = 16;

void StepStructure::findConcurrentStreams() {
  uint32_t total = getNumNodes();
  bool present[NumReplayStreams] = {};
  llvm::SmallVector<uint32_t, 4> sends;
  for (uint32_t id = 0; id < total; ++id) {
    ReplayStream stream = unfoldedStreams[id];
    if (stream != ReplayStream::None)
      present[unsigned(stream)] = true;
    if (stream == ReplayStream::Pipeline)
      sends.push_back(id);
  }
  bool activation = present[unsigned(ReplayStream::Activation)];
  bool gradient = present[unsigned(ReplayStream::Gradient)];
  // Collectives of the two: some run at once, as a rule (a gradient
  // reduction beside the backward's collectives).
  concurrentStreams = activation && gradient ? ActivationGradient : 0;
  if (sends.empty() || (!activation && !gradient))
    return;
  if (sends.size() > MaxPipelineNodes) {
    concurrentStreams |= (activation ? ActivationPipeline : 0) |
                         (gradient ? GradientPipeline : 0);
    return;
  }
  // A send runs beside the nodes that are neither its ancestors nor its
  // descendants: found by a walk each way.
  std::vector<uint32_t> parentBegin(total + 1, 0), parents;
  for (uint32_t id = 0; id < total; ++id)
    for (uint32_t index = releasedBegin[id]; index < releasedBegin[id + 1];
         ++index)
      ++parentBegin[(released[index] & ~ReleasedByEveryCopy) + 1];
  for (uint32_t id = 0; id < total; ++id)
    parentBegin[id + 1] += parentBegin[id];
  parents.resize(parentBegin[total]);
  std::vector<uint32_t> filled(parentBegin.begin(), parentBegin.end() - 1);
  for (uint32_t id = 0; id < total; ++id)
    for (uint32_t index = releasedBegin[id]; index < releasedBegin[id + 1];
         ++index)
      parents[filled[released[index] & ~ReleasedByEveryCopy]++] = id;
  std::vector<uint8_t> related(total);
  std::vector<uint32_t> work;
  for (uint32_t send : sends) {
    std::fill(related.begin(), related.end(), 0);
    related[send] = 1;
    for (bool down : {true, false}) {
      work.assign(1, send);
      while (!work.empty()) {
        uint32_t id = work.back();
        work.pop_back();
        auto visit = [&](uint32_t next) {
          if (!related[next]) {
            related[next] = 1;
            work.push_back(next);
          }
        };
        if (down)
          for (uint32_t index = releasedBegin[id];
               index < releasedBegin[id + 1]; ++index)
            visit(released[index] & ~ReleasedByEveryCopy);
        else
          for (uint32_t index = parentBegin[id]; index < parentBegin[id + 1];
               ++index)
            visit(parents[index]);
      }
    }
    for (uint32_t id = 0; id < total; ++id) {
      if (related[id])
        continue;
      if (unfoldedStreams[id] == ReplayStream::Activation)
        concurrentStreams |= ActivationPipeline;
      else if (unfoldedStreams[id] == ReplayStream::Gradient)
        concurrentStreams |= GradientPipeline;
    }
  }
}

bool StepStructure::mayShareLinks(uint32_t streamTiers) const {
  for (unsigned tier = 0; tier < NumLinkTiers; ++tier) {
    auto uses = [&](ReplayStream stream) {
      return (streamTiers >> (2 * unsigned(stream) + tier) & 1) != 0;
    };
    bool activation = uses(ReplayStream::Activation);
    bool gradient = uses(ReplayStream::Gradient);
    bool pipeline = uses(ReplayStream::Pipeline);
    if ((activation && gradient && (concurrentStreams & ActivationGradient)) ||
        (activation && pipeline && (concurrentStreams & ActivationPipeline)) ||
        (gradient && pipeline && (concurrentStreams & GradientPipeline)))
      return true;
  }
  return false;
}

int64_t StepSimulation::getLatency(uint32_t slot) const {
  int64_t latency = shape.picos[slot];
  for (const ShapeTransfer &transfer : shape.getTransfers(slot))
    latency -= transfer.picos;
  return latency;
}

void StepSimulation::startTransfers(uint32_t id, int64_t now) {
  transfer[id] = 0;
  starts[id] = now;
  joinTier(id, now);
}

void StepSimulation::joinTier(uint32_t id, int64_t now) {
  const ShapeTransfer &next = shape.getTransfers(slots[id])[transfer[id]];
  TierState &tier = tiers[next.tier];
  // A member whose transfer ended alone has left (its event is its end).
  if (tier.members.size() == 1 && endsAlone[tier.members[0]] &&
      transferEnds[tier.members[0]] <= now) {
    uint32_t left = tier.members[0];
    tier.members.clear();
    // Its end was no event: that it came first is kept like the order of
    // completions (trackPop), for an outcome moved with a message.
    if (tracking && moves[left] != moves[id]) {
      if (moves[left])
        highShift = std::min(highShift, now - transferEnds[left] + 1);
      else
        lowShift = std::max(lowShift, transferEnds[left] - now);
    }
  }
  remaining[id] = next.picos * ShareUnit;
  if (tier.members.empty()) {
    // Alone, at the full rate: what retime would find, without its loops.
    // The node's event, pushed last, is its transfer's end or its own.
    tier.last = now;
    tier.members.push_back(id);
    uint32_t slot = slots[id];
    int64_t end = now + next.picos;
    transferEnds[id] = end;
    endsAlone[id] = transfer[id] + 1u == shape.getTransfers(slot).size();
    int64_t time = endsAlone[id] ? end + getLatency(slot) : end;
    assert(events.back().second == id && "the joining node's event is last");
    events.back().first = time;
    done[id] = time;
    return;
  }
  settle(tier, now);
  tier.members.push_back(id);
  retime(tier, now);
}

bool StepSimulation::completesTransfers(uint32_t id, int64_t now) {
  uint32_t slot = slots[id];
  llvm::ArrayRef<ShapeTransfer> transfers = shape.getTransfers(slot);
  if (transfer[id] < transfers.size()) {
    TierState &tier = tiers[transfers[transfer[id]].tier];
    if (endsAlone[id]) {
      // Its last transfer ended alone, and its latency since: it leaves
      // the tier as it was (alone, if still there), changing no one's rate.
      if (!tier.members.empty() && tier.members.front() == id)
        tier.members.clear();
      transfer[id] = transfers.size();
    } else {
      // A transfer ended: the others on its tier speed up, and the node
      // goes on to its next transfer or its latency.
      settle(tier, now);
      llvm::erase_value(tier.members, id);
      retime(tier, now);
      if (++transfer[id] < transfers.size()) {
        events.push_back({now, id});
        joinTier(id, now);
        return false;
      }
      if (int64_t latency = getLatency(slot)) {
        events.push_back({now + latency, id});
        done[id] = now + latency;
        return false;
      }
    }
  }
  // Its stream was busy from its start: longer than its time, if shared.
  communicationPicos += now - starts[id] - shape.picos[slot];
  return true;
}

void StepSimulation::settle(TierState &tier, int64_t now) {
  if (!tier.members.empty()) {
    int64_t progress = (now - tier.last) * (ShareUnit / tier.members.size());
    for (uint32_t id : tier.members)
      remaining[id] -= progress;
  }
  tier.last = now;
}

void StepSimulation::retime(TierState &tier, int64_t now) {
  int64_t sharers = tier.members.size();
  for (uint32_t id : tier.members) {
    // ceil(left * sharers / ShareUnit), without overflowing: left is at
    // most ShareUnit * MaxStepPicos.
    int64_t left = std::max<int64_t>(remaining[id], 0);
    int64_t end = now + left / ShareUnit * sharers +
                  (left % ShareUnit * sharers + ShareUnit - 1) / ShareUnit;
    transferEnds[id] = end;
    // Alone in its last transfer, its one event is its end, latency and
    // all, as without sharing; another that joins first makes it a
    // transfer's end again.
    uint32_t slot = slots[id];
    endsAlone[id] =
        sharers == 1 && transfer[id] + 1u == shape.getTransfers(slot).size();
    setEvent(id, endsAlone[id] ? end + getLatency(slot) : end);
  }
  if (tracking && sharers > 1 && llvm::any_of(tier.members, [&](uint32_t id) {
        return moves[id] != moves[tier.members.front()];
      }))
    mixedSharing = true;
}

void StepSimulation::setEvent(uint32_t id, int64_t time) {
  for (Event &event : events)
    if (event.second == id) {
      event.first = time;
      break;
    }
  done[id] = time;
}

std::pair<uint8_t, int64_t>
StepSimulation::getTransferState(uint32_t id, int64_t now) const {
  uint32_t count = shape.getTransfers(slots[id]).size();
  if (transfer[id] >= count || (endsAlone[id] && transferEnds[id] <= now))
    return {count, 0}; // In its latency.
  const TierState &tier = tiers[getTier(id)];
  return {transfer[id],
          remaining[id] -
              (now - tier.last) * (ShareUnit / int64_t(tier.members.size()))};
}

void StepSimulation::jumpTransfers(uint32_t begin, uint32_t end, uint32_t shift,
                                   int64_t moved) {
  for (uint32_t id = end; id-- > begin;) {
    transfer[id + shift] = transfer[id];
    remaining[id + shift] = remaining[id];
    transferEnds[id + shift] = transferEnds[id] + moved;
    endsAlone[id + shift] = endsAlone[id];
    starts[id + shift] = starts[id] + moved;
  }
  // Every member is a running node of the window, as every event is.
  for (TierState &tier : tiers) {
    tier.last += moved;
    for (uint32_t &id : tier.members)
      id += shift;
  }
}
