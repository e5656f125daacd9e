//===- CostTest.cpp - FLOPs of ops and of a training step -----------------===//

#include "stg/IR/Cost.h"
#include "stg/Parse/Parser.h"
#include "stg/Passes/Pass.h"

#include "gtest/gtest.h"

using namespace stg;

namespace {

std::unique_ptr<Module> build(const char *source, llvm::StringRef pipeline) {
  std::string errors;
  llvm::raw_string_ostream os(errors);
  DiagnosticEngine diags(os);
  auto module = parseSource(source, "cost.stg", {}, diags);
  PassManager passes;
  if (!module || failed(passes.addPipeline(pipeline, diags)) ||
      failed(passes.run(*module, diags))) {
    ADD_FAILURE() << os.str();
    return nullptr;
  }
  return module;
}

/// Sum of getFlops over the ops `select` picks, a repeat body counted once
/// per repetition.
Expr totalFlops(const Graph &graph, llvm::function_ref<bool(const Op &)> select) {
  Expr total = 0;
  for (const auto &op : graph.getOps()) {
    if (const Graph *body = op->getBody())
      total = total + op->getAttr("count")->expr * totalFlops(*body, select);
    else if (select(*op))
      total = total + getFlops(*op);
  }
  return total;
}

bool sameExpr(const Expr &a, const Expr &b) { return (a - b).normal().is_zero(); }

// A small dense decoder-like model: every einsum's operands need gradients
// (the embedding makes the first activation depend on a weight).
const char *kDense = R"(
  dim B = 2, S = 16, D = 8, F = 32, V = 64, L = 3;
  axis dp, tp;
  model dense {
    ids: i32[B/dp, S] = input();
    param table: [V, D];
    x: [B/dp, S, D] = embedding(ids, table);
    repeat L {
      param w1: [D, F/tp];
      param w2: [F/tp, D];
      h = einsum[bsd,df->bsf](x, w1);
      x = einsum[bsf,fd->bsd](gelu(h), w2);
    }
    param wo: [D, V/tp];
    logits: [B/dp, S, V/tp] = einsum[bsd,dv->bsv](x, wo);
    loss = cross_entropy(logits);
  }
)";

TEST(Cost, EinsumCountsTwoFlopsPerPointOfTheLocalIterationSpace) {
  auto module = build(kDense, "shape-infer,distribute,match-collectives");
  ASSERT_TRUE(module);
  const Op *lmHead = nullptr;
  module->getModel()->walk([&](Op &op) {
    if (op.getKind() == OpKind::Einsum && op.getResult()->getName() == "logits")
      lmHead = &op;
  });
  ASSERT_TRUE(lmHead);
  SymbolTable &s = module->getSymbols();
  Expr expected = 2 * Expr(*s.lookup("B")) * *s.lookup("S") * *s.lookup("D") *
                  *s.lookup("V") / (Expr(*s.lookup("dp")) * *s.lookup("tp"));
  EXPECT_TRUE(sameExpr(getFlops(*lmHead), expected))
      << module->getPrinter().str(getFlops(*lmHead));
}

TEST(Cost, ATrainingStepCostsThreeForwardPassesOfMatmuls) {
  auto isEinsum = [](const Op &op) { return op.getKind() == OpKind::Einsum; };
  auto forward = build(kDense, "shape-infer,distribute,match-collectives");
  auto training = build(kDense, getTrainingPipeline());
  ASSERT_TRUE(forward && training);
  Expr forwardFlops = totalFlops(*forward->getModel(), isEinsum);
  Expr stepFlops = totalFlops(*training->getModel(), isEinsum);
  // The two builds have their own symbols: compare numbers, with the axis
  // degrees bound too.
  auto numeric = [](const Module &module, const Expr &e) {
    GiNaC::exmap degrees;
    degrees[*module.getSymbols().lookup("dp")] = 2;
    degrees[*module.getSymbols().lookup("tp")] = 4;
    return module.bindDims(e).value().subs(degrees);
  };
  Expr ratio = (numeric(*training, stepFlops) /
                numeric(*forward, forwardFlops)).normal();
  EXPECT_TRUE(ratio.is_equal(3)) << training->getPrinter().str(ratio);
}

