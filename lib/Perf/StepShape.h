//===- StepShape.h - One schedule step, as simulated ------------*- C++ -*-===//
//
// What a simulation of one step reads: its nodes' streams, times and
// dependencies, with edges from earlier steps left out (those nodes are done
// when the step starts). Steps of equal shapes (a stage's first and last
// micro-batch, a pipeline's middle stages) share one, and its outcomes.
//
// A shape has a slot per node the program stores for the step. A folded
// layer (LayerFold) stays folded: its template's slots stand for every copy.
// The simulation names a node by its id in the unfolded step (the prefix,
// the template, copies 1 to C, the rest), so that it breaks ties as the
// unfolded program would, and it jumps over the copies that only repeat a
// period (StepSimulation.cpp). Its clock counts whole picoseconds, so that
// sums are exact and equal times equal, in every copy alike.
//
//===----------------------------------------------------------------------===//

#ifndef STG_LIB_PERF_STEPSHAPE_H
#define STG_LIB_PERF_STEPSHAPE_H

#include "CommunicationCost.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"

#include <array>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

namespace stg {

constexpr unsigned NumReplayStreams = 4;

/// A dependency edge seen from its parent slot.
struct ShapeChild {
  enum Kind : uint8_t {
    /// The child slot, in the parent's copy if both are template slots.
    Plain,
    /// A template slot in the copy after the parent's (a layer's input
    /// from the layer before); none after the last copy.
    NextCopy,
    /// A slot after the fold, released by the last copy only.
    LastCopyOnly,
    /// A template slot in every copy: a node every layer depends on.
    AllCopies,
  };
  uint32_t slot = 0;
  Kind kind = Plain;
  bool operator==(const ShapeChild &other) const {
    return slot == other.slot && kind == other.kind;
  }
};

/// A step's slots, streams and edges: what plans of one structure share.
struct StepStructure {
  // Per slot:
  std::vector<uint32_t> initialPending;
  std::vector<ReplayStream> streams;
  /// The children of slot i are children[childBegin[i], childBegin[i+1]).
  std::vector<uint32_t> childBegin;
  std::vector<ShapeChild> children;
  std::vector<uint32_t> recvs, sends; ///< Slots, in id order.
  /// The template of a folded layer, [foldBegin, foldEnd), runs foldCopies
  /// more times after itself; 0 copies: no fold.
  uint32_t foldBegin = 0, foldEnd = 0, foldCopies = 0;
  uint64_t hash = 0; ///< Of the above, once built (finish).
  /// Pairs of communication streams that may run nodes at once (finish):
  /// a bit per pair, ActivationGradient, ActivationPipeline and
  /// GradientPipeline. Streams whose nodes always wait for each other
  /// through the step's edges cannot share a link (LinkSharing.cpp).
  enum : uint8_t {
    ActivationGradient = 1,
    ActivationPipeline = 2,
    GradientPipeline = 4
  };
  uint8_t concurrentStreams = 0;
  // Per node of the unfolded step (finish): its slot, its copy of the fold
  // (0 outside), the dependencies it waits for, its stream; and the nodes
  // that wait for none, in id order. Every simulation of the step starts from
  // these.
  std::vector<uint32_t> unfoldedSlots, unfoldedCopies, unfoldedPending;
  std::vector<ReplayStream> unfoldedStreams;
  std::vector<uint32_t> initiallyReady;
  /// The nodes unfolded node i's completion releases, in the order the
  /// simulation releases them, are released[releasedBegin[i],
  /// releasedBegin[i+1]); ReleasedByEveryCopy marks a node every copy of
  /// its parent releases alike (ShapeChild::AllCopies).
  std::vector<uint32_t> releasedBegin, released;
  static constexpr uint32_t ReleasedByEveryCopy = 1u << 31;

