//===- ImportTest.cpp - Hugging Face configs to STG -----------------------===//

#include "stg/Import/ConfigJSON.h"
#include "stg/Import/HFImport.h"
#include "stg/IR/ParamCount.h"
#include "stg/Parse/Parser.h"

#include "gtest/gtest.h"

#include <cmath>

using namespace stg;

namespace {

/// Parses `text` as config.json; the diagnostics land in `errors`.
std::unique_ptr<JSONNode> parseJSON(const std::string &text,
                                    std::string &errors) {
  llvm::raw_string_ostream os(errors);
  DiagnosticEngine diags(os);
  return parseConfigJSON(text, "config.json", diags);
}

/// Imports `text` and compiles the program with the shipped templates;
/// returns the module's parameter count and active count (or -1, -1).
std::pair<long long, long long> importAndCount(const std::string &text,
                                               std::string &source,
                                               std::string &errors) {
  llvm::raw_string_ostream os(errors);
  DiagnosticEngine diags(os);
  std::optional<ImportedModel> imported =
      importModelConfigText(text, "/nonexistent/tiny/config.json", diags);
  if (!imported)
    return {-1, -1};
  source = imported->source;
  ParseOptions options;
  options.templateDirs = {STG_SOURCE_TEMPLATES_DIR};
  std::unique_ptr<Module> module =
      parseSource(imported->source, "config.json.stg", options, diags);
  if (!module)
    return {-1, -1};
  auto count = [&](const Expr &expr) {
    std::optional<Expr> bound = module->bindDims(expr);
    return bound ? getIntegerValue(*bound).value_or(-1) : -1;
  };
  return {count(countParameters(*module)),
          count(countActiveParameters(*module))};
}

TEST(ConfigJSONTest, LocatesEveryValue) {
  std::string errors;
  auto config = parseJSON("{\n  \"a\": 1,\n  \"b\": [true, null, \"x\"],\n"
                          "  \"c\": {\"d\": -2.5e3}\n}\n",
                          errors);
  ASSERT_TRUE(config) << errors;
  ASSERT_EQ(config->members.size(), 3u);
  const JSONMember &b = config->members[1];
  EXPECT_EQ(b.key, "b");
  EXPECT_EQ(b.keyLoc.line, 3u);
  EXPECT_EQ(b.keyLoc.col, 3u);
  ASSERT_EQ(b.value.elements.size(), 3u);
  EXPECT_EQ(b.value.elements[0].kind, JSONNode::Kind::Bool);
  EXPECT_EQ(b.value.elements[1].kind, JSONNode::Kind::Null);
  EXPECT_EQ(b.value.elements[2].text, "x");
  const JSONNode &d = config->find("c")->value.members[0].value;
  EXPECT_EQ(d.number, -2500);
  EXPECT_EQ(d.loc.line, 4u);
  EXPECT_EQ(d.loc.col, 14u);
}

TEST(ConfigJSONTest, TakesPythonsNonFiniteWords) {
  std::string errors;
  auto config = parseJSON("{\"a\": Infinity, \"b\": -Infinity, \"c\": NaN}",
                          errors);
  ASSERT_TRUE(config) << errors;
  EXPECT_TRUE(std::isinf(config->find("a")->value.number));
  EXPECT_LT(config->find("b")->value.number, 0);
  EXPECT_TRUE(std::isnan(config->find("c")->value.number));
}

TEST(ConfigJSONTest, RefusesWhatIsNotJSON) {
  const std::pair<const char *, const char *> cases[] = {
      {"a: 1\n", "expected a JSON object in braces"},
      {"{'a': 1}", "double-quoted"},
      {"{\"a\": hello}", "expected a JSON value"},
      {"{\"a\": 1, \"a\": 2}", "appears twice"},
      {"{\"a\": 0x10}", "expected a JSON value"},
      {"[1]", "at the top level"},
      {"", "empty file"},
  };
  for (const auto &[text, message] : cases) {
    std::string errors;
    EXPECT_FALSE(parseJSON(text, errors)) << text;
    EXPECT_NE(errors.find(message), std::string::npos)
        << text << " gave: " << errors;
  }
}

const char *const TinyLlama = R"({
  "model_type": "llama", "hidden_size": 64, "num_attention_heads": 4,
  "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 1000,
  "num_hidden_layers": 2, "rms_norm_eps": 1e-05, "rope_theta": Infinity
})";

TEST(ImportTest, ALlamaConfigCountsAsWrittenByHand) {
  std::string source, errors;
  auto [total, active] = importAndCount(TinyLlama, source, errors);
  // 2 * (attention 12,288 + SwiGLU 24,576 + norms 128) + 2 * 64,000 + 64.
  EXPECT_EQ(total, 202048) << errors;
  EXPECT_EQ(active, total);
  EXPECT_NE(source.find("set D = 64;"), std::string::npos) << source;
  EXPECT_NE(source.find("model tiny {"), std::string::npos) << source;
}

TEST(ImportTest, TheModelIsNamedAfterItsRepository) {
  std::string config = TinyLlama;
  config.insert(1, "\"_name_or_path\": \"acme/if\", ");
  std::string errors;
  llvm::raw_string_ostream os(errors);
  DiagnosticEngine diags(os);
  std::optional<ImportedModel> imported =
      importModelConfigText(config, "/nonexistent/tiny/config.json", diags);
  ASSERT_TRUE(imported) << errors;
  EXPECT_EQ(imported->name, "if");
  // A keyword is no model name.
  EXPECT_EQ(imported->identifier, "m_if");
  EXPECT_EQ(imported->hfRepo, "acme/if");
  EXPECT_NE(imported->source.find("option hf_repo = \"acme/if\";"),
            std::string::npos);
}

