//===- ExprTest.cpp - Symbolic expressions and their printer --------------===//

#include "stg/IR/Expr.h"

#include "gtest/gtest.h"

using namespace stg;

namespace {

class ExprPrinterTest : public ::testing::Test {
protected:
  std::string print(const Expr &e) { return ExprPrinter(&symbols).str(e); }

  SymbolTable symbols;
  // Declaration order B, S, D, NH, tp decides factor order when printing.
  Expr b = symbols.getOrCreate("B"), s = symbols.getOrCreate("S"),
       d = symbols.getOrCreate("D"), nh = symbols.getOrCreate("NH"),
       tp = symbols.getOrCreate("tp");
};

TEST_F(ExprPrinterTest, ProductsFollowDeclarationOrder) {
  EXPECT_EQ(print(d * s * b * 2), "2*B*S*D");
  EXPECT_EQ(print(tp * b), "B*tp");
}

TEST_F(ExprPrinterTest, FactoredSumsLeadWithAPositiveTerm) {
  // GiNaC stores a sum factor with either sign depending on symbol serials;
  // the printer picks the one whose first term in printing order (B before
  // S) is positive, so both forms print alike.
  Expr stored = GiNaC::mul(GiNaC::numeric(-2), d,
                                      GiNaC::add(s, -b)).hold();
  Expr negated = GiNaC::mul(GiNaC::numeric(2), d,
                                       GiNaC::add(b, -s)).hold();
  EXPECT_EQ(print(stored), "2*(B - S)*D");
  EXPECT_EQ(print(negated), "2*(B - S)*D");
  EXPECT_EQ(print(d * (b - s) / (s - b + tp)), "-(B - S)*D/(B - S - tp)");
}

TEST_F(ExprPrinterTest, DivisionIsWrittenAsAFraction) {
  EXPECT_EQ(print(d / nh), "D/NH");
  EXPECT_EQ(print(s / (tp * nh)), "S/(NH*tp)");
  EXPECT_EQ(print(GiNaC::pow(d, 2) / 4), "D^2/4");
  EXPECT_EQ(print(1 / d), "1/D");
}

TEST_F(ExprPrinterTest, SumsPutConstantsLastAndUseMinus) {
  EXPECT_EQ(print(1 + d), "D + 1");
  EXPECT_EQ(print(s - b), "S - B");
  EXPECT_EQ(print(-b - s), "-B - S");
  EXPECT_EQ(print(d - 1), "D - 1");
  EXPECT_EQ(print((d + 1) * nh), "(D + 1)*NH");
}

TEST_F(ExprPrinterTest, NumbersAreExact) {
  EXPECT_EQ(print(Expr(GiNaC::numeric(3, 8))), "3/8");
  EXPECT_EQ(print(Expr(-4)), "-4");
  EXPECT_EQ(print(-d), "-D");
}

TEST_F(ExprPrinterTest, SymbolNamesAreSortedAndDistinct) {
  EXPECT_EQ(getSymbolNames(2 * b * s * d / (tp * b + 1) + s),
            (std::set<std::string>{"B", "D", "S", "tp"}));
  EXPECT_TRUE(getSymbolNames(Expr(42)).empty());
}

TEST(SymbolTable, ReturnsTheSameSymbolForTheSameName) {
  SymbolTable symbols;
  GiNaC::symbol first = symbols.getOrCreate("D");
  GiNaC::symbol again = symbols.getOrCreate("D");
  EXPECT_TRUE(Expr(first).is_equal(again));
  // A fresh GiNaC symbol with the same name is a different symbol.
  EXPECT_FALSE(Expr(first).is_equal(GiNaC::symbol("D")));
  EXPECT_EQ(symbols.ordinal(first), 0u);
  EXPECT_EQ(symbols.ordinal(symbols.getOrCreate("S")), 1u);
  EXPECT_FALSE(symbols.lookup("X").has_value());
}

TEST(ParseDecimal, GivesExactRationals) {
  EXPECT_TRUE(parseDecimal("0.125")->is_equal(GiNaC::numeric(1, 8)));
  EXPECT_TRUE(parseDecimal("42")->is_equal(42));
  EXPECT_TRUE(parseDecimal("1e3")->is_equal(1000));
  EXPECT_TRUE(parseDecimal("2.5e-1")->is_equal(GiNaC::numeric(1, 4)));
  EXPECT_FALSE(parseDecimal("1e999").has_value());
  EXPECT_FALSE(parseDecimal("").has_value());
}

TEST(GetIntegerValue, AcceptsOnlyIntegerConstants) {
  SymbolTable symbols;
  EXPECT_EQ(getIntegerValue(Expr(-3)), -3);
  EXPECT_FALSE(getIntegerValue(Expr(GiNaC::numeric(1, 2))).has_value());
  EXPECT_FALSE(getIntegerValue(Expr(symbols.getOrCreate("D"))).has_value());
}

} // namespace
