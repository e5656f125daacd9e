//===- SmallSearchModel.h - The model search tests start from ---*- C++ -*-===//
//
// Llama-3-8B cut to 4 layers of 1024 tokens on DGX H100 nodes: small enough
// that a test evaluates every plan of a 16- or 32-GPU space.
//
//===----------------------------------------------------------------------===//

#ifndef STG_TEST_UNIT_SMALLSEARCHMODEL_H
#define STG_TEST_UNIT_SMALLSEARCHMODEL_H

#include "stg/Search/PlanEvaluator.h"

#include "gtest/gtest.h"

namespace stg {

class SmallSearchModel : public ::testing::Test {
protected:
  void SetUp() override {
    base.input = std::string(STG_SOURCE_TEMPLATES_DIR) + "/llama3-8b.stg";
    base.overrides = {{"L", "4"}, {"S", "1024"}};
    llvm::Expected<SystemSpec> loaded = loadSystem("dgx-h100");
    ASSERT_TRUE(bool(loaded)) << llvm::toString(loaded.takeError());
    system = std::move(*loaded);
    llvm::Expected<ModelFacts> read = readModelFacts(base);
    ASSERT_TRUE(bool(read)) << llvm::toString(read.takeError());
    facts = std::move(*read);
  }

  CompileOptions base;
  SystemSpec system;
  ModelFacts facts;
};

} // namespace stg

#endif // STG_TEST_UNIT_SMALLSEARCHMODEL_H