TEST(Cost, BackwardKernelsCostTheirDocumentedFactor) {
  auto step = build(R"(
    dim B = 2, S = 16, H = 4, E = 8;
    model m {
      param wq: [B, S, H, E];
      q = relu(wq);
      a = attention[causal](q, q, q);
      loss = cross_entropy(a);
    }
  )",
                    getTrainingPipeline());
  ASSERT_TRUE(step);
  Expr attention = 0, attentionGrad = 0, relu = 0, reluGrad = 0, adam = 0;
  step->getModel()->walk([&](Op &op) {
    if (op.getKind() == OpKind::Attention)
      attention = getFlops(op);
    if (op.getKind() == OpKind::Relu)
      relu = getFlops(op);
    if (op.getKind() == OpKind::Grad && op.getAttr("of")->text == "attention")
      attentionGrad = getFlops(op);
    if (op.getKind() == OpKind::Grad && op.getAttr("of")->text == "relu")
      reluGrad = getFlops(op);
    if (op.getKind() == OpKind::Adam)
      adam = getFlops(op);
  });
  SymbolTable &s = step->getSymbols();
  Expr b = *s.lookup("B"), seq = *s.lookup("S"), h = *s.lookup("H"),
       e = *s.lookup("E");
  // Causal attention: half of 2*B*H*S*S*(E + E).
  EXPECT_TRUE(sameExpr(attention, 2 * b * h * seq * seq * e));
  EXPECT_TRUE(sameExpr(attentionGrad, attention * 5 / 2));
  EXPECT_TRUE(sameExpr(reluGrad, 2 * relu));
  EXPECT_TRUE(sameExpr(adam, 12 * b * seq * h * e));
}

} // namespace

namespace {

TEST(Cost, RecomputeAddsExactlyOneForwardOfTheRecomputedLayers) {
  auto all = [](const Op &) { return true; };
  auto plain = build(kDense, getTrainingPipeline());
  auto replayed = build(kDense, "shape-infer,autodiff,recompute-full,distribute,"
                                "match-collectives,optimizer");
  auto forward = build(kDense, "shape-infer,distribute,match-collectives");
  ASSERT_TRUE(plain && replayed && forward);
  // The forward FLOPs of the repeated layers alone.
  Expr layers = 0;
  for (const auto &op : forward->getModel()->getOps())
    if (const Graph *body = op->getBody())
      layers = layers + op->getAttr("count")->expr * totalFlops(*body, all);
  auto numeric = [](const Module &module, const Expr &e) {
    GiNaC::exmap degrees;
    degrees[*module.getSymbols().lookup("dp")] = 2;
    degrees[*module.getSymbols().lookup("tp")] = 4;
    return module.bindDims(e).value().subs(degrees);
  };
  Expr extra = numeric(*replayed, totalFlops(*replayed->getModel(), all)) -
               numeric(*plain, totalFlops(*plain->getModel(), all));
  EXPECT_TRUE((extra - numeric(*forward, layers)).normal().is_zero())
      << "extra " << extra << " vs layers " << numeric(*forward, layers);
}

} // namespace

namespace {

// An unfused attention moves its score matrix through memory: 4 passes of
// 2-byte scores forward (6.5 with dropout on the probabilities, which also
// writes a one-byte mask); a fused one does not.
TEST(CostTest, UnfusedAttentionMovesItsScores) {
  const char *source = R"(
    dim B = 2, S = 16, H = 4, E = 8;
    model m {
      q: [B, S, H, E] = input();
      k: [B, S, H, E] = input();
      v: [B, S, H, E] = input();
      fused = attention[causal](q, k, v);
      unfused = attention[mask=causal, kernel=unfused](q, k, v);
      dropped = attention[mask=causal, kernel=unfused, dropout=1/10](q, k, v);
    }
  )";
  std::unique_ptr<Module> module = build(source, "shape-infer");
  ASSERT_TRUE(module);
  std::vector<const Op *> attentions;
  module->getModel()->walk([&](Op &op) {
    if (op.getKind() == OpKind::Attention)
      attentions.push_back(&op);
  });
  ASSERT_EQ(attentions.size(), 3u);
  auto extra = [&](const Op *op) {
    return module->bindAll(getBytesAccessed(*op) -
                           getBytesAccessed(*attentions[0]))
        .value();
  };
  const int scores = 2 * 4 * 16 * 16; // B * H * S * S.
  EXPECT_TRUE(sameExpr(extra(attentions[1]), Expr(scores * 8)));
  EXPECT_TRUE(sameExpr(extra(attentions[2]), Expr(scores * 13)));
  EXPECT_TRUE(sameExpr(getFlops(*attentions[1]), getFlops(*attentions[0])));
}

} // namespace
