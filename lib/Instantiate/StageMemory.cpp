//===- StageMemory.cpp - Peak memory of one rank of a stage ---------------===//
//
// Weights, gradients, optimizer state, saved activations and state tensors
// of one rank, from the values a stage keeps (collected once per placement,
// StageMemoryKeys) and their bound sizes. Under a low-precision recipe, a
// saved value that only the recipe's GEMMs read back is kept in their
// format, and each weight they read has a cast copy in it beside its own
// in training (Transformer Engine's cached FP8 weights), or is served in
// it in inference (an FP8 checkpoint); a weight-only format (W4A16) is the
// one a weight is served in.
//

#include "StageMemory.h"

#include "stg/IR/Cost.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

#include <cmath>

using namespace stg;

/// The declarations (`param`, `state`) `value` is a view of, if any.
static void findDeclarations(const Value *value,
                             llvm::SmallVectorImpl<const Op *> &found) {
  const Op *def = value->getDefiningOp();
  if (!def)
    return;
  if (def->getKind() == OpKind::Param || def->getKind() == OpKind::State) {
    found.push_back(def);
    return;
  }
  if (isElided(*def) && def->getKind() != OpKind::Repeat)
    for (const Value *operand : def->getOperands())
      findDeclarations(operand, found);
}

using InstanceKey = std::pair<const Value *, int>;
using InstanceKeys = llvm::SetVector<InstanceKey, std::vector<InstanceKey>,
                                     llvm::DenseSet<InstanceKey>>;

/// Each value of `keys`, in the order of its first instance, with its
/// number of instances.
static std::vector<std::pair<const Value *, uint64_t>>
countByValue(const InstanceKeys &keys) {
  llvm::DenseMap<const Value *, uint32_t> index;
  std::vector<std::pair<const Value *, uint64_t>> counts;
  for (const InstanceKey &key : keys) {
    auto [it, added] = index.try_emplace(key.first, counts.size());
    if (added)
      counts.push_back({key.first, 0});
    ++counts[it->second].second;
  }
  return counts;
}

/// `bytes` of `value` in `precision` instead of its element type.
static uint64_t scaleBytes(uint64_t bytes, const Value &value,
                           Precision precision) {
  double element = getElementTypeBytes(value.getType().getElementType());
  return uint64_t(std::ceil(bytes / element * getPrecisionBytes(precision)));
}

/// What the kept values of `keys` hold on one rank: weights, gradients,
/// optimizer state, `state` tensors and (training) the saved activations,
/// for `inFlightMicrobatches`.
static std::optional<StageMemory>
sumKeptMemory(const StageMemoryKeys &keys, OpNumberCache &numbers,
              double inFlightMicrobatches, bool training,
              MemoryAccounting accounting) {
  // An unfused attention's probabilities; with dropout also its mask and
  // output.
  uint64_t scoreBytes = 0;
  bool failedScores = false;
  for (const auto &[attention, count] : keys.unfusedAttention) {
    std::optional<int64_t> scores =
        numbers.evaluate(getAttentionScores(*attention), attention->getLoc(),
                         "scores of 'attention'");
    failedScores |= !scores;
    unsigned element =
        getElementTypeBytes(attention->getResult()->getType().getElementType());
    bool dropout = !attention->getAttr("dropout")->expr.is_zero();
    scoreBytes +=
        count * scores.value_or(0) * (dropout ? 2 * element + 1 : element);
  }
  StageMemory memory;
  memory.inFlightMicrobatches = inFlightMicrobatches;
  auto bytesOf = [&](const Value *value) {
    return numbers.getLocalBytes(*value, value->getDefiningOp()->getLoc());
  };
  for (const auto &[value, count] : keys.declarations) {
    std::optional<int64_t> bytes = bytesOf(value);
    if (!bytes)
      return std::nullopt;
    if (value->getDefiningOp()->getKind() == OpKind::State) {
      memory.state += count * *bytes;
      continue;
    }
    // Under a low-precision recipe, training keeps a cast copy beside each
    // weight its GEMMs read; inference serves the weights in the format.
    uint64_t weightBytes = *bytes;
    if (auto copy = keys.weightCopies.find(value);
        copy != keys.weightCopies.end()) {
      uint64_t cast = scaleBytes(*bytes, *value, copy->second);
      weightBytes = training ? weightBytes + cast : cast;
    }
    memory.weights += count * weightBytes;
    if (!training)
      continue;
    // Megatron-LM accumulates 16-bit weights' gradients in fp32 main
    // gradients; ZeRO's accounting keeps them in the weights' type.
    unsigned elementBytes =
        getElementTypeBytes(value->getType().getElementType());
    bool mainGradients =
        accounting == MemoryAccounting::Megatron && elementBytes < 4;
    memory.gradients +=
        count * (mainGradients ? *bytes / elementBytes * 4 : *bytes);
  }
  // Adam keeps 12 bytes per element it steps (fp32 master and two moments):
  // the local weight shard, or a slice of it with a distributed optimizer.
  for (const auto &[value, count] : keys.steps) {
    std::optional<int64_t> bytes = bytesOf(value);
    if (!bytes)
      return std::nullopt;
    memory.optimizer +=
        count * 12 *
        (*bytes / getElementTypeBytes(value->getType().getElementType()));
  }
  if (failedScores)
    return std::nullopt;
  uint64_t savedBytes = scoreBytes;
  for (const auto &[value, count] : keys.saved) {
    std::optional<int64_t> bytes = bytesOf(value);
    if (!bytes)
      return std::nullopt;
    if (auto format = keys.savedFormats.find(value);
        format != keys.savedFormats.end())
      *bytes = scaleBytes(*bytes, *value, format->second);
    savedBytes += count * *bytes;
  }
  memory.activations =
      uint64_t(std::llround(savedBytes * inFlightMicrobatches));
  return memory;
}

