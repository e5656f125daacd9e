//===- OutputDirectoryTest.cpp - All files or none ------------------------===//
//
// What stagec promises about its output directory, through the library: an
// interrupted emission reports an error and leaves nothing behind, a
// completed one appears at once, and only an earlier stagec output is ever
// replaced.
//
//===----------------------------------------------------------------------===//

#include "stg/Emit/OutputDirectory.h"
#include "stg/Emit/TraceEmitter.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include "ScratchDirectoryTest.h"
#include "gtest/gtest.h"

using namespace stg;
namespace fs = llvm::sys::fs;

namespace {

class OutputDirectoryTest : public ScratchDirectoryTest {
protected:
  void SetUp() override {
    ScratchDirectoryTest::SetUp();
    target = path("out");
  }

  /// Names in the scratch directory.
  std::vector<std::string> listRoot() {
    std::vector<std::string> names;
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; it != end && !ec;
         it.increment(ec))
      names.push_back(llvm::sys::path::filename(it->path()).str());
    return names;
  }

  /// Two ranks of one stage, one compute node each.
  static ProgramSet makePrograms() {
    ProgramSet programs;
    programs.mesh = Mesh({{"tp", 2}});
    programs.stages.resize(1);
    ProgramNode node;
    node.name = "matmul";
    node.opType = "einsum";
    node.numOps = 64;
    node.tensorBytes = 32;
    programs.stages[0].nodes.push_back(node);
    return programs;
  }

  std::string target;
};

TEST_F(OutputDirectoryTest, InterruptedEmissionLeavesNothing) {
  ProgramSet programs = makePrograms();
  CommGroups groups(programs.mesh, programs.getUsedMasks());
  std::atomic<bool> cancel{true};
  {
    auto output = OutputDirectory::create(target);
    ASSERT_TRUE(bool(output)) << llvm::toString(output.takeError());
    EmitOptions options;
    options.cancel = &cancel;
    llvm::Error err = emitTraces(programs, groups, (*output)->getPath(),
                                 options);
    ASSERT_TRUE(bool(err));
    EXPECT_EQ(llvm::toString(std::move(err)), "interrupted");
  } // Destroyed uncommitted.
  EXPECT_TRUE(listRoot().empty());
}

TEST_F(OutputDirectoryTest, CommittedOutputAppearsWhole) {
  ProgramSet programs = makePrograms();
  CommGroups groups(programs.mesh, programs.getUsedMasks());
  auto output = OutputDirectory::create(target);
  ASSERT_TRUE(bool(output));
  EmitOptions options;
  options.prefix = "m";
  ASSERT_FALSE(bool(emitTraces(programs, groups, (*output)->getPath(),
                               options)));
  EXPECT_FALSE(fs::exists(target)); // Not before the commit.
  ASSERT_FALSE(bool(writeTextFile((*output)->getPath(), "m.manifest.json",
                                  [](llvm::raw_ostream &os) { os << "{}"; })));
  ASSERT_FALSE(bool((*output)->commit()));
  EXPECT_EQ(listRoot(), std::vector<std::string>{"out"});
  EXPECT_TRUE(fs::exists(target + "/m.0.et"));
  EXPECT_TRUE(fs::exists(target + "/m.1.et"));

  // A second run replaces the first (it holds a manifest)...
  auto again = OutputDirectory::create(target);
  ASSERT_TRUE(bool(again));
  ASSERT_FALSE(bool(writeTextFile((*again)->getPath(), "n.manifest.json",
                                  [](llvm::raw_ostream &os) { os << "{}"; })));
  ASSERT_FALSE(bool((*again)->commit()));
  EXPECT_FALSE(fs::exists(target + "/m.0.et"));
  EXPECT_TRUE(fs::exists(target + "/n.manifest.json"));
  EXPECT_EQ(listRoot(), std::vector<std::string>{"out"});
}

TEST_F(OutputDirectoryTest, ForeignDirectoryIsNotReplaced) {
  ASSERT_FALSE(fs::create_directory(target));
  ASSERT_FALSE(bool(writeTextFile(target, "thesis.tex",
                                  [](llvm::raw_ostream &os) { os << "x"; })));
  // Refused before any work...
  llvm::Error early = OutputDirectory::checkTarget(target);
  ASSERT_TRUE(bool(early));
  EXPECT_NE(llvm::toString(std::move(early)).find("is not an earlier stagec "
                                                  "or stage-search output"),
            std::string::npos);
  auto refused = OutputDirectory::create(target);
  ASSERT_FALSE(bool(refused));
  llvm::consumeError(refused.takeError());
  EXPECT_TRUE(fs::exists(target + "/thesis.tex"));
  EXPECT_EQ(listRoot(), std::vector<std::string>{"out"});
}

TEST_F(OutputDirectoryTest, DirectoryThatAppearsMeanwhileIsNotReplaced) {
  auto output = OutputDirectory::create(target);
  ASSERT_TRUE(bool(output)) << llvm::toString(output.takeError());
  ASSERT_FALSE(fs::create_directory(target));
  ASSERT_FALSE(bool(writeTextFile(target, "thesis.tex",
                                  [](llvm::raw_ostream &os) { os << "x"; })));
  llvm::Error err = (*output)->commit();
  ASSERT_TRUE(bool(err));
  EXPECT_NE(llvm::toString(std::move(err)).find("is not an earlier stagec "
                                                "or stage-search output"),
            std::string::npos);
  output->reset();
  EXPECT_TRUE(fs::exists(target + "/thesis.tex"));
  EXPECT_EQ(listRoot(), std::vector<std::string>{"out"});
}

TEST_F(OutputDirectoryTest, AFullDeviceIsAnErrorNotACrash) {
  // /dev/full refuses every write (ENOSPC): the stream's error comes back
  // as an Error, and the stream closes without aborting.
  if (!fs::exists("/dev/full"))
    GTEST_SKIP() << "no /dev/full";
  llvm::Error err = writeTextFile("/dev", "full", [](llvm::raw_ostream &os) {
    os << std::string(1 << 16, 'x');
  });
  ASSERT_TRUE(bool(err));
  EXPECT_NE(llvm::toString(std::move(err)).find("cannot write /dev/full"),
            std::string::npos);
}

TEST_F(OutputDirectoryTest, SearchTableIsAnEarlierOutput) {
  ASSERT_FALSE(fs::create_directory(target));
  ASSERT_FALSE(bool(writeTextFile(target, "plans.json",
                                  [](llvm::raw_ostream &os) { os << "{}"; })));
  EXPECT_FALSE(bool(OutputDirectory::checkTarget(target)));
}

TEST_F(OutputDirectoryTest, DeploymentTableIsAnEarlierOutput) {
  ASSERT_FALSE(fs::create_directory(target));
  ASSERT_FALSE(bool(writeTextFile(target, "notes.txt",
                                  [](llvm::raw_ostream &os) { os << "x"; })));
  EXPECT_TRUE(bool(llvm::errorToBool(OutputDirectory::checkTarget(target))));
  ASSERT_FALSE(bool(writeTextFile(target, "deployments.json",
                                  [](llvm::raw_ostream &os) { os << "{}"; })));
  EXPECT_FALSE(bool(OutputDirectory::checkTarget(target)));
}

} // namespace
