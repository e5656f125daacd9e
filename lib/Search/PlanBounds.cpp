//===- PlanBounds.cpp - What a plan needs at least, before compiling ------===//
//
// The two bounds of a plan, from what readModelBounds read once
// (ModelBounds.cpp): the memory of the busiest stage, and the step's time
// as the longest of a stage's compute, a rank's compute share and a
// stage's collectives over tp and cp, expert exchanges and FSDP gathers. Each is checked against evaluated plans
// (PlanBoundsTest).
//
//===----------------------------------------------------------------------===//

#include "stg/Search/PlanBounds.h"

#include "stg/Instantiate/Mesh.h"
#include "stg/Perf/StepEstimate.h"
#include "stg/Perf/System.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>

using namespace stg;

namespace {

using Bounds = ModelBounds;

/// Calls `fn(stage, layer)` for each layer of `plan`'s split into `chunks`,
/// placed as its schedule places them.
template <typename Fn>
void forEachStageLayer(const std::vector<unsigned> &chunks, const Plan &plan,
                       Fn fn) {
  unsigned stages = plan.getDegree("pp"), layer = 0;
  ChunkPlacement placement = getChunkPlacement(plan.schedule);
  for (unsigned chunk = 0; chunk < chunks.size(); ++chunk)
    for (unsigned end = layer + chunks[chunk]; layer < end; ++layer)
      fn(getChunkStage(placement, chunk, stages), layer);
}

/// The product of the degrees `splits` split over in `plan`, and which
/// axes split (a split an alias's conditions turn off counts nothing).
uint64_t getDivisor(llvm::ArrayRef<Bounds::Split> splits, const Plan &plan,
                    unsigned &axes) {
  uint64_t divisor = 1;
  axes = 0;
  for (const Bounds::Split &split : splits) {
    bool active = llvm::all_of(split.conditions, [&](const auto &condition) {
      switch (condition.kind) {
      case Bounds::Split::Switch::WeightSharded:
        return (plan.sharding == WeightSharding::FSDP) == condition.wanted;
      case Bounds::Split::Switch::SequenceParallel:
        return plan.sequenceParallel == condition.wanted;
      case Bounds::Split::Switch::Fixed:
        return condition.wanted;
      }
      return true;
    });
    if (!active)
      continue;
    divisor *= plan.degrees[split.axis];
    axes |= 1u << split.axis;
  }
  return divisor;
}

/// The bytes StageMemory counts at least for `tensor` on a rank of `plan`.
uint64_t getTensorBytes(const Bounds::Tensor &tensor, const Plan &plan,
                        MemoryAccounting accounting) {
  unsigned axes = 0;
  uint64_t divisor = getDivisor(tensor.splits, plan, axes);
  if (tensor.adam) {
    // A distributed optimizer slices the step over the axes its gradient
    // is all-reduced over (padding the slices up): where those were read,
    // them; else at most every axis that does not split it already.
    if (plan.sharding == WeightSharding::DistributedOptimizer) {
      unsigned reduced = 0;
      uint64_t shards = tensor.reducedOver
                            ? getDivisor(*tensor.reducedOver, plan, reduced)
                            : 1;
      if (!tensor.reducedOver)
        for (unsigned index = 0; index < PlanAxes.size(); ++index)
          if (!(axes & (1u << index)))
            shards *= plan.degrees[index];
      divisor *= shards;
    }
    return 12 * (tensor.elements / divisor);
  }
  uint64_t bytes = tensor.elements * tensor.elementBytes / divisor;
  bool mainGradients =
      accounting == MemoryAccounting::Megatron && tensor.elementBytes < 4;
  return bytes + (mainGradients ? bytes / tensor.elementBytes * 4 : bytes);
}

/// The layers of each model chunk of `plan`, or nothing.
std::optional<std::vector<unsigned>> getChunkLayers(unsigned layers,
                                                    const Plan &plan) {
  std::string error;
  return splitLayers(layers, plan.getDegree("pp"), plan.virtualStages,
                     getPipelineSplit(plan, layers), error,
                     getChunkPlacement(plan.schedule));
}

/// A dualpipe plan's bounds are those of the DualPipeV plan it folds into
/// (foldDualPipePlan): the same programs but for the messages between its
/// halves, which only add time.
Plan getBoundedPlan(const Plan &plan) {
  Plan folded = foldDualPipePlan(plan);
  folded.schedule = PipelineSchedule::DualPipeV;
  return folded;
}

} // namespace

