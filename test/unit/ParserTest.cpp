//===- ParserTest.cpp - The front end through its library API -------------===//
//
// What an embedding compiler sees: parseSource/parseFile build a Module or
// return null with located diagnostics; nothing throws.
//
//===----------------------------------------------------------------------===//

#include "stg/IR/Printer.h"
#include "stg/Parse/Parser.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include "gtest/gtest.h"

#include <fstream>

using namespace stg;

namespace {

struct ParseResult {
  std::unique_ptr<Module> module;
  std::string diagnostics;
};

ParseResult parse(llvm::StringRef source, ParseOptions options = {}) {
  ParseResult result;
  llvm::raw_string_ostream os(result.diagnostics);
  DiagnosticEngine diags(os);
  result.module = parseSource(source, "test.stg", options, diags);
  os.flush();
  return result;
}

std::string printed(const Module &module) {
  std::string text;
  llvm::raw_string_ostream os(text);
  printModule(os, module);
  return os.str();
}

TEST(Parser, BuildsDimsAxesAndTheModel) {
  auto result = parse(R"(
    dim D = 8, F = 4 * D;
    axis tp;
    model m {
      x: [D] = input();
      param w: [D, F/tp];
      y = einsum[d,df->f](x, w);
    }
  )");
  ASSERT_TRUE(result.module) << result.diagnostics;
  Module &module = *result.module;
  ASSERT_EQ(module.getDims().size(), 2u);
  EXPECT_EQ(module.getPrinter().str(*module.lookupDim("F")->value), "4*D");
  Graph *model = module.getModel();
  ASSERT_TRUE(model);
  ASSERT_EQ(model->getOps().size(), 3u);
  const Op &einsum = *model->getOps()[2];
  EXPECT_EQ(einsum.getKind(), OpKind::Einsum);
  EXPECT_EQ(einsum.getResult()->getName(), "y");
  EXPECT_EQ(einsum.getOperand(1)->getName(), "w");
  const TensorType &w = einsum.getOperand(1)->getType();
  EXPECT_EQ(w.getDistribution().on(module.lookupAxis("tp")).kind,
            Distribution::Kind::Partition);
  EXPECT_EQ(einsum.getLoc().line, 7u);
  EXPECT_EQ(einsum.getLoc().col, 11u);
}

TEST(Parser, ReportsLocatedErrorsWithCaret) {
  auto result = parse("model m {\n  y = relu(x);\n}\n");
  EXPECT_FALSE(result.module);
  EXPECT_EQ(result.diagnostics, "test.stg:2:12: error: unknown name 'x'\n"
                                "  y = relu(x);\n"
                                "           ^\n");
}

TEST(Parser, ReportsSeveralSyntaxErrors) {
  auto result = parse("dim A = 1\ndim B = 2;\naxis tp tp;\n");
  EXPECT_FALSE(result.module);
  EXPECT_NE(result.diagnostics.find("test.stg:1:10: error:"), std::string::npos)
      << result.diagnostics;
  EXPECT_NE(result.diagnostics.find("test.stg:3:9: error:"), std::string::npos)
      << result.diagnostics;
}

TEST(Parser, OverridesApplyAfterTheFilesOwnSets) {
  ParseOptions options;
  options.overrides = {{"D", "64"}, {"sequence_parallel", "false"}};
  auto result = parse(R"(
    dim D = 8;
    set D = 16;
    axis tp;
    option sequence_parallel = true;
    axis sp = tp if sequence_parallel;
  )",
                      options);
  ASSERT_TRUE(result.module) << result.diagnostics;
  EXPECT_TRUE(result.module->lookupDim("D")->value->is_equal(64));
  EXPECT_FALSE(result.module->lookupAxis("sp")->active);
  EXPECT_EQ(result.module->lookupAxis("sp")->resolve(), nullptr);
}

TEST(Parser, RejectsAnUnknownOverride) {
  ParseOptions options;
  options.overrides = {{"Q", "1"}};
  auto result = parse("dim D = 8;", options);
  EXPECT_FALSE(result.module);
  EXPECT_EQ(result.diagnostics,
            "stagec: error: --set Q=1: no dim, option or axis named 'Q'\n");
}

TEST(Parser, SwitchesSetDeclaredBoolOptionsBeforeAxesResolve) {
  ParseOptions options;
  options.overrides = {{"weight_sharded", "false"}};
  options.switches = {{"weight_sharded", true}, {"absent", true},
                      {"label", false}};
  auto result = parse(R"(
    axis dp;
    option weight_sharded = false;
    option label = "x";
    axis fsdp = dp if weight_sharded;
  )",
                      options);
  ASSERT_TRUE(result.module) << result.diagnostics;
  EXPECT_TRUE(result.module->lookupAxis("fsdp")->active); // after overrides
  EXPECT_FALSE(result.module->lookupOption("absent"));    // not declared
  EXPECT_EQ(std::get<std::string>(result.module->lookupOption("label")->value),
            "x"); // not a bool: left alone
}

