//===- TemplatePlan.h - A plan of a shipped template, for tests -*- C++ -*-===//
//
// Tests that compile the shipped templates under many plans (folded against
// flat programs, moved against built ones) name each plan this way.
//
//===----------------------------------------------------------------------===//

#ifndef STG_TEST_UNIT_TEMPLATEPLAN_H
#define STG_TEST_UNIT_TEMPLATEPLAN_H

#include "stg/Driver/Compile.h"

#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace stg {

struct TemplatePlan {
  const char *model;
  std::vector<std::pair<std::string, unsigned>> degrees;
  unsigned microbatches;
  unsigned virtualStages = 1;
  std::string recompute = "none";
  std::string mode = "train";
  bool fsdp = false;
  PipelineSchedule schedule = PipelineSchedule::OneFOneB;
  unsigned layers = 8;
  bool distributedOptimizer = false;
  bool overlapGradientReduction = true;
  /// `true` or `false` to set the model's option; empty leaves it.
  std::string sequenceParallel = "";
  PipelineSplit pipelineSplit;
};

/// A failing plan's name in the test's output.
inline void PrintTo(const TemplatePlan &plan, std::ostream *os) {
  *os << plan.model << " L=" << plan.layers;
  for (const auto &[axis, degree] : plan.degrees)
    *os << " " << axis << degree;
  *os << " mb" << plan.microbatches << " v" << plan.virtualStages << " "
      << plan.recompute << " " << plan.mode << (plan.fsdp ? " fsdp" : "")
      << (plan.distributedOptimizer ? " dist-opt" : "");
  const PipelineSplit &split = plan.pipelineSplit;
  if (split.accountForEmbedding)
    *os << " embedding-counted";
  if (split.accountForLoss)
    *os << " loss-counted";
  if (split.firstStageLayers)
    *os << " first" << *split.firstStageLayers;
  if (split.lastStageLayers)
    *os << " last" << *split.lastStageLayers;
}

/// The plan's options, sequences of 1024 tokens, unfolded.
inline CompileOptions getCompileOptions(const TemplatePlan &plan) {
  CompileOptions options;
  options.input = std::string(STG_SOURCE_TEMPLATES_DIR) + "/" + plan.model;
  options.degrees = plan.degrees;
  options.microbatches = plan.microbatches;
  options.virtualStages = plan.virtualStages;
  options.recompute = plan.recompute;
  options.mode = plan.mode;
  options.fsdp = plan.fsdp;
  options.schedule = plan.schedule;
  options.distributedOptimizer = plan.distributedOptimizer;
  options.overlapGradientReduction = plan.overlapGradientReduction;
  options.pipelineSplit = plan.pipelineSplit;
  options.overrides = {{"L", std::to_string(plan.layers)}, {"S", "1024"}};
  if (!plan.sequenceParallel.empty())
    options.overrides.push_back({"sequence_parallel", plan.sequenceParallel});
  return options;
}

} // namespace stg

#endif // STG_TEST_UNIT_TEMPLATEPLAN_H
