//===- ParamCountTest.cpp - Trainable parameter counts ---------------------===//

#include "stg/IR/ParamCount.h"
#include "stg/IR/Module.h"
#include "stg/Parse/Parser.h"
#include "stg/Passes/Pass.h"

#include "gtest/gtest.h"

using namespace stg;

namespace {

std::unique_ptr<Module> build(const char *source, llvm::StringRef pipeline = "",
                              std::vector<std::pair<std::string, std::string>> sets = {}) {
  std::string errors;
  llvm::raw_string_ostream os(errors);
  DiagnosticEngine diags(os);
  ParseOptions options;
  options.overrides = std::move(sets);
  auto module = parseSource(source, "params.stg", options, diags);
  PassManager passes;
  if (!module || failed(passes.addPipeline(pipeline, diags)) ||
      failed(passes.run(*module, diags))) {
    ADD_FAILURE() << os.str();
    return nullptr;
  }
  return module;
}

Expr sym(Module &module, llvm::StringRef name) {
  return module.getSymbols().getOrCreate(name);
}

bool sameExpr(const Expr &a, const Expr &b) { return (a - b).normal().is_zero(); }

// Embedding, L layers of a two-matrix MLP with a bias, a separate head.
const char *kDense = R"(
  dim B = 2, S = 16, D = 8, F = 32, V = 64, L = 3;
  axis dp, tp;
  model dense {
    ids: i32[B/dp, S] = input();
    param table: [V/tp, D];
    x: [B/dp, S, D] = embedding(ids, table);
    repeat L {
      param w1: [D, F/tp];
      param b1: [F/tp];
      param w2: [F/tp, D];
      h = add(einsum[bsd,df->bsf](x, w1), b1);
      x = einsum[bsf,fd->bsd](gelu(h), w2);
    }
    param wo: [D, V/tp];
    logits: [B/dp, S, V/tp] = einsum[bsd,dv->bsv](x, wo);
    loss = cross_entropy(logits);
  }
)";

TEST(ParamCountTest, RepeatBodyCountsOncePerRepetition) {
  auto module = build(kDense);
  ASSERT_TRUE(module);
  Expr V = sym(*module, "V"), D = sym(*module, "D"), F = sym(*module, "F"),
       L = sym(*module, "L");
  Expr expected = V * D + L * (D * F + F + F * D) + D * V;
  EXPECT_TRUE(sameExpr(countParameters(*module), expected))
      << module->getPrinter().str(countParameters(*module));
  // 64*8 + 3*(8*32 + 32 + 32*8) + 8*64
  EXPECT_EQ(getIntegerValue(module->bindDims(countParameters(*module)).value()),
            std::optional<long long>(1024 + 3 * 544));
}

TEST(ParamCountTest, LogicalSizeIgnoresTheMesh) {
  // Degrees and sharding change what one rank holds, not the model's size.
  auto module = build(kDense, "", {{"tp", "4"}, {"dp", "2"}});
  ASSERT_TRUE(module);
  EXPECT_EQ(getIntegerValue(module->bindDims(countParameters(*module)).value()),
            std::optional<long long>(1024 + 3 * 544));
}

TEST(ParamCountTest, TrainingStepAddsNoParameters) {
  // Gradients, the backward repeat and Adam's state are not parameters.
  auto forward = build(kDense);
  auto step = build(kDense, "shape-infer,autodiff,distribute,"
                            "match-collectives,optimizer");
  ASSERT_TRUE(forward && step);
  EXPECT_EQ(getIntegerValue(step->bindDims(countParameters(*step)).value()),
            getIntegerValue(forward->bindDims(countParameters(*forward)).value()));
}

TEST(ParamCountTest, TiedWeightCountsOnce) {
  auto module = build(R"(
    dim B = 2, S = 16, D = 8, V = 32;
    axis dp;
    model m {
      ids: i32[B/dp, S] = input();
      param table: [V, D];
      x = embedding(ids, table);
      logits: [B/dp, S, V] = einsum[bsd,vd->bsv](relu(x), table);
      loss = cross_entropy(logits);
    }
  )");
  ASSERT_TRUE(module);
  EXPECT_EQ(getIntegerValue(module->bindDims(countParameters(*module)).value()),
            std::optional<long long>(32 * 8));
}

TEST(ParamCountTest, NestedRepeatsMultiply) {
  auto module = build(R"(
    dim B = 2, D = 4, L = 5, M = 3;
    axis dp;
    model m {
      x: [B/dp, D] = input();
      repeat L as outer {
        param a: [D];
        repeat M as inner {
          param w: [D, D];
          x = einsum[bd,de->be](mul(x, a), w);
        }
      }
    }
  )");
  ASSERT_TRUE(module);
  Expr D = sym(*module, "D"), L = sym(*module, "L"), M = sym(*module, "M");
  EXPECT_TRUE(sameExpr(countParameters(*module), L * (D + M * D * D)));
  EXPECT_EQ(getIntegerValue(module->bindDims(countParameters(*module)).value()),
            std::optional<long long>(5 * (4 + 3 * 16)));
}

TEST(ParamCountTest, EmbeddingParametersAreTheLookedUpTables) {
  // The table `embedding` reads (V*D), not the head; after distribution a
  // layout op may sit between them, which changes nothing.
  for (const char *pipeline :
       {"", "shape-infer,autodiff,distribute,match-collectives,optimizer"}) {
    auto module = build(kDense, pipeline, {{"tp", "2"}});
    ASSERT_TRUE(module);
    EXPECT_EQ(getIntegerValue(
                  module->bindDims(countEmbeddingParameters(*module)).value()),
              std::optional<long long>(64 * 8))
        << pipeline;
  }
}

TEST(ParamCountTest, ATiedTableIsOneEmbedding) {
  auto module = build(R"(
    dim B = 2, S = 16, D = 8, V = 32;
    axis dp;
    model m {
      ids: i32[B/dp, S] = input();
      param table: [V, D];
      x = embedding(ids, table);
      y = embedding(ids, table);
      logits: [B/dp, S, V] = einsum[bsd,vd->bsv](add(x, y), table);
      loss = cross_entropy(logits);
    }
  )");
  ASSERT_TRUE(module);
  EXPECT_EQ(getIntegerValue(
                module->bindDims(countEmbeddingParameters(*module)).value()),
            std::optional<long long>(32 * 8));
}

TEST(ParamCountTest, LibraryHasNoParameters) {
  auto module = build(R"(
    dim D = 4;
    block f(x: [D]) -> [D] { param w: [D]; return mul(x, w); }
  )");
  ASSERT_TRUE(module);
  EXPECT_TRUE(countParameters(*module).is_zero());
}

} // namespace