/// The share of the bytes read in the model's precision that `plan`'s
/// values and collectives may come to: its low-precision format's, which
/// saves and moves some of them narrower; 1 otherwise.
static double getNarrowedShare(const ModelBounds &bounds, const Plan &plan) {
  if (!isLowPrecision(plan.precision))
    return 1;
  return std::min(1.0, getPrecisionBytes(plan.precision) /
                           std::max(1u, bounds.elementBytes));
}

uint64_t stg::getMemoryLowerBound(const ModelBounds &bounds, const Plan &plan,
                                  MemoryAccounting accounting) {
  if (plan.schedule == PipelineSchedule::DualPipe)
    return getMemoryLowerBound(bounds, getBoundedPlan(plan), accounting);
  if (!bounds.training || bounds.layerGroup.empty())
    return 0;
  std::optional<std::vector<unsigned>> chunks =
      getChunkLayers(bounds.layers, plan);
  if (!chunks)
    return 0;
  std::vector<uint64_t> groupBytes(bounds.groups.size());
  for (size_t group = 0; group < groupBytes.size(); ++group)
    for (const ModelBounds::Tensor &tensor : bounds.groups[group])
      groupBytes[group] += getTensorBytes(tensor, plan, accounting);
  unsigned stages = plan.getDegree("pp");
  std::vector<uint64_t> stageBytes(stages);
  forEachStageLayer(*chunks, plan, [&](unsigned stage, unsigned layer) {
    stageBytes[stage] += groupBytes[bounds.layerGroup[layer]];
  });
  for (const ModelBounds::TopWeight &weight : bounds.topWeights) {
    uint64_t bytes = getTensorBytes(weight.tensor, plan, accounting);
    if (weight.first)
      stageBytes.front() += bytes;
    if (weight.last && !(weight.first && stages == 1))
      stageBytes.back() += bytes;
  }
  // Activations, a micro-batch's over tp x cp at best (ep and dp move
  // tokens, not their count), as read in the plan's recipe; a
  // low-precision recipe's not read count those of the model's precision
  // at the format's share (it saves some in its format, none narrower). A
  // tenth is left for the values a pipeline split saves differently.
  std::string key = getActivationKey(plan.recompute, plan.precision);
  double narrowed = 1;
  if (!bounds.activationsPerSequence.count(key)) {
    key = plan.recompute;
    narrowed = getNarrowedShare(bounds, plan);
  }
  auto activations = bounds.activationsPerSequence.find(key);
  if (activations == bounds.activationsPerSequence.end())
    return *std::max_element(stageBytes.begin(), stageBytes.end());
  double perSequence = 0.9 * narrowed * plan.microBatchSize /
                       (double(plan.getDegree("tp")) * plan.getDegree("cp"));
  // The busiest rank holds at least the stages' average, and every stage
  // at least one micro-batch's activations of its layers: together, at
  // least a micro-batch's activations of the whole model.
  double average = activations->second * perSequence;
  for (uint64_t bytes : stageBytes)
    average += double(bytes);
  average /= stages;
  // A stage holds its schedule's micro-batches in flight, each with every
  // layer's activations.
  auto layerActivations = bounds.layerActivationsPerSequence.find(key);
  auto replicated = bounds.layerReplicatedPerSequence.find(key);
  bool replicates = !plan.sequenceParallel && plan.getDegree("tp") > 1 &&
                    replicated != bounds.layerReplicatedPerSequence.end();
  if (layerActivations != bounds.layerActivationsPerSequence.end()) {
    std::vector<double> stageActivations(stages);
    forEachStageLayer(*chunks, plan, [&](unsigned stage, unsigned layer) {
      double bytes = layerActivations->second[layer] * perSequence;
      if (replicates) // What tp does not split, over cp alone.
        bytes += replicated->second[layer] * perSequence *
                 (plan.getDegree("tp") - 1);
      stageActivations[stage] += bytes;
    });
    for (unsigned stage = 0; stage < stages; ++stage)
      stageBytes[stage] += uint64_t(
          stageActivations[stage] *
          getMaxInFlightMicrobatches(plan.schedule, stage, stages,
                                     plan.microbatches, plan.virtualStages));
  }
  uint64_t busiest = *std::max_element(stageBytes.begin(), stageBytes.end());
  return std::max<uint64_t>(busiest, uint64_t(average));
}

