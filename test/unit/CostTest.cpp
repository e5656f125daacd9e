//===- CostTest.cpp - FLOPs of ops and of a training step -----------------===//

#include "stg/IR/Cost.h"
#include "stg/Parse/Parser.h"
#include "stg/Passes/Pass.h"

#include "gtest/gtest.h"

#include <map>
#include <tuple>

using namespace stg;

namespace {

std::unique_ptr<Module>
build(llvm::StringRef source, llvm::StringRef pipeline,
      std::vector<std::pair<std::string, std::string>> overrides = {}) {
  std::string errors;
  llvm::raw_string_ostream os(errors);
  DiagnosticEngine diags(os);
  ParseOptions options;
  options.overrides = std::move(overrides);
  auto module = parseSource(source, "cost.stg", options, diags);
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
// writes a one-byte mask; 2 more to soft-cap them); a fused one does not.
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
      capped = attention[mask=causal, kernel=unfused, softcap=30](q, k, v);
    }
  )";
  std::unique_ptr<Module> module = build(source, "shape-infer");
  ASSERT_TRUE(module);
  std::vector<const Op *> attentions;
  module->getModel()->walk([&](Op &op) {
    if (op.getKind() == OpKind::Attention)
      attentions.push_back(&op);
  });
  ASSERT_EQ(attentions.size(), 4u);
  auto extra = [&](const Op *op) {
    return module->bindAll(getBytesAccessed(*op) -
                           getBytesAccessed(*attentions[0]))
        .value();
  };
  const int scores = 2 * 4 * 16 * 16; // B * H * S * S.
  EXPECT_TRUE(sameExpr(extra(attentions[1]), Expr(scores * 8)));
  EXPECT_TRUE(sameExpr(extra(attentions[2]), Expr(scores * 13)));
  EXPECT_TRUE(sameExpr(extra(attentions[3]), Expr(scores * 12)));
  EXPECT_TRUE(sameExpr(getFlops(*attentions[1]), getFlops(*attentions[0])));
}

// Absorbed MLA's decode: the values are the keys' leading channels, so the
// kv-cache pass keeps one cache, the values a slice of it, and the attention
// reads the cache once (FlashMLA's 576 channels a token, not 576 + 512).
TEST(CostTest, ValuesSlicedFromTheKeyCacheAreReadWithTheKeys) {
  auto module = build(R"(
    dim B = 2, S = 100, H = 4, E = 16, R = 4;
    model m {
      q: [B, S, H, E + R] = input();
      latent: [B, S, 1, E] = input();
      rope: [B, S, 1, R] = input();
      k = concat[3](latent, rope);
      o = attention[causal](q, k, latent);
    }
  )", "shape-infer,distribute,kv-cache");
  ASSERT_TRUE(module);
  const Op *attention = nullptr;
  unsigned states = 0;
  module->getModel()->walk([&](Op &op) {
    if (op.getKind() == OpKind::Attention)
      attention = &op;
    states += op.getKind() == OpKind::State;
  });
  ASSERT_TRUE(attention);
  EXPECT_EQ(states, 1u);
  const Op *values = attention->getOperand(2)->getDefiningOp();
  ASSERT_EQ(values->getKind(), OpKind::Slice);
  EXPECT_EQ(values->getOperand(0), attention->getOperand(1));
  // bf16: the query (1 x 4 x 20) and the result (1 x 4 x 16) of each
  // sequence, and its 100 cached positions of 20 channels, once.
  Expr bytes = module->bindAll(getBytesAccessed(*attention)).value();
  EXPECT_TRUE(sameExpr(bytes, Expr(2 * 2 * (4 * 20 + 4 * 16 + 100 * 20))));
}

} // namespace

