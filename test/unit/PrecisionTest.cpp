//===- PrecisionTest.cpp - The formats and the recipes that name them -----===//
//
// Every format a GEMM computes in is a recipe but tf32 (fp32 GEMMs on
// tensor cores, which no recipe asks for), and the messages list exactly
// the recipes, in the enum's order.
//
//===----------------------------------------------------------------------===//

#include "stg/IR/Precision.h"

#include "gtest/gtest.h"

using namespace stg;

TEST(PrecisionTest, EveryFormatButTf32IsARecipe) {
  for (unsigned i = 0; i < NumPrecisions; ++i) {
    Precision precision = Precision(i);
    llvm::StringRef name = getPrecisionName(precision);
    EXPECT_EQ(parsePrecision(name), precision) << name.str();
    EXPECT_EQ(parseRecipe(name).has_value(), precision != Precision::TF32)
        << name.str();
  }
  EXPECT_FALSE(parseRecipe("fp4"));
  EXPECT_EQ(parseRecipe("mxfp4"), Precision::MXFP4);
}

TEST(PrecisionTest, TheRecipeListNamesEachRecipeOnce) {
  EXPECT_EQ(getRecipeNames(), "bf16, fp16, fp8, mxfp8, mxfp6, mxfp4, nvfp4");
  EXPECT_EQ(getRecipeNames(" or "),
            "bf16, fp16, fp8, mxfp8, mxfp6, mxfp4 or nvfp4");
}

TEST(PrecisionTest, MicroscalingFormatsCountTheirBlockScales) {
  // An E8M0 scale a block of 32; nvfp4's FP8 scale a block of 16.
  EXPECT_DOUBLE_EQ(getPrecisionBytes(Precision::MXFP4), 0.5 + 1.0 / 32);
  EXPECT_DOUBLE_EQ(getPrecisionBytes(Precision::MXFP6), 0.75 + 1.0 / 32);
  EXPECT_DOUBLE_EQ(getPrecisionBytes(Precision::NVFP4), 0.5 + 1.0 / 16);
  EXPECT_TRUE(isLowPrecision(Precision::MXFP4));
  EXPECT_FALSE(isLowPrecision(Precision::BF16));
}
