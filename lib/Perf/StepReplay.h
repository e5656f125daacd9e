//===- StepReplay.h - The replay of a plan's steps --------------*- C++ -*-===//
//
// The state of one estimate (estimateStep): the stages' programs priced on
// the system, their schedule steps found once (StepStructures.cpp: each
// distinct step's streams and edges, and its messages numbered, kept by a
// StepShapeCache across plans of one structure), and the steps replayed
// stage by stage, each step's outcome simulated once per shape and arrival
// of its messages and reused (StepEstimate.cpp). Private to lib/Perf: the
// two files share the class.
//
//===----------------------------------------------------------------------===//

#ifndef STG_LIB_PERF_STEPREPLAY_H
#define STG_LIB_PERF_STEPREPLAY_H

#include "StepShape.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/Hashing.h"

#include <optional>
#include <string>
#include <tuple>
#include <unordered_map>

namespace stg {

/// Receive arrivals after the step's start, in whole nanoseconds, so that
/// the periodic steps of a pipeline's steady state find their outcome again
/// despite rounding in the absolute times.
using ArrivalPattern = std::vector<int64_t>;

struct OutcomeKeyHash {
  size_t operator()(const ArrivalPattern &key) const {
    return llvm::hash_combine_range(key.begin(), key.end());
  }
};

/// The spans of a rank's groups, by mask: a few, looked up per node.
using GroupSpans = llvm::SmallDenseMap<AxisMask, GroupSpan, 8>;

/// A message: sending stage, receiving stage, tag.
using MessageKey = std::tuple<unsigned, unsigned, int32_t>;

/// Outcomes a shape keeps to match by arrival ranges: a steady state
/// drifting by a little each micro-batch asks for the last few again, and
/// stages that take turns waiting for some more. (Shard 0/64 of Llama-3-70B
/// on 1024 GPUs: 8 kept, 80,441 step simulations; 16, 67,592; 32, 61,364;
/// 64, 59,097, no faster.)
constexpr unsigned MaxRangedOutcomes = 32;

/// The outcomes of one step shape, by arrival pattern. A step has one
/// receive or none almost always (a pipeline stage's input): those are
/// keyed by the one arrival, without building a pattern.
struct ShapeOutcomes {
  llvm::DenseMap<int64_t, uint32_t> byArrival;
  std::unordered_map<ArrivalPattern, uint32_t, OutcomeKeyHash> byPattern;
  /// Recent outcomes that hold for ranges of arrivals (StepOutcome::sameFor),
  /// the oldest replaced first, with the first receive's range at hand: the
  /// search reads no outcome that the first arrival rules out.
  struct Ranged {
    int64_t first, second;
    uint32_t index;
  };
  llvm::SmallVector<Ranged, 8> ranged;
  uint32_t nextReplaced = 0;
};

constexpr uint32_t NoShape = ~0u;

/// What the replay reads of a shape at every step, apart from the rest:
/// most steps find their outcome here.
struct ShapeSummary {
  uint32_t numRecvs = 0, numSends = 0;
  /// The outcome of the single arrival looked up last, if it did not move:
  /// in a steady state the next step of the shape asks for it again.
  uint32_t lastOutcome = ~0u;
  int64_t lastArrival = 0;
  /// The ranged outcome a single receive found last, and the arrivals it
  /// holds for: a steady state that moves with its receive asks for it
  /// again, at another arrival.
  uint32_t rangedOutcome = ~0u;
  int64_t rangedFirst = 0, rangedSecond = 0;
};

/// What a stage's steps share in every plan of a structure: the step of
/// each distinct first node (folded micro-batches repeat a few), the
/// streams and edges of its shape, with no times, and each step's messages.
struct StageSteps {
  /// Per step, read together: its index in `structures`; and where its
  /// messages begin: step i receives messages[messageBegin + r] in its
  /// shape's r-th receive, and sends the ones after those in the order of
  /// its sends.
  struct Step {
    uint32_t distinct, messageBegin;
  };
  std::vector<Step> steps;
  std::vector<std::shared_ptr<const StepStructure>> structures;
  std::vector<uint32_t> firstNodes; ///< Per structure.
  std::vector<uint32_t> messages;
};

/// The steps of a program set, whatever its numbers, with its messages
/// numbered: the replay keeps when each was sent in a vector by number,
/// rather than by key in a map (a plan has thousands of steps).
struct ProgramSteps {
  std::vector<StageSteps> stages;
  std::vector<MessageKey> messages; ///< By number.
  bool ready = false;
};

/// A stage's step structures by their first node.
using StructuresByNode =
    llvm::DenseMap<uint32_t, std::shared_ptr<const StepStructure>>;

struct StepShapeCache::Shapes {
  ProgramSteps steps;
  /// Per stage, the structures of steps numbered before forgetSteps.
  std::vector<StructuresByNode> kept;
};

struct StageState {
  unsigned rank = 0;          ///< The rank that stands for the stage.
  std::vector<double> micros; ///< Per node: its time on its stream.
  /// Per node, a bit per tier it may move bytes over: its transfers
  /// (CommunicationCost.h) are found only for steps that may share links.
  std::vector<uint8_t> tierMasks;
  /// Its groups' spans, by mask: its own, or the first stage's when its
  /// ranks are those moved by whole nodes.
  GroupSpans ownSpans;
  GroupSpans *spans = nullptr;
  /// The program's steps, or the whole program as one step when it has
  /// none (a hand-built program).
  llvm::ArrayRef<ProgramStep> steps;
  ProgramStep wholeProgram;
  /// Per distinct step: the index of its shape in Replay::shapes, once
  /// known.
  std::vector<uint32_t> shapes;
  size_t next = 0; ///< The next step to run.
  // Whole picoseconds, as the steps': the sums are exact.
  int64_t now = 0; ///< When the previous step finished.
  int64_t computePicos = 0, communicationPicos = 0, waitPicos = 0;
};

/// One estimate of a program set on a system: the stages' steps replayed
/// until every stage is done, or one waits for a message never sent.
class Replay {
public:
  Replay(const ProgramSet &programs, const SystemSpec &system,
         StepTimeline *timeline, StepShapeCache::Shapes *cache)
      : programs(programs), system(system), timeline(timeline),
        steps(cache ? cache->steps : ownSteps),
        keptStructures(cache ? &cache->kept : nullptr),
        states(programs.stages.size()),
        waiting(programs.stages.size(), NoMessage) {}