namespace {

/// The (query, key) pairs with 0 <= query - key < window, the queries being
/// the last `queries` of `keys` positions, counted one by one.
long long countWindowPairs(long long queries, long long keys,
                           long long window) {
  long long pairs = 0;
  for (long long query = keys - queries; query < keys; ++query)
    for (long long key = 0; key < keys; ++key)
      if (query - key >= 0 && query - key < window)
        ++pairs;
  return pairs;
}

// The closed form against a count of every pair: decode (one query), a
// window longer than the keys, more queries than keys; bound from symbols
// too, as a model's dims are.
TEST(CostTest, ACustomKernelMovesTheBytesItsAuthorWrote) {
  auto module = build(R"(
    dim B = 4, D = 8;
    model m {
      x: [B, D] = input();
      y: [B, D] = custom[name="given", flops=3*B, bytes=7*B](x);
      z: [B, D] = custom[name="unsaid", flops=1](y);
    }
  )", "shape-infer");
  ASSERT_TRUE(module);
  llvm::ArrayRef<std::unique_ptr<Op>> ops = module->getModel()->getOps();
  Expr b = module->lookupDim("B")->symbol, d = module->lookupDim("D")->symbol;
  EXPECT_TRUE(sameExpr(getBytesAccessed(*ops[1]), 7 * b));
  EXPECT_TRUE(sameExpr(getFlops(*ops[1]), 3 * b));
  // Without `bytes`, its operand and result (bf16).
  EXPECT_TRUE(sameExpr(getBytesAccessed(*ops[2]), 2 * (2 * b * d)));
}

TEST(CostTest, AnEmbeddingLookupReadsItsRowsNotTheTable) {
  auto module = build(R"(
    dim B = 4, S = 16, V = 50000, D = 8;
    model m {
      ids: i32[B, S] = input();
      param table: [V, D];
      x: [B, S, D] = embedding(ids, table);
    }
  )", "shape-infer");
  ASSERT_TRUE(module);
  const Op &lookup = *module->getModel()->getOps().back();
  Expr b = module->lookupDim("B")->symbol, s = module->lookupDim("S")->symbol,
       d = module->lookupDim("D")->symbol;
  // The 4-byte ids, then each row read and written (bf16); V is absent.
  EXPECT_TRUE(sameExpr(getBytesAccessed(lookup), 4 * b * s + 2 * 2 * b * s * d));
}

TEST(CostTest, WindowPairsMatchACountOfEveryPair) {
  GiNaC::symbol s("S"), t("T"), w("W");
  Expr symbolic = getWindowPairs(s, t, w);
  for (long long queries = 1; queries <= 12; ++queries)
    for (long long keys = 1; keys <= 12; ++keys)
      for (long long window = 1; window <= 15; ++window) {
        long long expected = countWindowPairs(queries, keys, window);
        Expr direct = getWindowPairs(queries, keys, window);
        Expr bound =
            symbolic.subs(GiNaC::lst{s == queries, t == keys, w == window});
        EXPECT_EQ(getIntegerValue(direct), expected)
            << "S=" << queries << " T=" << keys << " W=" << window;
        EXPECT_EQ(getIntegerValue(bound), expected)
            << "S=" << queries << " T=" << keys << " W=" << window;
      }
  // S queries over their own S keys need no max(T - S, 0): the formula
  // stays short, min(S, W)*(min(S, W) + 1)/2 + (S - min(S, W))*W.
  std::string text = ExprPrinter().str(getWindowPairs(s, s, w));
  EXPECT_NE(text.find("min(S, W)"), std::string::npos) << text;
  EXPECT_EQ(text.find("max("), std::string::npos) << text;
}

// A sliding attention costs 2*(E + F) per pair inside its window; a
// context-parallel rank its share of them; the backward 2.5x; soft-capping
// 6 more per pair.
TEST(CostTest, SlidingAttentionCostsItsWindowPairs) {
  const char *source = R"(
    dim B = 2, S = 8, H = 4, E = 8, WIN = 3;
    axis cp;
    model m {
      q: [B, S/cp, H, E] = input();
      kv: [B, S, H, E] = input();
      plain = attention[mask=sliding, window=WIN](q, kv, kv);
      capped = attention[mask=sliding, window=WIN, softcap=30.0](q, kv, kv);
      causal = attention[mask=causal, softcap=30](q, kv, kv);
    }
  )";
  for (long long cp : {1, 2}) {
    std::unique_ptr<Module> module =
        build(source, "shape-infer", {{"cp", std::to_string(cp)}});
    ASSERT_TRUE(module);
    std::vector<const Op *> ops;
    module->getModel()->walk([&](Op &op) {
      if (op.getKind() == OpKind::Attention)
        ops.push_back(&op);
    });
    ASSERT_EQ(ops.size(), 3u);
    auto flops = [&](const Op *op) {
      return getIntegerValue(module->bindAll(getFlops(*op)).value());
    };
    // 1 + 2 + 3 * 6 = 21 pairs of 8 positions, window 3, per head and
    // sequence: 2 * 4 * 21 = 168 kept scores, split over cp.
    long long kept = 168 / cp;
    EXPECT_EQ(flops(ops[0]), kept * 2 * (8 + 8));
    EXPECT_EQ(flops(ops[1]), kept * (2 * (8 + 8) + 6));
    // Causal keeps half of the rank's S/cp x S scores.
    EXPECT_EQ(flops(ops[2]), 2 * 4 * (8 / cp) * 8 / 2 * (2 * (8 + 8) + 6));
  }

