//===- StageMemory.cpp - Peak memory of one rank of a stage ---------------===//

#include "StageMemory.h"

#include "stg/IR/Cost.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

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

std::optional<StageMemory>
stg::computeStageMemory(const Module &module, const Placement &placement,
                        OpNumberCache &numbers, unsigned stage,
                        double inFlightMicrobatches, unsigned numMicrobatches,
                        bool training, MemoryAccounting accounting) {
  using Key = std::pair<const Value *, int>;
  llvm::DenseSet<Key> declarations, saved, steps;
  // Inference: the keys and values attention computes here, with the
  // attention reading them (a prefill's KV cache, which the decode steps
  // read), and the ops whose operands and results are live at once.
  llvm::DenseMap<Key, const Op *> producedCache;
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
  uint64_t scoreBytes = 0;
  bool failedScores = false;
  forEachInstanceOnStage(module, placement, stage, [&](const Op &op, int layer) {
    if (op.getKind() == OpKind::Adam)
      steps.insert({op.getResult(), layer});
    if (training && !replaysAttention && op.getKind() == OpKind::Attention &&
        op.getAttr("kernel")->text == "unfused") {
      std::optional<int64_t> scores = numbers.evaluate(
          getAttentionScores(op), op.getLoc(), "scores of 'attention'");
      failedScores |= !scores;
      // The probabilities; with dropout also its mask and output.
      unsigned element =
          getElementTypeBytes(op.getResult()->getType().getElementType());
      bool dropout = !op.getAttr("dropout")->expr.is_zero();
      scoreBytes += scores.value_or(0) * (dropout ? 2 * element + 1 : element);
    }
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
      if (op.getKind() == OpKind::Attention)
        for (unsigned index : {1u, 2u}) {
          ValueInstance source = placement.resolve(op.getOperand(index), layer);
          found.clear();
          findDeclarations(source.value, found);
          if (found.empty()) // Not read from a cache: it makes one.
            producedCache.try_emplace({source.value, source.layer}, &op);
        }
    }
    bool backward = op.getPhase() != Phase::Forward;
    for (const Value *operand : op.getOperands()) {
      ValueInstance source = placement.resolve(operand, layer);
      const Op *def = source.value->getDefiningOp();
      found.clear();
      findDeclarations(source.value, found);
      for (const Op *declaration : found)
        declarations.insert({declaration->getResult(),
                             declaration->getParent()->getParentOp() ? layer
                                                                     : -1});
      if (backward && def && def->getPhase() == Phase::Forward &&
          !placement.isFloating(def))
        saved.insert({source.value, source.layer});
    }
  });

  StageMemory memory;
  memory.inFlightMicrobatches = inFlightMicrobatches;
  auto bytesOf = [&](const Value *value) {
    return numbers.getLocalBytes(*value, value->getDefiningOp()->getLoc());
  };
  for (const Key &key : declarations) {
    std::optional<int64_t> bytes = bytesOf(key.first);
    if (!bytes)
      return std::nullopt;
    if (key.first->getDefiningOp()->getKind() == OpKind::State) {
      memory.state += *bytes;
      continue;
    }
    memory.weights += *bytes;
    if (!training)
      continue;
    // Megatron-LM accumulates 16-bit weights' gradients in fp32 main
    // gradients; ZeRO's accounting keeps them in the weights' type.
    unsigned elementBytes =
        getElementTypeBytes(key.first->getType().getElementType());
    bool mainGradients =
        accounting == MemoryAccounting::Megatron && elementBytes < 4;
    memory.gradients += mainGradients ? *bytes / elementBytes * 4 : *bytes;
  }
  // Adam keeps 12 bytes per element it steps (fp32 master and two moments):
  // the local weight shard, or a slice of it with a distributed optimizer.
  for (const Key &key : steps) {
    std::optional<int64_t> bytes = bytesOf(key.first);
    if (!bytes)
      return std::nullopt;
    memory.optimizer +=
        12 * (*bytes / getElementTypeBytes(key.first->getType().getElementType()));
  }
  if (failedScores)
    return std::nullopt;
  uint64_t savedBytes = scoreBytes;
  for (const Key &key : saved) {
    std::optional<int64_t> bytes = bytesOf(key.first);
    if (!bytes)
      return std::nullopt;
    savedBytes += *bytes;
  }
  memory.activations = uint64_t(std::llround(savedBytes * inFlightMicrobatches));
  if (training)
    return memory;

  // Inference saves nothing for a backward; its activations are the
  // largest working set of one op (its operands and results; a framework
  // frees the rest as it goes).
  if (failedWorkingSet)
    return std::nullopt;
  memory.activations = workingSet;
  // A sliding window's cache keeps only its last positions, as decode's.
  for (const auto &[key, attention] : producedCache) {
    const TensorType &type = key.first->getType();
    Expr positions = type.getLocalDim(getAttentionSequenceDim(type));
    std::optional<int64_t> bytes =
        numbers.evaluate(getLocalBytes(*key.first) / positions *
                             getCachedPositions(*attention, positions),
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
