//===- TraceToolsTest.cpp - stage-et stats and diff -----------------------===//
//
// stats sums the fixture's traces to the figures they were built with;
// diff finds nothing between identical traces (plain against gzipped
// included) and lists each added, removed and changed node, each changed
// field and attribute, a new node order and files missing on one side.
//
//===----------------------------------------------------------------------===//

#include "TraceFixtures.h"

#include "stg/Trace/TraceDiff.h"
#include "stg/Trace/TraceStats.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include "ScratchDirectoryTest.h"
#include "gtest/gtest.h"

using namespace stg;
using namespace stg::testing;

namespace {

class TraceToolsTest : public ScratchDirectoryTest {
protected:
  /// Writes `set` into the subdirectory `name` and returns its path.
  std::string write(const TraceSetFixture &set, llvm::StringRef name,
                    bool gzip = false) {
    llvm::SmallString<128> subdir(dir);
    llvm::sys::path::append(subdir, name);
    EXPECT_FALSE(llvm::sys::fs::create_directories(subdir));
    if (llvm::Error error = set.write(subdir, gzip))
      ADD_FAILURE() << llvm::toString(std::move(error));
    return std::string(subdir.str());
  }

  static std::string file(llvm::StringRef subdir, llvm::StringRef name) {
    llvm::SmallString<128> path(subdir);
    llvm::sys::path::append(path, name);
    return std::string(path.str());
  }

  TraceDiff diff(const TraceSetFixture &before, const TraceSetFixture &after) {
    std::string a = write(before, "a"), b = write(after, "b");
    auto result = diffTraceFiles(file(a, "toy.0.et"), file(b, "toy.0.et"));
    if (!result) {
      ADD_FAILURE() << llvm::toString(result.takeError());
      return {};
    }
    return *result;
  }

};

TEST_F(TraceToolsTest, StatsSumTheFixture) {
  std::string traces = write(makeGoodTraceSet(), "set");
  auto stats = computeTraceStats(file(traces, "toy.0.et"));
  ASSERT_TRUE(bool(stats)) << llvm::toString(stats.takeError());
  EXPECT_EQ(stats->numNodes, 7u);
  EXPECT_EQ(stats->nodesByType["COMP_NODE"], 2u);
  EXPECT_EQ(stats->nodesByType["COMM_COLL_NODE"], 4u);
  EXPECT_EQ(stats->numOps, 3000u);
  EXPECT_EQ(stats->tensorBytes, 768u);
  EXPECT_EQ(stats->collectivesByType["ALL_REDUCE"].bytes, 1024u);
  EXPECT_EQ(stats->collectivesByGroup["1"].count, 2u);
  EXPECT_EQ(stats->collectivesByGroup["1"].bytes, 1536u);
  EXPECT_EQ(stats->collectivesByGroup["3"].bytes, 2112u);
  EXPECT_EQ(stats->sends.count, 1u);
  EXPECT_EQ(stats->sends.bytes, 128u);
  EXPECT_EQ(stats->recvs.count, 0u);

  auto other = computeTraceStats(file(traces, "toy.1.et"));
  ASSERT_TRUE(bool(other));
  stats->merge(*other);
  EXPECT_EQ(stats->numFiles, 2u);
  EXPECT_EQ(stats->numNodes, 14u);
  EXPECT_EQ(stats->recvs.bytes, 128u);
  EXPECT_EQ(stats->collectivesByGroup["4"].bytes, 2112u);
}

TEST_F(TraceToolsTest, StatsOfACorruptFileIsAnError) {
  std::string traces = file(dir, "set");
  ASSERT_FALSE(writeTraceFixture("truncated", traces).operator bool());
  auto stats = computeTraceStats(file(traces, "toy.1.et"));
  ASSERT_FALSE(bool(stats));
  EXPECT_NE(llvm::toString(stats.takeError()).find("truncated file"),
            std::string::npos);
}

TEST_F(TraceToolsTest, IdenticalTracesHaveNoDiff) {
  std::string plain = write(makeGoodTraceSet(), "plain");
  std::string gzip = write(makeGoodTraceSet(), "gzip", /*gzip=*/true);
  auto result =
      diffTraceFiles(file(plain, "toy.0.et"), file(gzip, "toy.0.et.gz"));
  ASSERT_TRUE(bool(result)) << llvm::toString(result.takeError());
  EXPECT_TRUE(result->isEmpty());
}

TEST_F(TraceToolsTest, DiffListsChangedFieldsAndAttributes) {
  TraceSetFixture after = makeGoodTraceSet();
  ChakraProtoMsg::Node &node = after.node(0, 2);
  node.set_name("layer.0.backward");
  node.add_ctrl_deps(0);
  *node.mutable_attr(1) = chakra::numOpsAttr(5);
  TraceDiff result = diff(makeGoodTraceSet(), after);
  ASSERT_EQ(result.changed.size(), 1u);
  EXPECT_EQ(result.changed[0].node.id, 2u);
  EXPECT_EQ(
      result.changed[0].changes,
      (std::vector<std::string>{"name: \"layer.0.bwd\" -> \"layer.0.backward\"",
                                "ctrl_deps: [] -> [0]",
                                "attr num_ops: int64 2000 -> int64 5"}));
  EXPECT_TRUE(result.added.empty());
  EXPECT_TRUE(result.removed.empty());
  EXPECT_FALSE(result.orderChange);
}

TEST_F(TraceToolsTest, DiffListsAddedRemovedAndReordered) {
  TraceSetFixture after = makeGoodTraceSet();
  std::vector<ChakraProtoMsg::Node> &nodes = after.ranks[0];
  nodes.erase(nodes.begin() + 6);
  nodes.push_back(chakra::makeCompNode(9, "extra", 1, 1, "elementwise"));
  std::swap(nodes[0], nodes[1]);
  TraceDiff result = diff(makeGoodTraceSet(), after);
  ASSERT_EQ(result.removed.size(), 1u);
  EXPECT_EQ(result.removed[0].id, 6u);
  EXPECT_EQ(result.removed[0].type, "COMM_SEND_NODE");
  ASSERT_EQ(result.added.size(), 1u);
  EXPECT_EQ(result.added[0].name, "extra");
  ASSERT_TRUE(result.orderChange);
  EXPECT_NE(result.orderChange->find("node 0 before, node 1 after"),
            std::string::npos);
}

TEST_F(TraceToolsTest, DiffOfDirectories) {
  std::string a = write(makeGoodTraceSet(), "a");
  std::string b = write(makeGoodTraceSet(), "b");
  std::string text;
  llvm::raw_string_ostream os(text);
  auto differ = diffTracePaths(a, b, os);
  ASSERT_TRUE(bool(differ));
  EXPECT_FALSE(*differ);
  EXPECT_EQ(os.str(), "");

  ASSERT_FALSE(llvm::sys::fs::remove(file(b, "toy.3.et")));
  differ = diffTracePaths(a, b, os);
  ASSERT_TRUE(bool(differ));
  EXPECT_TRUE(*differ);
  EXPECT_EQ(os.str(), "only in " + a + ": toy.3.et\n");

  auto mixed = diffTracePaths(a, file(b, "toy.0.et"), os);
  EXPECT_FALSE(bool(mixed));
  llvm::consumeError(mixed.takeError());
}

} // namespace
