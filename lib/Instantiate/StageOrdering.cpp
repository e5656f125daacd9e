//===- StageOrdering.cpp - What a stage's nodes wait for beyond data ------===//
//
// The order a framework imposes that the data does not: a recomputation
// replays a layer after the backward of the layer above, weight gathers
// run at most a layer ahead, and a schedule step waits for the step before
// it (through one barrier node, so that the boundary costs one edge per
// node rather than exits x entries), and an engine's overlapped halves run
// each stream's kernels in the order its host thread issued them.
//
//===----------------------------------------------------------------------===//

#include "StageBuilder.h"

#include "llvm/ADT/STLExtras.h"

using namespace stg;

void StageBuilder::noteLayerCompute(int32_t layer, uint32_t node) {
  if (layer < 0)
    return;
  if (layer != layerStarts.layer) {
    layerStarts.previous = layerStarts.current;
    layerStarts.previousLast = layerStarts.last;
    layerStarts.layer = layer;
    layerStarts.current = node;
  }
  layerStarts.last = node;
}

void StageBuilder::boundReplay(ProgramNode &compute) {
  auto inStep = [&](uint32_t dep) { return dep >= stepBegin; };
  if (compute.layer < 0 || llvm::any_of(compute.dataDeps, inStep))
    return;
  // The node's layer starts with it if no compute of that layer came yet.
  uint32_t before = compute.layer == layerStarts.layer
                        ? layerStarts.previousLast
                        : layerStarts.last;
  if (before != NoLayerStart)
    compute.ctrlDeps.push_back(before);
}

void StageBuilder::boundPrefetch(ProgramNode &gather) {
  // The gather's layer starts with it if no compute of that layer came yet.
  uint32_t before = gather.layer == layerStarts.layer ? layerStarts.previous
                                                      : layerStarts.current;
  if (before != NoLayerStart)
    gather.ctrlDeps.push_back(before);
}

llvm::SmallVector<uint32_t, 8>
stg::findExitNodes(llvm::ArrayRef<ProgramNode> nodes, size_t begin,
                   size_t end) {
  std::vector<bool> consumed(end - begin);
  for (size_t id = begin; id < end; ++id)
    for (auto deps : {llvm::ArrayRef<uint32_t>(nodes[id].dataDeps),
                      llvm::ArrayRef<uint32_t>(nodes[id].ctrlDeps)})
      for (uint32_t dep : deps)
        if (dep >= begin && dep < end)
          consumed[dep - begin] = true;
  llvm::SmallVector<uint32_t, 8> exits;
  for (size_t id = begin; id < end; ++id)
    if (!consumed[id - begin])
      exits.push_back(uint32_t(id));
  return exits;
}

uint32_t StageBuilder::addStepBarrier(llvm::ArrayRef<uint32_t> exits,
                                      llvm::StringRef stepName,
                                      int microbatch) {
  ProgramNode barrier;
  // Unnamed when folded, as getInstanceName leaves the other nodes.
  if (!shared.options.foldMicrobatches && !shared.options.foldLayers)
    barrier.name = ("barrier." + stepName).str();
  barrier.opType = "barrier";
  barrier.microbatch = microbatch;
  barrier.ctrlDeps.assign(exits.begin(), exits.end());
  return addNode(std::move(barrier));
}

void StageBuilder::chainEntries(size_t begin, llvm::ArrayRef<uint32_t> exits) {
  for (size_t id = begin; id < nodes->size(); ++id) {
    ProgramNode &node = (*nodes)[id];
    auto inStep = [&](uint32_t dep) { return dep >= begin; };
    if (llvm::any_of(node.dataDeps, inStep) ||
        llvm::any_of(node.ctrlDeps, inStep))
      continue;
    for (uint32_t exit : exits) // One exit or a few: the scan is short.
      if (!llvm::is_contained(node.dataDeps, exit) &&
          !llvm::is_contained(node.ctrlDeps, exit))
        node.ctrlDeps.push_back(exit);
  }
}

void StageBuilder::orderStreams(size_t begin) {
  // A CUDA stream runs its kernels in the order they were issued: a kernel
  // that waits holds back those behind it. The replay's streams run their
  // ready node with the lowest id, which is that order only where each
  // node waits for the one before it on its stream.
  std::optional<uint32_t> lastCompute, lastCollective;
  for (size_t id = begin; id < nodes->size(); ++id) {
    ProgramNode &node = (*nodes)[id];
    std::optional<uint32_t> *last = nullptr;
    if (node.kind == ProgramNodeKind::Compute)
      last = &lastCompute;
    else if (node.kind == ProgramNodeKind::Collective)
      last = &lastCollective;
    else
      continue;
    if (*last && !llvm::is_contained(node.dataDeps, **last) &&
        !llvm::is_contained(node.ctrlDeps, **last))
      node.ctrlDeps.push_back(**last);
    *last = uint32_t(id);
  }
}
