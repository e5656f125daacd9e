//===- ProgramChain.cpp - Stage programs run one after another ------------===//

#include "stg/Serve/ProgramChain.h"

#include "stg/Serve/PairMesh.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <cassert>

using namespace stg;

namespace {

/// The steps a program runs: its own, or the whole program as one.
std::vector<ProgramStep> getSteps(const StageProgram &program) {
  if (!program.steps.empty() || program.nodes.empty())
    return program.steps;
  return {ProgramStep{0, uint32_t(program.nodes.size()), 0, -1}};
}

bool isMessage(const ProgramNode &node) {
  return node.kind == ProgramNodeKind::Send ||
         node.kind == ProgramNodeKind::Recv;
}

void keepLarger(StageMemory &memory, const StageMemory &other) {
  memory.weights = std::max(memory.weights, other.weights);
  memory.gradients = std::max(memory.gradients, other.gradients);
  memory.optimizer = std::max(memory.optimizer, other.optimizer);
  memory.activations = std::max(memory.activations, other.activations);
  memory.state = std::max(memory.state, other.state);
  memory.inFlightMicrobatches =
      std::max(memory.inFlightMicrobatches, other.inFlightMicrobatches);
}

} // namespace

void stg::appendChainLink(StageProgram &chain, const ChainLink &link) {
  assert((!link.program || link.program->folds.empty()) &&
         "a folded program has no trace");
  if (link.messages.empty() && (!link.program || link.program->nodes.empty()))
    return;
  std::vector<ProgramNode> &nodes = chain.nodes;
  uint32_t begin = uint32_t(nodes.size());

  // What the link waits for: the exits of the chain's last step.
  llvm::SmallVector<uint32_t, 8> exits;
  std::vector<ProgramStep> chainSteps = getSteps(chain);
  if (!chainSteps.empty())
    exits = findExitNodes(nodes, chainSteps.back().begin,
                          chainSteps.back().end);
  if (exits.size() > 1) {
    ProgramNode barrier;
    barrier.name = "barrier." + link.name;
    barrier.opType = "barrier";
    barrier.ctrlDeps.assign(exits.begin(), exits.end());
    nodes.push_back(std::move(barrier));
    exits = {begin};
  }
  auto waitForExits = [&](ProgramNode &node) {
    for (uint32_t exit : exits)
      if (!llvm::is_contained(node.dataDeps, exit) &&
          !llvm::is_contained(node.ctrlDeps, exit))
        node.ctrlDeps.push_back(exit);
  };

  llvm::SmallVector<uint32_t, 8> receives;
  for (const ProgramNode &message : link.messages) {
    assert(isMessage(message) && "a link's messages are sends and receives");
    ProgramNode &added = nodes.emplace_back(message);
    added.dataDeps.clear();
    added.ctrlDeps.clear();
    waitForExits(added);
    if (added.kind == ProgramNodeKind::Recv)
      receives.push_back(uint32_t(nodes.size() - 1));
  }

  // The chain's own steps may be implicit: explicit before others follow.
  if (chain.steps.empty() && begin > 0)
    chain.steps = chainSteps;
  if (!link.program || link.program->nodes.empty()) {
    chain.steps.push_back({begin, uint32_t(nodes.size()), 0, -1});
    return;
  }

  const StageProgram &program = *link.program;
  uint32_t offset = uint32_t(nodes.size());
  std::vector<ProgramStep> steps = getSteps(program);
  uint32_t firstStepEnd = steps.empty() ? 0 : steps.front().end;
  for (uint32_t id = 0; id < program.nodes.size(); ++id) {
    ProgramNode &node = nodes.emplace_back(program.nodes[id]);
    bool entry =
        id < firstStepEnd && node.dataDeps.empty() && node.ctrlDeps.empty();
    for (uint32_t &dep : node.dataDeps)
      dep += offset;
    for (uint32_t &dep : node.ctrlDeps)
      dep += offset;
    if (!node.name.empty())
      node.name = link.name + "." + node.name;
    if (isMessage(node)) {
      node.tag += link.tagOffset;
      node.peerStage += link.peerOffset;
    }
    if (!link.axisMap.empty()) {
      node.group = mapAxisMask(node.group, link.axisMap);
      node.attentionRing = mapAxisMask(node.attentionRing, link.axisMap);
    }
    if (!entry)
      continue;
    waitForExits(node);
    if (link.waitForReceives)
      for (uint32_t receive : receives)
        node.ctrlDeps.push_back(receive);
  }

  for (size_t index = 0; index < steps.size(); ++index) {
    ProgramStep step = steps[index];
    step.begin = index == 0 ? begin : step.begin + offset;
    step.end += offset;
    chain.steps.push_back(step);
  }
  chain.schedule.insert(chain.schedule.end(), program.schedule.begin(),
                        program.schedule.end());
  for (unsigned layer : program.layers)
    if (!llvm::is_contained(chain.layers, layer))
      chain.layers.push_back(layer);
  llvm::sort(chain.layers);
  keepLarger(chain.memory, program.memory);
}

int32_t stg::getMaxTag(const StageProgram &program) {
  int32_t highest = -1;
  for (const ProgramNode &node : program.nodes)
    if (isMessage(node))
      highest = std::max(highest, node.tag);
  return highest;
}
