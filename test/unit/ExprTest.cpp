//===- ExprTest.cpp - Unit tests of symbolic expressions ------------------===//

#include "stg/IR/Expr.h"

#include "gtest/gtest.h"

using namespace stg;

namespace {

TEST(ExprPrinter, WritesDivisionAsAFraction) {
  SymbolTable symbols;
  Expr d = symbols.getOrCreate("D"), nh = symbols.getOrCreate("NH");
  EXPECT_EQ(ExprPrinter(&symbols).str(d / nh), "D/NH");
}

} // namespace
