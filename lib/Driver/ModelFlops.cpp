//===- ModelFlops.cpp - The work of a step in the model's terms -----------===//

#include "stg/Driver/ModelFlops.h"

#include "llvm/Support/raw_ostream.h"

#include <algorithm>

using namespace stg;

CompileOptions stg::getReferenceOptions(const CompileOptions &plan,
                                        const CompiledModel &compiled) {
  const Module &planModule = *compiled.module;
  const ProgramSet &programs = compiled.programs;
  CompileOptions reference = plan;
  reference.degrees.clear();
  // One GPU per pipeline stage: the FLOPs are the same as on one GPU, and
  // a stage holds no more layers than the plan's (a model too deep for one
  // stage's program compiles).
  std::string pipeline = InstantiateOptions().pipelineAxis;
  unsigned stages = programs.stages.size();
  for (const std::unique_ptr<Axis> &axis : planModule.getAxes())
    if (!axis->alias)
      reference.degrees.push_back(
          {axis->name, axis->name == pipeline ? stages : 1});
  if (!planModule.lookupAxis(pipeline) && stages > 1)
    reference.degrees.push_back({pipeline, stages});
  // `--set tp=8` sets a degree too; the reference keeps only dims and
  // options.
  llvm::erase_if(reference.overrides, [&](const auto &assignment) {
    return planModule.lookupAxis(assignment.first) != nullptr;
  });
  reference.recompute = "none";
  reference.distributedOptimizer = false;
  reference.fsdp = false;
  reference.microbatches = 1;
  reference.virtualStages = 1;
  reference.schedule = PipelineSchedule::OneFOneB; // One chunk a stage.
  // The plan's split, one chunk a stage: each stage keeps its layers (the
  // embedding and loss counted, or first and last stage counts, divide
  // alike without interleaving; given chunk counts add up by stage).
  std::vector<unsigned> &chunkLayers = reference.pipelineSplit.chunkLayers;
  if (!chunkLayers.empty() && stages && chunkLayers.size() > stages) {
    std::vector<unsigned> stageLayers(stages);
    for (size_t chunk = 0; chunk < chunkLayers.size(); ++chunk)
      stageLayers[getChunkStage(getChunkPlacement(plan.schedule), chunk,
                                stages)] += chunkLayers[chunk];
    chunkLayers = std::move(stageLayers);
  }
  reference.gradientBucketMB = 0;
  reference.foldMicrobatches = false;
  return reference;
}

double stg::countProgramFlops(const ProgramSet &programs, bool withOptimizer) {
  double total = 0;
  unsigned stages = std::max<size_t>(1, programs.stages.size());
  double ranksPerStage = double(programs.mesh.getNumRanks()) / stages;
  for (const StageProgram &program : programs.stages) {
    double stage = 0;
    forEachExecutedNode(program, [&](const ProgramNode &node) {
      if (node.kind == ProgramNodeKind::Compute &&
          (withOptimizer || node.phase != Phase::Optimizer))
        stage += double(node.numOps);
    });
    total += stage * ranksPerStage;
  }
  return total;
}

std::optional<double> stg::countStepSequences(const Module &module,
                                              const ProgramSet &programs) {
  std::optional<long long> batch = module.getDimValue("B");
  if (!batch || *batch <= 0)
    return std::nullopt;
  return double(*batch) * programs.numMicrobatches;
}

std::optional<double> stg::countStepTokens(const Module &module,
                                           const ProgramSet &programs) {
  std::optional<double> sequences = countStepSequences(module, programs);
  std::optional<long long> length = module.getDimValue("S");
  if (!sequences || !length || *length <= 0)
    return std::nullopt;
  return *sequences * double(*length);
}

llvm::Expected<double> stg::countModelFlops(const CompileOptions &plan,
                                            const CompiledModel &compiled) {
  CompileOptions options = getReferenceOptions(plan, compiled);
  std::string messages;
  llvm::raw_string_ostream os(messages);
  DiagnosticEngine diags(os);
  diags.setProgramName("stagec");
  std::optional<CompiledModel> reference = compileModel(options, diags);
  if (!reference)
    return llvm::createStringError(
        std::errc::invalid_argument,
        "the model FLOPs (the step on one GPU, without recomputation): %s",
        llvm::StringRef(os.str()).split('\n').first.str().c_str());
  double flops = countProgramFlops(reference->programs, false);
  // The reference runs one micro-batch of its own B (B = MB when B grows
  // with the data-parallel degrees); the plan runs its B per micro-batch.
  std::optional<double> planSequences =
      countStepSequences(*compiled.module, compiled.programs);
  std::optional<double> referenceSequences =
      countStepSequences(*reference->module, reference->programs);
  double scale = planSequences && referenceSequences
                     ? *planSequences / *referenceSequences
                     : double(compiled.programs.numMicrobatches);
  return flops * scale;
}
