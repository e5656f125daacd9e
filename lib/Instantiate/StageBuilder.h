//===- StageBuilder.h - One pipeline stage's program, node by node -*- C++ -*-===//
//
// The builder instantiation runs once per stage: it walks the model once per
// schedule step and appends a node per op instance, receiving operands from
// other stages, sending results to them, and chaining steps and each group's
// collectives with control dependencies. What the stages share (the
// placement, the numbers, the cross-stage edges) is in SharedState.
//
//===----------------------------------------------------------------------===//

#ifndef STG_LIB_INSTANTIATE_STAGEBUILDER_H
#define STG_LIB_INSTANTIATE_STAGEBUILDER_H

#include "stg/Instantiate/Instantiate.h"

#include "stg/Instantiate/OpNumbers.h"
#include "CommOverlap.h"
#include "Placement.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

namespace stg {

using InstanceKey = std::pair<const Value *, int>;

/// Work done once per training step, not per micro-batch: gradient
/// synchronization and the optimizer.
inline bool isOncePerStep(const Op &op) {
  return op.getPhase() == Phase::GradientSync ||
         op.getPhase() == Phase::Optimizer;
}

/// A cross-stage edge: the consuming stage and the edge's number. An edge
/// into once-per-step work (summing a tied weight's gradients) carries the
/// value once, after the last micro-batch accumulated it. In a folded
/// dualpipe, an edge from a rank's one model copy to its other crosses to
/// the other half (SharedState::crossesHalves), also within a stage.
struct StageEdge {
  unsigned stage;
  unsigned number;
  bool once = false;
  bool acrossHalves = false;
};

/// What every stage's builder shares.
struct SharedState {
  SharedState(const Module &module, const Mesh &mesh,
              const Placement &placement, const InstantiateOptions &options,
              OpNumberCache &numbers, DiagnosticEngine &diags, bool training,
              ProgramSources *sources)
      : module(module), mesh(mesh), placement(placement), options(options),
        numbers(numbers), diags(diags), training(training), sources(sources) {}

  const Module &module;
  const Mesh &mesh;
  const Placement &placement;
  const InstantiateOptions &options;
  OpNumberCache &numbers;
  DiagnosticEngine &diags;
  bool training;
  /// Filled as the stages are built, if not null.
  ProgramSources *sources;
  /// Producer instance -> the stages that consume it.
  llvm::DenseMap<InstanceKey, llvm::SmallVector<StageEdge, 1>> edges;
  unsigned numEdges = 0;
  /// With sources: each query's index in sources->queries, and the stage
  /// that asked it last.
  llvm::DenseMap<std::pair<const Op *, const Value *>, uint32_t> queryIndex;
  std::vector<unsigned> queryAskedBy;
  /// A zero-bubble schedule's W ops (BackwardSplit.h); empty otherwise.
  llvm::DenseSet<const Op *> weightGradientOps;
  /// With options.expertExchange: the router's top-k and routed experts.
  uint16_t tokenCopies = 0;
  uint32_t experts = 0;

  /// Whether the value `def` makes in `layer`, consumed by `consumer` in
  /// `consumerLayer`, crosses to the other half of a folded dualpipe: a
  /// micro-batch's value passed between a stage's two chunks, which on
  /// DualPipe's ranks are two copies of the model, each run by its
  /// mirror's for the other direction. A tied weight's gradients, summed
  /// once a step, stay: both copies' gradients are summed anyway.
  bool crossesHalves(const Op &def, int layer, const Op &consumer,
                     int consumerLayer) const {
    return options.schedule == PipelineSchedule::DualPipe &&
           !isOncePerStep(def) && !isOncePerStep(consumer) &&
           placement.getChunk(&def, layer) !=
               placement.getChunk(&consumer, consumerLayer);
  }
};

/// Whether `step`, of the last micro-batch, is the one that reduces the
/// gradients: the backward, or of a split backward its W.
inline bool runsGradientSync(ScheduleStep step) {
  return step.backward && step.part != BackwardPart::Input;
}

/// Whether a folded stage's schedule step replays micro-batch 0's step of
/// its kind rather than building nodes: every micro-batch's but the first's
/// and the last's, and in training the last one's forward too (it matches
/// the first's but for its tags; its backward reduces the gradients).
inline bool replaysFirstMicrobatch(ScheduleStep step, unsigned numMicrobatches,
                                   bool training) {
  bool last = step.microbatch + 1 == numMicrobatches;
  return step.microbatch > 0 &&
         (!last || (training && !runsGradientSync(step)));
}

/// Builds the program of one stage. Stages are built independently: the
/// shared edges tell each what it sends and receives, and with which tag.
class StageBuilder {
public:
  StageBuilder(SharedState &shared, unsigned stage)
      : shared(shared), placement(shared.placement), stage(stage) {}

