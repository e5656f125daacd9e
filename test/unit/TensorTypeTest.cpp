//===- TensorTypeTest.cpp - Distributions and tensor types ----------------===//

#include "stg/IR/Module.h"

#include "gtest/gtest.h"

using namespace stg;

namespace {

class TensorTypeTest : public ::testing::Test {
protected:
  void SetUp() override {
    for (const char *name : {"B", "S", "D"})
      module.addDim(name, {});
    dp = module.addAxis("dp", {});
    tp = module.addAxis("tp", {});
    sp = module.addAxis("sp", {});
    sp->alias = tp;
    sp->condition = "sequence_parallel";
  }
  Expr sym(const char *name) { return *module.getSymbols().lookup(name); }
  std::string print(const TensorType &type) {
    std::string text;
    llvm::raw_string_ostream os(text);
    type.print(os, module.getPrinter());
    return os.str();
  }
  /// bf16[B/dp, S/(sp*tp?)...]: the activation layout of a Megatron block.
  TensorType activation(bool partial) {
    Distribution dist(3);
    dist.addPartition(0, dp);
    dist.addPartition(1, sp);
    if (partial)
      dist.addPartialSum(tp);
    return TensorType(ElementType::BF16, {sym("B"), sym("S"), sym("D")}, dist);
  }

  Module module;
  Axis *dp, *tp, *sp;
};

TEST_F(TensorTypeTest, DistributionOnEachAxis) {
  TensorType type = activation(/*partial=*/true);
  const Distribution &dist = type.getDistribution();
  EXPECT_EQ(dist.on(dp).kind, Distribution::Kind::Partition);
  EXPECT_EQ(dist.on(dp).dim, 0u);
  EXPECT_EQ(dist.on(sp).dim, 1u);
  EXPECT_EQ(dist.on(tp).kind, Distribution::Kind::PartialSum);
  Axis *other = module.addAxis("cp", {});
  EXPECT_EQ(dist.on(other).kind, Distribution::Kind::Duplicated);
}

TEST_F(TensorTypeTest, PrintsTheSourceSyntax) {
  EXPECT_EQ(print(activation(false)), "bf16[B/dp, S/sp, D]");
  EXPECT_EQ(print(activation(true)), "bf16[B/dp, S/sp, D] @ tp");
  Distribution dist(1);
  dist.addPartition(0, sp);
  dist.addPartition(0, dp);
  dist.addPartialSum(tp);
  TensorType type(ElementType::I32, {sym("D") / 2}, dist);
  EXPECT_EQ(print(type), "i32[(D/2)/(sp*dp)] @ tp");
}

TEST_F(TensorTypeTest, LocalExtentsDivideByActiveAxesOnly) {
  TensorType type = activation(false);
  EXPECT_TRUE(type.getLocalDim(0).is_equal(sym("B") / sym("dp")));
  // An active alias divides by the axis it aliases.
  EXPECT_TRUE(type.getLocalDim(1).is_equal(sym("S") / sym("tp")));
  sp->active = false; // sequence_parallel off: sp has degree 1.
  EXPECT_TRUE(type.getLocalDim(1).is_equal(sym("S")));
  EXPECT_TRUE(type.getLocalNumElements().is_equal(sym("B") * sym("S") *
                                                  sym("D") / sym("dp")));
}

TEST_F(TensorTypeTest, ReplicatedExtentsKeepOneWholeOnARank) {
  // Key/value heads over tp and over sp (an alias of tp): a rank holds
  // KVH/tp of them, or one whole where tp outnumbers them; D still divides.
  module.addDim("KVH", {});
  Expr heads = sym("KVH");
  tp->replicatedExtents.push_back(heads);
  for (Axis *axis : {tp, sp}) {
    Distribution dist(2);
    dist.addPartition(0, axis);
    dist.addPartition(1, axis);
    TensorType type(ElementType::BF16, {heads, sym("D")}, dist);
    Expr local = type.getLocalDim(0);
    GiNaC::exmap fewer{{heads, 4}, {tp->degree, 8}},
        more{{heads, 16}, {tp->degree, 8}};
    EXPECT_TRUE(local.subs(fewer).is_equal(1));
    EXPECT_TRUE(local.subs(more).is_equal(2));
    EXPECT_TRUE(type.getLocalDim(1).is_equal(sym("D") / tp->degree));
  }
  EXPECT_FALSE(dp->mayReplicate(heads));
}

TEST_F(TensorTypeTest, EqualityComparesShapeAndLayout) {
  EXPECT_EQ(activation(false), activation(false));
  EXPECT_NE(activation(false), activation(true));
  Distribution a(1), b(1);
  a.addPartialSum(dp);
  a.addPartialSum(tp);
  b.addPartialSum(tp);
  b.addPartialSum(dp);
  EXPECT_EQ(a, b) << "PartialSum axes are a set";
  Distribution c(1), d(1);
  c.addPartition(0, dp);
  c.addPartition(0, tp);
  d.addPartition(0, tp);
  d.addPartition(0, dp);
  EXPECT_NE(c, d) << "partition order is major to minor";
}

TEST_F(TensorTypeTest, FindsAnAxisUsedTwice) {
  Distribution dist(2);
  dist.addPartition(0, tp);
  EXPECT_EQ(dist.findRepeatedAxis(), nullptr);
  dist.addPartialSum(tp);
  EXPECT_EQ(dist.findRepeatedAxis(), tp);
}

TEST(ElementType, NamesAndSizes) {
  EXPECT_EQ(parseElementType("fp32"), ElementType::FP32);
  EXPECT_FALSE(parseElementType("float").has_value());
  EXPECT_EQ(getElementTypeName(ElementType::BF16), "bf16");
  EXPECT_EQ(getElementTypeBytes(ElementType::BF16), 2u);
  EXPECT_EQ(getElementTypeBytes(ElementType::I64), 8u);
}

TEST(Module, MakesUniqueNames) {
  Module module;
  EXPECT_EQ(module.makeUniqueName("x"), "x");
  EXPECT_EQ(module.makeUniqueName("x"), "x_1");
  EXPECT_EQ(module.makeUniqueName("x_2"), "x_2");
  // x_2 is taken by the user; the counter skips it.
  EXPECT_EQ(module.makeUniqueName("x"), "x_3");
}

} // namespace