  // The gradient of a sliding attention is 2.5x its forward.
  const char *trained = R"(
    dim B = 2, S = 8, H = 4, E = 8, WIN = 3;
    model m {
      x: [B, S, H, E] = input();
      param w: [E, E];
      q = einsum[bshe,ef->bshf](x, w);
      o = attention[mask=sliding, window=WIN](q, q, q);
      loss = cross_entropy(o);
    }
  )";
  std::unique_ptr<Module> module = build(trained, "shape-infer,autodiff");
  ASSERT_TRUE(module);
  Expr forward = 0, backward = 0;
  module->getModel()->walk([&](Op &op) {
    if (op.getKind() == OpKind::Attention)
      forward = getFlops(op);
    if (op.getKind() == OpKind::Grad && op.getAttr("of")->text == "attention")
      backward = getFlops(op);
  });
  EXPECT_EQ(getIntegerValue(module->bindAll(forward).value()), 168 * 32);
  EXPECT_TRUE(sameExpr(backward, forward * 5 / 2));
}

} // namespace

namespace {

/// The (query, key) pairs of a causal chunked mask, chunks of `chunk`
/// aligned at 0, the queries being the last `queries` of `keys` positions,
/// counted one by one.
long long countChunkPairs(long long queries, long long keys, long long chunk) {
  long long pairs = 0;
  for (long long query = keys - queries; query < keys; ++query)
    for (long long key = 0; key <= query; ++key)
      if (query >= 0 && key / chunk == query / chunk)
        ++pairs;
  return pairs;
}

// The closed form against a count of every pair: S a multiple of C or not,
// decode (one query), a chunk longer than the keys, more queries than
// keys; bound from symbols too.
TEST(CostTest, ChunkPairsMatchACountOfEveryPair) {
  GiNaC::symbol s("S"), t("T"), c("C");
  Expr symbolic = getChunkPairs(s, t, c);
  for (long long queries = 1; queries <= 12; ++queries)
    for (long long keys = 1; keys <= 12; ++keys)
      for (long long chunk = 1; chunk <= 15; ++chunk) {
        long long expected = countChunkPairs(queries, keys, chunk);
        Expr direct = getChunkPairs(queries, keys, chunk);
        Expr bound =
            symbolic.subs(GiNaC::lst{s == queries, t == keys, c == chunk});
        EXPECT_EQ(getIntegerValue(direct), expected)
            << "S=" << queries << " T=" << keys << " C=" << chunk;
        EXPECT_EQ(getIntegerValue(bound), expected)
            << "S=" << queries << " T=" << keys << " C=" << chunk;
      }
}

/// The attention ops of `module`, in program order.
std::vector<const Op *> attentionsOf(const Module &module) {
  std::vector<const Op *> ops;
  module.getModel()->walk([&](Op &op) {
    if (op.getKind() == OpKind::Attention)
      ops.push_back(&op);
  });
  return ops;
}

// A chunked attention costs 2*(E + F) per pair inside each query's chunk;
// a context-parallel rank its share; sinks 4 per query and head, on the
// rank's own queries and heads.
TEST(CostTest, ChunkedAttentionAndSinksCostTheirPairsAndRows) {
  const char *source = R"(
    dim B = 2, S = 10, H = 4, E = 8, CHUNK = 4;
    axis cp, tp;
    model m {
      q: [B, S/cp, H/tp, E] = input();
      kv: [B, S, H/tp, E] = input();
      s: [H/tp] = input();
      chunked = attention[mask=chunked, window=CHUNK](q, kv, kv);
      sunk = attention[mask=chunked, window=CHUNK](q, kv, kv, s);
      causal = attention[causal](q, kv, kv, s);
    }
  )";
  for (long long cp : {1, 2}) {
    std::unique_ptr<Module> module =
        build(source, "shape-infer",
              {{"cp", std::to_string(cp)}, {"tp", "2"}});
    ASSERT_TRUE(module);
    std::vector<const Op *> ops = attentionsOf(*module);
    ASSERT_EQ(ops.size(), 3u);
    auto flops = [&](const Op *op) {
      return getIntegerValue(module->bindAll(getFlops(*op)).value());
    };
    // Chunks [0, 4), [4, 8), [8, 10): 10 + 10 + 3 = 23 pairs per head and
    // sequence; 2 sequences x 2 local heads, split over cp.
    long long kept = 2 * 2 * 23 / cp;
    long long rows = 2 * 2 * (10 / cp); // Local sequences x heads x queries.
    EXPECT_EQ(flops(ops[0]), kept * 2 * (8 + 8));
    EXPECT_EQ(flops(ops[1]), kept * 2 * (8 + 8) + 4 * rows);
    EXPECT_EQ(flops(ops[2]), 2 * 2 * (10 / cp) * 10 / 2 * 32 + 4 * rows);
  }
}

