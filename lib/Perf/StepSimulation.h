//===- StepSimulation.h - The simulation of one schedule step ---*- C++ -*-===//
//
// The state of one step's discrete-event simulation (simulateStep): the
// events and queues, the search for a folded layer's period
// (StepSimulation.cpp), what bounds the arrivals of the step's messages
// that give the same outcome (ArrivalRanges.cpp), the transfers that
// share a tier's bandwidth (LinkSharing.cpp), and compute beside kernels
// that hold some of the device's units (HeldUnits.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef STG_LIB_PERF_STEPSIMULATION_H
#define STG_LIB_PERF_STEPSIMULATION_H

#include "StepShape.h"

#include "llvm/ADT/SmallVector.h"

#include <optional>

namespace stg {

class StepSimulation {
public:
  StepSimulation(const StepShape &shape, llvm::ArrayRef<int64_t> arrivals,
                 bool recordTimes, SimulationScratch &scratch);
  StepOutcome run();

private:
  enum NodeStatus : uint8_t { Waiting, Ready, Running, Done };
  using Event = SimulationScratch::Event;
  bool inFold(uint32_t id) const { return id >= foldFirst && id < foldLast; }
  uint32_t getCopy(uint32_t id) const { return copyOf[id]; }
  void pushEvent(int64_t time, uint32_t id);
  void makeReady(uint32_t id, int64_t now);
  void issue(int64_t now);
  void release(uint32_t id, int64_t now, bool byEveryLayer);
  void complete(uint32_t id, int64_t now);
  /// Notes a change to node `id` for the period search.
  void touch(uint32_t id, bool byEveryLayer = false);
  // Which other arrivals give the same outcome (see sameFor).
  void watchReceives();
  void received(uint32_t recv, int64_t now);
  void watchIssue(unsigned stream, uint32_t id, int64_t now, bool wasIdle);
  void watchReady(uint32_t id, int64_t now);
  void setSameFor();

  // Link sharing: the transfers in flight on a tier divide its bandwidth
  // equally, each progressing at 1/k of it while k are in flight. At most
  // one a communication stream, so k <= 3 and the progress of a picosecond
  // is a whole number of sixths of one: the clock stays exact.
  static constexpr int64_t ShareUnit = 6;
  struct TierState {
    int64_t last = 0; ///< When its members' remainders were brought up.
    llvm::SmallVector<uint32_t, 3> members;
  };
  bool hasTransfers(uint32_t id) const {
    uint32_t slot = slots[id];
    return shape.transferBegin[slot + 1] > shape.transferBegin[slot];
  }
  LinkTier getTier(uint32_t id) const {
    return shape.getTransfers(slots[id])[transfer[id]].tier;
  }
  void startTransfers(uint32_t id, int64_t now);
  /// Whether the event of node `id` at `now` completes it, rather than
  /// ending one of its transfers.
  bool completesTransfers(uint32_t id, int64_t now);
  void joinTier(uint32_t id, int64_t now);
  /// Brings the remainders of the tier's members up to `now`.
  void settle(TierState &tier, int64_t now);
  /// Sets the end of each member's transfer for the members it has now.
  void retime(TierState &tier, int64_t now);
  void setEvent(uint32_t id, int64_t time);
  /// The time of `slot` after its transfers.
  int64_t getLatency(uint32_t slot) const;
  /// Running node `id`'s transfer and what is left of it as of `now`; past
  /// its last once that ended.
  std::pair<uint8_t, int64_t> getTransferState(uint32_t id, int64_t now) const;
  void jumpTransfers(uint32_t begin, uint32_t end, uint32_t shift,
                     int64_t moved);

  // Held units: while communication nodes that hold `held` of the
  // device's `computeUnits` run, the compute node runs slower once fewer
  // units are left than it keeps busy (HeldUnits.cpp). Its full-rate
  // picoseconds left are settled whenever the rate changes; a whole
  // picosecond's progress is rounded down and its end up, so the clock
  // stays whole and translation-invariant.
  static constexpr uint32_t NoNode = ~0u;
  bool contending = false; ///< The step has nodes that hold units.
  uint32_t held = 0;
  uint32_t computeNode = NoNode; ///< The running compute node, if any.
  UnitUse computeUse;            ///< How it uses the units, busy set.
  int64_t computeLeft = 0, computeSettled = 0, computeStart = 0;
  /// Whether compute ran slowed while the moving receive was tracked: its
  /// time then depends on what overlapped it, so the outcome is not moved.
  bool slowedCompute = false;
  uint16_t getHeldUnits(uint32_t id) const {
    return shape.heldUnits[slots[id]];
  }
  /// Starts compute node `id` of `duration` full-rate picoseconds at
  /// `now`; when it ends at the current rate.
  int64_t startCompute(uint32_t id, int64_t now, int64_t duration);
  /// A node that holds units starts (`delta` > 0) or ends: the running
  /// compute node is settled and retimed.
  void changeHeldUnits(int32_t delta, int64_t now);
  /// The running compute node's end at the current rate, from `now`, its
  /// remainder settled then.
  int64_t getComputeEnd(int64_t now) const;
  /// The running compute node's rate, as a fraction of its full rate.
  std::pair<int64_t, int64_t> getComputeRate() const;

  using Snapshot = SimulationScratch::Snapshot;
  void takeSnapshot(uint32_t copy, int64_t now, Snapshot &into) const;
  bool repeats(const Snapshot &before, const Snapshot &after) const;
  /// Moves the state of `after` on by `copies` copies of its period.
  void jump(const Snapshot &before, const Snapshot &after, uint32_t copies);

  const StepShape &shape;
  const StepStructure &structure; ///< The shape's, at hand.
  llvm::ArrayRef<int64_t> arrivals;
  bool recordTimes;
  std::vector<Event> &events;
  std::array<std::vector<uint32_t>, NumReplayStreams> &ready;
  /// Per unfolded node: its slot, and its copy of the fold (0 outside).
  const std::vector<uint32_t> &slots, &copyOf;
  std::vector<uint32_t> &pending;
  std::vector<uint8_t> &status;
  std::vector<int64_t> &arrival, &starts, &done;
  /// Bit per stream: idle (running no node), and with ready nodes.
  unsigned idle = (1u << NumReplayStreams) - 1, queued = 0;
  /// Per receive (of shape.recvs): what bounds the arrivals of its
  /// message that give the same outcome.
  struct RecvWatch {
    uint32_t id = 0;
    int64_t ready = 0;  ///< When it waited for its message.
    bool exact = false; ///< Only its own arrival is known to.
    bool done = false;
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
  /// Whether transfers that move with the moving receive shared a tier
  /// with some that do not: then the outcome moves with no arrival.
  bool mixedSharing = false;

  bool sharing = false; ///< The step may share links (StepShape).
  std::array<TierState, NumLinkTiers> tiers;
  std::vector<uint8_t> &transfer, &endsAlone;
  std::vector<int64_t> &remaining, &transferEnds;

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
  uint32_t foldLast = 0; ///< Past the last copy's last node.
  std::vector<uint32_t> doneInCopy;
  uint32_t lowCopy = 0, highCopy = 0;
  uint64_t outsideChanges = 0;
  uint32_t outsideRunning = 0;
  std::optional<uint32_t> markerCopy; ///< A copy's first node completed.
  Snapshot (&snapshots)[2];
  bool haveBefore = false;
};

} // namespace stg

#endif // STG_LIB_PERF_STEPSIMULATION_H