/// `plan`'s mesh, its ranks laid out as PlanEvaluator lays them out.
static Mesh getPlanMesh(const Plan &plan) {
  std::vector<Mesh::AxisInfo> axes;
  llvm::SmallVector<llvm::StringRef, 8> names;
  std::string order = plan.getRankOrder();
  llvm::StringRef(order).split(names, ',');
  for (llvm::StringRef name : names)
    axes.push_back({name.str(), plan.getDegree(name)});
  return Mesh(std::move(axes));
}

/// The span of the group over `axes` of each stage's first rank on `mesh`
/// (none: an axis is not in the mesh).
static std::vector<GroupSpan> getStageSpans(const Mesh &mesh,
                                            const SystemSpec &system,
                                            llvm::ArrayRef<std::string> axes) {
  int ppAxis = mesh.findAxis("pp");
  AxisMask mask = 0;
  for (const std::string &axis : axes) {
    int index = mesh.findAxis(axis);
    if (index < 0 || ppAxis < 0)
      return {};
    mask |= 1u << unsigned(index);
  }
  std::vector<GroupSpan> spans;
  for (unsigned stage = 0; stage < mesh.getDegree(ppAxis); ++stage)
    spans.push_back(getGroupSpan(mesh, system,
                                 mesh.withCoordinate(0, ppAxis, stage), mask));
  return spans;
}

/// What each model chunk of `plan` spends at least on the expert exchanges
/// of one micro-batch, forward and backward, whose bytes per layer and
/// sequence `read` holds (read at tp 2: tp splits a rank's tokens at most
/// that much more), run as `exchange` says.
static void addChunkExchangeMicros(const std::vector<double> &read,
                                   const Bounds::Exchange &exchange,
                                   const Plan &plan, const SystemSpec &system,
                                   const std::vector<unsigned> &chunks,
                                   const std::vector<GroupSpan> &spans,
                                   double narrowed,
                                   std::vector<double> &micros) {
  double perSequence = double(plan.microBatchSize) / plan.getDegree("cp") *
                       std::min(1.0, 2.0 / plan.getDegree("tp")) * narrowed;
  unsigned stages = plan.getDegree("pp"), layer = 0;
  ChunkPlacement placement = getChunkPlacement(plan.schedule);
  ProgramNode node;
  node.kind = ProgramNodeKind::Collective;
  node.commType = CollectiveKind::AllToAll;
  node.expertExchange = exchange.mode;
  node.tokenCopies = exchange.tokenCopies;
  node.experts = exchange.experts;
  for (unsigned chunk = 0; chunk < chunks.size(); ++chunk) {
    double bytes = 0;
    for (unsigned end = layer + chunks[chunk]; layer < end; ++layer)
      bytes += read[layer] * perSequence;
    node.commBytes = uint64_t(bytes);
    if (node.commBytes)
      micros[chunk] += getCollectiveMicros(
          node, spans[getChunkStage(placement, chunk, stages)], system);
  }
}

/// What each model chunk of `plan` spends at least on the collectives of
/// one micro-batch, forward and backward, whose bytes per layer and
/// sequence `read` holds, scaled by `perSequence` (by `gathered` more for
/// a gather, whose input is a rank's shard): a rank's collectives run one
/// at a time on their stream, and each takes at least getCollectiveMicros
/// of its bytes (a sum of bytes costs no more than its parts: the latency
/// counts once).
static void addChunkCollectiveMicros(
    const std::vector<Bounds::CollectiveBytes> &read, const Plan &plan,
    const SystemSpec &system, const std::vector<unsigned> &chunks,
    const std::vector<GroupSpan> &spans, double perSequence, double gathered,
    std::vector<double> &micros) {
  unsigned stages = plan.getDegree("pp"), layer = 0;
  ChunkPlacement placement = getChunkPlacement(plan.schedule);
  for (unsigned chunk = 0; chunk < chunks.size(); ++chunk) {
    Bounds::CollectiveBytes bytes = {};
    for (unsigned end = layer + chunks[chunk]; layer < end; ++layer)
      for (size_t kind = 0; kind < bytes.size(); ++kind)
        bytes[kind] += read[layer][kind] * perSequence;
    const GroupSpan &span = spans[getChunkStage(placement, chunk, stages)];
    for (size_t kind = 0; kind < bytes.size(); ++kind) {
      auto type = CollectiveKind(kind);
      double scaled =
          bytes[kind] * (type == CollectiveKind::AllGather ? gathered : 1);
      if (scaled > 0)
        micros[chunk] += getCollectiveMicros(type, scaled, span, system);
    }
  }
}