// A param used only as attention's sinks gets a gradient from the one
// grad[of=attention] op (2.5x the forward, sinks included), reduced over
// the data-parallel axis, and an Adam step like any weight.
TEST(CostTest, SinksGetAGradientAndAnOptimizerStep) {
  const char *source = R"(
    dim B = 2, S = 8, H = 4, E = 8;
    axis dp, tp;
    model m {
      x: [B/dp, S, H/tp, E] = input();
      param w: [E, E];
      param sinks: [H/tp];
      q = einsum[bshe,ef->bshf](x, w);
      o = attention[causal](q, q, q, sinks);
      loss = cross_entropy(o);
    }
  )";
  std::unique_ptr<Module> module =
      build(source, getTrainingPipeline(), {{"dp", "2"}, {"tp", "2"}});
  ASSERT_TRUE(module);
  const Op *forward = nullptr, *backward = nullptr, *adam = nullptr;
  bool reduced = false;
  module->getModel()->walk([&](Op &op) {
    if (op.getKind() == OpKind::Attention)
      forward = &op;
    if (op.getKind() == OpKind::Grad && op.getAttr("of")->text == "attention")
      backward = &op;
    if (op.getKind() == OpKind::Adam &&
        op.getOperand(0)->getName() == "sinks")
      adam = &op;
    if (op.getKind() == OpKind::AllReduce &&
        op.getOperand(0)->getName().startswith("sinks.grad"))
      reduced = true;
  });
  ASSERT_TRUE(forward && backward && adam);
  EXPECT_TRUE(reduced);
  EXPECT_TRUE(sameExpr(getFlops(*backward), getFlops(*forward) * 5 / 2));
  // Every operand gets a gradient, the sinks last: [H/tp].
  ASSERT_EQ(backward->getResults().size(), 4u);
  EXPECT_EQ(backward->getResult(3)->getType().getRank(), 1u);
  EXPECT_TRUE(sameExpr(getFlops(*adam),
                       12 * adam->getResult()->getType().getLocalNumElements()));
}