std::optional<StageMemory>
stg::computeStageMemory(const Module &module, const Placement &placement,
                        OpNumberCache &numbers, unsigned stage,
                        double inFlightMicrobatches, unsigned numMicrobatches,
                        bool training, MemoryAccounting accounting,
                        const std::vector<unsigned> &placementName) {
  // Training keeps the same values whatever the numbers bound: they are
  // collected once per placement of the module.
  if (training)
    if (const StageMemoryKeys *keys =
            numbers.findStageMemoryKeys(placementName))
      return sumKeptMemory(*keys, numbers, inFlightMicrobatches, training,
                           accounting);
  InstanceKeys declarations, saved, steps;
  // Inference: the keys and values attention computes here, with the
  // attention reading them (a prefill's KV cache, which the decode steps
  // read), and the ops whose operands and results are live at once.
  llvm::DenseMap<InstanceKey, const Op *> producedCache;
  uint64_t workingSet = 0, recurrentState = 0;
  bool failedWorkingSet = false;
  llvm::SmallVector<const Op *, 2> found;
  // An unfused attention keeps its softmax output (the score matrix) for
  // the backward pass, unless recomputation replays it there.
  bool replaysAttention = false;
  module.getModel()->walk([&](Op &op) {
    replaysAttention |=
        op.getKind() == OpKind::Attention && op.getPhase() != Phase::Forward;
  });
  llvm::MapVector<const Op *, uint64_t> unfusedAttention;
  // Per saved value, the one low precision all its backward readers read
  // it in (none: its own type); per weight, that of its low-precision
  // readers.
  llvm::DenseMap<const Value *, std::optional<Precision>> savedFormats;
  llvm::DenseMap<const Value *, Precision> weightCopies;
  forEachInstanceOnStage(module, placement, stage, [&](const Op &op, int layer) {
    if (op.getKind() == OpKind::Adam)
      steps.insert({op.getResult(), layer});
    if (training && !replaysAttention && op.getKind() == OpKind::Attention &&
        op.getAttr("kernel")->text == "unfused")
      ++unfusedAttention[&op];
    if (!training && !isElided(op)) {
      uint64_t live = 0;
      auto addLive = [&](const Value *value) {
        found.clear();
        findDeclarations(value, found);
        if (!found.empty())
          return; // A weight or a cache, counted as such.
        std::optional<int64_t> bytes = numbers.getLocalBytes(
            *value, value->getDefiningOp()->getLoc());
        failedWorkingSet |= !bytes;
        live += bytes.value_or(0);
      };
      for (const Value *operand : op.getOperands())
        addLive(placement.resolve(operand, layer).value);
      for (const Value *result : op.getResults())
        addLive(result);
      workingSet = std::max(workingSet, live);
      // A recurrent layer leaves its state for the decode steps. A decode
      // step's ops read theirs as a third operand (kv-cache's `state`
      // tensors, counted as declarations), not counted twice.
      std::optional<RecurrentState> state = getRecurrentState(op);
      if (state && op.getOperands().size() < 3) {
        const TensorType &type = state->like->getType();
        std::optional<int64_t> bytes = numbers.evaluate(
            getLocalBytes(*state->like) / type.getLocalDim(state->dim) *
                state->positions,
            op.getLoc(), "recurrent state of '" + op.getKindName().str() + "'");
        failedWorkingSet |= !bytes;
        recurrentState += bytes.value_or(0);
      }
      // An attention whose cache is a latent (its `cache` channels) makes
      // one entry, by its keys' positions.
      if (op.getKind() == OpKind::Attention)
        for (unsigned index : {1u, 2u}) {
          if (index == 2 && !op.getAttr("cache")->expr.is_zero())
            break;
          ValueInstance source = placement.resolve(op.getOperand(index), layer);
          found.clear();
          findDeclarations(source.value, found);
          if (found.empty()) // Not read from a cache: it makes one.
            producedCache.try_emplace({source.value, source.layer}, &op);
        }
    }
    bool backward = op.getPhase() != Phase::Forward;
    std::optional<Precision> reads =
        op.getKind() == OpKind::Einsum ? getLowPrecision(op) : std::nullopt;
    // A weight served in a weight-only format is held in it.
    std::optional<Precision> weightFormat =
        op.getKind() == OpKind::Einsum ? getWeightPrecision(op) : std::nullopt;
    if (!weightFormat)
      weightFormat = reads;
    for (const Value *operand : op.getOperands()) {
      ValueInstance source = placement.resolve(operand, layer);
      const Op *def = source.value->getDefiningOp();
      found.clear();
      findDeclarations(source.value, found);
      for (const Op *declaration : found) {
        declarations.insert({declaration->getResult(),
                             declaration->getParent()->getParentOp() ? layer
                                                                     : -1});
        if (weightFormat && declaration->getKind() == OpKind::Param)
          weightCopies.try_emplace(declaration->getResult(), *weightFormat);
      }
      if (backward && def && def->getPhase() == Phase::Forward &&
          !placement.isFloating(def)) {
        saved.insert({source.value, source.layer});
        auto [format, first] = savedFormats.try_emplace(source.value, reads);
        if (!first && format->second != reads)
          format->second = std::nullopt;
      }
    }
  });

  StageMemoryKeys keys;
  keys.declarations = countByValue(declarations);
  keys.steps = countByValue(steps);
  keys.saved = countByValue(saved);
  keys.unfusedAttention.assign(unfusedAttention.begin(),
                               unfusedAttention.end());
  for (const auto &[value, format] : savedFormats)
    if (format)
      keys.savedFormats[value] = *format;
  keys.weightCopies = std::move(weightCopies);
  if (training)
    return sumKeptMemory(
        numbers.addStageMemoryKeys(placementName, std::move(keys)), numbers,
        inFlightMicrobatches, training, accounting);
  std::optional<StageMemory> kept = sumKeptMemory(
      keys, numbers, inFlightMicrobatches, training, accounting);
  if (!kept)
    return std::nullopt;
  StageMemory memory = *kept;

  // Inference saves nothing for a backward; its activations are the
  // largest working set of one op (its operands and results; a framework
  // frees the rest as it goes), for each micro-batch in flight.
  if (failedWorkingSet)
    return std::nullopt;
  memory.activations = uint64_t(double(workingSet) * inFlightMicrobatches);
  // A sliding window's cache keeps only its last positions, as decode's.
  for (const auto &[key, attention] : producedCache) {
    const TensorType &type = key.first->getType();
    Expr positions = type.getLocalDim(getAttentionSequenceDim(type));
    Expr perPosition = getLocalBytes(*key.first) / positions;
    // A latent cache: one head of `cache` channels, whole on every rank.
    const Expr &latent = attention->getAttr("cache")->expr;
    unsigned rank = type.getRank();
    if (!latent.is_zero() && rank >= 2)
      perPosition = perPosition /
                    (type.getLocalDim(rank - 2) * type.getLocalDim(rank - 1)) *
                    latent;
    std::optional<int64_t> bytes = numbers.evaluate(
        perPosition * getCachedPositions(*attention, positions),
        attention->getLoc(), "KV cache of 'attention'");
    if (!bytes)
      return std::nullopt;
    memory.state += *bytes;
  }
  memory.state += recurrentState;
  // Every micro-batch's sequences keep their caches on the stage between
  // steps, not only the one in flight.
  memory.state *= numMicrobatches;
  return memory;
}
