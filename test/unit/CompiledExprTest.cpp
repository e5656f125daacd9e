//===- CompiledExprTest.cpp - Exact evaluation against GiNaC's ------------===//
//
// A CompiledExpr must give GiNaC's substitution's number whenever it gives
// one, and nothing where it cannot be sure (overflow, a pole, what it does
// not compile): the op numbers of the search rest on it.
//
//===----------------------------------------------------------------------===//

#include "stg/IR/CompiledExpr.h"

#include "gtest/gtest.h"

#include <random>

using namespace stg;

namespace {

class CompiledExprTest : public ::testing::Test {
protected:
  /// `e` evaluated with `values` both ways; fails the test if the compiled
  /// answer is not GiNaC's. Returns the compiled answer.
  std::optional<Rational> check(const Expr &e, const GiNaC::exmap &values) {
    SymbolSlots slots;
    CompiledExpr program = CompiledExpr::compile(e, slots);
    std::vector<std::optional<Rational>> bound;
    for (const Expr &symbol : slots.getSymbols()) {
      auto found = values.find(symbol);
      bound.push_back(found == values.end()
                          ? std::nullopt
                          : Rational::fromNumeric(found->second));
    }
    std::optional<Rational> exact = program.evaluate(bound);
    std::optional<Expr> reference = trySubstitute(e, values);
    if (exact) {
      EXPECT_TRUE(reference)
          << e << ": compiled " << describe(*exact) << ", GiNaC a pole";
      if (reference) {
        EXPECT_TRUE(reference->is_equal(toNumeric(*exact)))
            << e << ": compiled " << describe(*exact) << ", GiNaC "
            << *reference;
      }
    }
    return exact;
  }
  static GiNaC::numeric toNumeric(__int128 value) {
    bool negative = value < 0;
    unsigned __int128 magnitude =
        negative ? -(unsigned __int128)value : (unsigned __int128)value;
    GiNaC::numeric high((unsigned long)(magnitude >> 64));
    GiNaC::numeric low((unsigned long)magnitude);
    GiNaC::numeric result = high * GiNaC::numeric(2).power(64) + low;
    return negative ? -result : result;
  }
  static Expr toNumeric(const Rational &value) {
    return toNumeric(value.num) / toNumeric(value.den);
  }
  static std::string describe(const Rational &value) {
    return std::to_string((long long)value.num) + "/" +
           std::to_string((long long)value.den);
  }

