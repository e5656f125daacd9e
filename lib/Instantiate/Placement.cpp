//===- Placement.cpp - Where and how often each op of a module runs -------===//

#include "Placement.h"

#include "stg/Instantiate/Limits.h"
#include "stg/Instantiate/PipelineSplit.h"

using namespace stg;

bool stg::isElided(const Op &op) {
  switch (op.getKind()) {
  case OpKind::Input:
  case OpKind::Param:
  case OpKind::State:
  case OpKind::Yield:
  case OpKind::Repeat:
  case OpKind::Layout:
  case OpKind::Reshape:
  case OpKind::Shard:
  case OpKind::DropoutMask: // Written by its dropout's kernel.
    return true;
  case OpKind::Slice: {
    // Part of a cache is read in place (kv-cache's shared key cache).
    const Op *def = op.getOperand(0)->getDefiningOp();
    return def && def->getKind() == OpKind::State;
  }
  default:
    return false;
  }
}

std::optional<Placement>
Placement::create(const Module &module, unsigned numStages, unsigned numChunks,
                  const PipelineSplit &split, ChunkPlacement chunkPlacement,
                  DiagnosticEngine &diags) {
  Placement placement;
  placement.numStages = numStages;
  placement.chunkPlacement = chunkPlacement;
  const Graph &model = *module.getModel();
  const Op *firstRepeat = nullptr;
  const Op *previousForward = nullptr;
  bool ok = true;
  for (const std::unique_ptr<Op> &op : model.getOps()) {
    if (op->getKind() != OpKind::Repeat)
      continue;
    op->getBody()->walk([&](Op &inner) {
      if (inner.getKind() == OpKind::Repeat) {
        diags.error(inner.getLoc(), "a repeat inside a repeat cannot be "
                                    "instantiated yet; unroll the inner one");
        ok = false;
      }
    });
    RepeatInfo info;
    if (const Op *forward = op->getForwardRepeat()) {
      info = placement.repeats.lookup(forward);
      info.backward = true;
    } else {
      const Expr &formula = op->getAttr("count")->expr;
      std::optional<Expr> count = module.bindAll(formula);
      std::optional<long long> value =
          count ? getIntegerValue(*count) : std::nullopt;
      if (!value || *value < 0 || *value > MaxLayers) {
        std::string shown = module.getPrinter().str(formula);
        if (count && !count->is_equal(formula))
          shown += " = " + module.getPrinter().str(*count);
        diags.error(op->getLoc(),
                    "the repeat count " + shown +
                        (!count ? " divides by zero with " +
                                      module.describeBindings(formula)
                         : value && *value > MaxLayers
                             ? " exceeds the limit of " +
                                   std::to_string(MaxLayers) + " layers"
                             : std::string(" is not a non-negative integer")));
        ok = false;
        continue;
      }
      info.period = op->getBody()->getNumLayers();
      uint64_t layers = uint64_t(*value) * info.period;
      if (placement.numLayers + layers > MaxLayers) {
        diags.error(op->getLoc(), "the repeats add up to more than the limit "
                                  "of " + llvm::Twine(MaxLayers) + " layers");
        ok = false;
        continue;
      }
      info.offset = placement.numLayers;
      info.count = *value;
      info.loopStart = info.offset;
      // A layer pattern's remainder repeats follow it, under its name.
      if (previousForward &&
          previousForward->getAttr("name")->text == op->getAttr("name")->text)
        info.loopStart = placement.repeats.lookup(previousForward).loopStart;
      placement.numLayers += layers;
      previousForward = op.get();
      if (!firstRepeat)
        firstRepeat = op.get();
    }
    placement.repeats[op.get()] = info;
    llvm::ArrayRef<Value *> args = op->getBody()->getArguments();
    for (unsigned index = 0; index < args.size(); ++index)
      placement.bodyArgs[args[index]] = {op.get(), index};
  }
  if (!ok)
    return std::nullopt;
  std::string error;
  std::optional<std::vector<unsigned>> sizes = splitLayers(
      placement.numLayers, numStages, numChunks, split, error, chunkPlacement);
  if (!sizes) {
    diags.error(firstRepeat ? firstRepeat->getLoc() : module.getModelLoc(),
                error);
    return std::nullopt;
  }
  placement.chunkSizes = std::move(*sizes);
  for (unsigned chunk = 0; chunk < placement.chunkSizes.size(); ++chunk) {
    unsigned size = placement.chunkSizes[chunk];
    placement.layerStages.insert(
        placement.layerStages.end(), size,
        getChunkStage(chunkPlacement, chunk, numStages));
    placement.layerChunks.insert(placement.layerChunks.end(), size,
                                 getStageChunkIndex(chunk, numStages));
  }

  model.walk([&](Op &op) {
    bool isDeclaration = op.getKind() == OpKind::Param ||
                         op.getKind() == OpKind::State ||
                         op.getKind() == OpKind::Input;
    bool isView = isElided(op) && op.getKind() != OpKind::Repeat &&
                  op.getKind() != OpKind::Yield && !op.getOperands().empty();
    if (isView)
      isView = llvm::all_of(op.getOperands(), [&](const Value *operand) {
        const Op *def = operand->getDefiningOp();
        return def && placement.floating.count(def);
      });
    if (isDeclaration || isView)
      placement.floating[&op] = true;
  });
  placement.assignTopLevelStages(model);
  if (!placement.checkEmptyChunks(module, diags))
    return std::nullopt;
  return placement;
}

