//===- Program.h - Numeric per-stage programs -------------------*- C++ -*-===//
//
// What instantiation produces and emission consumes: for each pipeline
// stage, the ordered list of nodes every rank of that stage runs, with all
// numbers computed (FLOPs, bytes, message sizes) and every dependency
// resolved. Ranks of one stage differ only in their communicator groups and
// pipeline peers, which a node records as a mesh-axis mask or a peer stage;
// the emitter turns those into group ids and ranks while it stamps each
// rank's file (architecture.md, "Scale").
//
// Nodes are listed in a topological order and refer to each other by index,
// which is also the node id written to the trace.
//
//===----------------------------------------------------------------------===//

#ifndef STG_INSTANTIATE_PROGRAM_H
#define STG_INSTANTIATE_PROGRAM_H

#include "stg/IR/Graph.h"
#include "stg/IR/Precision.h"
#include "stg/Instantiate/Mesh.h"
#include "stg/Instantiate/PipelineSplit.h"
#include "stg/Instantiate/Schedule.h"

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

namespace stg {

enum class ProgramNodeKind : uint8_t { Compute, Collective, Send, Recv };

/// The collectives a program issues. Instantiation knows nothing of the
/// Chakra schema; the emitter maps these to its `CollectiveCommType`.
enum class CollectiveKind : uint8_t { AllReduce, AllGather, ReduceScatter,
                                      AllToAll };

/// How an expert-parallel all-to-all (an MoE layer's dispatch or combine)
/// runs: as NCCL's all-to-all, or as DeepEP's normal kernels (a token
/// crosses to each node it needs once, then is forwarded inside the node)
/// or low-latency kernels (each of a token's copies straight to its
/// expert's rank, one network step); docs/cluster.md has the model.
enum class ExpertExchange : uint8_t { AllToAll, Normal, LowLatency };

/// The collective's name as Chakra spells it (`ALL_REDUCE`, ...), which the
/// manifest, reports and perturbation selectors use.
llvm::StringRef getCollectiveName(CollectiveKind kind);

/// The matrix product a compute node performs, when it is one: `batch`
/// products of [m, k] by [k, n], on one rank. Zero when not a GEMM.
struct GemmShape {
  int64_t batch = 0, m = 0, n = 0, k = 0;
  bool isGemm() const { return batch > 0 && m > 0 && n > 0 && k > 0; }
};

/// The one kernel a linear GEMM runs in with the GEMMs beside it that read
/// the same input (an inference engine's fused QKV or gate/up weight):
/// their FLOPs and bytes together, the input read and cast once, and their
/// matrix shape with N summed. No FLOPs: the GEMM is a kernel of its own.
struct SharedKernel {
  GemmShape gemm;
  int64_t flops = 0;
  uint64_t bytes = 0, castBytes = 0;
  bool isShared() const { return flops > 0; }
};

/// How a compute kernel uses the device's compute units (SMs), which
/// decides how it slows while communication kernels hold some of them
/// (HeldUnits.cpp, DeviceSpec::getUnitUse): it keeps `busy` of them busy
/// over the part of its time they bound, all but `unbound` / Scale of it.
/// Zero: all of them, all of the time.
struct UnitUse {
  static constexpr uint32_t Scale = 1024;
  uint32_t busy = 0;
  uint16_t unbound = 0;
  bool operator==(const UnitUse &other) const {
    return busy == other.busy && unbound == other.unbound;
  }
};

struct ProgramNode {
  ProgramNode() = default;
  ProgramNode(const ProgramNode &) = default;
  ProgramNode &operator=(const ProgramNode &) = default;
  // Moved, not copied, when a program's node list grows (SmallVector's own
  // move is not declared noexcept, which would make std::vector copy).
  ProgramNode(ProgramNode &&) noexcept = default;
  ProgramNode &operator=(ProgramNode &&) noexcept = default;