  llvm::Expected<StepEstimate> run();

private:
  const ProgramNode &node(unsigned stage, uint32_t id) const {
    return programs.stages[stage].nodes[id];
  }
  void initialize(unsigned stage);
  /// The node's time, with a bit per tier it may use set in `tiers`.
  double getMicros(unsigned stage, const ProgramNode &node, GroupSpans &spans,
                   uint8_t &tiers);
  /// The transfers of a node getMicros priced, appended to `transfers`.
  void getTransfers(unsigned stage, const ProgramNode &node,
                    llvm::SmallVectorImpl<TierTransfer> &transfers);
  /// The index of the shape of the stage's step `stepIndex` in `shapes`.
  uint32_t getShape(unsigned stage, size_t stepIndex);
  /// Finds the steps' structures and numbers their messages.
  void findSteps();
  /// The streams and edges of the stage's `step`.
  std::shared_ptr<const StepStructure> buildStructure(unsigned stage,
                                                      const ProgramStep &step);
  /// The outcome `byKey` holds for `key`, else one kept for ranges that
  /// hold the current arrivals (`ranged`), and by how much it moves; else
  /// the index the next outcome gets, recorded for `key`.
  template <typename Map, typename Key>
  uint32_t findOutcome(Map &byKey, const Key &key, const ShapeOutcomes &known,
                       int64_t &movedPicos,
                       const ShapeOutcomes::Ranged *&ranged) {
    if (auto found = byKey.find(key); found != byKey.end())
      return found->second;
    if ((ranged = findRanged(known, movedPicos)))
      return ranged->index;
    uint32_t fresh = outcomes.size();
    byKey.try_emplace(key, fresh);
    return fresh;
  }
  /// A kept outcome whose ranges hold the current arrivals, and by how
  /// much it moves.
  const ShapeOutcomes::Ranged *findRanged(const ShapeOutcomes &known,
                                          int64_t &movedPicos);
  /// How much ranged outcome `index` moves with the current arrivals
  /// (`single`: the one receive's, else the pattern's).
  int64_t getMovedPicos(uint32_t index, std::optional<int64_t> single = {}) {
    const StepOutcome &outcome = outcomes[index];
    ++estimate.rangedSteps;
    if (outcome.movingRecv < 0)
      return 0;
    int64_t arrival = single ? *single : arrivals[outcome.movingRecv];
    return (arrival - outcome.movingFrom) * 1000;
  }
  /// The outcome of shape `shapeIndex` at `arrivals`, which its summary
  /// did not have: found among those kept, else simulated.
  uint32_t lookUpOutcome(uint32_t shapeIndex, int64_t &movedPicos);
  void keepRanged(ShapeOutcomes &known, uint32_t index);
  /// Runs the stage's steps until one waits for a message not yet sent.
  void advance(unsigned stage);
  llvm::Error describeDeadlock() const;

  const ProgramSet &programs;
  const SystemSpec &system;
  StepTimeline *timeline; ///< Null unless recording.
  /// The steps' structures and numbered messages: the cache's, if there is
  /// one (it serves program sets of these steps), else ownSteps.
  ProgramSteps ownSteps;
  ProgramSteps &steps;
  /// The cache's structures of steps numbered before, if any.
  std::vector<StructuresByNode> *keptStructures;
  std::vector<StageState> states;
  StepEstimate estimate;
  /// The distinct step shapes of all stages, with their outcomes.
  std::vector<StepShape> shapes;
  std::vector<ShapeOutcomes> outcomeIndex; ///< Per shape.
  std::vector<ShapeSummary> summaries;     ///< Per shape.
  std::vector<StepOutcome> outcomes;
  /// Shapes by their hash, to find an equal one.
  llvm::DenseMap<uint64_t, llvm::SmallVector<uint32_t, 1>> shapesByHash;
  StepShape candidate; ///< getShape's buffer, reused.
  std::vector<std::pair<uint32_t, ShapeChild>> edges;
  /// Per message, read together: when its send completed (NotSent
  /// before), and the stage that waits for it, if one does.
  static constexpr int64_t NotSent = -1;
  static constexpr uint32_t NoStage = ~0u;
  struct MessageState {
    int64_t sentAt = NotSent;
    uint32_t waiter = NoStage;
  };
  std::vector<MessageState> messageStates;
  SimulationScratch scratch;
  /// The groups' spans of the first stage's rank, by mask.
  GroupSpans firstStageSpans;
  /// Per stage, the message it waits for (a stage waits for one at a
  /// time), and the stages to advance.
  static constexpr uint32_t NoMessage = ~0u;
  std::vector<uint32_t> waiting;
  std::vector<unsigned> runnable;
  std::string failure;     ///< Why the replay stopped early, if it did.
  ArrivalPattern arrivals; ///< The current step's, reused.
};

} // namespace stg

#endif // STG_LIB_PERF_STEPREPLAY_H
