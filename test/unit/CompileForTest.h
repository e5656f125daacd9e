//===- CompileForTest.h - Compiling a model inside a test ---------*- C++ -*-===//
//
// compileModel with its diagnostics caught: a model that does not compile
// fails the test with what stagec would have printed.
//
//===----------------------------------------------------------------------===//

#ifndef STG_TEST_UNIT_COMPILEFORTEST_H
#define STG_TEST_UNIT_COMPILEFORTEST_H

#include "stg/Driver/Compile.h"

#include "gtest/gtest.h"

#include <optional>
#include <string>

namespace stg {

inline std::optional<CompiledModel>
compileForTest(const CompileOptions &options) {
  std::string errors;
  llvm::raw_string_ostream os(errors);
  DiagnosticEngine diags(os);
  std::optional<CompiledModel> compiled = compileModel(options, diags);
  EXPECT_TRUE(compiled) << os.str();
  return compiled;
}

} // namespace stg

#endif // STG_TEST_UNIT_COMPILEFORTEST_H