  ProgramNodeKind kind = ProgramNodeKind::Compute;
  std::string name;
  /// Compute: `einsum`, `attention`, `elementwise`, ... (Chakra `op_type`).
  std::string opType;
  int64_t numOps = 0;       ///< Compute: floating-point operations.
  uint64_t tensorBytes = 0; ///< Compute: bytes read and written.
  /// Compute, fused attention: query rows (batch x heads x queries), and
  /// the axes of a context-parallel ring whose steps each run a kernel
  /// over them (its group's size in kernels; 0: one kernel). Axes, not a
  /// count, so that the set priced on another mesh (a search's plans share
  /// programs across cp degrees) counts that mesh's steps.
  int64_t attentionRows = 0;
  int64_t attentionExps = 0; ///< OpNumbers::attentionExps.
  AxisMask attentionRing = 0;
  /// Collective: bytes of this rank's input buffer; send/recv: message bytes.
  int64_t commBytes = 0;
  CollectiveKind commType = CollectiveKind::AllReduce;
  AxisMask group = 0;     ///< Collective: the axes of its group.
  /// Collective, an expert all-to-all: how it runs, the copies of a token
  /// its bytes hold (the router's top-k) and the routed experts.
  ExpertExchange expertExchange = ExpertExchange::AllToAll;
  uint16_t tokenCopies = 0;
  uint32_t experts = 0;
  /// Collective: the SMs (compute units) its kernels hold while they run,
  /// which compute on the same rank runs without (DeepEP's normal kernels;
  /// StepEstimate.h). 0 for collectives that take none from compute.
  uint16_t heldUnits = 0;
  /// Compute, with a device model that counts compute units: how its
  /// kernel uses them.
  UnitUse unitUse;
  unsigned peerStage = 0; ///< Send: destination stage; recv: source stage.
  /// Send/recv of a folded dualpipe: the peer is in the other half of the
  /// mirror axis (ProgramSet::mirrorAxis), the other direction's copy.
  bool acrossHalves = false;
  int32_t tag = 0;        ///< Send/recv: equal on both ends.
  uint64_t durationMicros = 0; ///< Compute, with a device model.
  GemmShape gemm;              ///< Compute: an einsum's matrix shape.
  /// Compute: of tensorBytes, what a low-precision GEMM's casts move.
  uint64_t castBytes = 0;
  /// Compute, a GEMM: the kernel it shares with its siblings, if any; its
  /// time is its share (by FLOPs) of that kernel's.
  SharedKernel kernel;
  Precision precision = Precision::BF16; ///< Compute: what it runs in.

  // Where the node comes from: reports and perturbation selectors use it.
  Phase phase = Phase::Forward;
  /// Backward: a zero-bubble schedule's W step runs it (weight gradients).
  bool weightGradient = false;
  int32_t layer = -1;      ///< The model's layer, or -1 at top level.
  int32_t microbatch = -1; ///< -1 for once-per-step work (gradient sync).

  llvm::SmallVector<uint32_t, 4> dataDeps;
  llvm::SmallVector<uint32_t, 2> ctrlDeps;
};

/// What one rank of a stage holds in device memory at its peak, in bytes.
struct StageMemory {
  uint64_t weights = 0;     ///< Local shards of the weights the stage uses.
  uint64_t gradients = 0;   ///< One per local weight element (training).
  uint64_t optimizer = 0;   ///< Adam: fp32 master copy and two moments.
  uint64_t activations = 0; ///< Saved for backward, times in-flight steps.
  uint64_t state = 0;       ///< `state` tensors (KV cache).
  double inFlightMicrobatches = 1; ///< Fractional with virtual stages.