bool Placement::checkEmptyChunks(const Module &module,
                                 DiagnosticEngine &diags) const {
  for (unsigned chunk = 0; chunk < chunkSizes.size(); ++chunk) {
    if (chunkSizes[chunk] || chunkSizes.size() == 1)
      continue;
    unsigned stage = getChunkStage(chunkPlacement, chunk, numStages);
    unsigned stageChunk = getStageChunkIndex(chunk, numStages);
    bool holdsWork = llvm::any_of(
        module.getModel()->getOps(), [&](const std::unique_ptr<Op> &op) {
          return op->getKind() != OpKind::Repeat && !isFloating(op.get()) &&
                 topStages.lookup(op.get()) == stage &&
                 topChunks.lookup(op.get()) == stageChunk;
        });
    // A chunk of nothing would be a stage step of no work.
    if (!holdsWork) {
      diags.error(module.getModelLoc(),
                  "model chunk " + llvm::Twine(chunk) + " (on stage " +
                      llvm::Twine(stage) +
                      ") holds no layer and no other work: only the first "
                      "and the last chunk may hold no layer, with the work "
                      "before and after the layers");
      return false;
    }
  }
  return true;
}

std::vector<unsigned> Placement::getLayersOf(unsigned stage) const {
  std::vector<unsigned> layers;
  for (unsigned layer = 0; layer < numLayers; ++layer)
    if (layerStages[layer] == stage)
      layers.push_back(layer);
  return layers;
}