/// The bytes `atOne` (read at ep 1) and `atTwo` (at ep 2) give for `ep`:
/// a layer's B(ep) = D + E / ep, the experts' part E what ep divides, so
/// D = 2 B(2) - B(1) and E = 2 (B(1) - B(2)); into `split`. Null where
/// either was not read.
static const std::vector<Bounds::CollectiveBytes> *
splitExpertWeights(const std::vector<Bounds::CollectiveBytes> *atOne,
                   const std::vector<Bounds::CollectiveBytes> *atTwo,
                   unsigned ep, std::vector<Bounds::CollectiveBytes> &split) {
  if (!atOne || !atTwo || atOne->size() != atTwo->size())
    return nullptr;
  split.resize(atOne->size());
  for (size_t layer = 0; layer < split.size(); ++layer)
    for (size_t kind = 0; kind < split[layer].size(); ++kind) {
      double one = (*atOne)[layer][kind], two = (*atTwo)[layer][kind];
      double experts = std::max(0.0, 2 * (one - two));
      split[layer][kind] = std::max(0.0, 2 * two - one) + experts / ep;
    }
  return &split;
}

namespace {
/// Per model chunk, what a micro-batch's collectives take at least under
/// the plan's recomputation (`work`) and without recomputation (`chain`).
struct ChunkCommunication {
  std::vector<double> work, chain;
};
} // namespace

/// The value `map` holds for `key`, or null.
template <typename Map, typename Key>
static const typename Map::mapped_type *lookup(const Map &map, const Key &key) {
  auto found = map.find(key);
  return found == map.end() ? nullptr : &found->second;
}