  uint64_t total() const {
    return weights + gradients + optimizer + activations + state;
  }
};

/// Repetitions of a layer that a step runs without nodes of their own
/// (InstantiateOptions::foldLayers). The template, the nodes [begin, end)
/// of one repetition, runs `copies` more times right after itself. A copy
/// depends on the copy before it (the template, for the first) as the
/// template depends on the repetition built before it, and on other nodes
/// as the template does; the step's nodes after `end` that depend on the
/// template depend on the last copy.
struct LayerFold {
  uint32_t begin = 0, end = 0;
  uint32_t copies = 0;
  /// The template's dependencies on the repetition before it: (template
  /// node, the node it depends on, the template node of the same op).
  struct CarriedDep {
    uint32_t node, dep, same;
    bool operator<(const CarriedDep &other) const {
      return std::tie(node, dep) < std::tie(other.node, other.dep);
    }
  };
  std::vector<CarriedDep> carried; ///< By node, then dep.
};

/// One schedule step of a stage (or its optimizer step): a stretch of the
/// program whose first nodes wait for all of the previous step's, so that
/// it starts on idle streams. The step estimate replays a stage step by
/// step, and prices a step once for each pattern of late receives.
struct ProgramStep {
  uint32_t begin = 0, end = 0; ///< The step's nodes in StageProgram::nodes.
  /// Added to the tags of the step's sends and receives: nonzero when a
  /// folded step replays the nodes built for another micro-batch.
  int32_t tagOffset = 0;
  /// The step's folded layers, as an index into StageProgram::folds, or -1.
  /// A step folds the layers of one repeat at most.
  int32_t fold = -1;
};

struct StageProgram {
  unsigned stage = 0;
  /// The layers this stage runs, ascending (with virtual stages, not
  /// contiguous).
  std::vector<unsigned> layers;
  std::vector<ProgramNode> nodes;
  std::vector<ScheduleStep> schedule;
  /// The steps in the order they run. Empty in hand-built programs: the
  /// whole program is then one step.
  std::vector<ProgramStep> steps;
  std::vector<LayerFold> folds;
  StageMemory memory;
};

/// Calls `visit` on each node of `program` as often as its steps run it: a
/// folded program replays some of its nodes.
/// The nodes of [begin, end) that no node of that range depends on: what
/// a step that follows must wait for.
llvm::SmallVector<uint32_t, 8> findExitNodes(llvm::ArrayRef<ProgramNode> nodes,
                                             size_t begin, size_t end);

void forEachExecutedNode(const StageProgram &program,
                         llvm::function_ref<void(const ProgramNode &)> visit);

/// Everything emission needs: the mesh, one program per pipeline stage.
struct ProgramSet {
  Mesh mesh;
  int pipelineAxis = -1; ///< Mesh axis whose coordinate is the stage, or -1.
  /// A folded dualpipe's (foldDualPipe): the data-parallel axis whose upper
  /// half of coordinates runs the pipeline's second direction, each rank
  /// the mirror of the rank of its lower half; -1 otherwise.
  int mirrorAxis = -1;
  unsigned numMicrobatches = 1;
  unsigned numVirtualStages = 1; ///< Model chunks per stage (interleaving).
  PipelineSchedule schedule = PipelineSchedule::OneFOneB;
  bool training = false;
  unsigned numLayers = 0; ///< Repetitions of all forward repeats.
  /// How the layers were split, and each model chunk's layer count (chunk
  /// c on stage c mod the stages).
  PipelineSplit pipelineSplit;
  std::vector<unsigned> chunkLayers;
  /// Only the first and last micro-batch have nodes; the others' steps
  /// replay the first's (InstantiateOptions::foldMicrobatches), and steps
  /// may fold layers (LayerFold). Enough for the step estimate and memory;
  /// not for traces.
  bool folded = false;
  std::vector<StageProgram> stages;

  unsigned getStageOfRank(unsigned rank) const {
    return pipelineAxis < 0 ? 0 : mesh.getCoordinate(rank, pipelineAxis);
  }
  /// The rank of stage `stage` with `rank`'s other coordinates, in the
  /// other half of the mirror axis if `acrossHalves`.
  unsigned getPeerRank(unsigned rank, unsigned stage,
                       bool acrossHalves = false) const {
    unsigned peer = pipelineAxis < 0
                        ? rank
                        : mesh.withCoordinate(rank, pipelineAxis, stage);
    if (!acrossHalves || mirrorAxis < 0)
      return peer;
    unsigned degree = mesh.getDegree(mirrorAxis);
    unsigned mirrored =
        (mesh.getCoordinate(peer, mirrorAxis) + degree / 2) % degree;
    return mesh.withCoordinate(peer, mirrorAxis, mirrored);
  }
  /// The peer rank of send or recv `node` run by `rank`.
  unsigned getPeerRank(unsigned rank, const ProgramNode &node) const {
    return getPeerRank(rank, node.peerStage, node.acrossHalves);
  }
  /// The degree of mesh axis `axis` (-1: 1) and the micro-batches as the
  /// plan gave them: a folded dualpipe's pipeline has twice the stages and
  /// micro-batches, and its mirror axis half the replicas (foldDualPipe
  /// undone).
  unsigned getGivenDegree(int axis) const {
    unsigned degree = axis < 0 ? 1 : mesh.getDegree(axis);
    if (mirrorAxis < 0)
      return degree;
    return axis == mirrorAxis     ? degree / 2
           : axis == pipelineAxis ? degree * 2
                                  : degree;
  }
  unsigned getGivenMicrobatches() const {
    return numMicrobatches * (mirrorAxis < 0 ? 1 : 2);
  }
  /// Every group mask some collective uses.
  std::vector<AxisMask> getUsedMasks() const;
  /// The stage whose ranks hold the most memory (the first of equals), or
  /// null without stages.
  const StageProgram *getLargestMemoryStage() const;
};

} // namespace stg

#endif // STG_INSTANTIATE_PROGRAM_H