TEST(ImportTest, AReadKeyRefusesANonFiniteNumber) {
  std::string config = TinyLlama;
  config.replace(config.find("\"hidden_size\": 64"), 17,
                 "\"hidden_size\": Infinity");
  std::string source, errors;
  EXPECT_EQ(importAndCount(config, source, errors).first, -1);
  EXPECT_NE(errors.find("config.json:2:41: error: 'hidden_size' must be a "
                        "whole number"),
            std::string::npos)
      << errors;
}

TEST(ImportTest, UnknownKeysAreErrorsAtTheirPlace) {
  std::string config = TinyLlama;
  config.insert(config.rfind('}'), ", \"shiny_new_feature\": 3\n");
  std::string source, errors;
  EXPECT_EQ(importAndCount(config, source, errors).first, -1);
  EXPECT_NE(errors.find("key 'shiny_new_feature' is not understood for "
                        "llama configs"),
            std::string::npos)
      << errors;
}

TEST(ImportTest, ExpertsCountKOfEForAToken) {
  // Qwen 3 MoE: every layer routed but the first (mlp_only_layers), which
  // gives a pattern with no period below the layer count.
  const char *config = R"({
    "model_type": "qwen3_moe", "hidden_size": 64, "num_attention_heads": 4,
    "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 96,
    "moe_intermediate_size": 32, "num_experts": 8, "num_experts_per_tok": 2,
    "vocab_size": 100, "num_hidden_layers": 2, "decoder_sparse_step": 1,
    "mlp_only_layers": [0]
  })";
  std::string source, errors;
  auto [total, active] = importAndCount(config, source, errors);
  ASSERT_GT(total, 0) << errors;
  // Each layer: attention 12,288 + q/k-norm 32 + norms 128; layer 0 a
  // SwiGLU of 96 (18,432), layer 1 a router (512) and 8 experts of 6,144.
  long long experts = 8 * 3 * 64 * 32;
  EXPECT_EQ(total, 2 * (12288 + 32 + 128) + 18432 + 512 + experts +
                       2 * 6400 + 64);
  EXPECT_EQ(active, total - experts + experts * 2 / 8);
  EXPECT_NE(source.find("if layer % 2 == 1 { x = decoder_moe(x); }"),
            std::string::npos)
      << source;
  EXPECT_NE(source.find("else { x = decoder_dense(x); }"), std::string::npos);
  EXPECT_NE(source.find("self_attention[qk_norm=true]"), std::string::npos);
}

TEST(ImportTest, QwenTwoMoEHasAGatedSharedExpert) {
  const char *config = R"({
    "model_type": "qwen2_moe", "hidden_size": 64, "num_attention_heads": 4,
    "num_key_value_heads": 2, "intermediate_size": 96,
    "moe_intermediate_size": 32, "shared_expert_intermediate_size": 48,
    "num_experts": 8, "num_experts_per_tok": 2, "vocab_size": 100,
    "num_hidden_layers": 1, "use_sliding_window": false
  })";
  std::string source, errors;
  auto [total, active] = importAndCount(config, source, errors);
  // Attention with q/k/v biases 12,416, norms 128, router 512, experts
  // 49,152, the shared expert 9,216 and its gate 64; embedding and head
  // 12,800 and the final norm.
  EXPECT_EQ(total, 12416 + 128 + 512 + 49152 + 9216 + 64 + 12800 + 64)
      << errors;
  EXPECT_EQ(active, total - 49152 + 49152 / 4);
  EXPECT_NE(source.find("mul(shared_experts(h), gate)"), std::string::npos)
      << source;
}

TEST(ImportTest, LayerTypesBecomeALayerPattern) {
  const char *config = R"({
    "model_type": "gemma2", "hidden_size": 64, "num_attention_heads": 4,
    "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 96,
    "vocab_size": 100, "num_hidden_layers": 6, "sliding_window": 32,
    "max_position_embeddings": 256,
    "layer_types": ["sliding_attention", "sliding_attention", "full_attention",
                    "sliding_attention", "sliding_attention", "full_attention"]
  })";
  std::string source, errors;
  EXPECT_GT(importAndCount(config, source, errors).first, 0) << errors;
  EXPECT_NE(source.find("if layer % 3 == 2 { x = decoder_full(x); }"),
            std::string::npos)
      << source;
  EXPECT_NE(source.find("self_attention[mask=sliding, window=WIN,\n"
                        "      softcap=50]"),
            std::string::npos)
      << source;
}

TEST(ImportTest, MultimodalConfigsImportTheirTextModel) {
  const char *config = R"({
    "model_type": "gemma3", "vision_config": {"hidden_size": 1152},
    "text_config": {"model_type": "gemma3_text", "hidden_size": 64,
      "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16,
      "intermediate_size": 96, "num_hidden_layers": 2, "vocab_size": 100}
  })";
  std::string source, errors;
  EXPECT_GT(importAndCount(config, source, errors).first, 0) << errors;
  EXPECT_NE(source.find("(gemma3_text)"), std::string::npos) << source;
  EXPECT_NE(source.find("qk_norm=true"), std::string::npos) << source;
}

} // namespace