void Placement::assignTopLevelStages(const Graph &model) {
  // Work before the first repeat runs on the first stage, after a forward
  // repeat on the stage (and in the chunk) of its last layer, after a
  // backward repeat on that of its first. The work before and after all
  // the layers (the embedding; the head and the loss) belongs to the first
  // and the last model chunk, which may hold no layer when a split counts
  // that work as one. Gradient sync and optimizer steps follow the gradient
  // they consume, wherever it was computed.
  unsigned numModelChunks = chunkSizes.size();
  unsigned current = 0, currentChunk = 0;
  for (const std::unique_ptr<Op> &op : model.getOps()) {
    if (op->getKind() == OpKind::Repeat) {
      const RepeatInfo &info = repeats.find(op.get())->second;
      if (info.count) {
        unsigned layer = info.backward
                             ? info.offset
                             : info.offset + info.count * info.period - 1;
        current = layerStages[layer];
        currentChunk = layerChunks[layer];
        if (info.backward && layer == 0) {
          current = 0;
          currentChunk = 0;
        } else if (!info.backward && layer + 1 == numLayers) {
          current =
              getChunkStage(chunkPlacement, numModelChunks - 1, numStages);
          currentChunk = getStageChunkIndex(numModelChunks - 1, numStages);
        }
      }
      continue;
    }
    unsigned stage = current, chunk = currentChunk;
    if (op->getPhase() == Phase::GradientSync ||
        op->getPhase() == Phase::Optimizer) {
      for (const Value *operand : op->getOperands()) {
        ValueInstance source = resolve(operand, -1);
        const Op *def = source.value->getDefiningOp();
        if (def && !isFloating(def)) {
          stage = getStage(def, source.layer);
          chunk = getChunk(def, source.layer);
          break;
        }
      }
    }
    topStages[op.get()] = stage;
    topChunks[op.get()] = chunk;
  }
}

ValueInstance Placement::resolve(const Value *value, int layer) const {
  while (true) {
    if (const Op *def = value->getDefiningOp()) {
      if (def->getKind() != OpKind::Repeat)
        return {value, def->getParent()->getParentOp() ? layer : -1};
      // A repeat's result: what its last repetition yielded.
      const RepeatInfo &info = repeats.find(def)->second;
      unsigned index = value->getResultIndex();
      if (!info.count) {
        value = def->getOperand(index);
        layer = -1;
        continue;
      }
      value = def->getBody()->getTerminator()->getOperand(index);
      layer = info.backward ? info.offset
                            : info.offset + (info.count - 1) * info.period;
      continue;
    }
    // A loop-carried argument: the initial value in the first repetition
    // run, else what the previous one yielded.
    auto [repeat, index] = bodyArgs.find(value)->second;
    const RepeatInfo &info = repeats.find(repeat)->second;
    int first = info.backward ? info.offset + (info.count - 1) * info.period
                              : info.offset;
    if (layer == first) {
      value = repeat->getOperand(index);
      layer = -1;
      continue;
    }
    value = repeat->getBody()->getTerminator()->getOperand(index);
    layer += info.backward ? int(info.period) : -int(info.period);
  }
}

void stg::forEachInstance(const Module &module, const Placement &placement,
                          llvm::function_ref<void(const Op &, int)> fn) {
  for (const std::unique_ptr<Op> &op : module.getModel()->getOps()) {
    if (op->getKind() != OpKind::Repeat) {
      fn(*op, -1);
      continue;
    }
    const Placement::RepeatInfo &info = placement.getRepeat(op.get());
    for (unsigned i = 0; i < info.count; ++i)
      for (const std::unique_ptr<Op> &inner : op->getBody()->getOps())
        if (inner->getKind() != OpKind::Yield)
          fn(*inner, info.offset + i * info.period);
  }
}

void stg::forEachInstanceOnStage(const Module &module,
                                 const Placement &placement, unsigned stage,
                                 llvm::function_ref<void(const Op &, int)> fn) {
  // As forEachInstance, but past the repetitions with no layer here: a
  // stage of a deep pipeline runs a few of them.
  for (const std::unique_ptr<Op> &op : module.getModel()->getOps()) {
    if (op->getKind() != OpKind::Repeat) {
      if (placement.getStage(op.get(), -1) == stage)
        fn(*op, -1);
      continue;
    }
    const Placement::RepeatInfo &info = placement.getRepeat(op.get());
    for (unsigned i = 0; i < info.count; ++i) {
      if (!placement.hasLayerOn(info, i, stage))
        continue;
      int layer = info.offset + i * info.period;
      for (const std::unique_ptr<Op> &inner : op->getBody()->getOps())
        if (inner->getKind() != OpKind::Yield &&
            placement.getStage(inner.get(), layer) == stage)
          fn(*inner, layer);
    }
  }
}
