//===- PlanSpace.cpp - The parallel plans of a model on N GPUs ------------===//
//
// Candidates are the product of the dimensions; checks run from the outer
// dimension in, so a degree tuple that cannot work removes all the plans
// under it at once, counted, without visiting them.
//
//===----------------------------------------------------------------------===//

#include "stg/Search/PlanSpace.h"

#include "stg/Instantiate/Limits.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/xxhash.h"
#include "llvm/Support/raw_ostream.h"


using namespace stg;

llvm::StringRef stg::getWeightShardingName(WeightSharding sharding) {
  switch (sharding) {
  case WeightSharding::None:
    return "none";
  case WeightSharding::DistributedOptimizer:
    return "distributed-optimizer";
  case WeightSharding::FSDP:
    return "fsdp";
  }
  return "none";
}

std::optional<WeightSharding> stg::parseWeightSharding(llvm::StringRef name) {
  for (WeightSharding sharding :
       {WeightSharding::None, WeightSharding::DistributedOptimizer,
        WeightSharding::FSDP})
    if (name == getWeightShardingName(sharding))
      return sharding;
  return std::nullopt;
}

llvm::StringRef stg::getLayerSplitName(LayerSplit split) {
  switch (split) {
  case LayerSplit::Even:
    return "";
  case LayerSplit::Embedding:
    return "embedding";
  case LayerSplit::Loss:
    return "loss";
  case LayerSplit::EmbeddingAndLoss:
    return "embedding+loss";
  case LayerSplit::FirstLast:
    return "first-last";
  }
  return "";
}

std::optional<LayerSplit> stg::parseLayerSplit(llvm::StringRef name) {
  for (LayerSplit split :
       {LayerSplit::Even, LayerSplit::Embedding, LayerSplit::Loss,
        LayerSplit::EmbeddingAndLoss, LayerSplit::FirstLast})
    if (name == getLayerSplitName(split))
      return split;
  return std::nullopt;
}

std::optional<std::pair<unsigned, unsigned>>
stg::getFirstLastStageLayers(unsigned layers, unsigned stages) {
  if (stages < 2 || layers % stages == 0)
    return std::nullopt;
  unsigned middle = (layers + stages - 1) / stages;
  unsigned shortfall = stages * middle - layers;
  unsigned first = shortfall / 2 + shortfall % 2, last = shortfall / 2;
  if (first >= middle)
    return std::nullopt;
  return std::make_pair(middle - first, middle - last);
}

PipelineSplit stg::getPipelineSplit(const Plan &plan, unsigned layers) {
  PipelineSplit split;
  split.accountForEmbedding = plan.layerSplit == LayerSplit::Embedding ||
                              plan.layerSplit == LayerSplit::EmbeddingAndLoss;
  split.accountForLoss = plan.layerSplit == LayerSplit::Loss ||
                         plan.layerSplit == LayerSplit::EmbeddingAndLoss;
  if (plan.layerSplit == LayerSplit::FirstLast)
    if (auto counts = getFirstLastStageLayers(layers, plan.getDegree("pp"))) {
      split.firstStageLayers = counts->first;
      split.lastStageLayers = counts->second;
    }
  return split;
}

llvm::StringRef stg::getCpExchangeName(CpExchange exchange) {
  switch (exchange) {
  case CpExchange::Ring:
    return "p2p";
  case CpExchange::AllGather:
    return "all_gather";
  case CpExchange::AllToAll:
    return "a2a";
  }
  return "";
}

std::optional<CpExchange> stg::parseCpExchange(llvm::StringRef name) {
  for (CpExchange exchange :
       {CpExchange::Ring, CpExchange::AllGather, CpExchange::AllToAll})
    if (name == getCpExchangeName(exchange))
      return exchange;
  return std::nullopt;
}

unsigned Plan::getDegree(llvm::StringRef axis) const {
  for (size_t index = 0; index < PlanAxes.size(); ++index)
    if (axis == PlanAxes[index])
      return degrees[index];
  return 1;
}

Plan stg::foldDualPipePlan(const Plan &plan) {
  if (plan.schedule != PipelineSchedule::DualPipe)
    return plan;
  DualPipeFold fold = foldDualPipeDegrees(
      plan.getDegree("pp"), plan.getDegree("dp"), plan.microbatches);
  Plan folded = plan;
  for (size_t index = 0; index < PlanAxes.size(); ++index) {
    llvm::StringRef axis = PlanAxes[index];
    if (axis == "pp")
      folded.degrees[index] = fold.numStages;
    else if (axis == "dp")
      folded.degrees[index] = fold.dataParallel;
  }
  folded.microbatches = fold.numMicrobatches;
  folded.virtualStages = fold.numChunks;
  return folded;
}