  SymbolTable symbols;
  Expr b = symbols.getOrCreate("B"), s = symbols.getOrCreate("S"),
       d = symbols.getOrCreate("D"), tp = symbols.getOrCreate("tp");
};

Expr call(llvm::StringRef name, llvm::ArrayRef<Expr> arguments) {
  return *makeFunction(name, arguments);
}

TEST_F(CompiledExprTest, CostFormulas) {
  GiNaC::exmap values{{b, 4}, {s, 8192}, {d, 8192}, {tp, 8}};
  std::optional<Rational> flops = check(2 * b * s * d * d / tp, values);
  ASSERT_TRUE(flops);
  EXPECT_EQ((long long)flops->num, 2LL * 4 * 8192 * 8192 * 8192 / 8);
  EXPECT_TRUE(flops->isInteger());
  // An average by design: a fraction, in lowest terms.
  std::optional<Rational> half = check(b * s * 5 / (2 * tp * 3), values);
  ASSERT_TRUE(half);
  EXPECT_EQ((long long)half->num, 10240);
  EXPECT_EQ((long long)half->den, 3);
  EXPECT_TRUE(check(b - s + GiNaC::numeric(3, 7), values));
}

TEST_F(CompiledExprTest, IntegerFunctions) {
  GiNaC::exmap values{{b, 7}, {s, 2}, {d, -7}, {tp, 3}};
  auto value = [&](const Expr &e) {
    std::optional<Rational> exact = check(e, values);
    EXPECT_TRUE(exact && exact->isInteger()) << e;
    return exact ? (long long)exact->num : 0;
  };
  EXPECT_EQ(value(call("floor", {b / s})), 3);
  EXPECT_EQ(value(call("ceil", {b / s})), 4);
  EXPECT_EQ(value(call("floor", {d / s})), -4);
  EXPECT_EQ(value(call("ceil", {d / s})), -3);
  EXPECT_EQ(value(call("min", {b, tp})), 3);
  EXPECT_EQ(value(call("max", {call("floor", {b / s}), tp})), 3);
  std::optional<Rational> larger = check(call("max", {b / s, tp}), values);
  ASSERT_TRUE(larger);
  EXPECT_EQ(describe(*larger), "7/2");
  EXPECT_EQ(value(call("min", {tp, 3 * b / 7})), 3); // Equal: either.
  EXPECT_EQ(value(call("ceil", {call("max", {b, tp}) / tp})), 3);
}

TEST_F(CompiledExprTest, OverflowLeavesItToGiNaC) {
  GiNaC::exmap values{{b, GiNaC::numeric(1L << 40)},
                      {s, GiNaC::numeric(1L << 40)},
                      {d, 3},
                      {tp, 1}};
  // 2^160 does not fit 128 bits; GiNaC has it.
  EXPECT_FALSE(check(b * b * b * s, values));
  EXPECT_FALSE(check(GiNaC::pow(b, 4), values));
  EXPECT_FALSE(check(1 / (b * b * b * s) + d, values));
  // Within 128 bits, still exact.
  std::optional<Rational> big = check(b * s / d, values);
  ASSERT_TRUE(big);
  EXPECT_EQ(big->num, (__int128(1) << 80));
  EXPECT_EQ((long long)big->den, 3);
}

TEST_F(CompiledExprTest, PolesAndMissingValuesGiveNothing) {
  GiNaC::exmap values{{b, 4}, {s, 4}};
  EXPECT_FALSE(check(d / (b - s), values));
  EXPECT_FALSE(check(1 / (b - 4), values));
  EXPECT_FALSE(check(b * d, values)); // No value for D.
  SymbolSlots slots;
  EXPECT_FALSE(CompiledExpr::compile(GiNaC::sqrt(b), slots).isValid());
  EXPECT_FALSE(CompiledExpr::compile(b * 0.5, slots).isValid());
  EXPECT_FALSE(CompiledExpr::compile(GiNaC::pow(b, GiNaC::numeric(1, 2)), slots)
                   .isValid());
  EXPECT_TRUE(CompiledExpr::compile(b * s, slots).isValid());
}

TEST_F(CompiledExprTest, RandomFormulasAgreeWithGiNaC) {
  std::mt19937_64 random(20261124);
  auto pick = [&](int n) { return int(random() % uint64_t(n)); };
  std::vector<Expr> leaves{b, s, d, tp};
  // Sums, products, quotients, powers and the functions of random leaves
  // and constants, small enough to read when one fails.
  std::function<Expr(int)> make = [&](int depth) -> Expr {
    if (depth == 0 || pick(4) == 0) {
      if (pick(3) == 0)
        return GiNaC::numeric(pick(41) - 20, 1 + pick(6));
      return leaves[pick(int(leaves.size()))];
    }
    Expr x = make(depth - 1), y = make(depth - 1);
    switch (pick(9)) {
    case 0:
      return x + y;
    case 1:
      return x - y;
    case 2:
      return x * y;
    case 3:
      return x / y;
    case 4:
      return GiNaC::pow(x, 1 + pick(3));
    case 5:
      return call("floor", {x});
    case 6:
      return call("ceil", {x / y});
    case 7:
      return call("min", {x, y});
    default:
      return call("max", {x, y});
    }
  };
  unsigned answered = 0, poles = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    Expr e;
    try {
      e = make(4);
    } catch (const std::exception &) {
      continue; // A constant zero divisor: GiNaC refuses to build it.
    }
    GiNaC::exmap values;
    for (const Expr &leaf : leaves) {
      // Mostly degrees and dims, sometimes huge, zero or negative.
      long value =
          pick(5) == 0 ? (1L << (30 + pick(30))) + pick(7) : pick(20) - 3;
      values[leaf] = GiNaC::numeric(value);
    }
    if (check(e, values))
      ++answered;
    else if (!trySubstitute(e, values))
      ++poles;
  }
  // Most formulas are answered without GiNaC; the rest were checked to
  // give nothing rather than a different number.
  EXPECT_GT(answered, 1500u);
  EXPECT_GT(poles, 0u);
}

} // namespace