  llvm::ArrayRef<ShapeChild> getChildren(uint32_t slot) const {
    return llvm::makeArrayRef(children).slice(
        childBegin[slot], childBegin[slot + 1] - childBegin[slot]);
  }
  uint32_t getNumSlots() const { return streams.size(); }
  uint32_t getFoldSize() const { return foldEnd - foldBegin; }
  bool isTemplate(uint32_t slot) const {
    return slot >= foldBegin && slot < foldEnd;
  }
  /// Nodes of the unfolded step.
  uint32_t getNumNodes() const {
    return getNumSlots() + foldCopies * getFoldSize();
  }
  /// The unfolded id of `slot` in `copy` (0 unless a template slot).
  uint32_t getId(uint32_t slot, uint32_t copy) const {
    if (slot < foldBegin)
      return slot;
    if (slot < foldEnd)
      return slot + copy * getFoldSize();
    return slot + foldCopies * getFoldSize();
  }
  /// The slot and copy of unfolded `id`.
  std::pair<uint32_t, uint32_t> getSlot(uint32_t id) const {
    if (id < foldBegin)
      return {id, 0};
    uint32_t size = getFoldSize();
    if (id < foldBegin + (foldCopies + 1) * size)
      return {foldBegin + (id - foldBegin) % size, (id - foldBegin) / size};
    return {id - foldCopies * size, 0};
  }

  /// Equal slots, edges and fold: recvs and sends follow from the streams,
  /// the unfolded step from the slots and the fold.
  bool operator==(const StepStructure &other) const;
  /// Computes the hash and the unfolded step, once the slots, edges and
  /// fold are set.
  void finish();
  /// Sets concurrentStreams from the unfolded step (LinkSharing.cpp).
  void findConcurrentStreams();
  /// Whether two streams that may run at once have transfers on one tier,
  /// given a bit per stream and tier (2 * stream + tier).
  bool mayShareLinks(uint32_t streamTiers) const;
};

/// A slot's bytes moving over one tier at the tier's full bandwidth
/// (CommunicationCost.h); the rest of its time is latency.
struct ShapeTransfer {
  int64_t picos = 0;
  LinkTier tier = ScaleUpTier;
  bool operator==(const ShapeTransfer &other) const {
    return picos == other.picos && tier == other.tier;
  }
};

/// A step as simulated: its structure, shared by the steps of every plan
/// that has it, and its slots' times.
struct StepShape {
  std::shared_ptr<const StepStructure> structure;
  std::vector<int64_t> picos; ///< Per slot: its time on its stream.
  /// Whether two streams of the step have transfers on one tier: only then
  /// may they share its bandwidth, and only then are the transfers kept,
  /// slot i's being transfers[transferBegin[i], transferBegin[i+1]).
  /// (Steps that cannot share simulate as they did before sharing, and
  /// shapes that differ only in transfers that cannot share are equal.)
  bool sharesLinks = false;
  std::vector<uint32_t> transferBegin;
  std::vector<ShapeTransfer> transfers;
  /// Per slot, the compute units its node holds while it runs
  /// (ProgramNode::heldUnits), of the device's `computeUnits`: only when
  /// some node of the step holds any on a device that counts them (else
  /// empty), and only then does compute slow beside them (HeldUnits.cpp).
  std::vector<uint16_t> heldUnits;
  uint32_t computeUnits = 0;
  /// Per slot, beside heldUnits: how a compute node uses the units
  /// (ProgramNode::unitUse).
  std::vector<UnitUse> unitUse;

