//===- PlanBounds.h - What a plan needs at least ----------------*- C++ -*-===//
//
// Two lower bounds of what PlanEvaluator reports for a plan, from numbers
// read once from the model, so that the search can skip compiling the
// plans that cannot fit or cannot beat the best plan found so far:
//
//  - memory: the busiest rank's weights, gradients and Adam state, counted
//    as StageMemory.cpp counts them (a weight's local shard by the axes its
//    layout splits it over, 4-byte main gradients under Megatron's
//    accounting, 12 bytes per stepped element) for the layers each stage
//    holds and the embedding and head of the first and last stage, with
//    each stage's layers' activations times the micro-batches its schedule
//    holds (without sequence parallelism, the part tp does not split
//    whole on every tp rank; a low-precision recipe's as read in it, else
//    at its format's share), and at least the stages' average;
//    whatever cannot be attributed for certain counts nothing;
//  - step: each compute node runs no faster than its FLOPs at the best
//    rate of its kind of kernel (GEMM, fused attention with its work per
//    query row, other) in any of the plan's precisions, and the other
//    kernels no faster than their bytes at the memory's bandwidth, each
//    after its launch gap; a rank runs its compute one node after another,
//    and a micro-batch crosses the stages in order, so a stage's work waits
//    for the first micro-batch's forward through the chunks before it and,
//    under 1F1B, is followed by the last one's backward back through them
//    (the other schedules fill that with other work); and a
//    stage takes at least its collectives over tp and cp, its expert
//    exchanges and its FSDP gathers, which a rank's collective stream runs
//    one at a time (without Ulysses; a low-precision recipe's at its
//    format's share of the bytes read, what an FP8 gather moves).
//    The work per layer and sequence comes from the model compiled on one
//    GPU with micro-batches of one and two sequences, their difference, so
//    that work that does not grow with the batch (a weight's bytes) is not
//    multiplied; a plan's split over tp x cp divides it at best (a split
//    kernel reaches no higher rate, a replicated one moves more bytes); the
//    collectives' bytes likewise from the model split a layer a stage
//    over tp 2 (and ep 2), over cp 2, and over dp 2 with FSDP.
//
// Both are checked against evaluated plans (PlanBoundsTest).
//
//===----------------------------------------------------------------------===//

#ifndef STG_SEARCH_PLANBOUNDS_H
#define STG_SEARCH_PLANBOUNDS_H

#include "stg/Driver/Compile.h"
#include "stg/Perf/DeviceModel.h"
#include "stg/Perf/System.h"
#include "stg/Search/PlanSpace.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/Error.h"

#include <array>
#include <map>
#include <string>
#include <tuple>
#include <vector>

namespace stg {

/// What the bounds read from the model, once per search.
struct ModelBounds {
  /// A split of a weight over an axis, through an alias whose conditions
  /// (options) may depend on the plan.
  struct Split {
    unsigned axis = 0; ///< Index in PlanAxes.
    /// The conditions the alias chain needs, each an option and the value
    /// that makes the split active; options the search does not set are
    /// fixed by the model and stored as `fixed`.
    enum class Switch : uint8_t { Fixed, WeightSharded, SequenceParallel };
    struct Condition {
      Switch kind = Switch::Fixed;
      bool wanted = true; ///< Fixed: whether the alias is active.
    };
    llvm::SmallVector<Condition, 1> conditions;
  };
  /// A weight, or an Adam step of one, as the memory counts it.
  struct Tensor {
    uint64_t elements = 0; ///< Logical (unsharded).
    unsigned elementBytes = 2;
    bool adam = false; ///< An optimizer step: 12 bytes per local element.
    llvm::SmallVector<Split, 3> splits;
    /// An optimizer step's: the axes its gradient is all-reduced over,
    /// which a distributed optimizer shards it over (ShardOptimizer.cpp),
    /// if read; else every axis that does not split it bounds them.
    std::optional<llvm::SmallVector<Split, 4>> reducedOver;
  };

  unsigned layers = 0;
  /// The tensors a layer holds, by its repeat and body layer; layerGroup
  /// maps each global layer to its group. Empty: no memory bound.
  std::vector<std::vector<Tensor>> groups;
  std::vector<uint32_t> layerGroup;
  /// Weights outside the layers read before the first layer (on the first
  /// stage), after the last one (on the last stage), or both.
  struct TopWeight {
    Tensor tensor;
    bool first = false, last = false;
  };
  std::vector<TopWeight> topWeights;
  bool training = true;