unsigned Plan::getGPUs() const {
  unsigned gpus = 1;
  for (unsigned degree : degrees)
    gpus *= degree;
  return gpus;
}

std::string Plan::getLabel() const {
  std::string label;
  llvm::raw_string_ostream os(label);
  for (size_t index = 0; index < PlanAxes.size(); ++index)
    if (degrees[index] > 1 || index < 3)
      os << PlanAxes[index] << degrees[index] << ' ';
  os << "mb" << microBatchSize << 'x' << microbatches << " v" << virtualStages;
  if (layerSplit != LayerSplit::Even)
    os << " split=" << getLayerSplitName(layerSplit);
  os << " rc=" << recompute << " ws=" << getWeightShardingName(sharding);
  if (precision != Precision::BF16)
    os << ' ' << getPrecisionName(precision);
  if (cpExchange != CpExchange::Ring)
    os << " cp=" << getCpExchangeName(cpExchange);
  if (schedule != PipelineSchedule::OneFOneB)
    os << ' ' << getPipelineScheduleName(schedule);
  if (sequenceParallel)
    os << " sp";
  if (!tpInNode)
    os << " tp-outer";
  return label;
}

std::string Plan::getModuleKey() const {
  std::string key = recompute + "|" + getWeightShardingName(sharding).str() +
                    "|" + (sequenceParallel ? "sp" : "");
  if (precision != Precision::BF16) // bf16 keys as they always were.
    key += "|" + getPrecisionName(precision).str();
  // Ulysses changes the module (attention's distribution); the other two
  // only the programs (getFamilyKey).
  if (cpExchange == CpExchange::AllToAll)
    key += "|cp-a2a";
  return key;
}

std::string Plan::getFamilyKey() const {
  std::string key = getModuleKey() + "|v" + std::to_string(virtualStages);
  if (layerSplit != LayerSplit::Even) // Even keys as they always were.
    key += "+" + getLayerSplitName(layerSplit).str();
  if (cpExchange == CpExchange::AllGather)
    key += "+cp-gather";
  if (schedule != PipelineSchedule::OneFOneB)
    key += "+" + getPipelineScheduleName(schedule).str();
  key += microbatches > 1 ? " mbs* " : " mbs1 ";
  for (size_t index = 0; index < PlanAxes.size(); ++index) {
    // Only pp's degree shapes the programs; the others only by being 1.
    key += llvm::StringRef(PlanAxes[index]) == "pp"
               ? std::to_string(degrees[index])
           : degrees[index] > 1 ? "+"
                                : "-";
  }
  return key;
}

std::string Plan::getStructureKey() const {
  return getFamilyKey() + " " + std::to_string(microbatches);
}

std::string Plan::getRankOrder() const {
  return tpInNode ? "tp,cp,ep,dp,pp" : "cp,ep,dp,tp,pp";
}

uint64_t PlanSpace::getCandidates() const {
  uint64_t total = kept;
  for (const auto &entry : pruned)
    total += entry.second;
  return total;
}

/// The divisors of `n`, ascending.
static std::vector<unsigned> getDivisors(unsigned n) {
  std::vector<unsigned> small, large;
  for (unsigned d = 1; uint64_t(d) * d <= n; ++d)
    if (n % d == 0) {
      small.push_back(d);
      if (d != n / d)
        large.push_back(n / d);
    }
  small.insert(small.end(), large.rbegin(), large.rend());
  return small;
}

namespace {

const char *const InterleavingMicrobatches =
    "interleaving needs micro-batches a multiple of pp";

/// The enumeration's state: the options, the plans kept and the counts.
class Enumerator {
public:
  Enumerator(const PlanSpaceOptions &options, const ModelShape &shape)
      : options(options), shape(shape) {
    singleStageSchedules = {PipelineSchedule::OneFOneB};
    if (llvm::is_contained(options.schedules, PipelineSchedule::Combined1F1B))
      singleStageSchedules.push_back(PipelineSchedule::Combined1F1B);
    microBatchSizes = options.microBatchSizes.empty()
                          ? getDivisors(options.globalBatch)
                          : options.microBatchSizes;
    virtualStages = options.virtualStages.empty()
                        ? getDivisors(shape.layers)
                        : options.virtualStages;
    // Chunk counts that only an accounted split divides: tried with those
    // splits alone, so that a space where none applies stays as it was.
    chunkChoices.reserve(virtualStages.size());
    for (unsigned chunks : virtualStages)
      chunkChoices.push_back({chunks, true});
    if (options.splits != SplitChoice::Even && options.virtualStages.empty()) {
      for (unsigned more : {shape.layers + 1, shape.layers + 2})
        for (unsigned chunks : getDivisors(more))
          if (!llvm::any_of(chunkChoices, [&](const ChunkChoice &choice) {
                return choice.chunks == chunks;
              }))
            chunkChoices.push_back({chunks, false});
      llvm::stable_sort(chunkChoices,
                        [](const ChunkChoice &a, const ChunkChoice &b) {
                          return a.chunks < b.chunks;
                        });
    }
  }

