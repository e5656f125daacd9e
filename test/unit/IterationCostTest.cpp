//===- IterationCostTest.cpp - Iterations priced from compiled samples ----===//
//
// IterationCostModel::build prices an engine's iterations from compiled
// prefill and decode steps. Under --deepep-mode auto an engine moves a
// decode batch's tokens with DeepEP's low-latency kernels and a batch
// with a prompt in it with the normal ones, so the model keeps a body for
// each: the normal mode's and the low-latency mode's, point for point.
//
//===----------------------------------------------------------------------===//

#include "stg/Serve/IterationCost.h"
#include "stg/Perf/System.h"

#include "gtest/gtest.h"

#include <optional>
#include <string>

using namespace stg;

namespace {

using DeepEpMode = CompileOptions::DeepEpMode;

/// Mixtral-8x7B, two layers, experts over 4 ranks, on a DGX H100.
std::optional<IterationCostModel> build(DeepEpMode mode) {
  CompileOptions base;
  base.input = std::string(STG_SOURCE_TEMPLATES_DIR) + "/mixtral-8x7b.stg";
  base.degrees = {{"ep", 4}};
  base.overrides = {{"L", "2"}};
  base.deepEpMode = mode;
  ServingLimits limits;
  limits.maxBatchedTokens = 256;
  limits.maxContext = 256;
  limits.maxBatch = 16;
  llvm::Expected<SystemSpec> system = loadSystem("dgx-h100");
  EXPECT_TRUE(bool(system)) << llvm::toString(system.takeError());
  if (!system)
    return std::nullopt;
  std::string errors;
  llvm::raw_string_ostream os(errors);
  DiagnosticEngine diags(os);
  std::optional<IterationCostModel> model =
      IterationCostModel::build(base, *system, limits, diags);
  EXPECT_TRUE(model) << os.str();
  return model;
}

TEST(IterationCostTest, AutoExchangesDecodeAsLowLatencyAndPrefillAsNormal) {
  std::optional<IterationCostModel> automatic = build(DeepEpMode::Auto),
                                    normal = build(DeepEpMode::Normal),
                                    lowLatency = build(DeepEpMode::LowLatency);
  ASSERT_TRUE(automatic && normal && lowLatency);
  EXPECT_TRUE(normal->decodeBody.empty());
  EXPECT_TRUE(lowLatency->decodeBody.empty());
  ASSERT_FALSE(automatic->decodeBody.empty());
  IterationWork decodes;
  decodes.decodeSequences = 8;
  decodes.decodeContext = 8 * 128;
  decodes.sampled = 8;
  IterationWork prompt;
  prompt.prefill = {{128, 0}};
  prompt.sampled = 1;
  for (double tokens : {1.0, 8.0, 96.0, 256.0}) {
    EXPECT_DOUBLE_EQ(automatic->decodeBody(tokens), lowLatency->body(tokens));
    EXPECT_DOUBLE_EQ(automatic->body(tokens), normal->body(tokens));
  }
  EXPECT_DOUBLE_EQ(automatic->getMicros(decodes),
                   lowLatency->getMicros(decodes));
  EXPECT_DOUBLE_EQ(automatic->getMicros(prompt), normal->getMicros(prompt));
  // The two kernels price these exchanges differently, or the test shows
  // nothing.
  EXPECT_NE(normal->getMicros(decodes), lowLatency->getMicros(decodes));
}

} // namespace