/// What each chunk of `plan` spends at least on the collectives of its
/// forward and backward: over tp (read at tp 2, and ep 2 for plans with
/// ep > 1), over cp (read at cp 2 and tp 1: tp splits the heads they move,
/// a replicated head moves more) and the expert exchanges, all on one
/// stream. A low-precision recipe may gather and dispatch in its format:
/// its collectives count that share of the bytes read. Ulysses plans,
/// which trade the gathers for all-to-alls, count none.
static ChunkCommunication
getChunkCommunication(const Bounds &bounds, const Plan &plan,
                      const SystemSpec &system,
                      const std::vector<unsigned> &chunks) {
  ChunkCommunication micros{std::vector<double>(chunks.size()),
                            std::vector<double>(chunks.size())};
  if (plan.cpExchange == CpExchange::AllToAll)
    return micros;
  double narrowed = getNarrowedShare(bounds, plan);
  unsigned tp = plan.getDegree("tp"), cp = plan.getDegree("cp");
  bool experts = plan.getDegree("ep") > 1;
  // Built once, for the first collectives that count.
  std::optional<Mesh> mesh;
  auto getSpans = [&](llvm::ArrayRef<std::string> axes) {
    if (!mesh)
      mesh = getPlanMesh(plan);
    return getStageSpans(*mesh, system, axes);
  };
  // A gather's input is a rank's shard: `gathered` of the one read.
  auto add = [&](llvm::StringRef axis, const auto *work, const auto *chain,
                 double perSequence, double gathered) {
    if (plan.getDegree(axis) < 2 || !work || !chain)
      return;
    std::vector<GroupSpan> spans = getSpans({axis.str()});
    if (spans.empty())
      return;
    addChunkCollectiveMicros(*work, plan, system, chunks, spans,
                             perSequence * narrowed, gathered, micros.work);
    addChunkCollectiveMicros(*chain, plan, system, chunks, spans,
                             perSequence * narrowed, gathered, micros.chain);
  };
  add("tp",
      lookup(bounds.tensorParallelBytes,
             Bounds::TensorParallelKey{plan.recompute, plan.sequenceParallel,
                                       experts}),
      lookup(bounds.tensorParallelBytes,
             Bounds::TensorParallelKey{"none", plan.sequenceParallel, experts}),
      double(plan.microBatchSize) / cp, 2.0 / tp);
  add("cp", lookup(bounds.contextParallelBytes, plan.recompute),
      lookup(bounds.contextParallelBytes, std::string("none")),
      double(plan.microBatchSize) / tp, 2.0 / cp);
  // FSDP gathers each micro-batch's weights over dp, tp splitting them at
  // most, ep the experts'.
  if (plan.sharding == WeightSharding::FSDP) {
    const auto *work = lookup(bounds.shardedWeightBytes, plan.recompute);
    const auto *chain = lookup(bounds.shardedWeightBytes, std::string("none"));
    std::vector<Bounds::CollectiveBytes> splitWork, splitChain;
    if (experts) {
      unsigned ep = plan.getDegree("ep");
      work = splitExpertWeights(
          work, lookup(bounds.shardedExpertSplitBytes, plan.recompute), ep,
          splitWork);
      chain = splitExpertWeights(
          chain, lookup(bounds.shardedExpertSplitBytes, std::string("none")),
          ep, splitChain);
    }
    add("dp", work, chain, 1.0 / tp, 2.0 / plan.getDegree("dp"));
  }
  const auto *exchanged = lookup(
      bounds.exchangeBytes, std::pair(plan.recompute, plan.sequenceParallel));
  const auto *chainExchanged =
      lookup(bounds.exchangeBytes,
             std::pair(std::string("none"), plan.sequenceParallel));
  if (experts && bounds.exchange && exchanged && chainExchanged) {
    std::vector<GroupSpan> spans = getSpans(bounds.exchange->axes);
    if (!spans.empty()) {
      addChunkExchangeMicros(*exchanged, *bounds.exchange, plan, system, chunks,
                             spans, narrowed, micros.work);
      addChunkExchangeMicros(*chainExchanged, *bounds.exchange, plan, system,
                             chunks, spans, narrowed, micros.chain);
    }
  }
  return micros;
}

namespace {

/// The fastest each kind of kernel can run in any precision `plan` may
/// give it.
struct KernelRates {
  double gemm = 0, attention = 0, other = 0; ///< FLOP/s.
  double bandwidth = 0;                      ///< Bytes/s.
  double forwardRowFlops = 0, backwardRowFlops = 0;
  double launchMicros = 0;

  KernelRates(const ModelBounds &bounds, const Plan &plan,
              const DeviceSpec &device)
      : bandwidth(device.memoryBandwidth * device.memoryEfficiency),
        forwardRowFlops(device.attentionRowFlops),
        backwardRowFlops(device.attentionBackwardRowFlops),
        launchMicros(device.launchMicros) {
    using Kind = DeviceSpec::KernelKind;
    for (unsigned index = 0; index < NumPrecisions; ++index) {
      auto precision = Precision(index);
      bool narrow = isLowPrecision(precision);
      if (narrow && !bounds.ownPrecision && precision != plan.precision)
        continue;
      gemm = std::max(gemm, device.getAchievableFlops(precision, Kind::Gemm));
      other =
          std::max(other, device.getAchievableFlops(precision, Kind::Other));
      // A recipe leaves attention in the model's precision unless asked.
      if (!narrow || bounds.ownPrecision || bounds.lowPrecisionAttention)
        attention = std::max(
            attention, device.getAchievableFlops(precision, Kind::Attention));
    }
  }
  bool isKnown() const { return gemm > 0 && attention > 0 && other > 0; }

  /// Microseconds that a micro-batch of `sequences` takes at least with
  /// `work` a sequence, one kernel after another.
  double getMicros(const ModelBounds::Work &work, double sequences) const {
    double attentionWork = work.attentionFlops +
                           work.forwardRows * forwardRowFlops +
                           work.backwardRows * backwardRowFlops;
    double others = work.otherFlops / other;
    if (bandwidth > 0)
      others = std::max(others, work.otherBytes / bandwidth);
    return (work.gemmFlops / gemm + attentionWork / attention + others) * 1e6 *
               sequences +
           work.kernels * launchMicros;
  }
};

} // namespace

