//===- StageSummary.cpp - What each stage's program computes and moves ----===//
//
// The totals the report and the manifest print per stage (Manifest.h):
// FLOPs, bytes, collective and pipeline traffic, from one stage's program.
//
//===----------------------------------------------------------------------===//

#include "stg/Emit/Manifest.h"

#include "RankFormats.h"

using namespace stg;

std::vector<StageSummary> stg::summarize(const ProgramSet &programs) {
  std::vector<StageSummary> summaries;
  unsigned numStages = programs.stages.size();
  for (const StageProgram &program : programs.stages) {
    StageSummary summary;
    summary.stage = program.stage;
    summary.numRanks = programs.mesh.getNumRanks() / numStages;
    summary.layers = program.layers;
    for (const ProgramNode &node : program.nodes) {
      ++summary.nodesByType[ChakraProtoMsg::NodeType_Name(
          getChakraNodeType(node.kind))];
      switch (node.kind) {
      case ProgramNodeKind::Compute:
        summary.flops += node.numOps;
        summary.tensorBytes += node.tensorBytes;
        summary.computeMicros += node.durationMicros;
        break;
      case ProgramNodeKind::Collective:
        summary.commBytes[getCollectiveName(node.commType).str() +
                          " over " +
                          programs.mesh.describeMask(node.group)] +=
            node.commBytes;
        break;
      case ProgramNodeKind::Send:
        summary.sendBytes += node.commBytes;
        break;
      case ProgramNodeKind::Recv:
        summary.recvBytes += node.commBytes;
        break;
      }
    }
    summaries.push_back(std::move(summary));
  }
  return summaries;
}
