//===- Instantiate.h - Symbolic IR to numeric stage programs ----*- C++ -*-===//
//
// Instantiation binds every dim and axis degree to its number and lays the
// training step (or inference pass) out in time, per pipeline stage:
//
//  - pipeline split: the layers of the model's `repeat`s are divided
//    evenly over the `pp` stages, the remainder going to the first stages,
//    or as Megatron-LM splits them (PipelineSplit.h); ops before the first
//    repeat run on the first stage, ops after it on the last; the backward
//    repeat mirrors the forward one;
//  - every data edge between stages becomes a SEND on the producing stage
//    and a RECV on the consuming one, with a tag both derive alike;
//  - micro-batches: forward and backward work is replayed per micro-batch;
//    gradient synchronization and the optimizer step run once, in the last
//    micro-batch's backward, after the gradients of all micro-batches
//    (accumulation is fused into the weight-gradient kernel, as Megatron-LM
//    does, so it adds no node);
//  - the schedule (1F1B or GPipe) orders the micro-batch steps of a stage
//    with control dependencies, and the collectives of each group are
//    chained in program order so every member issues them alike.
//
// Each op's numbers are evaluated once and shared by all its instances.
// Layouts, reshapes, local slices and declarations emit no node; their
// consumers depend on what produced their operands.
//
//===----------------------------------------------------------------------===//

#ifndef STG_INSTANTIATE_INSTANTIATE_H
#define STG_INSTANTIATE_INSTANTIATE_H

#include "stg/IR/Module.h"
#include "stg/Instantiate/PipelineSplit.h"
#include "stg/Instantiate/Program.h"
#include "stg/Support/Diagnostics.h"
#include "stg/Support/LogicalResult.h"

#include "llvm/ADT/StringMap.h"

#include <optional>
#include <string>
#include <vector>