  /// The work per sequence of a forward and backward, by the kind of
  /// kernel that does it, as DeviceSpec::getNodeMicros prices them: each
  /// term alone is a lower bound of its kernels' time.
  struct Work {
    double gemmFlops = 0;      ///< GEMMs, and unfused attention's products.
    double attentionFlops = 0; ///< Fused attention's products,
    double forwardRows = 0;    ///< its query rows in the forward
    double backwardRows = 0;   ///< and in the backward.
    double otherFlops = 0;     ///< The other kernels' FLOPs
    double otherBytes = 0;     ///< and bytes (unfused attention's too).
    /// The kernels a micro-batch launches, whatever its size: each pays
    /// the device's launch gap.
    double kernels = 0;
    Work &operator+=(const Work &other);
    /// What a larger micro-batch (`this`) adds to `other`'s work, each term
    /// at least 0, and the kernels both launch.
    Work getGrowthOver(const Work &other) const;
  };
  /// The work of each layer's forward and backward, by the recomputation
  /// (`none`, `selective`, `full`); the layers' and the rest of the
  /// model's, as read (empty: no step bound for it).
  struct ModelWork {
    std::vector<Work> layers;
    /// Of each layer's, its forward pass's (the first micro-batch's fills
    /// the pipeline with it).
    std::vector<Work> forwardLayers;
    Work other;
    /// Of `other`, what the first stage runs before the layers (the
    /// embedding) and the last after them (the head and the loss), as
    /// read from the model split one layer a stage (none where not read).
    Work beforeLayers, afterLayers;
  };
  std::map<std::string, ModelWork> work;
  /// Saved activation bytes per sequence of the whole model on one GPU, by
  /// the recomputation (getActivationKey: in the model's own precision, and
  /// in each low-precision recipe searched; empty: none read).
  std::map<std::string, double> activationsPerSequence;
  /// The same per layer, read from the model split one layer a stage (the
  /// first and last layer with what runs before and after the layers), by
  /// the recomputation (empty: none read).
  std::map<std::string, std::vector<double>> layerActivationsPerSequence;
  /// The part of those that tp does not split without sequence
  /// parallelism (every tp rank holds it whole), read at tp 2 (empty: none).
  std::map<std::string, std::vector<double>> layerReplicatedPerSequence;
  /// Bytes by CollectiveKind.
  using CollectiveBytes = std::array<double, 4>;
  /// Per sequence, the bytes of each layer's forward and backward
  /// collectives over tp, read at tp 2 (and ep 2 for plans with ep > 1),
  /// by the recomputation, whether sequence parallelism is on and whether
  /// ep > 1 (empty: none read).
  using TensorParallelKey = std::tuple<std::string, bool, bool>;
  std::map<TensorParallelKey, std::vector<CollectiveBytes>> tensorParallelBytes;
  /// Per sequence, the bytes of each layer's forward and backward
  /// collectives over cp, read at cp 2, by the recomputation (empty: none
  /// read).
  std::map<std::string, std::vector<CollectiveBytes>> contextParallelBytes;
  /// Per micro-batch, the bytes of each layer's forward and backward
  /// collectives over dp under FSDP (its weights' gathers), read at dp 2, by
  /// the recomputation (empty: none read).
  std::map<std::string, std::vector<CollectiveBytes>> shardedWeightBytes;
  /// The same read at ep 2 too, for plans with ep > 1 (empty: none read):
  /// the experts' weights, split over ep, gather half of theirs there.
  std::map<std::string, std::vector<CollectiveBytes>> shardedExpertSplitBytes;
  /// The expert exchanges (all-to-alls over ep) as read at tp 2 and ep 2:
  /// the axes of their group and how their kernels move them, when every
  /// one is alike; and per sequence the bytes of each layer's, forward and
  /// backward, by the recomputation and sequence parallelism. They run on
  /// the stream of the collectives over tp.
  struct Exchange {
    llvm::SmallVector<std::string, 2> axes;
    ExpertExchange mode = ExpertExchange::AllToAll;
    uint16_t tokenCopies = 0;
    uint32_t experts = 0;
    bool operator==(const Exchange &other) const {
      return axes == other.axes && mode == other.mode &&
             tokenCopies == other.tokenCopies && experts == other.experts;
    }
  };
  std::optional<Exchange> exchange;
  std::map<std::pair<std::string, bool>, std::vector<double>> exchangeBytes;
  /// The model sets a precision option of its own: any peak may apply.
  bool ownPrecision = false;
  /// Attention runs in a low-precision recipe's format too
  /// (`--low-precision-attention`); else in the model's precision.
  bool lowPrecisionAttention = false;
  /// The widest element of the model's weights, bytes: the collectives
  /// read move no wider elements, and a low-precision recipe's move no
  /// narrower than its format's.
  unsigned elementBytes = 4;
};

/// Reads the bounds' numbers from `base`'s model compiled on one GPU, for
/// the recomputations in `recompute` (and the activations again in each
/// low-precision recipe of `precisions`); a model that does not compile as
/// the search needs returns an error.
llvm::Expected<ModelBounds>
readModelBounds(const CompileOptions &base,
                llvm::ArrayRef<std::string> recompute, const ModelShape &shape,
                llvm::ArrayRef<Precision> precisions = {});

/// The key of ModelBounds' activations for a plan of `recompute` in
/// `precision`: the recomputation in the model's own precision, with the
/// recipe's name after it for a low-precision one (`none fp8`).
std::string getActivationKey(llvm::StringRef recompute, Precision precision);

/// A lower bound of the bytes PlanEvaluator reports for the busiest rank
/// of `plan` (0 where the split fails: the compiler reports that).
uint64_t getMemoryLowerBound(const ModelBounds &bounds, const Plan &plan,
                             MemoryAccounting accounting);

/// A lower bound of the step, in microseconds, that PlanEvaluator
/// estimates for `plan` on `system` (0 where nothing is known).
double getStepLowerBound(const ModelBounds &bounds, const Plan &plan,
                         const SystemSpec &system);

} // namespace stg

#endif // STG_SEARCH_PLANBOUNDS_H
