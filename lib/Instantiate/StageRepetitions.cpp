//===- StageRepetitions.cpp - A stage's repeated work, built once ---------===//
//
// What makes a stage's program cost the same whatever its depth: a
// step builds the repetitions of a repeat it runs, and folds those between
// the second and the last into the second (a LayerFold) where they are the
// same nodes but for their ids; a step of a chunk whose layers are a chunk
// built before replays that chunk's step with its tags moved on
// (InstantiateOptions::foldLayers).
//
//===----------------------------------------------------------------------===//

#include "StageBuilder.h"

#include "llvm/ADT/STLExtras.h"

using namespace stg;

void StageBuilder::buildRepetitions(
    const Op &repeat, unsigned chunk, int microbatch,
    llvm::function_ref<bool(const Op &, int)> builds) {
  const Placement::RepeatInfo &info = placement.getRepeat(&repeat);
  llvm::SmallVector<unsigned, 16> repetitions =
      getRepetitionsInOrder(info, chunk);
  uint32_t firstBegin = nodes->size(), templateBegin = firstBegin;
  for (size_t i = 0; i < repetitions.size(); ++i) {
    int layer = info.offset + repetitions[i] * info.period;
    if (i == 1)
      templateBegin = nodes->size();
    for (const std::unique_ptr<Op> &inner : repeat.getBody()->getOps())
      if (inner->getKind() != OpKind::Yield && builds(*inner, layer))
        buildOp(*inner, layer, microbatch);
    if (i == 1 && !failed &&
        foldLayers(repeat, repetitions, chunk, firstBegin, templateBegin))
      i = repetitions.size() - 2; // On to the last.
  }
  redirect.repeat = nullptr;
}

llvm::SmallVector<unsigned, 16>
StageBuilder::getRepetitionsInOrder(const Placement::RepeatInfo &info,
                                    unsigned chunk) const {
  llvm::SmallVector<unsigned, 16> repetitions;
  for (unsigned i = 0; i < info.count; ++i) {
    unsigned repetition = info.backward ? info.count - 1 - i : i;
    if (placement.hasLayerOn(info, repetition, stage, int(chunk)))
      repetitions.push_back(repetition);
  }
  return repetitions;
}

bool StageBuilder::foldLayers(const Op &repeat, llvm::ArrayRef<unsigned> here,
                              unsigned chunk, uint32_t firstBegin,
                              uint32_t templateBegin) {
  // A step that gathers its weights first has a gather for each layer,
  // which no copy of a template layer could wait for: it builds them all.
  if (!shared.options.foldLayers || shared.options.gradientBucketBytes ||
      here.size() < 4 || stepFold >= 0 || !stepParamGathers.empty())
    return false;
  const Placement::RepeatInfo &info = placement.getRepeat(&repeat);
  auto firstLayer = [&](unsigned repetition) {
    return int(info.offset + repetition * info.period);
  };
  // The template, the repetition before it and the folded ones run all
  // their layers here, and the folded ones send nothing: they are the same
  // nodes but for their ids.
  llvm::ArrayRef<unsigned> folded = here.slice(2, here.size() - 3);
  for (unsigned repetition : here.drop_back())
    for (unsigned k = 0; k < info.period; ++k) {
      unsigned layer = firstLayer(repetition) + k;
      if (placement.getStageOfLayer(layer) != stage ||
          placement.getChunkOfLayer(layer) != chunk)
        return false;
    }
  for (unsigned repetition : folded)
    if (sendingRepetitions.count({&repeat, firstLayer(repetition)}))
      return false;
  uint32_t templateEnd = nodes->size();
  llvm::DenseMap<const Op *, uint32_t> templateNodes;
  for (uint32_t id = templateBegin; id < templateEnd; ++id) {
    if (!nodeOps[id])
      return false; // A message: each copy's would need a tag of its own.
    templateNodes[nodeOps[id]] = id;
  }
  LayerFold fold;
  fold.begin = templateBegin;
  fold.end = templateEnd;
  fold.copies = here.size() - 3;
  for (uint32_t id = templateBegin; id < templateEnd; ++id) {
    const ProgramNode &node = (*nodes)[id];
    for (auto deps : {llvm::ArrayRef<uint32_t>(node.dataDeps),
                      llvm::ArrayRef<uint32_t>(node.ctrlDeps)})
      for (uint32_t dep : deps) {
        if (dep < firstBegin || dep >= templateBegin || !nodeOps[dep])
          continue; // The same node for every copy.
        auto same = templateNodes.find(nodeOps[dep]);
        if (same == templateNodes.end())
          return false;
        fold.carried.push_back({id, dep, same->second});
      }
  }
  if (fold.begin == fold.end)
    return false;
  llvm::sort(fold.carried);
  stepFold = int32_t(folds->size());
  folds->push_back(std::move(fold));
  for (unsigned repetition : folded)
    foldedAway[firstLayer(repetition)] = true;
  int first = firstLayer(folded.front()), last = firstLayer(folded.back());
  redirect.repeat = &repeat;
  redirect.first = std::min(first, last);
  redirect.last = std::max(first, last);
  redirect.templateLayer = firstLayer(here[1]);
  return true;
}