TEST(Parser, RepeatCarriesReboundNames) {
  auto result = parse(R"(
    dim D = 8, L = 3;
    block f(x: [D]) -> [D] { return relu(x); }
    model m {
      x: [D] = input();
      repeat L as layer { x = f(x); }
      y = relu(x);
    }
  )");
  ASSERT_TRUE(result.module) << result.diagnostics;
  Graph *model = result.module->getModel();
  const Op &repeat = *model->getOps()[1];
  ASSERT_EQ(repeat.getKind(), OpKind::Repeat);
  ASSERT_EQ(repeat.getOperands().size(), 1u);
  EXPECT_EQ(repeat.getOperand(0)->getName(), "x");
  Graph *body = repeat.getBody();
  ASSERT_TRUE(body);
  EXPECT_EQ(body->getArguments()[0]->getName(), "layer.x");
  EXPECT_EQ(body->getOps()[0]->getResult()->getName(), "layer.f.relu");
  ASSERT_TRUE(body->getTerminator());
  // After the loop `x` is the repeat's result.
  const Op &relu = *model->getOps()[2];
  EXPECT_EQ(relu.getOperand(0), repeat.getResult(0));
}

TEST(Parser, ImportsResolveAndCyclesAreReported) {
  llvm::SmallString<128> dir;
  ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("stg-parser-test", dir));
  auto write = [&](const char *name, const char *text) {
    llvm::SmallString<128> path(dir);
    llvm::sys::path::append(path, name);
    std::ofstream(std::string(path)) << text;
    return std::string(path);
  };
  write("a.stg", "import \"b.stg\";\ndim A = 1;\n");
  write("b.stg", "import \"a.stg\";\n");
  std::string main = write("main.stg", "import \"a.stg\";\n");

  std::string text;
  llvm::raw_string_ostream os(text);
  DiagnosticEngine diags(os);
  EXPECT_FALSE(parseFile(main, {}, diags));
  EXPECT_NE(os.str().find("error: import cycle: a.stg -> b.stg -> a.stg"),
            std::string::npos)
      << os.str();
  llvm::sys::fs::remove_directories(dir);
}

TEST(Parser, PrintsStably) {
  const char *source = R"(
    dim B = 2, S = 4, D = 8;
    axis dp, tp;
    model m {
      x: [B/dp, S, D] = input();
      y: [B/dp, S, D] @ tp = scale[0.5](x);
    }
  )";
  auto first = parse(source), second = parse(source);
  ASSERT_TRUE(first.module && second.module);
  EXPECT_EQ(printed(*first.module), printed(*second.module));
  EXPECT_NE(printed(*first.module).find(
                "%y = scale[factor=1/2](%x) : bf16[B/dp, S, D] @ tp"),
            std::string::npos)
      << printed(*first.module);
}

TEST(Parser, BlockAttributeParametersChooseEachCallsVariant) {
  auto result = parse(R"(
    dim B = 2, S = 4, H = 2, E = 8, WIN = 2;
    block attn[mask = "causal", window = 0, rope = true](q: [B, S, H, E]) {
      if rope { q = relu(q); }
      return attention[mask = mask, window = window](q, q, q);
    }
    model m {
      q: [B, S, H, E] = input();
      a = attn(q);
      b = attn[mask = sliding, window = 2 * WIN, rope = false](a);
    }
  )");
  ASSERT_TRUE(result.module) << result.diagnostics;
  Graph &model = *result.module->getModel();
  llvm::SmallVector<const Op *, 2> attentions;
  unsigned relus = 0;
  for (const auto &op : model.getOps()) {
    relus += op->getKind() == OpKind::Relu;
    if (op->getKind() == OpKind::Attention)
      attentions.push_back(op.get());
  }
  EXPECT_EQ(relus, 1u); // The second call builds no `if rope` branch.
  ASSERT_EQ(attentions.size(), 2u);
  EXPECT_EQ(attentions[0]->getAttr("mask")->text, "causal");
  EXPECT_EQ(attentions[1]->getAttr("mask")->text, "sliding");
  EXPECT_EQ(result.module->getPrinter().str(
                attentions[1]->getAttr("window")->expr),
            "2*WIN");
}

/// A chain of `depth` blocks, each calling the one before twice.
static std::string blockChain(unsigned depth) {
  std::string source = "dim D = 8;\nblock b0(x: [D]) { return relu(x); }\n";
  for (unsigned i = 1; i <= depth; ++i)
    source += "block b" + std::to_string(i) + "(x: [D]) { return b" +
              std::to_string(i - 1) + "(b" + std::to_string(i - 1) +
              "(x)); }\n";
  return source + "model m {\n  x: [D] = input();\n  y = b" +
         std::to_string(depth) + "(x);\n}\n";
}

TEST(Parser, InliningIsRefusedAtTheCallThatPassesTheLimit) {
  auto small = parse(blockChain(8));
  ASSERT_TRUE(small.module) << small.diagnostics;
  // The input, 256 relus, and a layout for each untyped argument.
  EXPECT_EQ(small.module->getModel()->getOps().size(), 1u + 256u + 255u);
  // 2^40 copies of b0: refused before any is built.
  auto huge = parse(blockChain(40));
  EXPECT_FALSE(huge.module);
  EXPECT_NE(huge.diagnostics.find("test.stg:45:7: error: calling block 'b40' "
                                  "here would inline about"),
            std::string::npos)
      << huge.diagnostics;
}

TEST(Parser, NeverThrowsOnGarbage) {
  for (const char *source :
       {"", "\xff\xfe", "model", "dim = ;", "block b( { }", "model m { x = ",
        "dim D = 1/0;", "dim D = 2^1000;", "model m { repeat 1 { } }"}) {
    auto result = parse(source);
    (void)result;
  }
  SUCCEED();
}

} // namespace
