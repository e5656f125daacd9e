//===- ServingWindow.cpp - A serving run's iterations as programs ---------===//
//
// Each of the window's iterations (ServingWindowPlan.cpp) has its decode
// step and prefill compiled unfolded at its sizes (a size once, whichever
// iterations share it), appended to the stage programs of its instance
// (ProgramChain.h). Disaggregated, the two instances become one mesh whose
// pipeline axis holds the prefill stages, then the decode stages
// (PairMesh.h), so the KV caches are ordinary sends and receives between
// stages that hold the same layers.
//
//===----------------------------------------------------------------------===//

#include "stg/Serve/ServingWindow.h"

#include "stg/Instantiate/Limits.h"
#include "stg/Perf/DeviceModel.h"
#include "stg/Serve/PairMesh.h"
#include "stg/Serve/ProgramChain.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

using namespace stg;

namespace {

/// Compiles the window's programs, each size once per instance.
class PieceCompiler {
public:
  explicit PieceCompiler(DiagnosticEngine &diags) : diags(diags) {}

  /// Checks what the model declares, once.
  bool inspect(const CompileOptions &base);
  /// The decode step of `sequences` at `context` (`decode`), or the
  /// prefill of `sequences` of `tokens`.
  const ProgramSet *compile(unsigned side, const CompileOptions &base,
                            bool decode, uint64_t sequences,
                            uint64_t tokensOrContext);

  std::unique_ptr<Module> firstModule;
  int32_t maxTag = -1;

private:
  DiagnosticEngine &diags;
  bool hasSequenceParallel = false;
  std::map<std::tuple<unsigned, bool, uint64_t, uint64_t>, ProgramSet> compiled;
};

} // namespace

bool PieceCompiler::inspect(const CompileOptions &base) {
  std::unique_ptr<Module> module = loadModel(base, diags);
  if (!module)
    return false;
  hasSequenceParallel = module->lookupOption("sequence_parallel") != nullptr;
  return true;
}

const ProgramSet *PieceCompiler::compile(unsigned side,
                                         const CompileOptions &base,
                                         bool decode, uint64_t sequences,
                                         uint64_t tokensOrContext) {
  auto key = std::make_tuple(side, decode, sequences, tokensOrContext);
  if (auto found = compiled.find(key); found != compiled.end())
    return &found->second;
  CompileOptions options = base;
  // As IterationCostModel prices them: all-reduces rather than sequence
  // parallelism, one micro-batch, and every node (a trace needs them all).
  if (hasSequenceParallel)
    options.overrides.push_back({"sequence_parallel", "false"});
  // Two-batch overlap splits an even count of sequences in two halves (the
  // estimate also splits a prefill's tokens; a trace keeps sequences
  // whole).
  options.twoBatchOverlap &= sequences % 2 == 0;
  options.microbatches = options.twoBatchOverlap ? 2 : 1;
  options.foldLayers = false;
  options.foldMicrobatches = false;
  options.overrides.push_back(
      {"MB", std::to_string(sequences / options.microbatches)});
  std::string what;
  if (decode) {
    options.mode = "decode";
    options.context = unsigned(tokensOrContext);
    what = "decode step of " + std::to_string(sequences) +
           " sequences at context " + std::to_string(tokensOrContext);
  } else {
    options.mode = "prefill";
    options.overrides.push_back({"S", std::to_string(tokensOrContext)});
    what = "prefill of " + std::to_string(sequences) + " sequences of " +
           std::to_string(tokensOrContext) + " tokens";
  }
  std::optional<CompiledModel> model = compileModel(options, diags);
  if (!model) {
    diags.note({}, "while compiling the serving window's " + what);
    return nullptr;
  }
  for (const StageProgram &stage : model->programs.stages)
    maxTag = std::max(maxTag, getMaxTag(stage));
  if (!firstModule)
    firstModule = std::move(model->module);
  return &compiled.emplace(key, std::move(model->programs)).first->second;
}