std::optional<ProgramStep> StageBuilder::findChunkReplay(ScheduleStep step,
                                                         int64_t &edgeShift,
                                                         uint32_t &preamble) {
  if (!shared.options.foldLayers)
    return std::nullopt;
  const std::vector<unsigned> &layers = chunkLayers[step.chunk];
  if (layers.empty() || chunksWithTopLevelOps.count(step.chunk))
    return std::nullopt;
  // The repeat statement whose repetitions the chunk's layers are.
  const Placement::RepeatInfo *repeat = nullptr;
  for (const std::unique_ptr<Op> &op : shared.module.getModel()->getOps())
    if (op->getKind() == OpKind::Repeat) {
      const Placement::RepeatInfo &info = placement.getRepeat(op.get());
      if (layers.front() >= info.offset &&
          layers.back() < info.offset + info.count * info.period)
        repeat = &info;
    }
  if (!repeat)
    return std::nullopt;
  for (const BuiltStep &built : builtSteps) {
    if (built.microbatch != int(step.microbatch) ||
        built.backward != step.backward || built.part != step.part ||
        chunksWithTopLevelOps.count(built.chunk))
      continue;
    // The same layers of the same repeat, whole repetitions further on.
    const std::vector<unsigned> &other = chunkLayers[built.chunk];
    if (other.size() != layers.size() || other.front() < repeat->offset ||
        (layers.front() - other.front()) % repeat->period)
      continue;
    int shift = int(layers.front()) - int(other.front());
    bool same = true;
    for (size_t i = 0; i < layers.size() && same; ++i)
      same = int(layers[i]) - int(other[i]) == shift;
    // Each message of the built step, moved by `shift` layers, is an edge
    // numbered the same distance on.
    std::optional<int64_t> distance;
    for (const Message &message : built.messages) {
      if (!same)
        break;
      auto edges =
          shared.edges.find({message.key.first, message.key.second + shift});
      same = edges != shared.edges.end();
      const StageEdge *edge = nullptr;
      if (same)
        for (const StageEdge &candidate : edges->second)
          if (candidate.stage == message.consumer)
            edge = &candidate;
      same = edge && edge->once == message.once &&
             (!distance || *distance == int64_t(edge->number) - message.edge);
      if (same)
        distance = int64_t(edge->number) - message.edge;
    }
    if (!same)
      continue;
    std::optional<ProgramStep> replay = built.step;
    if (replay) {
      int64_t offset = replay->tagOffset +
                       distance.value_or(0) * shared.options.numMicrobatches;
      if (offset > INT32_MAX || offset < INT32_MIN)
        continue;
      replay->tagOffset = int32_t(offset);
    }
    edgeShift = distance.value_or(0);
    preamble = built.preamble;
    // Later steps find no nodes for this chunk's repetitions, and what it
    // received is here: a backward that uses it receives it no more.
    for (const Message &message : built.messages)
      if (message.consumer == stage && !message.once)
        replayedReceives.insert(
            {{message.key.first, message.key.second + shift},
             int(step.microbatch)});
    for (unsigned layer : layers)
      foldedAway[repeat->offset + (layer - repeat->offset) / repeat->period *
                                      repeat->period] = true;
    return replay.value_or(ProgramStep{0, 0, 0, -1});
  }
  return std::nullopt;
}
