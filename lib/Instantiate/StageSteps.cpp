//===- StageSteps.cpp - What one schedule step of a stage builds ----------===//
//
// The ops a schedule step runs on a stage and the order it builds them in:
// a forward or (part of) a backward of one model chunk for one micro-batch,
// two such steps overlapped in turns (DualPipe's and Megatron-Core's F&B
// steps, two-batch overlap's pairs of forwards), and the optimizer step
// after the schedule with the gradient synchronization deferred to it.
//
//===----------------------------------------------------------------------===//

#include "StageBuilder.h"

#include "llvm/ADT/STLExtras.h"

using namespace stg;

bool StageBuilder::runsInStep(const Op &op, int layer, ScheduleStep step,
                              bool lastBackward) const {
  if (placement.getStage(&op, layer) != stage ||
      placement.getChunk(&op, layer) != step.chunk)
    return false;
  if (!step.backward)
    return op.getPhase() == Phase::Forward;
  if (op.getPhase() == Phase::Backward)
    return step.part == BackwardPart::Whole ||
           shared.weightGradientOps.count(&op) ==
               (step.part == BackwardPart::Weight);
  return lastBackward && op.getPhase() == Phase::GradientSync &&
         !deferredSync.count(&op);
}

bool StageBuilder::isLastBackward(ScheduleStep step) const {
  return runsGradientSync(step) &&
         step.microbatch + 1 == shared.options.numMicrobatches;
}

void StageBuilder::buildStep(ScheduleStep step) {
  bool lastBackward = isLastBackward(step);
  int mb = step.microbatch;
  for (const std::unique_ptr<Op> &op : shared.module.getModel()->getOps()) {
    if (op->getKind() != OpKind::Repeat) {
      if (runsInStep(*op, -1, step, lastBackward))
        buildOp(*op, -1, mb);
      continue;
    }
    if (placement.getRepeat(op.get()).backward != step.backward)
      continue;
    buildRepetitions(*op, step.chunk, mb, [&](const Op &inner, int layer) {
      return runsInStep(inner, layer, step, lastBackward);
    });
    if (failed)
      return;
  }
}

void StageBuilder::buildOverlappedSteps(ScheduleStep leading,
                                        ScheduleStep trailing) {
  // Each step's instances in the order buildStep builds them (no layer
  // folds: instantiation unfolds such schedules), where its turn stopped
  // and how many of its expert exchanges it built.
  struct Part {
    ScheduleStep step;
    std::vector<std::pair<const Op *, int>> instances;
    size_t next = 0;
    unsigned exchanges = 0;
    LayerStarts starts;
  };
  Part parts[2] = {{leading, {}, 0, 0, {}}, {trailing, {}, 0, 0, {}}};
  for (Part &part : parts) {
    bool lastBackward = isLastBackward(part.step);
    for (const std::unique_ptr<Op> &op : shared.module.getModel()->getOps()) {
      if (op->getKind() != OpKind::Repeat) {
        if (runsInStep(*op, -1, part.step, lastBackward))
          part.instances.push_back({op.get(), -1});
        continue;
      }
      const Placement::RepeatInfo &info = placement.getRepeat(op.get());
      if (info.backward != part.step.backward)
        continue;
      for (unsigned repetition : getRepetitionsInOrder(info, part.step.chunk)) {
        int layer = info.offset + repetition * info.period;
        for (const std::unique_ptr<Op> &inner : op->getBody()->getOps())
          if (inner->getKind() != OpKind::Yield &&
              runsInStep(*inner, layer, part.step, lastBackward))
            part.instances.push_back({inner.get(), layer});
      }
    }
  }
  bool stagedByExchanges = stagesByExpertExchanges();
  auto done = [](const Part &part) {
    return part.next == part.instances.size();
  };
  for (unsigned turn = 0; !failed && !(done(parts[0]) && done(parts[1]));
       turn ^= 1) {
    Part &part = parts[turn];
    // The bounds on prefetches and replays follow each step's own layers.
    std::swap(layerStarts, part.starts);
    bool built = false;
    while (!done(part) && !failed) {
      auto [op, layer] = part.instances[part.next];
      size_t before = nodes->size();
      if (stagedByExchanges && isExpertExchange(*op)) {
        // A forward's exchanges alternate: a layer's dispatch, its combine.
        bool dispatch = part.exchanges % 2 == 0;
        if (dispatch && built)
          break;
        ++part.next;
        ++part.exchanges;
        buildOp(*op, layer, int(part.step.microbatch));
        if (!dispatch)
          break;
        built = true;
        continue;
      }
      ++part.next;
      buildOp(*op, layer, int(part.step.microbatch));
      built |= nodes->size() > before;
      // A collective over one rank makes no node and ends no turn.
      if (!stagedByExchanges &&
          llvm::any_of(llvm::drop_begin(*nodes, before),
                       [](const ProgramNode &node) {
                         return node.kind == ProgramNodeKind::Collective;
                       }))
        break;
    }
    std::swap(layerStarts, part.starts);
  }
  if (!shared.training && !failed)
    orderStreams(stepBegin);
}

void StageBuilder::findDeferredSync() {
  if (!shared.options.overlapGradientReduction) {
    forEachInstanceOnStage(shared.module, placement, stage,
                           [&](const Op &op, int) {
                             if (op.getPhase() == Phase::GradientSync)
                               deferredSync.insert(&op);
                           });
    return;
  }
  for (const std::unique_ptr<Op> &op : shared.module.getModel()->getOps()) {
    if (op->getPhase() != Phase::GradientSync ||
        placement.getStage(op.get(), -1) != stage)
      continue;
    bool waits = llvm::any_of(op->getOperands(), [&](const Value *operand) {
      ValueInstance source = placement.resolve(operand, -1);
      const Op *def = source.value->getDefiningOp();
      if (!def || placement.isFloating(def))
        return false;
      return placement.getStage(def, source.layer) != stage ||
             deferredSync.count(def);
    });
    if (waits)
      deferredSync.insert(op.get());
  }
}

void StageBuilder::buildOptimizerStep() {
  int last = int(shared.options.numMicrobatches) - 1;
  // The stage's instances in program order, as forEachInstanceOnStage
  // gives them, a chunk's repetitions at a time so that they fold.
  auto buildAll = [&](llvm::function_ref<bool(const Op &)> steps) {
    for (const std::unique_ptr<Op> &op : shared.module.getModel()->getOps()) {
      if (op->getKind() != OpKind::Repeat) {
        if (placement.getStage(op.get(), -1) == stage && steps(*op))
          buildOp(*op, -1, last);
      } else {
        unsigned chunks = std::max(1u, shared.options.numVirtualStages);
        for (unsigned chunk = 0; chunk < chunks; ++chunk)
          buildRepetitions(*op, chunk, last, [&](const Op &inner, int layer) {
            return placement.getStage(&inner, layer) == stage &&
                   placement.getChunk(&inner, layer) == chunk && steps(inner);
          });
      }
      if (failed)
        return;
    }
  };
  buildAll([&](const Op &op) {
    return (op.getPhase() == Phase::Optimizer && !paramGatherOps.count(&op)) ||
           deferredSync.count(&op);
  });
  if (shared.options.overlapParamGather || paramGatherOps.empty() || failed)
    return;
  // Megatron gathers the updated weights once every shard has stepped.
  for (size_t id = nodes->size(); id-- > stepBegin;)
    if ((*nodes)[id].kind == ProgramNodeKind::Compute) {
      gathersAfter = uint32_t(id);
      break;
    }
  buildAll([&](const Op &op) { return paramGatherOps.count(&op) > 0; });
  gathersAfter.reset();
}