  const StepStructure *operator->() const { return structure.get(); }
  llvm::ArrayRef<ShapeTransfer> getTransfers(uint32_t slot) const {
    return llvm::makeArrayRef(transfers).slice(
        transferBegin[slot], transferBegin[slot + 1] - transferBegin[slot]);
  }
  bool operator==(const StepShape &other) const;
  /// A hash, never DenseMap's empty or tombstone key.
  uint64_t hash() const;
};

/// How a step runs from its start, given when its receives' messages
/// arrive (also from its start).
struct StepOutcome {
  int64_t finishPicos = 0;
  int64_t computePicos = 0, communicationPicos = 0; ///< Busy times.
  // A step has a send or two and a receive or two: kept inline, an
  // outcome costs no allocation.
  llvm::SmallVector<int64_t, 2> sendDonePicos; ///< Per send of the shape.
  /// Per receive: the arrivals [first, second) in nanoseconds that give
  /// this outcome too, the others' arrivals in their ranges.
  llvm::SmallVector<std::pair<int64_t, int64_t>, 2> sameFor;
  /// A receive whose message moves part of the step, or -1: another
  /// arrival in its range, `movingFrom` plus d nanoseconds, moves the sends
  /// `sendMoves` marks, and the finish if `finishMoves`, by d. (A message
  /// into an idle step moves all that is left; one the step waits for
  /// while other work runs moves what follows from it, as long as nothing
  /// else changes order with it.)
  int32_t movingRecv = -1;
  int64_t movingFrom = 0;
  bool finishMoves = true;
  llvm::SmallVector<uint8_t, 2> sendMoves;
  uint32_t jumpedCopies = 0; ///< Folded copies not simulated one by one.
  /// Per unfolded node of the step, when it started and ended (a receive:
  /// when it was ready to wait, and when its message was there); only when
  /// recorded.
  std::vector<double> starts, ends;
};

/// The buffers of one step's simulation, kept for the next.
struct SimulationScratch {
  using Event = std::pair<int64_t, uint32_t>; ///< Completion, id.
  std::vector<Event> events;                  ///< Unordered: a few.
  std::array<std::vector<uint32_t>, NumReplayStreams> ready; ///< Min-heaps.
  std::vector<uint32_t> pending; ///< Per unfolded node: dependencies left.
  std::vector<uint8_t> status;
  std::vector<int64_t> arrival, starts, done; ///< Picoseconds.
  /// Per node: whether its completion moves with the moving receive's
  /// arrival (StepOutcome::movingRecv).
  std::vector<uint8_t> moves;
  /// Per node, when its step shares links (LinkSharing.cpp): the transfer
  /// it is in (past the last: in its latency); what is left of that
  /// transfer, in sixths of a picosecond, as of its tier's last change;
  /// when it ends at the current rate; and whether its event is its end,
  /// the transfer ending alone.
  std::vector<uint8_t> transfer, endsAlone;
  std::vector<int64_t> remaining, transferEnds;
  /// The state after copy `copy`'s first node completed, the copies before
  /// `low` done and those after `high` not started (StepSimulation.cpp).
  struct Snapshot {
    uint32_t copy = 0, low = 0, high = 0;
    int64_t now = 0, computePicos = 0, communicationPicos = 0;
    uint64_t outsideChanges = 0;
    std::vector<uint8_t> status;
    std::vector<uint32_t> pending;
    std::vector<int64_t> ends; ///< Of running nodes, from `now`.
    std::vector<uint8_t> moves;
    /// Of running nodes, when the step shares links: as the scratch's, the
    /// remainder as of `now`.
    std::vector<uint8_t> transfer;
    std::vector<int64_t> remaining;
    /// When compute shares the device with held units (HeldUnits.cpp): the
    /// running compute node's full-rate picoseconds left as last settled,
    /// and how long ago that was.
    int64_t computeLeft = 0, computeSince = 0;
  };
  Snapshot snapshots[2];
};

/// The longest a step may take, in microseconds (11.6 days), and a stage
/// of the replay, its steps summed: its clock in picoseconds then fits an
/// int64 with room to spare.
constexpr double MaxStepMicros = 1e12;
constexpr int64_t MaxStepPicos = int64_t(MaxStepMicros) * 1'000'000;

/// Simulates a step of `shape` from its start, its receives' messages
/// arriving `arrivals` nanoseconds after it (in the order of shape.recvs;
/// each at most MaxStepMicros, as is the sum of the step's times).
/// With `recordTimes`, the outcome has every node's start and end, and a
/// folded layer's copies are all simulated.
StepOutcome simulateStep(const StepShape &shape,
                         llvm::ArrayRef<int64_t> arrivals, bool recordTimes,
                         SimulationScratch &scratch);

} // namespace stg

#endif // STG_LIB_PERF_STEPSHAPE_H