// The named activations cost their documented FLOPs per element, and
// their generic gradient twice that.
TEST(CostTest, ActivationsCostTheirDocumentedFlops) {
  const char *source = R"(
    dim B = 2, S = 4, F = 16;
    model m {
      param g: [B, S, F];
      param u: [B, S, F];
      r = relu2(g);
      c = swiglu_clamped(r, u);
      loss = cross_entropy(c);
    }
  )";
  std::unique_ptr<Module> module = build(source, "shape-infer,autodiff");
  ASSERT_TRUE(module);
  std::map<std::string, Expr> flops;
  module->getModel()->walk([&](Op &op) {
    std::string kind = op.getKindName().str();
    if (op.getKind() == OpKind::Grad)
      kind = "grad_" + op.getAttr("of")->text;
    flops[kind] = getFlops(op);
  });
  const long long elements = 2 * 4 * 16;
  auto count = [&](const char *kind) {
    return getIntegerValue(module->bindAll(flops[kind]).value());
  };
  EXPECT_EQ(count("relu2"), 2 * elements);
  EXPECT_EQ(count("swiglu_clamped"), 11 * elements);
  EXPECT_EQ(count("grad_relu2"), 2 * 2 * elements);
  EXPECT_EQ(count("grad_swiglu_clamped"), 2 * 11 * elements);
}

} // namespace

namespace {

// An FP8 recipe's linear: its operands are read in FP8 (one byte each), its
// bf16 result written, and the cast of its activation operand reads that in
// bf16 and writes it in FP8; the FLOPs do not change. Its weight gradient
// casts nothing (it reuses the forward's and the data gradient's casts);
// mxfp8 and nvfp4 add their block scales.
/// Two linear layers of a repeat, `h` the first, with the recipe bf16 and
/// `options` declared besides.
std::string getTwoLinearLayers(llvm::StringRef options = "") {
  return (R"(
    dim B = 2, S = 16, D = 32, F = 64, L = 1;
    option precision = "bf16";
  )" + options +
          R"(
    model m {
      x: [B, S, D] = input();
      repeat L {
        param w: [D, F];
        h = einsum[bsd,df->bsf](x, w);
        param w2: [F, D];
        x = add(x, einsum[bsf,fd->bsd](h, w2));
      }
      loss = cross_entropy(x);
    }
  )")
      .str();
}

TEST(CostTest, LowPrecisionGemmsReadQuantizedOperandsAndPayTheirCasts) {
  std::string source = getTwoLinearLayers();
  for (auto [recipe, bytesPerElement] :
       {std::pair<const char *, double>{"fp8", 1}, {"mxfp8", 33.0 / 32},
        {"nvfp4", 9.0 / 16}}) {
    std::unique_ptr<Module> module = build(
        source, "shape-infer,precision,autodiff", {{"precision", recipe}});
    ASSERT_TRUE(module);
    const Op *forward = nullptr, *weightGrad = nullptr;
    module->getModel()->walk([&](Op &op) {
      if (op.getKind() != OpKind::Einsum)
        return;
      if (op.getResult()->getName() == "layer.h")
        forward = &op;
      if (op.getResult()->getName().startswith("layer.w.grad"))
        weightGrad = &op;
    });
    ASSERT_TRUE(forward && weightGrad) << recipe;
    ASSERT_EQ(getLowPrecision(*forward), parsePrecision(recipe));
    const double x = 2 * 16 * 32, w = 32 * 64, h = 2 * 16 * 64;
    double cast = x * 2 + x * bytesPerElement;
    EXPECT_DOUBLE_EQ(
        GiNaC::ex_to<GiNaC::numeric>(*module->bindAll(getCastBytes(*forward)))
            .to_double(),
        cast)
        << recipe;
    EXPECT_DOUBLE_EQ(GiNaC::ex_to<GiNaC::numeric>(
                         *module->bindAll(getBytesAccessed(*forward)))
                         .to_double(),
                     (x + w) * bytesPerElement + h * 2 + cast)
        << recipe;
    EXPECT_TRUE(getCastBytes(*weightGrad).is_zero()) << recipe;
    EXPECT_EQ(getLowPrecision(*weightGrad), parsePrecision(recipe));
    EXPECT_TRUE(sameExpr(*module->bindAll(getFlops(*forward)),
                         Expr(2 * 2 * 16 * 32 * 64)));
  }
}