namespace {

/// The programs of one side's iterations, in order: each iteration's decode
/// step, then its prefill chunk.
struct SidePieces {
  std::vector<std::pair<std::string, const ProgramSet *>> links;
  /// Per iteration, its first link.
  std::vector<size_t> firstLink;
};

std::optional<SidePieces>
compileSide(PieceCompiler &compiler, unsigned side, const CompileOptions &base,
            const std::vector<WindowIteration> &iterations) {
  SidePieces pieces;
  for (size_t index = 0; index < iterations.size(); ++index) {
    const WindowIteration &iteration = iterations[index];
    pieces.firstLink.push_back(pieces.links.size());
    std::string name = "iter" + std::to_string(index);
    if (iteration.decodeSequences) {
      const ProgramSet *decode = compiler.compile(
          side, base, true, iteration.decodeSequences, iteration.decodeContext);
      if (!decode)
        return std::nullopt;
      pieces.links.push_back({name + ".decode", decode});
    }
    if (iteration.prefillTokens) {
      const ProgramSet *prefill =
          compiler.compile(side, base, false, iteration.prefillSequences,
                           iteration.prefillTokens);
      if (!prefill)
        return std::nullopt;
      pieces.links.push_back({name + ".prefill", prefill});
    }
  }
  return pieces;
}

bool isSameMesh(const Mesh &a, const Mesh &b) {
  if (a.getAxes().size() != b.getAxes().size())
    return false;
  for (unsigned axis = 0; axis < a.getAxes().size(); ++axis)
    if (a.getAxes()[axis].name != b.getAxes()[axis].name ||
        a.getDegree(axis) != b.getDegree(axis))
      return false;
  return true;
}

/// Of what a decode rank of each decode stage holds of a sequence's cache,
/// the share each prefill stage sends it: its layers among the decode
/// stage's, over the decode instance's replicas in the pair's stage (one
/// where both instances have one plan).
std::vector<std::vector<double>> getCacheShares(const ProgramSet &prefill,
                                                const ProgramSet &decode,
                                                const PairMesh &pair) {
  double replicas =
      double(pair.ranksPerStage) / double(pair.instanceRanksPerStage[1]);
  std::vector<std::vector<double>> shares(
      prefill.stages.size(), std::vector<double>(decode.stages.size()));
  for (size_t to = 0; to < decode.stages.size(); ++to) {
    const std::vector<unsigned> &held = decode.stages[to].layers;
    for (size_t from = 0; from < prefill.stages.size(); ++from) {
      size_t common = llvm::count_if(held, [&](unsigned layer) {
        return llvm::is_contained(prefill.stages[from].layers, layer);
      });
      if (common)
        shares[from][to] = double(common) / double(held.size()) / replicas;
    }
  }
  return shares;
}

/// Appends one side's links to `stages` (its pp stages); `addMessages`
/// gives each link its sends and receives (by link index, and one past the
/// last for a link of messages alone).
void chainSide(
    std::vector<StageProgram> &stages, const SidePieces &pieces,
    unsigned peerOffset, llvm::ArrayRef<AxisMask> axisMap, int32_t tagStride,
    int32_t &nextLink,
    llvm::function_ref<void(size_t link, unsigned stage, ChainLink &chainLink)>
        addMessages) {
  for (size_t index = 0; index <= pieces.links.size(); ++index)
    for (unsigned stage = 0; stage < stages.size(); ++stage) {
      ChainLink link;
      if (index < pieces.links.size()) {
        link.name = pieces.links[index].first;
        link.program = &pieces.links[index].second->stages[stage];
        link.tagOffset = nextLink * tagStride;
        link.peerOffset = peerOffset;
        link.axisMap = axisMap;
      } else {
        link.name = "kv";
      }
      addMessages(index, stage, link);
      appendChainLink(stages[stage], link);
      if (stage + 1 == stages.size() && index < pieces.links.size())
        ++nextLink;
    }
}

} // namespace