namespace stg {

class OpNumberCache;

/// Megatron-LM's rank order, fastest-varying axis first.
inline const char *const DefaultRankOrder = "tp,cp,ep,dp,pp";

/// The mesh of a run: the axes of `rankOrder` (comma-separated), each with
/// its degree from `degrees` or else from the module's axis of that name
/// (1 if neither has one). Every axis the module uses with a degree above 1
/// must be in the order.
std::optional<Mesh> buildMesh(const Module &module, llvm::StringRef rankOrder,
                              const llvm::StringMap<unsigned> &degrees,
                              DiagnosticEngine &diags);

/// How model state is counted for mixed-precision training (16-bit
/// weights): Megatron-LM keeps fp32 main gradients (2 + 4 + 12 = 18 bytes a
/// parameter); ZeRO's accounting keeps 16-bit gradients (16 bytes).
enum class MemoryAccounting { Megatron, ZeRO };

std::optional<MemoryAccounting> parseMemoryAccounting(llvm::StringRef name);

struct InstantiateOptions {
  unsigned numMicrobatches = 1;
  MemoryAccounting memoryAccounting = MemoryAccounting::Megatron;
  /// Model chunks per pipeline stage (Megatron-LM's virtual stages); more
  /// than one interleaves them in the 1F1B schedule.
  unsigned numVirtualStages = 1;
  /// How the layers split into model chunks when not evenly (the
  /// remainder to the first chunks): Megatron-LM's fewer layers on the
  /// first and last stage, which also hold the embedding and the head.
  PipelineSplit pipelineSplit;
  /// Gradient reductions of consecutive weights are issued together, as
  /// data-parallel frameworks do, up to this many bytes; 0 issues one per
  /// weight.
  uint64_t gradientBucketBytes = 0;
  /// Data-parallel gradient reductions overlap the last micro-batch's
  /// backward (DDP, Megatron-LM's --overlap-grad-reduce); false issues them
  /// all after the schedule's last step, as Megatron-LM does by default.
  bool overlapGradientReduction = true;
  /// Tensor-parallel all-gathers and reduce-scatters run beside the GEMMs
  /// they feed or reduce (Transformer Engine's userbuffers overlap,
  /// Megatron's --tp-comm-overlap; CommOverlap.h).
  bool tensorParallelOverlap = false;
  /// Context parallelism as a ring (Megatron's cp_comm_type p2p): the
  /// gathers of keys and values over cp run beside attention, and the
  /// reduce-scatters of their gradients beside its backward; false gathers
  /// them before it (all_gather).
  bool contextParallelRing = false;
  /// The distributed optimizer's all-gathers of the updated weights run in
  /// the next step's first forward, beside it, each before the first use
  /// of its weight (Megatron's --overlap-param-gather;
  /// ParamGatherOverlap.cpp); false keeps them after the optimizer.
  bool overlapParamGather = false;
  PipelineSchedule schedule = PipelineSchedule::OneFOneB;
  /// Outside training, each pair of micro-batches (0 and 1, 2 and 3, ...)
  /// runs as one overlapped step, each one's collectives beside the other's
  /// compute (SGLang's two-batch overlap; overlapForwardPairs). Such
  /// programs are built unfolded.
  bool twoBatchOverlap = false;
  /// Builds the nodes of the first micro-batch and of the last one's
  /// backward (and, outside training, forward) only, and lets the other
  /// micro-batches' steps replay the first's: every step of one kind
  /// (chunk, forward or backward) is the same but for its names and tags.
  /// The plan search prices plans this way, in time independent of the
  /// micro-batch count; such programs cannot be emitted.
  bool foldMicrobatches = false;
  /// Builds, of the repetitions a step runs of a repeat, the first two and
  /// the last, and lets the template (the second) stand for those between
  /// (LayerFold): a step's nodes then do not grow with its layers. For the
  /// step estimate and memory only, as foldMicrobatches; it is not done
  /// with gradient buckets, which span layers.
  bool foldLayers = false;
  /// The mesh axis whose coordinate is the pipeline stage.
  std::string pipelineAxis = "pp";
  /// How the all-to-alls over `expertAxis` (an MoE layer's dispatch and
  /// combine, and their gradients) run; the router's top-k and expert
  /// count, read off the model's `route` ops, go with them.
  ExpertExchange expertExchange = ExpertExchange::AllToAll;
  std::string expertAxis = "ep";
  /// The SMs normal expert exchanges hold while they run
  /// (ProgramNode::heldUnits): DeepEP's default, and Megatron-Core's
  /// `moe_deepep_num_sms`.
  uint16_t expertExchangeUnits = 20;
};

/// Where the numbers of a program set's nodes come from, recorded while
/// instantiate() builds it: per stage, the ops' numbers and the values'
/// bytes the builder asked for, in its order, and the one each node took
/// its numbers from. Which nodes a set has depends on the module, the
/// options and which mesh axes have a degree above 1, not on the numbers,
/// so another binding of that structure re-prices the nodes
/// (repriceProgramSet) rather than building them again: the plan search
/// builds each structure once.
struct ProgramSources {
  static constexpr uint32_t NoQuery = ~0u;
  /// A schedule step of a folded set that built its nodes or replayed
  /// another chunk's step: of the first micro-batch or of the last.
  struct ScheduleSource {
    unsigned chunk = 0;
    bool backward = false;
    BackwardPart part = BackwardPart::Whole;
    bool lastMicrobatch = false;
    /// What it added to the steps (none if no nodes), its tags not moved.
    std::optional<ProgramStep> step;
    /// A replay moves its tags this many edges on: times the micro-batch
    /// count.
    int64_t edgeShift = 0;
    /// Nodes at the step's start that only micro-batch 0 runs (its weights'
    /// gathers): the other micro-batches' replays skip them.
    uint32_t preamble = 0;
  };
  /// An op's numbers (`value` null), or the bytes of `value` on one rank
  /// (`op` defines it).
  struct Query {
    const Op *op;
    const Value *value;
  };
  /// Each distinct query of the set once: a stage asks for the same op's
  /// numbers at every layer and micro-batch it builds, and stages share
  /// ops.
  std::vector<Query> queries;
  struct Stage {
    /// The queries the stage's builder asked, each once, in the order it
    /// first asked them (re-pricing reports the error a build would).
    std::vector<uint32_t> queries;
    /// Per node, the query it took its numbers from, or NoQuery (a
    /// barrier).
    std::vector<uint32_t> nodeQueries;
    /// With folded micro-batches: in schedule order, each schedule step
    /// that built nodes or replayed another chunk's (micro-batch 0's or
    /// the last's), and what it added to the steps.
    std::vector<ScheduleSource> scheduleSources;
    std::optional<ProgramStep> optimizerStep; ///< If it added one.
  };
  /// Empty when the set cannot be re-priced: gradient buckets group
  /// reductions by their bytes.
  std::vector<Stage> stages;
  /// Whether the stages' scheduleSources were recorded (folded
  /// micro-batches), and the edges that cross stages: a tag is an edge's
  /// number times the micro-batch count plus the micro-batch.
  bool foldedMicrobatches = false;
  uint32_t numEdges = 0;
};

/// Builds one program per pipeline stage of `module`, which has been
/// through the passes and has every dim bound. Reports what cannot be
/// instantiated (an unbound symbol, more stages than layers) at its
/// source location.
///
/// `numbers`, if given, holds the ops' numbers of an earlier call with the
/// same dims and degrees bound (it is filled otherwise). `sources`, if
/// given, is filled for repriceProgramSet.
std::optional<ProgramSet> instantiate(const Module &module, const Mesh &mesh,
                                      const InstantiateOptions &options,
                                      DiagnosticEngine &diags,
                                      OpNumberCache *numbers = nullptr,
                                      ProgramSources *sources = nullptr);

/// Re-prices `set`, built by instantiate() from `module` with `options`
/// and `sources` recorded, for the module's current binding and `mesh`:
/// the nodes' numbers, the collectives' groups (the mesh may order its axes
/// otherwise) and each stage's memory, as instantiate() would give them.
/// `mesh` must have a degree above 1 on the same axes as the set's mesh
/// and `options` must be those of the build. Fails with the error
/// instantiate() would have reported first.
LogicalResult repriceProgramSet(ProgramSet &set, const ProgramSources &sources,
                                const Module &module, const Mesh &mesh,
                                const InstantiateOptions &options,
                                OpNumberCache &numbers,
                                DiagnosticEngine &diags);

/// Moves the collectives' groups of `set` onto `mesh`, whose axes with a
/// degree above 1 are those of the set's mesh, maybe in another order: a
/// plan that differs from the set's only in its rank order has its nodes
/// and numbers but these.
LogicalResult moveProgramSetToMesh(ProgramSet &set, const Mesh &mesh,
                                   llvm::StringRef pipelineAxis,
                                   DiagnosticEngine &diags);

/// Moves `set`, built by instantiate() with folded micro-batches and
/// `sources` recorded, to `numMicrobatches` micro-batches: the schedule,
/// the steps and the message tags that count would give; its numbers and
/// memory are left for repriceProgramSet. A folded set has nodes for the
/// first and the last micro-batch, so any count of two or more builds the
/// same nodes, in the same order, as long as its schedule reaches the
/// steps that build them in the same order. Fails, leaving `set` as it
/// was, where that does not hold (or the count is one): the caller builds
/// afresh, and any error is the build's to report.
LogicalResult retargetMicrobatches(ProgramSet &set,
                                   const ProgramSources &sources,
                                   unsigned numMicrobatches);

} // namespace stg

#endif // STG_INSTANTIATE_INSTANTIATE_H