  /// Fills `program`; false after reporting an error.
  bool build(StageProgram &program);

private:
  void buildStep(ScheduleStep step);
  /// Whether `op`, in `layer`, runs in `step` here (`lastBackward`: the
  /// step reduces the gradients).
  bool runsInStep(const Op &op, int layer, ScheduleStep step,
                  bool lastBackward) const;
  /// Whether `step` is the last micro-batch's that reduces the gradients.
  bool isLastBackward(ScheduleStep step) const;
  /// Builds two steps that overlap (DualPipe's F&B, two-batch overlap's
  /// pair of forwards) as one step: each cut after its collectives into
  /// turns, the turns taken in alternation from the leading step's, so
  /// that each group's collectives alternate between the two and run
  /// beside the other's compute (the compute stream takes the lowest ready
  /// id). DualPipe arranges its chunks so, the backward leading: the
  /// backward's combine beside the forward's attention, the forward's
  /// dispatch beside the backward's experts, and so on. Two forwards whose
  /// expert exchanges run on a communication stream are cut as SGLang's
  /// prefill strategy cuts them (stagesByExpertExchanges), and each of
  /// their streams runs in the order the turns issue it (orderStreams).
  void buildOverlappedSteps(ScheduleStep leading, ScheduleStep trailing);
  /// Whether two overlapped forwards take turns at their expert exchanges
  /// alone, as SGLang's two-batch overlap runs a prefill with DeepEP's
  /// normal kernels (`_compute_moe_deepseek_blog_prefill`): a turn ends
  /// before a layer's dispatch and after its combine, so that one half's
  /// dispatch, experts and combine run beside the other's attention, and
  /// other collectives stay in their turn. Low-latency exchanges keep the
  /// cut after every collective.
  bool stagesByExpertExchanges() const;
  /// Whether `op` is an all-to-all over the expert axis that makes a node.
  bool isExpertExchange(const Op &op) const;
  /// Makes each compute and each collective node from `begin` on wait for
  /// the one before it of its kind: one host thread issues an engine's
  /// overlapped halves into one compute stream and one communication
  /// stream (DeepEP's buffer has one), each of which runs in that order.
  void orderStreams(size_t begin);
  /// The repetitions of a repeat with a layer in `chunk` of this stage, in
  /// the order they run (a backward repeat's last first).
  llvm::SmallVector<unsigned, 16>
  getRepetitionsInOrder(const Placement::RepeatInfo &info,
                        unsigned chunk) const;
  /// Builds the instances `builds` selects of the repetitions of `repeat`
  /// with a layer in `chunk` (backward repeats last to first), folding the
  /// middle ones where it can.
  void buildRepetitions(const Op &repeat, unsigned chunk, int microbatch,
                        llvm::function_ref<bool(const Op &, int)> builds);
  /// Folds the repetitions of `repeat` between the second and the last of
  /// `here` (a step's, in build order), once the first two are built, from
  /// `firstBegin` and `templateBegin` (InstantiateOptions::foldLayers).
  /// False, with nothing changed, if they cannot be folded exactly or the
  /// step folded another repeat's: the step then builds them all.
  bool foldLayers(const Op &repeat, llvm::ArrayRef<unsigned> here,
                  unsigned chunk, uint32_t firstBegin, uint32_t templateBegin);
  /// The step of an earlier chunk that `step` may replay, its tags moved
  /// on: a chunk without top-level ops whose layers are those of a chunk
  /// built before, whole repetitions of the same repeat further on, and
  /// whose messages are those edges moved on alike
  /// (InstantiateOptions::foldLayers). An empty step if that chunk's was.
  std::optional<ProgramStep> findChunkReplay(ScheduleStep step,
                                             int64_t &edgeShift,
                                             uint32_t &preamble);
  /// Finds the gradient synchronization that runs after the schedule's last
  /// step: all of it without overlapGradientReduction; else the top-level
  /// sync that waits for another stage (a tied weight's gradient) or for
  /// such work, since with interleaving the last micro-batch's backward
  /// here may precede the other stage's, which would deadlock.
  void findDeferredSync();
  /// The optimizer's work of the stage, after the schedule's last step.
  void buildOptimizerStep();
  /// Finds the distributed optimizer's gathers of updated weight shards
  /// (ParamGatherOverlap.cpp), which --overlap-param-gather moves to the
  /// next step's forward.
  void findParamGathers();
  /// Whether `step` starts with its weights' gathers: micro-batch 0's
  /// forward of a training step, when they are overlapped.
  bool startsWithParamGathers(ScheduleStep step) const {
    return shared.options.overlapParamGather && !paramGathers.empty() &&
           !step.backward && step.microbatch == 0;
  }
  /// Builds, at the start of a step, the gathers of the weights of the
  /// stage's chunk `chunk`, each waiting for nothing but its group's order.
  void buildParamGathers(unsigned chunk);
  /// Adds to `deps` the gathers this step built of the weights `op` reads.
  void addParamGatherDeps(const Op &op, int layer,
                          llvm::SmallVectorImpl<uint32_t> &deps);
  /// The axes of a collective `op`'s group, those of degree above 1.
  AxisMask getGroupMask(const Op &op) const;
  /// Whether a collective's axes name the expert axis: an MoE exchange.
  bool isOverExpertAxis(const Op &op) const;
  void buildOp(const Op &op, int layer, int microbatch);
  /// Whether `op`, as built in `layer`, is a forward or backward collective
  /// of weights alone (FSDP's gather of a layer's weights): it depends on
  /// no compute.
  bool isWeightGather(const Op &op, int layer) const;
  /// Records that forward or backward compute node `node` runs in model
  /// layer `layer` (-1: top level), for boundPrefetch and boundReplay.
  void noteLayerCompute(int32_t layer, uint32_t node);
  /// Makes a weight gather wait for the first compute of the layer built
  /// before its own in this step, so that at most two layers' weights are
  /// gathered at once, as PyTorch FSDP's `limit_all_gathers` (on by
  /// default) and FSDP2 bound them. Unbounded, the gathers would run ahead
  /// of the compute as far as their stream lets them.
  void boundPrefetch(ProgramNode &gather);
  /// Makes a backward compute node that depends on nothing of its step (a
  /// recomputation's replay of the forward, which reads only what the
  /// forward saved) wait for the last compute of the layer built before its
  /// own in this step. Megatron-LM replays a layer when autograd reaches
  /// it, after the backward of the layer above, on the one compute stream;
  /// unbounded, the replay would run layers ahead in the stream's gaps.
  void boundReplay(ProgramNode &compute);
  /// Node ids holding `operand` of an op instance; receives it first if it
  /// comes from another stage.
  void collectOperand(const Op &consumer, const Value *operand, int layer,
                      int microbatch, bool allMicrobatches,
                      llvm::SmallVectorImpl<uint32_t> &deps);
  void sendResult(ValueInstance producer, int microbatch,
                  llvm::ArrayRef<uint32_t> deps);
  /// Appends `node`, built for `op` if it is an op's, priced by `query`.
  uint32_t addNode(ProgramNode &&node, const Op *op = nullptr,
                   uint32_t query = ProgramSources::NoQuery);
  /// The numbers of `op`, the query that asked for them in `query`; null,
  /// with the build failed, after an error.
  const OpNumbers *getNumbers(const Op &op, uint32_t &query) {
    query = recordQuery(&op, nullptr);
    const OpNumbers *numbers = shared.numbers.get(op);
    failed |= !numbers;
    return numbers;
  }
  /// Records, if sources are recorded, that the builder asked for the
  /// numbers of `op` (`value` null) or the bytes of `value`; the query's
  /// index.
  uint32_t recordQuery(const Op *op, const Value *value);
  /// Adds a gradient reduction to the pending bucket (issued as one
  /// collective when full, when another kind or group comes, when a member
  /// is needed, or at the end of the step).
  void addToBucket(ProgramNode node, const Op &op, int layer);
  void flushBucket();
  /// A node of no cost that waits for all of `exits`, so that a step boundary
  /// costs one edge per node, not exits x entries.
  uint32_t addStepBarrier(llvm::ArrayRef<uint32_t> exits,
                          llvm::StringRef stepName, int microbatch);
  /// Makes the nodes of [begin, end) that wait for nothing in that range
  /// wait for `exits`.
  void chainEntries(size_t begin, llvm::ArrayRef<uint32_t> exits);
  /// Whether `microbatch` (-1: once per step) gets nodes of its own.
  bool isBuilt(int microbatch) const {
    return !shared.options.foldMicrobatches || microbatch <= 0 ||
           microbatch + 1 == int(shared.options.numMicrobatches);
  }
  /// Whether the step that runs `op` for `microbatch` replays micro-batch
  /// 0's (replaysFirstMicrobatch) rather than building nodes of its own.
  bool isReplayed(const Op &op, int microbatch) const;
  int32_t getTag(unsigned edge, int microbatch) const {
    return int32_t(edge * shared.options.numMicrobatches +
                   std::max(microbatch, 0));
  }
  std::string getInstanceName(const Op &op, llvm::StringRef valueName,
                              int layer, int microbatch) const;
  /// The model's layer an op instance runs in, or -1 at top level.
  int32_t getModelLayer(const Op &op, int layer) const {
    return layer < 0 ? -1 : int32_t(placement.getLayer(&op, layer));
  }
  std::string getInstanceName(const Value &value, int layer,
                              int microbatch) const {
    return getInstanceName(*value.getDefiningOp(), value.getName(), layer,
                           microbatch);
  }

