//===- ScratchDirectoryTest.h - A test fixture with its own directory -----===//
//
// Tests that write files derive from this: each test gets a fresh directory
// under the system's temporary directory, removed with everything in it when
// the test ends.
//
//===----------------------------------------------------------------------===//

#ifndef STG_TEST_UNIT_SCRATCHDIRECTORYTEST_H
#define STG_TEST_UNIT_SCRATCHDIRECTORYTEST_H

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include "gtest/gtest.h"

#include <string>

namespace stg {

class ScratchDirectoryTest : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("stg-test", dir));
  }
  void TearDown() override { llvm::sys::fs::remove_directories(dir); }

  /// `name` inside the scratch directory.
  std::string path(llvm::StringRef name) const {
    llvm::SmallString<128> result(dir);
    llvm::sys::path::append(result, name);
    return std::string(result.str());
  }

  llvm::SmallString<128> dir;
};

} // namespace stg

#endif // STG_TEST_UNIT_SCRATCHDIRECTORYTEST_H
