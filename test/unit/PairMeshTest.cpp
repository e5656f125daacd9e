//===- PairMeshTest.cpp - The mesh a prefill and a decode instance share --===//
//
// Two instances of one plan keep their axes and add their stages; two plans
// cut a stage where either's groups end, each instance axis becoming the
// pieces it spans; groups that do not nest, and a pipeline axis inside the
// others, are refused with the reason.
//
//===----------------------------------------------------------------------===//

#include "stg/Serve/PairMesh.h"

#include "gtest/gtest.h"

using namespace stg;

namespace {

/// Serving's mesh order: tp, cp, ep, dp, pp (the last the pipeline axis).
Mesh makeMesh(unsigned tp, unsigned ep, unsigned dp, unsigned pp) {
  return Mesh({{"tp", tp}, {"cp", 1}, {"ep", ep}, {"dp", dp}, {"pp", pp}});
}

} // namespace

TEST(PairMeshTest, OnePlanAddsTheStages) {
  Mesh prefill = makeMesh(2, 1, 1, 1), decode = makeMesh(2, 1, 1, 2);
  llvm::Expected<PairMesh> pair = buildPairMesh({&prefill, 4}, {&decode, 4});
  ASSERT_TRUE(bool(pair)) << llvm::toString(pair.takeError());
  EXPECT_EQ(pair->mesh.describe(), "tp=2, pp=3");
  EXPECT_EQ(pair->pipelineAxis, 4u);
  EXPECT_EQ(pair->axisMaps[1], (std::vector<AxisMask>{1, 2, 4, 8, 16}));
  EXPECT_EQ(pair->instanceStages[0], 1u);
  EXPECT_EQ(pair->instanceStages[1], 2u);
}

TEST(PairMeshTest, TwoPlansCutAStageWhereEitherGroupEnds) {
  // tp 2 prefill beside tp 8 decode: pieces of 2 and 4.
  Mesh prefill = makeMesh(2, 1, 1, 1), decode = makeMesh(8, 1, 1, 1);
  llvm::Expected<PairMesh> pair = buildPairMesh({&prefill, 4}, {&decode, 4});
  ASSERT_TRUE(bool(pair)) << llvm::toString(pair.takeError());
  EXPECT_EQ(pair->mesh.describe(), "tp.0=2, tp.1=4, pp=2");
  EXPECT_EQ(pair->pipelineAxis, 2u);
  EXPECT_EQ(pair->axisMaps[0], (std::vector<AxisMask>{0b001, 0, 0, 0, 0b100}));
  EXPECT_EQ(pair->axisMaps[1], (std::vector<AxisMask>{0b011, 0, 0, 0, 0b100}));
  EXPECT_EQ(pair->ranksPerStage, 8u);
  EXPECT_EQ(pair->instanceRanksPerStage[0], 2u);
  EXPECT_EQ(mapAxisMask(AxisMask(1), pair->axisMaps[1]), AxisMask(0b011));

  // tp 4 prefill beside tp 2 x ep 2 decode: the second piece is the one's
  // tp and the other's ep.
  Mesh moe = makeMesh(2, 2, 1, 1), dense = makeMesh(4, 1, 1, 1);
  pair = buildPairMesh({&dense, 4}, {&moe, 4});
  ASSERT_TRUE(bool(pair)) << llvm::toString(pair.takeError());
  EXPECT_EQ(pair->mesh.describe(), "tp=2, tp/ep=2, pp=2");
  EXPECT_EQ(pair->axisMaps[0][0], AxisMask(0b011));
  EXPECT_EQ(pair->axisMaps[1][0], AxisMask(0b001));
  EXPECT_EQ(pair->axisMaps[1][2], AxisMask(0b010));

  llvm::json::Array described = describePairMesh(*pair);
  ASSERT_EQ(described.size(), 2u);
  const llvm::json::Object *decodeInstance = described[1].getAsObject();
  ASSERT_TRUE(decodeInstance);
  EXPECT_EQ(decodeInstance->getInteger("first_stage").getValueOr(-1), 1);
  EXPECT_EQ(decodeInstance->getInteger("replicas").getValueOr(-1), 1);
}

TEST(PairMeshTest, RefusesGroupsThatDoNotNest) {
  Mesh prefill = makeMesh(2, 1, 3, 1), decode = makeMesh(4, 1, 1, 1);
  llvm::Expected<PairMesh> pair = buildPairMesh({&prefill, 4}, {&decode, 4});
  ASSERT_FALSE(bool(pair));
  EXPECT_NE(llvm::toString(pair.takeError()).find("do not nest"),
            std::string::npos);
}

TEST(PairMeshTest, RefusesAPipelineAxisInsideTheOthers) {
  Mesh prefill({{"pp", 2}, {"tp", 2}}), decode = makeMesh(4, 1, 1, 1);
  llvm::Expected<PairMesh> pair = buildPairMesh({&prefill, 0}, {&decode, 4});
  ASSERT_FALSE(bool(pair));
  EXPECT_NE(llvm::toString(pair.takeError()).find("pp last in --rank-order"),
            std::string::npos);
  // A mesh without a pipeline axis has no stages to add.
  Mesh flat({{"tp", 4}});
  pair = buildPairMesh({&flat, -1}, {&decode, 4});
  ASSERT_FALSE(bool(pair));
  EXPECT_NE(llvm::toString(pair.takeError()).find("keep pp in --rank-order"),
            std::string::npos);
}
