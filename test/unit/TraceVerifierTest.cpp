//===- TraceVerifierTest.cpp - stage-et verify's checks -------------------===//
//
// The good four-rank set of test/fixtures/TraceFixtures.h verifies, plain
// and gzipped; each flaw there, and each damaged file, makes verification
// fail with its own kind of problem, at the right file and node, with the
// message the report prints. Also: the communicator-group file (missing,
// given explicitly), missing ranks, and the report's per-kind limit.
//
//===----------------------------------------------------------------------===//

#include "TraceFixtures.h"

#include "stg/Trace/TraceVerifier.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include "ScratchDirectoryTest.h"
#include "gtest/gtest.h"

using namespace stg;
using namespace stg::testing;

namespace {

class TraceVerifierTest : public ScratchDirectoryTest {
protected:
  TraceVerifyReport verify(const TraceSetFixture &set, bool gzip = false,
                           const TraceVerifyOptions &options = {}) {
    if (llvm::Error error = set.write(dir, gzip))
      ADD_FAILURE() << llvm::toString(std::move(error));
    return verifyTraceDirectory(dir, options);
  }

};

std::string print(const TraceVerifyReport &report) {
  std::string text;
  llvm::raw_string_ostream os(text);
  report.print(os);
  return os.str();
}

/// The first kept problem of `kind` whose message contains `text`.
const TraceProblem *findProblem(const TraceVerifyReport &report,
                                TraceProblemKind kind, llvm::StringRef text) {
  for (const TraceProblem &problem : report.getKeptProblems())
    if (problem.kind == kind && llvm::StringRef(problem.message).contains(text))
      return &problem;
  return nullptr;
}

TEST_F(TraceVerifierTest, GoodSetVerifies) {
  TraceVerifyReport report = verify(makeGoodTraceSet());
  EXPECT_TRUE(report.succeeded()) << print(report);
  EXPECT_EQ(report.numFiles, 4u);
  EXPECT_EQ(report.numNodes, 28u);
  EXPECT_EQ(report.numGroups, 4u);
  EXPECT_EQ(print(report), "verified 4 files, 28 nodes, 4 groups\n");
}

TEST_F(TraceVerifierTest, GzippedSetVerifies) {
  TraceVerifyReport report = verify(makeGoodTraceSet(), /*gzip=*/true);
  EXPECT_TRUE(report.succeeded()) << print(report);
  EXPECT_EQ(report.numFiles, 4u);
}

/// A flaw of TraceFixtures.h and the problem it must cause.
struct FlawCase {
  const char *flaw;
  TraceProblemKind kind;
  const char *file;
  std::optional<uint64_t> node;
  const char *message;
};

std::ostream &operator<<(std::ostream &os, const FlawCase &flawCase) {
  return os << flawCase.flaw;
}

class TraceFlawTest : public TraceVerifierTest,
                      public ::testing::WithParamInterface<FlawCase> {};

TEST_P(TraceFlawTest, IsReportedWhereItIs) {
  const FlawCase &flawCase = GetParam();
  TraceSetFixture set = makeGoodTraceSet();
  ASSERT_TRUE(applyTraceFlaw(set, flawCase.flaw));
  TraceVerifyReport report = verify(set);
  EXPECT_FALSE(report.succeeded());
  const TraceProblem *problem =
      findProblem(report, flawCase.kind, flawCase.message);
  ASSERT_TRUE(problem) << "expected ["
                       << getTraceProblemKindName(flawCase.kind).str() << "] "
                       << flawCase.message << ", got:\n"
                       << print(report);
  EXPECT_EQ(problem->file, flawCase.file);
  EXPECT_EQ(problem->nodeId, flawCase.node);
}

const FlawCase flawCases[] = {
    {"duplicate-id", TraceProblemKind::DuplicateId, "toy.0.et", 1,
     "id 1 is already used by the node at position 1"},
    {"dangling-dep", TraceProblemKind::DanglingDep, "toy.0.et", 2,
     "depends on id 99, which no node of the file has"},
    {"cycle", TraceProblemKind::TopologicalOrder, "toy.0.et", 0,
     "dependency cycle: 0 -> 2 -> 1 -> 0"},
    {"out-of-order", TraceProblemKind::TopologicalOrder, "toy.0.et", 3,
     "depends on node 2, which is written later (at position 3)"},
    {"missing-attr", TraceProblemKind::Attribute, "toy.0.et", 0,
     "missing attribute 'tensor_size' (uint64)"},
    {"wrong-attr-type", TraceProblemKind::Attribute, "toy.0.et", 0,
     "attribute 'num_ops' is uint64 1000, expected int64"},
    {"negative-num-ops", TraceProblemKind::Attribute, "toy.0.et", 0,
     "attribute 'num_ops' is negative: -5"},
    {"float-attr", TraceProblemKind::Attribute, "toy.0.et", 0,
     "numeric attributes must be integers"},
    {"cpu-op", TraceProblemKind::Attribute, "toy.0.et", 1,
     "is_cpu_op is true on a COMM_COLL_NODE"},
    {"broadcast", TraceProblemKind::Attribute, "toy.0.et", 1,
     "comm_type BROADCAST is not one of ALL_REDUCE"},
    {"unknown-group", TraceProblemKind::CommGroups, "toy.0.et", 1,
     "pg_name '9' is not a group of the communicator-group file"},
    {"not-member", TraceProblemKind::CommGroups, "toy.0.et", 4,
     "rank 0 is not a member of group '4'"},
    {"one-rank-group", TraceProblemKind::CommGroups, "", std::nullopt,
     "group '5' has 1 member(s): a group needs at least 2 ranks"},
    {"mismatched-collectives", TraceProblemKind::CollectiveMismatch, "toy.3.et",
     3,
     "group '2': collective #1 is ALL_GATHER of 256 bytes, but rank 2 "
     "issues ALL_GATHER of 512 bytes (node 3)"},
    {"unordered-collectives", TraceProblemKind::CollectiveOrder, "toy.0.et", 5,
     "collective #1 on group '3' does not depend, directly or through "
     "other nodes, on the previous one on that group (node 4"},
    {"unmatched-send", TraceProblemKind::SendRecv, "toy.0.et", 6,
     "SEND (src 0, dst 1, tag 8, 128 bytes) has no matching RECV on rank 1"},
    {"wrong-send-rank", TraceProblemKind::Attribute, "toy.2.et", 6,
     "SEND has comm_src 0 but the file is rank 2"},
};

INSTANTIATE_TEST_SUITE_P(Flaws, TraceFlawTest, ::testing::ValuesIn(flawCases),
                         [](const ::testing::TestParamInfo<FlawCase> &info) {
                           std::string name = info.param.flaw;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

TEST(TraceFlawCoverageTest, EveryFixtureFlawHasACase) {
  for (llvm::StringRef flaw : getTraceFlawNames())
    EXPECT_TRUE(llvm::any_of(flawCases, [&](const FlawCase &flawCase) {
      return flaw == flawCase.flaw;
    })) << flaw.str();
}

TEST_F(TraceVerifierTest, UnmatchedRecvIsReportedToo) {
  TraceSetFixture set = makeGoodTraceSet();
  ASSERT_TRUE(applyTraceFlaw(set, "unmatched-send"));
  TraceVerifyReport report = verify(set);
  const TraceProblem *problem = findProblem(
      report, TraceProblemKind::SendRecv,
      "RECV (src 0, dst 1, tag 7, 128 bytes) has no matching SEND on rank 0");
  ASSERT_TRUE(problem) << print(report);
  EXPECT_EQ(problem->file, "toy.1.et");
}

TEST_F(TraceVerifierTest, DuplicateSendIsAmbiguous) {
  TraceSetFixture set = makeGoodTraceSet();
  for (unsigned rank : {0u, 1u}) {
    ChakraProtoMsg::Node again = set.node(rank, 6);
    again.set_id(7);
    set.ranks[rank].push_back(again);
  }
  TraceVerifyReport report = verify(set);
  EXPECT_TRUE(findProblem(report, TraceProblemKind::SendRecv,
                          "2 SENDs and 2 RECVs share (src 0, dst 1, tag 7"))
      << print(report);
}

TEST_F(TraceVerifierTest, DamagedFilesAreReportedNotFatal) {
  const std::pair<llvm::StringLiteral, llvm::StringLiteral> cases[] = {
      {"truncated", "truncated file"},
      {"garbage", "the GlobalMetadata at byte 0 claims 116 bytes"},
      {"empty", "empty file"}};
  ASSERT_EQ(std::size(cases), getFileFlawNames().size());
  for (const auto &[flaw, message] : cases) {
    ASSERT_FALSE(llvm::sys::fs::remove_directories(dir));
    ASSERT_FALSE(writeTraceFixture(flaw, dir).operator bool());
    TraceVerifyReport report = verifyTraceDirectory(dir);
    const TraceProblem *problem =
        findProblem(report, TraceProblemKind::CorruptFile, message);
    ASSERT_TRUE(problem) << flaw.str() << ":\n" << print(report);
    EXPECT_EQ(problem->file, "toy.1.et");
    EXPECT_EQ(report.numFiles, 4u);
  }
}

TEST_F(TraceVerifierTest, MissingCommGroupFile) {
  TraceSetFixture set = makeGoodTraceSet();
  ASSERT_FALSE(set.write(dir).operator bool());
  ASSERT_FALSE(llvm::sys::fs::remove(path("toy.json")));
  TraceVerifyReport report = verifyTraceDirectory(dir);
  EXPECT_TRUE(findProblem(report, TraceProblemKind::CommGroups,
                          "toy.json: cannot read"))
      << print(report);
}

TEST_F(TraceVerifierTest, CommGroupFileGivenExplicitly) {
  TraceSetFixture set = makeGoodTraceSet();
  ASSERT_FALSE(set.write(dir).operator bool());
  std::string moved = path("groups.txt");
  ASSERT_FALSE(llvm::sys::fs::rename(path("toy.json"), moved));
  TraceVerifyOptions options;
  options.commGroupsPath = moved;
  TraceVerifyReport report = verifyTraceDirectory(dir, options);
  EXPECT_TRUE(report.succeeded()) << print(report);
}

TEST_F(TraceVerifierTest, MalformedCommGroupFile) {
  TraceSetFixture set = makeGoodTraceSet();
  ASSERT_FALSE(set.write(dir).operator bool());
  {
    std::error_code ec;
    llvm::raw_fd_ostream os(path("toy.json"), ec);
    os << "{\"1\": [0, \"one\"]}";
  }
  TraceVerifyReport report = verifyTraceDirectory(dir);
  EXPECT_TRUE(findProblem(report, TraceProblemKind::CommGroups,
                          "group \"1\" has a member that is not an integer"))
      << print(report);
}

TEST_F(TraceVerifierTest, MissingRankFile) {
  TraceSetFixture set = makeGoodTraceSet();
  ASSERT_FALSE(set.write(dir).operator bool());
  ASSERT_FALSE(llvm::sys::fs::remove(path("toy.2.et")));
  TraceVerifyReport report = verifyTraceDirectory(dir);
  EXPECT_TRUE(findProblem(report, TraceProblemKind::FileSet,
                          "rank 2 has no trace file toy.2.et"))
      << print(report);
  EXPECT_TRUE(findProblem(report, TraceProblemKind::CommGroups,
                          "group '2' lists rank 2, which has no trace file"));
}

TEST_F(TraceVerifierTest, NamesWithoutRankOrOtherPrefix) {
  TraceSetFixture set = makeGoodTraceSet();
  ASSERT_FALSE(set.write(dir).operator bool());
  ASSERT_FALSE(llvm::sys::fs::copy_file(path("toy.3.et"), path("extra.et")));
  ASSERT_FALSE(llvm::sys::fs::copy_file(path("toy.3.et"), path("other.4.et")));
  TraceVerifyReport report = verifyTraceDirectory(dir);
  EXPECT_TRUE(
      findProblem(report, TraceProblemKind::FileSet, "no rank in the name"));
  EXPECT_TRUE(findProblem(report, TraceProblemKind::FileSet,
                          "prefix 'other' differs from 'toy'"))
      << print(report);
}

// Hash maps that reserve key values (llvm::DenseMap) must not hold ids.
TEST_F(TraceVerifierTest, ExtremeIdsAreOrdinaryIds) {
  TraceSetFixture set = makeGoodTraceSet();
  for (unsigned rank = 0; rank < 4; ++rank) {
    set.node(rank, 0).set_id(UINT64_MAX);
    set.node(rank, 1).set_data_deps(0, UINT64_MAX);
    set.node(rank, 2).set_id(UINT64_MAX - 1);
    set.node(rank, 3).set_data_deps(0, UINT64_MAX - 1);
    set.node(rank, 5).set_data_deps(0, UINT64_MAX - 1);
  }
  TraceVerifyReport report = verify(set);
  EXPECT_TRUE(report.succeeded()) << print(report);
}

TEST_F(TraceVerifierTest, EmptyDirectory) {
  TraceVerifyReport report = verifyTraceDirectory(dir);
  EXPECT_TRUE(findProblem(report, TraceProblemKind::FileSet, "no .et"));
}

TEST_F(TraceVerifierTest, ReportKeepsTheFirstProblemsOfEachKind) {
  TraceSetFixture set = makeGoodTraceSet();
  for (uint64_t missing = 100; missing < 105; ++missing)
    set.node(0, 2).add_data_deps(missing);
  TraceVerifyOptions options;
  options.maxProblemsPerKind = 2;
  TraceVerifyReport report = verify(set, /*gzip=*/false, options);
  EXPECT_EQ(report.getNumProblems(TraceProblemKind::DanglingDep), 5u);
  EXPECT_EQ(report.getKeptProblems().size(), 2u);
  std::string text = print(report);
  EXPECT_NE(text.find("error: [dangling-dep] toy.0.et: node 2 'layer.0.bwd': "
                      "depends on id 100, which no node of the file has\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("note: 3 more [dangling-dep] problems not shown\n"),
            std::string::npos);
  EXPECT_NE(text.find("FAILED: 5 problems (dangling-dep 5) in 4 files, "
                      "28 nodes, 4 groups\n"),
            std::string::npos);
}

} // namespace