  PlanSpace run() {
    Plan plan;
    enumerateDegrees(plan, 0, options.gpus);
    for (const auto &[reason, count] : structureCounts)
      space.pruned[reason] += count;
    return std::move(space);
  }

private:
  /// Plans under a structure choice of `plan`'s degrees: the innermost
  /// dimensions (the context-parallel exchanges only where cp > 1).
  uint64_t getStructures(const Plan &plan) const {
    return uint64_t(options.recompute.size()) * options.precisions.size() *
           getExchanges(plan).size() * getSchedules(plan).size() *
           options.sharding.size() *
           options.sequenceParallel.size() * options.tpInNode.size();
  }
  llvm::ArrayRef<CpExchange> getExchanges(const Plan &plan) const {
    static const CpExchange ring = CpExchange::Ring;
    return plan.getDegree("cp") > 1 ? llvm::ArrayRef(options.cpExchanges)
                                    : llvm::ArrayRef(ring);
  }
  /// Without pipelining, 1F1B, and combined 1F1B where it is tried (its
  /// F&B steps need no pipeline).
  llvm::ArrayRef<PipelineSchedule> getSchedules(const Plan &plan) const {
    return plan.getDegree("pp") > 1 ? llvm::ArrayRef(options.schedules)
                                    : llvm::ArrayRef(singleStageSchedules);
  }
  void prune(const std::string &reason, uint64_t count) {
    if (count)
      space.pruned[reason] += count;
  }
  void enumerateDegrees(Plan &plan, size_t axis, unsigned left);
  /// The schedules of `plan`'s degrees, with the splits of `splits`.
  void enumerateSchedules(Plan &plan);
  /// Fills `splits` for plans of `pp` stages; the number of (chunks, split)
  /// choices.
  uint64_t findSplits(unsigned pp);
  /// The splits a plan of `pp` stages and `chunks` chunks a stage is tried
  /// with, as a mask of 1 << LayerSplit: the even one if `even`, and the
  /// accounted ones that divide where the even one does not (or always,
  /// with SplitChoice::Accounted).
  unsigned getSplits(unsigned pp, unsigned chunks, bool even) const;
  void enumerateStructures(Plan &plan);
  /// Why `plan` repeats another or cannot be built; null if it is kept.
  const char *checkStructure(const Plan &plan) const;

  const PlanSpaceOptions &options;
  const ModelShape &shape;
  std::vector<PipelineSchedule> singleStageSchedules;
  std::vector<unsigned> microBatchSizes, virtualStages;
  /// Chunks a stage to try: those of `virtualStages` with every split
  /// (`even`), then, ascending among them, those only an accounted split
  /// divides.
  struct ChunkChoice {
    unsigned chunks;
    bool even;
  };
  std::vector<ChunkChoice> chunkChoices;
  /// Per chunk choice, the splits of the degrees being enumerated.
  llvm::SmallVector<unsigned, 32> splits;
  PlanSpace space;
  /// The innermost reasons, counted by their (static) text: the loop runs
  /// once per candidate, up to billions of times.
  std::map<const char *, uint64_t> structureCounts;
};

} // namespace

void Enumerator::enumerateDegrees(Plan &plan, size_t axis, unsigned left) {
  if (axis + 1 == PlanAxes.size()) {
    plan.degrees[axis] = left;
    const std::vector<unsigned> &allowed = options.degrees[axis];
    if (!allowed.empty() && !llvm::is_contained(allowed, left))
      return; // Outside the space asked for: not a candidate.
    unsigned pp = plan.getDegree("pp");
    uint64_t under =
        uint64_t(microBatchSizes.size()) * findSplits(pp) * getStructures(plan);
    for (size_t index = 0; index < PlanAxes.size(); ++index)
      if (plan.degrees[index] > 1 && !shape.splits[index])
        return prune(std::string("the model splits nothing over ") +
                         PlanAxes[index],
                     under);
    if (pp > shape.layers) {
      // Only an accounted split may give each stage a slot (the first
      // just the embedding, the last just the loss).
      uint64_t even = 0;
      for (unsigned &mask : splits) {
        even += mask & 1u << unsigned(LayerSplit::Even) ? 1 : 0;
        mask &= ~(1u << unsigned(LayerSplit::Even));
      }
      prune("pp exceeds the layers",
            uint64_t(microBatchSizes.size()) * even * getStructures(plan));
    }
    return enumerateSchedules(plan);
  }
  for (unsigned degree : getDivisors(left)) {
    const std::vector<unsigned> &allowed = options.degrees[axis];
    if (!allowed.empty() && !llvm::is_contained(allowed, degree))
      continue;
    plan.degrees[axis] = degree;
    enumerateDegrees(plan, axis + 1, left / degree);
  }
}