std::optional<ServingWindow>
stg::buildServingWindow(const ServingWindowPlan &plan,
                        const CompileOptions &instance,
                        const CompileOptions *decodeInstance,
                        const SystemSpec &system, DiagnosticEngine &diags) {
  if (plan.iterations.empty() ||
      (decodeInstance && plan.decodeIterations.empty())) {
    diags.error({}, "the serving run has no iterations for a window");
    return std::nullopt;
  }
  PieceCompiler compiler(diags);
  if (!compiler.inspect(instance))
    return std::nullopt;
  std::optional<SidePieces> first =
      compileSide(compiler, 0, instance, plan.iterations);
  if (!first)
    return std::nullopt;
  std::optional<SidePieces> second;
  if (decodeInstance) {
    second = compileSide(compiler, 1, *decodeInstance, plan.decodeIterations);
    if (!second)
      return std::nullopt;
  }

  // Each side's sizes compile to one plan; a pair shares one mesh.
  const ProgramSet &model = *first->links.front().second;
  const ProgramSet *decodeModel =
      second ? second->links.front().second : nullptr;
  for (const SidePieces *side : {&*first, second ? &*second : nullptr}) {
    if (!side)
      continue;
    const ProgramSet &sideModel = *side->links.front().second;
    for (const auto &[name, programs] : side->links)
      if (!isSameMesh(programs->mesh, sideModel.mesh) ||
          programs->pipelineAxis != sideModel.pipelineAxis) {
        diags.error({}, "the window's iterations compiled to different "
                        "meshes: " +
                            sideModel.mesh.describe() + " and " +
                            programs->mesh.describe());
        return std::nullopt;
      }
  }
  std::optional<PairMesh> pair;
  if (decodeModel) {
    llvm::Expected<PairMesh> built =
        buildPairMesh({&model.mesh, model.pipelineAxis},
                      {&decodeModel->mesh, decodeModel->pipelineAxis});
    if (!built) {
      diags.error({}, llvm::toString(built.takeError()));
      return std::nullopt;
    }
    pair = std::move(*built);
  }
  unsigned prefillStages = unsigned(model.stages.size());

  // Tags: each link's own range, then one per KV cache.
  size_t numLinks = first->links.size() + (second ? second->links.size() : 0);
  int32_t tagStride = compiler.maxTag + 1;
  if (double(tagStride) * double(numLinks) + double(plan.transfers.size()) >
      double(INT32_MAX)) {
    diags.error({}, "the window's messages need more tags than a trace has; "
                    "use a smaller --window");
    return std::nullopt;
  }
  int32_t kvTagBase = tagStride * int32_t(numLinks);
  int32_t nextLink = 0;

  ServingWindow window;
  window.plan = plan;
  ProgramSet &programs = window.programs;
  programs.mesh = pair ? pair->mesh : model.mesh;
  programs.pipelineAxis = pair ? int(pair->pipelineAxis) : model.pipelineAxis;
  programs.numLayers = model.numLayers;
  programs.pipelineSplit = model.pipelineSplit;
  programs.chunkLayers = model.chunkLayers;
  programs.schedule = model.schedule;
  std::vector<StageProgram> firstStages(prefillStages), secondStages;

  std::vector<std::vector<double>> shares;
  if (pair)
    shares = getCacheShares(model, *decodeModel, *pair);
  auto makeMessage = [&](ProgramNodeKind kind, size_t transfer, unsigned from,
                         unsigned to) {
    const WindowTransfer &moved = plan.transfers[transfer];
    ProgramNode node;
    node.kind = kind;
    node.name = "kv.request" + std::to_string(moved.request) +
                (kind == ProgramNodeKind::Send ? ".send" : ".recv");
    node.commBytes = int64_t(std::max(
        1.0, std::round(double(moved.bytesPerRank) * shares[from][to])));
    node.peerStage = kind == ProgramNodeKind::Send ? prefillStages + to : from;
    // The rank pair tells a cache's messages apart.
    node.tag = kvTagBase + int32_t(transfer);
    return node;
  };
  // A cache is sent beside the prefill iteration after the one it finished
  // in (or after the last), and received in the decode iteration that
  // waits for it (or after the last), by each pair of stages that share
  // layers.
  chainSide(firstStages, *first, 0,
            pair ? llvm::ArrayRef<AxisMask>(pair->axisMaps[0])
                 : llvm::ArrayRef<AxisMask>(),
            tagStride, nextLink,
            [&](size_t link, unsigned stage, ChainLink &chainLink) {
              for (size_t index = 0; index < plan.transfers.size(); ++index) {
                unsigned after = plan.transfers[index].afterPrefill + 1;
                size_t sendLink = after < first->firstLink.size()
                                      ? first->firstLink[after]
                                      : first->links.size();
                if (sendLink != link)
                  continue;
                for (unsigned to = 0; to < shares[stage].size(); ++to)
                  if (shares[stage][to] > 0)
                    chainLink.messages.push_back(
                        makeMessage(ProgramNodeKind::Send, index, stage, to));
              }
            });
  if (second) {
    secondStages.resize(decodeModel->stages.size());
    chainSide(secondStages, *second, prefillStages, pair->axisMaps[1],
              tagStride, nextLink,
              [&](size_t link, unsigned stage, ChainLink &chainLink) {
                for (size_t index = 0; index < plan.transfers.size(); ++index) {
                  std::optional<unsigned> before =
                      plan.transfers[index].beforeDecode;
                  size_t recvLink = before ? second->firstLink[*before]
                                           : second->links.size();
                  if (recvLink != link)
                    continue;
                  for (unsigned from = 0; from < prefillStages; ++from)
                    if (shares[from][stage] > 0)
                      chainLink.messages.push_back(makeMessage(
                          ProgramNodeKind::Recv, index, from, stage));
                }
                chainLink.waitForReceives = true;
              });
    programs.chunkLayers.insert(programs.chunkLayers.end(),
                                decodeModel->chunkLayers.begin(),
                                decodeModel->chunkLayers.end());
    AxisMask pipelineMask = AxisMask(1) << pair->pipelineAxis;
    for (std::vector<StageProgram> *side : {&firstStages, &secondStages})
      for (const StageProgram &stage : *side)
        for (const ProgramNode &node : stage.nodes)
          if (node.kind == ProgramNodeKind::Collective &&
              (node.group & pipelineMask)) {
            diags.error({}, "a collective over the pipeline axis would span "
                            "both instances of the window");
            return std::nullopt;
          }
  }
  for (std::vector<StageProgram> *side : {&firstStages, &secondStages})
    for (StageProgram &stage : *side) {
      if (stage.nodes.size() > MaxStageNodes) {
        diags.error({}, "the window's stage programs have more than " +
                            llvm::Twine(MaxStageNodes) +
                            " nodes; use a smaller --window");
        return std::nullopt;
      }
      stage.stage = unsigned(programs.stages.size());
      programs.stages.push_back(std::move(stage));
    }
  applyDeviceModel(programs, system.device, nullptr);
  window.pair = std::move(pair);
  window.module = std::move(compiler.firstModule);
  return window;
}