double stg::getStepLowerBound(const ModelBounds &bounds, const Plan &plan,
                              const SystemSpec &system) {
  if (plan.schedule == PipelineSchedule::DualPipe)
    return getStepLowerBound(bounds, getBoundedPlan(plan), system);
  auto work = bounds.work.find(plan.recompute);
  auto plain = bounds.work.find("none");
  if (!bounds.training || work == bounds.work.end() ||
      plain == bounds.work.end())
    return 0;
  std::optional<std::vector<unsigned>> chunks =
      getChunkLayers(bounds.layers, plan);
  if (!chunks)
    return 0;
  KernelRates rates(bounds, plan, system.device);
  if (!rates.isKnown())
    return 0;
  // The sequences of a micro-batch on one rank: its work is split over
  // tp x cp ranks at best.
  double sequences = double(plan.microBatchSize) /
                     (double(plan.getDegree("tp")) * plan.getDegree("cp"));
  unsigned stages = plan.getDegree("pp");
  std::vector<double> stageMicros(stages), chainMicros(chunks->size()),
      fillMicros(chunks->size());
  bool forwardRead = plain->second.forwardLayers.size() == bounds.layers;
  double layerMicros = 0;
  unsigned layer = 0;
  ChunkPlacement placement = getChunkPlacement(plan.schedule);
  for (unsigned chunk = 0; chunk < chunks->size(); ++chunk)
    for (unsigned end = layer + (*chunks)[chunk]; layer < end; ++layer) {
      double all = rates.getMicros(work->second.layers[layer], sequences);
      layerMicros += all;
      stageMicros[getChunkStage(placement, chunk, stages)] += all;
      // Recomputation may run before the gradient arrives: the chain
      // counts the forward and backward alone.
      chainMicros[chunk] += std::min(
          all, rates.getMicros(plain->second.layers[layer], sequences));
      if (forwardRead)
        fillMicros[chunk] +=
            rates.getMicros(plain->second.forwardLayers[layer], sequences);
    }
  // The embedding on the stage of the first chunk, the head and the loss
  // on that of the last.
  stageMicros[getChunkStage(placement, 0, stages)] +=
      rates.getMicros(work->second.beforeLayers, sequences);
  stageMicros[getChunkStage(placement, chunks->size() - 1, stages)] +=
      rates.getMicros(work->second.afterLayers, sequences);
  // A stage's collectives, which its ranks run one at a time, bound its
  // work as its compute does; a micro-batch's pass through a chunk waits
  // for both.
  ChunkCommunication communication =
      getChunkCommunication(bounds, plan, system, *chunks);
  const std::vector<double> &chunkCollectives = communication.work,
                            &chainCollectives = communication.chain;
  std::vector<double> stageCollectives(stages);
  for (unsigned chunk = 0; chunk < chunks->size(); ++chunk)
    stageCollectives[getChunkStage(placement, chunk, stages)] +=
        chunkCollectives[chunk];
  double microbatches = plan.microbatches, bound = 0, before = 0;
  for (unsigned stage = 0; stage < stages; ++stage) {
    // The first micro-batch's forward through the chunks before the
    // stage's first, then its work, then under 1F1B the last one's
    // backward back through them. The other schedules may run work of
    // their own meanwhile (zero bubble's weight gradients, the V's second
    // chunk): their stages count the forward before them alone.
    bound = std::max(bound, microbatches * std::max(stageMicros[stage],
                                                    stageCollectives[stage]) +
                                before);
    before += plan.schedule == PipelineSchedule::OneFOneB
                  ? std::max(chainMicros[stage], chainCollectives[stage])
                  : fillMicros[stage];
  }
  // The busiest rank does at least the average share of all the work.
  double average =
      microbatches *
      (layerMicros + rates.getMicros(work->second.other, sequences)) / stages;
  // A margin for the rounding of the sums, far below the microsecond the
  // estimate counts in.
  return std::max(bound, average) * (1 - 1e-9);
}