  SharedState &shared;
  const Placement &placement;
  unsigned stage;
  /// The collectives that run beside compute (CommOverlap.h): over which
  /// axes, beside what.
  struct OverlapAxes {
    AxisMask axes;
    OverlapPartner partner;
  };
  llvm::SmallVector<OverlapAxes, 2> overlaps;
  std::vector<ProgramNode> *nodes = nullptr;
  std::vector<LayerFold> *folds = nullptr;
  /// The stage's sources, if recorded.
  ProgramSources::Stage *sources = nullptr;
  /// The op each node was built for (null for receives, sends, barriers and
  /// buckets): a folded layer's template finds its op's node in the
  /// repetition before it.
  std::vector<const Op *> nodeOps;
  /// The fold of the step being built, or -1.
  int32_t stepFold = -1;
  static constexpr uint32_t NoLayerStart = UINT32_MAX;
  /// The first and the last compute node of the step's latest layer and of
  /// the layer built before it (in build order: a folded layer's template
  /// stands for the copy before the layer after the fold).
  struct LayerStarts {
    int32_t layer = -1;
    uint32_t current = NoLayerStart, previous = NoLayerStart;
    uint32_t last = NoLayerStart, previousLast = NoLayerStart;
  } layerStarts;
  /// The first node of the step being built.
  uint32_t stepBegin = 0;
  /// The weight each gather of updated shards refills (shard-optimizer's
  /// all-gathers), and the gathers themselves.
  llvm::DenseMap<const Value *, const Op *> paramGathers;
  llvm::DenseSet<const Op *> paramGatherOps;
  /// Whether the forward first reads a top-level weight after the layers.
  llvm::DenseMap<const Value *, bool> topLevelGatherAfterLayers;
  /// The gathers the step being built began with, by the weight instance
  /// they refill, and how many nodes they are (the step's preamble).
  llvm::DenseMap<InstanceKey, uint32_t> stepParamGathers;
  uint32_t stepPreamble = 0;
  /// Without the overlap: the optimizer step's last compute node, which
  /// its weight gathers wait for.
  std::optional<uint32_t> gathersAfter;
  /// Per repetition's first layer: whether a step folded it, so that later
  /// steps find no nodes for it (what an earlier step made is done when a
  /// step starts: the estimate needs no edge to it).
  std::vector<bool> foldedAway;
  /// The repetitions (repeat, first layer) that send a value to another
  /// stage.
  llvm::DenseSet<std::pair<const Op *, int>> sendingRepetitions;
  /// While a step builds the repetition after a fold: values of the folded
  /// repetitions of `repeat` (first layers in [first, last]) are taken from
  /// the template's (first layer `templateLayer`), which stands for them.
  struct {
    const Op *repeat = nullptr;
    int first = 0, last = 0, templateLayer = 0;
  } redirect;
  /// A message a step built: the value instance, its edge's number, the
  /// consuming stage.
  struct Message {
    InstanceKey key;
    unsigned edge;
    unsigned consumer;
    bool once;
  };
  /// The messages of the step being built.
  std::vector<Message> stepMessages;
  /// A schedule step built in a chunk without top-level ops, which the
  /// same step of a like chunk may replay (its step: none if empty).
  struct BuiltStep {
    unsigned chunk;
    int microbatch;
    bool backward;
    BackwardPart part;
    std::optional<ProgramStep> step;
    std::vector<Message> messages;
    uint32_t preamble = 0;
  };
  std::vector<BuiltStep> builtSteps;
  /// (instance, micro-batch) received by a step that replayed another
  /// chunk's: held from then on, without a node of its own.
  llvm::DenseSet<std::pair<InstanceKey, int>> replayedReceives;
  /// The stage's layers in each of its chunks, ascending.
  std::vector<std::vector<unsigned>> chunkLayers;
  llvm::DenseSet<unsigned> chunksWithTopLevelOps;
  /// (instance, micro-batch) -> the nodes that hold it on this stage.
  llvm::DenseMap<std::pair<InstanceKey, int>, llvm::SmallVector<uint32_t, 1>>
      holders;
  /// Likewise, of the other half of a folded dualpipe: the receives of the
  /// values its mirror made (SharedState::crossesHalves).
  llvm::DenseMap<std::pair<InstanceKey, int>, uint32_t> mirrorHolders;
  llvm::DenseMap<AxisMask, uint32_t> lastCollective;
  llvm::DenseSet<const Op *> deferredSync;
  struct Bucket {
    std::optional<ProgramNode> node;
    unsigned size = 0;
    llvm::SmallVector<std::pair<InstanceKey, int>, 8> members;
  } bucket;
  bool failed = false;
};

} // namespace stg

#endif // STG_LIB_INSTANTIATE_STAGEBUILDER_H