TEST(CostTest, WeightOnlyGemmsReadTheirWeightsInTheirFormat) {
  // W4A16: the weight in MXFP4 (0.5 + 1/32 bytes an element), the
  // activation and the result in bf16, no cast, FLOPs unchanged; under an
  // FP8 recipe (W4A8) the activation is read and cast in FP8.
  std::string source =
      getTwoLinearLayers("option weight_precision = \"mxfp4\";");
  const double x = 2 * 16 * 32, w = 32 * 64, h = 2 * 16 * 64;
  for (auto [recipe, activationBytes, cast] :
       {std::tuple<const char *, double, double>{"bf16", 2, 0},
        {"fp8", 1, x * 2 + x}}) {
    std::unique_ptr<Module> module =
        build(source, "shape-infer,precision", {{"precision", recipe}});
    ASSERT_TRUE(module);
    const Op *gemm = nullptr;
    module->getModel()->walk([&](Op &op) {
      if (op.getKind() == OpKind::Einsum &&
          op.getResult()->getName() == "layer.h")
        gemm = &op;
    });
    ASSERT_TRUE(gemm);
    EXPECT_EQ(getWeightPrecision(*gemm), Precision::MXFP4);
    EXPECT_DOUBLE_EQ(
        GiNaC::ex_to<GiNaC::numeric>(*module->bindAll(getBytesAccessed(*gemm)))
            .to_double(),
        x * activationBytes + w * (0.5 + 1.0 / 32) + h * 2 + cast)
        << recipe;
    EXPECT_TRUE(sameExpr(*module->bindAll(getFlops(*gemm)),
                         Expr(2 * 2 * 16 * 32 * 64)));
  }
}

TEST(CostTest, LinearGemmsOfOneContractionAndFormatCanShareAKernel) {
  // q and k read x by weights of their own, in one contraction: one kernel
  // can run both (a fused weight). The product of q and another GEMM reads
  // no weight; the output projection contracts another index. Under the
  // FP8 recipe a GEMM reads its input in FP8 and casts it (read in bf16,
  // written in FP8): what GEMMs sharing a kernel move once.
  const char *source = R"(
    dim B = 2, S = 16, D = 32, N = 64, NKV = 16, L = 1;
    option precision = "bf16";
    model m {
      x: [B, S, D] = input();
      repeat L {
        param wq: [D, N];
        param wk: [D, NKV];
        param wo: [N, D];
        q = einsum[bsd,dn->bsn](x, wq);
        k = einsum[bsd,dn->bsn](x, wk);
        a = einsum[bsn,btn->bst](q, einsum[bsd,dn->bsn](x, wq));
        y = einsum[bsn,nd->bsd](q, wo);
        x = add(add(y, x), einsum[bst,btd->bsd](a, x));
      }
      loss = cross_entropy(x);
    }
  )";
  for (auto [recipe, read, cast] :
       {std::tuple<const char *, double, double>{"bf16", 2, 0},
        {"fp8", 1, 2 + 1}}) {
    std::unique_ptr<Module> module =
        build(source, "shape-infer,precision", {{"precision", recipe}});
    ASSERT_TRUE(module);
    std::map<std::string, const Op *> ops;
    module->getModel()->walk([&](Op &op) {
      if (op.getKind() == OpKind::Einsum)
        ops[op.getResult()->getName().str()] = &op;
    });
    const Op *q = ops["layer.q"], *k = ops["layer.k"], *a = ops["layer.a"],
             *y = ops["layer.y"];
    ASSERT_TRUE(q && k && a && y);
    EXPECT_TRUE(isLinearGemm(*q) && isLinearGemm(*y));
    EXPECT_FALSE(isLinearGemm(*a));
    EXPECT_TRUE(canShareKernel(*q, *k)) << recipe;
    EXPECT_FALSE(canShareKernel(*q, *y)) << recipe;
    EXPECT_FALSE(canShareKernel(*q, *a)) << recipe;
    const double x = 2 * 16 * 32;
    EXPECT_TRUE(
        sameExpr(*module->bindAll(getGemmInputBytes(*q)), Expr(x * read)))
        << recipe;
    EXPECT_TRUE(
        sameExpr(*module->bindAll(getGemmInputCastBytes(*q)), Expr(x * cast)))
        << recipe;
  }
}