unsigned Enumerator::getSplits(unsigned pp, unsigned chunks, bool even) const {
  even &= options.splits != SplitChoice::Accounted || pp == 1;
  unsigned mask = even ? 1u << unsigned(LayerSplit::Even) : 0;
  if (options.splits == SplitChoice::Even || pp == 1)
    return mask;
  uint64_t modelChunks = uint64_t(pp) * chunks;
  if (options.splits == SplitChoice::Auto && shape.layers % modelChunks == 0)
    return mask;
  if ((shape.layers + 1) % modelChunks == 0)
    mask |= 1u << unsigned(LayerSplit::Embedding) |
            1u << unsigned(LayerSplit::Loss);
  if ((shape.layers + 2) % modelChunks == 0)
    mask |= 1u << unsigned(LayerSplit::EmbeddingAndLoss);
  // Fewer layers on the first and last stages where counting the
  // embedding and the loss does not divide either (those give the same
  // layer counts where they do), without chunks.
  if (chunks == 1 && !(mask & ~1u) && options.splits == SplitChoice::Auto &&
      getFirstLastStageLayers(shape.layers, pp))
    mask |= 1u << unsigned(LayerSplit::FirstLast);
  return mask;
}

uint64_t Enumerator::findSplits(unsigned pp) {
  splits.clear();
  uint64_t choices = 0;
  for (const ChunkChoice &choice : chunkChoices) {
    splits.push_back(getSplits(pp, choice.chunks, choice.even));
    choices += llvm::countPopulation(splits.back());
  }
  return choices;
}

void Enumerator::enumerateSchedules(Plan &plan) {
  // The shipped templates split the batch over dp and ep (ep being data
  // parallelism outside the experts).
  unsigned dp = plan.getDegree("dp") * plan.getDegree("ep");
  unsigned pp = plan.getDegree("pp");
  // The candidates under a micro-batch size: a (chunks, split) choice each.
  uint64_t choices = 0;
  for (unsigned mask : splits)
    choices += llvm::countPopulation(mask);
  if (!choices)
    return;
  uint64_t under = choices * getStructures(plan);
  for (unsigned size : microBatchSizes) {
    plan.microBatchSize = size;
    if (options.globalBatch % (uint64_t(dp) * size)) {
      prune("dp x ep x micro-batch does not divide the global batch", under);
      continue;
    }
    plan.microbatches = unsigned(options.globalBatch / (uint64_t(dp) * size));
    if (plan.microbatches > MaxMicrobatches) {
      prune("more micro-batches than a step may have (" +
                std::to_string(MaxMicrobatches) + ")",
            under);
      continue;
    }
    for (size_t index = 0; index < chunkChoices.size(); ++index) {
      unsigned chunks = chunkChoices[index].chunks;
      plan.virtualStages = chunks;
      for (LayerSplit split :
           {LayerSplit::Even, LayerSplit::Embedding, LayerSplit::Loss,
            LayerSplit::EmbeddingAndLoss, LayerSplit::FirstLast}) {
        if (!(splits[index] & 1u << unsigned(split)))
          continue;
        plan.layerSplit = split;
        // An accounted split divides by construction.
        if (chunks > 1 && pp == 1)
          prune("virtual stages need pp > 1", getStructures(plan));
        else if (chunks > 1 && split == LayerSplit::Even &&
                 shape.layers % (uint64_t(pp) * chunks))
          prune("interleaving needs layers a multiple of pp x virtual stages",
                getStructures(plan));
        // The V schedules take any count: where one is tried,
        // checkStructure decides schedule by schedule.
        else if (chunks > 1 && plan.microbatches % pp &&
                 llvm::none_of(options.schedules, [](PipelineSchedule s) {
                   return getChunkPlacement(s) == ChunkPlacement::VShape;
                 }))
          prune(InterleavingMicrobatches, getStructures(plan));
        else
          enumerateStructures(plan);
      }
    }
  }
  plan.layerSplit = LayerSplit::Even;
}

