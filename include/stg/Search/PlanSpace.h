//===- PlanSpace.h - The parallel plans of a model on N GPUs ----*- C++ -*-===//
//
// What a plan search enumerates: every factorisation of the GPUs over the
// mesh axes (dp, tp, pp, cp, ep), tensor parallelism inside a node or
// across, micro-batch size and count from the global batch, interleaving,
// recomputation, weight sharding and sequence parallelism. Each dimension
// can be narrowed to a list of values. Plans that cannot compile, or that
// repeat another plan, are pruned before compiling, counted by reason.
//
//===----------------------------------------------------------------------===//

#ifndef STG_SEARCH_PLANSPACE_H
#define STG_SEARCH_PLANSPACE_H

#include "stg/IR/Precision.h"
#include "stg/Instantiate/PipelineSplit.h"
#include "stg/Instantiate/Schedule.h"

#include "llvm/ADT/StringRef.h"

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace stg {

/// How the weights and their optimizer state are spread over data
/// parallelism: replicated, the optimizer step sharded (ZeRO-1), or the
/// weights themselves (FSDP).
enum class WeightSharding : uint8_t { None, DistributedOptimizer, FSDP };

llvm::StringRef getWeightShardingName(WeightSharding sharding);
std::optional<WeightSharding> parseWeightSharding(llvm::StringRef name);

/// A plan's pipeline split: even, with the embedding, the loss or both
/// counted as a layer (Megatron-LM's account_for_embedding/loss_in_
/// pipeline_split; PipelineSplit.h), or with fewer decoder layers on the
/// first and last stages (FirstLast: getFirstLastStageLayers).
enum class LayerSplit : uint8_t {
  Even,
  Embedding,
  Loss,
  EmbeddingAndLoss,
  FirstLast
};

/// `embedding`, `loss`, `embedding+loss`, `first-last`; empty for an even
/// split.
llvm::StringRef getLayerSplitName(LayerSplit split);
std::optional<LayerSplit> parseLayerSplit(llvm::StringRef name);

/// The decoder layers of the first and last of `stages` stages when the
/// others hold ceil(layers / stages) each and those two share the rest
/// (Megatron-LM's decoder_first/last_pipeline_num_layers, which spare the
/// stages that also hold the embedding and the loss); nothing where that
/// leaves them none, or where the layers split evenly.
std::optional<std::pair<unsigned, unsigned>>
getFirstLastStageLayers(unsigned layers, unsigned stages);

struct Plan;
/// The pipeline split `plan` asks of a model of `layers` layers, as the
/// compiler takes it.
PipelineSplit getPipelineSplit(const Plan &plan, unsigned layers);

/// Which splits the search tries: `auto` the even split, and the accounted
/// ones where the layers do not split evenly over pp x virtual stages but
/// the layers + 1 or + 2 do; `even` only the even split; `accounted` only
/// the accounted ones (and the even split without pipelining).
enum class SplitChoice : uint8_t { Auto, Even, Accounted };

/// How context parallelism exchanges keys and values (Megatron's
/// cp_comm_type): a ring beside attention, gathered before it, or Ulysses'
/// all-to-alls.
enum class CpExchange : uint8_t { Ring, AllGather, AllToAll };

/// `p2p`, `all_gather`, `a2a`, as --cp-comm-type names them.
llvm::StringRef getCpExchangeName(CpExchange exchange);
std::optional<CpExchange> parseCpExchange(llvm::StringRef name);

/// The mesh axes a plan sets, in this order everywhere (labels, files).
constexpr std::array<const char *, 5> PlanAxes = {"dp", "tp", "pp", "cp",
                                                  "ep"};

struct Plan {
  std::array<unsigned, 5> degrees = {1, 1, 1, 1, 1}; ///< By PlanAxes.
  /// Sequences per micro-batch of each data replica (dp x ep of them).
  unsigned microBatchSize = 1;
  unsigned microbatches = 1;
  unsigned virtualStages = 1;
  LayerSplit layerSplit = LayerSplit::Even;
  std::string recompute = "none"; ///< `none`, `selective` or `full`.
  /// The recipe (`--precision`): bf16 plans keep the labels and keys they
  /// always had.
  Precision precision = Precision::BF16;
  /// Context parallelism's exchange; the ring plans keep the labels and
  /// keys they always had.
  CpExchange cpExchange = CpExchange::Ring;
  /// The pipeline schedule; 1F1B plans keep the labels and keys they
  /// always had.
  PipelineSchedule schedule = PipelineSchedule::OneFOneB;
  WeightSharding sharding = WeightSharding::None;
  bool sequenceParallel = false;
  /// Tensor parallelism on the fastest-varying ranks (inside a node);
  /// false puts it outside data, context and expert parallelism.
  bool tpInNode = true;

  unsigned getDegree(llvm::StringRef axis) const;
  unsigned getGPUs() const;
  /// `dp8 tp8 pp4 mb1x32 v2 rc=full ws=fsdp sp` (`v8 split=embedding+loss`
  /// with an accounted split): unique per plan.
  std::string getLabel() const;
  /// The rank order (fastest-varying axis first).
  std::string getRankOrder() const;
  /// Plans of one key share a module: the same recomputation, recipe,
  /// weight sharding and sequence parallelism, through the passes that do not
  /// read the degrees.
  std::string getModuleKey() const;
  /// Plans of one key compile to the same programs but for their numbers
  /// and rank order: the same recomputation, weight sharding, sequence
  /// parallelism, virtual stages, layer split, micro-batch count, pp, and
  /// axes of degree above 1. The search builds a structure's programs once and
  /// re-prices them for each of its plans (PlanEvaluator).
  std::string getStructureKey() const;
  /// Structures of one key differ only in their micro-batch count, of two
  /// or more (one is a key of its own): the search moves one's programs to
  /// the others' counts (retargetMicrobatches).
  std::string getFamilyKey() const;
};

/// The plan as instantiation runs it: a dualpipe plan folded into its
/// mirrored halves, as foldDualPipe (Compile.h) folds its options; any
/// other plan as it is.
Plan foldDualPipePlan(const Plan &plan);

/// What the model offers the search, read once from it.
struct ModelShape {
  unsigned layers = 1;           ///< Repetitions the pipeline splits.
  /// Mesh axes the model splits something over; the others stay at 1.
  std::array<bool, 5> splits = {true, false, true, false, false};
  bool hasSequenceParallel = false; ///< Option `sequence_parallel`.
  bool hasWeightSharding = false;   ///< Option `weight_sharded` (FSDP).
};

struct PlanSpaceOptions {
  unsigned gpus = 0;
  unsigned globalBatch = 0; ///< Sequences per step.
  unsigned gpusPerNode = 8;
  /// Allowed degrees per axis (PlanAxes order); empty: every divisor.
  std::array<std::vector<unsigned>, 5> degrees;
  std::vector<unsigned> microBatchSizes; ///< Empty: every divisor.
  /// Empty: every divisor of the layers (and, with accounted splits, of
  /// the layers + 1 and + 2).
  std::vector<unsigned> virtualStages;
  SplitChoice splits = SplitChoice::Auto;
  std::vector<std::string> recompute = {"none", "selective", "full"};
  std::vector<Precision> precisions = {Precision::BF16};
  /// Tried for the plans with cp > 1 (the others keep the ring).
  std::vector<CpExchange> cpExchanges = {CpExchange::Ring};
  /// Tried for the plans with pp > 1 (the others run one stage); zb-h1
  /// only with one model chunk a stage, zb-v only with two.
  std::vector<PipelineSchedule> schedules = {PipelineSchedule::OneFOneB};
  std::vector<WeightSharding> sharding = {WeightSharding::None,
                                          WeightSharding::DistributedOptimizer,
                                          WeightSharding::FSDP};
  std::vector<bool> sequenceParallel = {false, true};
  std::vector<bool> tpInNode = {true, false};
  /// Keep the plans of the families of structures (Plan::getFamilyKey)
  /// whose key hashes to `shardIndex` modulo `shardCount`.
  unsigned shardIndex = 0, shardCount = 1;
  /// Stop keeping plans past this many (the space is then `truncated`):
  /// about two hours of a 2-core machine, and 160 MB of plans.
  uint64_t maxPlans = uint64_t(1) << 21;
};

struct PlanSpace {
  std::vector<Plan> plans; ///< The shard's plans.
  uint64_t kept = 0;       ///< Plans kept in all shards.
  bool truncated = false;  ///< More than maxPlans in this shard.

  /// Plans not compiled, by why: "pp exceeds the layers", ...
  std::map<std::string, uint64_t> pruned;
  uint64_t getCandidates() const;
};

/// Every plan of `options`, with those that cannot compile or repeat
/// another plan pruned. Plans come grouped by degrees, then structure.
PlanSpace enumeratePlans(const PlanSpaceOptions &options,
                         const ModelShape &shape);

} // namespace stg

#endif // STG_SEARCH_PLANSPACE_H