/// n tokens each routed to k of E experts leave (1 - k/E)^n of them
/// without one; k >= E, or no tokens to go by, reads them all.
TEST(Cost, ActiveExpertsAreThoseThatGetATokenInExpectation) {
  EXPECT_DOUBLE_EQ(getActiveExpertFraction(1, 2, 8), 0.25);
  EXPECT_DOUBLE_EQ(getActiveExpertFraction(4, 2, 8), 175.0 / 256);
  EXPECT_DOUBLE_EQ(getActiveExpertFraction(1, 8, 256), 8.0 / 256);
  EXPECT_GT(getActiveExpertFraction(4096, 8, 256), 1 - 1e-12);
  EXPECT_DOUBLE_EQ(getActiveExpertFraction(3, 8, 8), 1);
  EXPECT_DOUBLE_EQ(getActiveExpertFraction(0, 2, 8), 1);
}

TEST(CostTest, OpsOnExpertSlotsComputeTheRowsTheirTokensFill) {
  // 3 tokens to 2 of 8 experts at 150 % capacity: 9 of the 8 x 4 slot rows
  // hold tokens. The dispatch, the experts' GEMMs, their activation and
  // the combine are on slots; the router and what follows the combine are
  // not.
  const char *source = R"(
    dim T = 3, D = 8, F = 16, E = 8, K = 2, C = 4, CAP = 150;
    axis ep;
    model m {
      x: [T, D] = input();
      param wr: [D, E];
      r = route[topk=K, experts=E](einsum[td,de->te](x, wr));
      d: [E/ep, C, D] = dispatch[capacity=CAP](x, r);
      param w: [E/ep, D, F];
      h = einsum[ecd,edf->ecf](d, w);
      param w2: [E/ep, F, D];
      o: [E/ep, C, D] = einsum[ecf,efd->ecd](silu(h), w2);
      y: [T, D] = combine(o, r);
      loss = cross_entropy(add(y, x));
    }
  )";
  std::unique_ptr<Module> module = build(source, "shape-infer");
  ASSERT_TRUE(module);
  std::map<std::string, std::optional<SlotFill>> fills;
  module->getModel()->walk([&](Op &op) {
    if (!op.getResults().empty())
      fills[op.getResult()->getName().str()] = getSlotFill(op);
  });
  for (const char *name : {"d", "h", "silu", "o", "y"}) {
    ASSERT_TRUE(fills.count(name) && fills[name]) << name;
    EXPECT_TRUE(sameExpr(*module->bindAll(fills[name]->copies), Expr(9)))
        << name;
    EXPECT_TRUE(sameExpr(*module->bindAll(fills[name]->rows), Expr(32)))
        << name;
  }
  // The dispatch writes, and the combine reads, the slots (8 x 4 x 8 bf16
  // elements) beside whole tokens; the ops between are all slots.
  for (const char *name : {"d", "y"}) {
    ASSERT_TRUE(fills[name]->slotBytes) << name;
    EXPECT_TRUE(sameExpr(*module->bindAll(*fills[name]->slotBytes),
                         Expr(8 * 4 * 8 * 2)))
        << name;
  }
  EXPECT_FALSE(fills["h"]->slotBytes);
  for (const char *name : {"r", "add"})
    EXPECT_FALSE(fills.count(name) && fills[name]) << name;
  EXPECT_DOUBLE_EQ(getSlotFillFraction(9, 32), 9.0 / 32);
  EXPECT_DOUBLE_EQ(getSlotFillFraction(40, 32), 1);
  EXPECT_DOUBLE_EQ(getSlotFillFraction(0, 32), 1);
}

} // namespace
