//===- MeshTest.cpp - Ranks, coordinates and communicator groups ----------===//

#include "stg/Instantiate/Mesh.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include "gtest/gtest.h"

using namespace stg;

namespace {

/// tp=2 fastest, then dp=3, then pp=2: 12 ranks.
Mesh makeMesh() { return Mesh({{"tp", 2}, {"dp", 3}, {"pp", 2}}); }

TEST(MeshTest, RanksAreMixedRadixNumbersFastestAxisFirst) {
  Mesh mesh = makeMesh();
  EXPECT_EQ(mesh.getNumRanks(), 12u);
  // Rank 9 = tp 1 + 2 * (dp 1 + 3 * pp 1).
  EXPECT_EQ(mesh.getCoordinate(9, 0), 1u);
  EXPECT_EQ(mesh.getCoordinate(9, 1), 1u);
  EXPECT_EQ(mesh.getCoordinate(9, 2), 1u);
  EXPECT_EQ(mesh.withCoordinate(9, 2, 0), 3u); // The same rank of stage 0.
  EXPECT_EQ(mesh.findAxis("dp"), 1);
  EXPECT_EQ(mesh.findAxis("ep"), -1);
  EXPECT_EQ(mesh.describe(), "tp=2, dp=3, pp=2");
  EXPECT_EQ(mesh.describeMask(0b011), "(tp, dp)");
}

TEST(MeshTest, GroupMembersAgreeOnTheOtherAxes) {
  Mesh mesh = makeMesh();
  llvm::SmallVector<unsigned, 8> members;
  mesh.getGroupMembers(9, 0b010, members); // dp group of rank 9
  EXPECT_EQ(llvm::ArrayRef<unsigned>(members),
            llvm::ArrayRef<unsigned>({7, 9, 11}));
  mesh.getGroupMembers(9, 0b011, members); // (tp, dp) group
  EXPECT_EQ(llvm::ArrayRef<unsigned>(members),
            llvm::ArrayRef<unsigned>({6, 7, 8, 9, 10, 11}));
  EXPECT_EQ(mesh.getGroupSize(0b011), 6u);
}

TEST(MeshTest, GroupIdsAreArithmeticAndMatchTheGroupFile) {
  Mesh mesh = makeMesh();
  // Masks in any order and repeated; a one-rank mask has no groups.
  CommGroups groups(mesh, {0b010, 0b001, 0b010, 0});
  EXPECT_EQ(groups.getMasks().size(), 2u);
  // tp groups first (mask 1): 6 of them, ids 1-6; then dp groups, 7-10.
  EXPECT_EQ(groups.getNumGroups(), 10u);
  EXPECT_EQ(groups.getGroupId(0, 0b001), 1u);
  EXPECT_EQ(groups.getGroupId(9, 0b001), 5u);
  EXPECT_EQ(groups.getGroupId(9, 0b010), 7u + 3u);
  std::string text;
  llvm::raw_string_ostream os(text);
  groups.writeJson(os);
  llvm::Expected<llvm::json::Value> parsed = llvm::json::parse(os.str());
  ASSERT_TRUE(bool(parsed)) << llvm::toString(parsed.takeError());
  const llvm::json::Object &file = *parsed->getAsObject();
  EXPECT_EQ(file.size(), 10u);
  auto membersOf = [&](unsigned id) {
    std::vector<int64_t> members;
    for (const llvm::json::Value &rank : *file.getArray(std::to_string(id)))
      members.push_back(*rank.getAsInteger());
    return members;
  };
  EXPECT_EQ(membersOf(5), (std::vector<int64_t>{8, 9}));
  EXPECT_EQ(membersOf(10), (std::vector<int64_t>{7, 9, 11}));
  // Every rank's id names a group the file lists it in.
  for (unsigned rank = 0; rank < mesh.getNumRanks(); ++rank)
    for (AxisMask mask : groups.getMasks()) {
      std::vector<int64_t> members =
          membersOf(groups.getGroupId(rank, mask));
      EXPECT_TRUE(llvm::is_contained(members, int64_t(rank)))
          << "rank " << rank << ", mask " << mask;
    }
}

} // namespace
