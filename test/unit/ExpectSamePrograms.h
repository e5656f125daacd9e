//===- ExpectSamePrograms.h - Two program sets, field by field --*- C++ -*-===//
//
// The plan search builds a structure's programs once and re-prices them
// (repriceProgramSet) or moves them to another micro-batch count
// (retargetMicrobatches): each must give, field for field, what building
// that plan gives.
//
//===----------------------------------------------------------------------===//

#ifndef STG_TEST_UNIT_EXPECTSAMEPROGRAMS_H
#define STG_TEST_UNIT_EXPECTSAMEPROGRAMS_H

#include "stg/Instantiate/Program.h"

#include "gtest/gtest.h"

#include <tuple>

namespace stg {

inline void expectSameNode(const ProgramNode &a, const ProgramNode &b) {
  EXPECT_EQ(a.kind, b.kind);
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.opType, b.opType);
  EXPECT_EQ(a.numOps, b.numOps);
  EXPECT_EQ(a.tensorBytes, b.tensorBytes);
  EXPECT_EQ(a.commBytes, b.commBytes);
  EXPECT_EQ(a.commType, b.commType);
  EXPECT_EQ(a.group, b.group);
  EXPECT_EQ(a.peerStage, b.peerStage);
  EXPECT_EQ(a.tag, b.tag);
  EXPECT_EQ(a.durationMicros, b.durationMicros);
  EXPECT_EQ(std::tie(a.gemm.batch, a.gemm.m, a.gemm.n, a.gemm.k),
            std::tie(b.gemm.batch, b.gemm.m, b.gemm.n, b.gemm.k));
  EXPECT_EQ(a.phase, b.phase);
  EXPECT_EQ(a.layer, b.layer);
  EXPECT_EQ(a.microbatch, b.microbatch);
  EXPECT_EQ(a.dataDeps, b.dataDeps);
  EXPECT_EQ(a.ctrlDeps, b.ctrlDeps);
}

inline void expectSameSet(const ProgramSet &a, const ProgramSet &b) {
  ASSERT_EQ(a.mesh.getAxes().size(), b.mesh.getAxes().size());
  for (size_t axis = 0; axis < a.mesh.getAxes().size(); ++axis) {
    EXPECT_EQ(a.mesh.getAxes()[axis].name, b.mesh.getAxes()[axis].name);
    EXPECT_EQ(a.mesh.getAxes()[axis].degree, b.mesh.getAxes()[axis].degree);
  }
  EXPECT_EQ(a.pipelineAxis, b.pipelineAxis);
  EXPECT_EQ(a.numMicrobatches, b.numMicrobatches);
  EXPECT_EQ(a.numVirtualStages, b.numVirtualStages);
  EXPECT_EQ(a.training, b.training);
  ASSERT_EQ(a.stages.size(), b.stages.size());
  for (size_t stage = 0; stage < a.stages.size(); ++stage) {
    const StageProgram &x = a.stages[stage], &y = b.stages[stage];
    ASSERT_EQ(x.nodes.size(), y.nodes.size()) << "stage " << stage;
    for (size_t id = 0; id < x.nodes.size(); ++id) {
      SCOPED_TRACE("stage " + std::to_string(stage) + " node " +
                   std::to_string(id));
      expectSameNode(x.nodes[id], y.nodes[id]);
    }
    EXPECT_TRUE(x.schedule == y.schedule) << "stage " << stage;
    ASSERT_EQ(x.steps.size(), y.steps.size());
    for (size_t step = 0; step < x.steps.size(); ++step)
      EXPECT_EQ(std::tie(x.steps[step].begin, x.steps[step].end,
                         x.steps[step].tagOffset, x.steps[step].fold),
                std::tie(y.steps[step].begin, y.steps[step].end,
                         y.steps[step].tagOffset, y.steps[step].fold));
    ASSERT_EQ(x.folds.size(), y.folds.size());
    for (size_t fold = 0; fold < x.folds.size(); ++fold) {
      const LayerFold &f = x.folds[fold], &g = y.folds[fold];
      EXPECT_EQ(std::make_tuple(f.begin, f.end, f.copies, f.carried.size()),
                std::make_tuple(g.begin, g.end, g.copies, g.carried.size()));
    }
    EXPECT_EQ(x.memory.weights, y.memory.weights);
    EXPECT_EQ(x.memory.gradients, y.memory.gradients);
    EXPECT_EQ(x.memory.optimizer, y.memory.optimizer);
    EXPECT_EQ(x.memory.activations, y.memory.activations);
    EXPECT_EQ(x.memory.state, y.memory.state);
    EXPECT_EQ(x.memory.inFlightMicrobatches, y.memory.inFlightMicrobatches);
  }
}

} // namespace stg

#endif // STG_TEST_UNIT_EXPECTSAMEPROGRAMS_H