const char *Enumerator::checkStructure(const Plan &plan) const {
  unsigned tp = plan.getDegree("tp");
  unsigned others =
      plan.getDegree("dp") * plan.getDegree("cp") * plan.getDegree("ep");
  if (plan.sequenceParallel && !shape.hasSequenceParallel)
    return "the model has no sequence_parallel option";
  if (plan.sequenceParallel && tp == 1)
    return "same plan: sequence parallelism without tp";
  if (plan.sharding == WeightSharding::FSDP && !shape.hasWeightSharding)
    return "the model has no weight_sharded option";
  if (plan.sharding != WeightSharding::None && plan.getDegree("dp") == 1)
    return "same plan: weight sharding without dp";
  if (!plan.tpInNode &&
      (tp == 1 || others == 1 || tp * others <= options.gpusPerNode))
    return "same plan: tp placement with every group in one node";
  if (plan.schedule == PipelineSchedule::ZeroBubbleH1 &&
      plan.virtualStages > 1)
    return "zb-h1 runs one model chunk a stage";
  if (plan.schedule == PipelineSchedule::ZeroBubbleV && plan.virtualStages != 2)
    return "zb-v runs two model chunks a stage";
  if (plan.schedule == PipelineSchedule::DualPipeV && plan.virtualStages != 2)
    return "dualpipev runs two model chunks a stage";
  if (plan.schedule == PipelineSchedule::DualPipe) {
    std::optional<DualPipeProblem> problem = checkDualPipe(
        plan.getDegree("pp"), plan.virtualStages, plan.microbatches);
    if (problem == DualPipeProblem::Stages)
      return "dualpipe needs an even pp of at least 4";
    if (problem == DualPipeProblem::Chunks)
      return "dualpipe runs a stage of each of its two model copies a rank";
    if (problem == DualPipeProblem::OddMicrobatches)
      return "dualpipe needs an even micro-batch count";
    // Megatron's splits name first and last stages, which a folded
    // dualpipe's V places otherwise.
    if (plan.layerSplit != LayerSplit::Even)
      return "dualpipe splits its layers evenly";
    if (problem == DualPipeProblem::FewMicrobatches)
      return "dualpipe needs 2 x pp micro-batches";
  }
  if (plan.microbatches <
      getMinMicrobatches(plan.schedule, plan.getDegree("pp")))
    return "dualpipev needs 2 x pp micro-batches";
  if (plan.schedule == PipelineSchedule::Combined1F1B) {
    if (plan.getDegree("ep") == 1)
      return "combined-1f1b overlaps expert all-to-alls: it needs ep > 1";
    unsigned pp = plan.getDegree("pp");
    if (pp > 1 && plan.virtualStages == 1)
      return "combined-1f1b with pp > 1 needs virtual stages";
    // Interleaving warms up with all of pp micro-batches' units.
    if (plan.microbatches <= std::max(pp, 1u))
      return "same plan: combined-1f1b without a steady step";
  }
  // Where a V schedule is tried, interleaving's rule waits for the
  // schedule.
  if (isInterleaved(plan.schedule, plan.virtualStages) &&
      plan.microbatches % plan.getDegree("pp"))
    return InterleavingMicrobatches;
  return nullptr;
}

void Enumerator::enumerateStructures(Plan &plan) {
  for (const std::string &recompute : options.recompute)
   for (Precision precision : options.precisions)
   for (CpExchange exchange : getExchanges(plan))
   for (PipelineSchedule schedule : getSchedules(plan))
    for (WeightSharding sharding : options.sharding)
      for (bool sequenceParallel : options.sequenceParallel)
        for (bool tpInNode : options.tpInNode) {
          plan.recompute = recompute;
          plan.precision = precision;
          plan.cpExchange = exchange;
          plan.schedule = schedule;
          plan.sharding = sharding;
          plan.sequenceParallel = sequenceParallel;
          plan.tpInNode = tpInNode;
          if (const char *reason = checkStructure(plan)) {
            ++structureCounts[reason];
            continue;
          }
          // A shard takes whole families of structures, whose plans share
          // their programs; a hash spreads the costly ones.
          ++space.kept;
          if (options.shardCount > 1 &&
              llvm::xxHash64(plan.getFamilyKey()) % options.shardCount !=
                  options.shardIndex)
            continue;
          if (space.plans.size() < options.maxPlans)
            space.plans.push_back(plan);
          else
            space.truncated = true;
        }
}

PlanSpace stg::enumeratePlans(const PlanSpaceOptions &options,
                              const ModelShape &shape) {
  return Enumerator(options, shape).run();
}
