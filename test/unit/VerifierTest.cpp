//===- VerifierTest.cpp - Structural checks of hand-built IR --------------===//
//
// The parser never builds invalid IR, so the verifier's errors are exercised
// here on graphs built by hand, as a pass with a bug would leave them.
//
//===----------------------------------------------------------------------===//

#include "stg/IR/Module.h"
#include "stg/IR/Verifier.h"

#include "gtest/gtest.h"

using namespace stg;

namespace {

class VerifierTest : public ::testing::Test {
protected:
  void SetUp() override {
    module.addDim("D", {});
    graph = module.createModel("m", {});
  }
  Value *input(const char *name) {
    Op *op = graph->createOp(OpKind::Input, {});
    Value *value = graph->createResult(op, name);
    Distribution dist(1);
    value->setType(TensorType(ElementType::BF16,
                              {*module.getSymbols().lookup("D")}, dist));
    return value;
  }
  /// A repeat carrying `x` through a body with one argument, `layer.x`,
  /// and an empty yield (the test decides what it passes).
  Op *repeatOver(Value *x) {
    Op *repeat = graph->createOp(OpKind::Repeat, {});
    repeat->setAttr("count", Attribute::getExpr(AttrKind::Expr, 2));
    repeat->setAttr("name", Attribute::getText(AttrKind::String, "layer"));
    repeat->addOperand(x);
    repeat->setBody(std::make_unique<Graph>("layer"));
    repeat->getBody()->createArgument("layer.x");
    repeat->getBody()->createOp(OpKind::Yield, {});
    return repeat;
  }
  std::string verify() {
    std::string text;
    llvm::raw_string_ostream os(text);
    DiagnosticEngine diags(os);
    (void)verifyModule(module, diags);
    return os.str();
  }

  Module module;
  Graph *graph = nullptr;
};

TEST_F(VerifierTest, AcceptsWellFormedIR) {
  Value *x = input("x");
  Op *relu = graph->createOp(OpKind::Relu, {});
  relu->addOperand(x);
  graph->createResult(relu, "y");
  EXPECT_EQ(verify(), "");
}

TEST_F(VerifierTest, RejectsUseBeforeDefinition) {
  Op *relu = graph->createOp(OpKind::Relu, {});
  Value *later = nullptr;
  graph->createResult(relu, "y");
  later = input("x");
  relu->addOperand(later);
  EXPECT_NE(verify().find("operand '%x' of 'relu' is not defined before its use"),
            std::string::npos);
}

TEST_F(VerifierTest, RejectsDuplicateNamesAndWrongArity) {
  Value *x = input("x");
  Op *add = graph->createOp(OpKind::Add, {});
  add->addOperand(x);
  graph->createResult(add, "x");
  std::string errors = verify();
  EXPECT_NE(errors.find("value name '%x' is defined twice"), std::string::npos);
  EXPECT_NE(errors.find("'add' has 1 operands"), std::string::npos);
}

TEST_F(VerifierTest, RejectsMissingAttributesAndTypes) {
  Op *reduce = graph->createOp(OpKind::Reduce, {});
  reduce->addOperand(input("x"));
  graph->createResult(reduce, "y");
  Op *untyped = graph->createOp(OpKind::Input, {});
  graph->createResult(untyped, "z");
  std::string errors = verify();
  EXPECT_NE(errors.find("'reduce' lacks attribute 'kind'"), std::string::npos);
  EXPECT_NE(errors.find("result of 'input' has no type"), std::string::npos);
}

TEST_F(VerifierTest, ChecksRepeatBodies) {
  Op *repeat = repeatOver(input("x"));
  Value *arg = repeat->getBody()->getArguments()[0];
  repeat->getBody()->getTerminator()->addOperand(arg);
  graph->createResult(repeat, "x_1");
  EXPECT_EQ(verify(), "");

  // A value of the body is not visible after the repeat.
  Op *relu = graph->createOp(OpKind::Relu, {});
  relu->addOperand(arg);
  graph->createResult(relu, "y");
  EXPECT_NE(verify().find("operand '%layer.x' of 'relu' is not defined"),
            std::string::npos);
}

TEST_F(VerifierTest, RejectsAYieldCountMismatch) {
  Op *repeat = repeatOver(input("x"));
  graph->createResult(repeat, "x_1");
  EXPECT_NE(verify().find("'yield' passes 0 values, the repeat carries 1"),
            std::string::npos);
}

TEST_F(VerifierTest, ChecksBodyLayers) {
  Op *repeat = repeatOver(input("x"));
  Graph &body = *repeat->getBody();
  body.setNumLayers(2);
  Value *arg = body.getArguments()[0];
  // Layer 0 computes `a`, layer 1 reads it: forward order.
  Op *first = body.createOpBefore(body.getTerminator(), OpKind::Relu, {});
  first->addOperand(arg);
  Value *a = body.createResult(first, "layer.a");
  Op *second = body.createOpBefore(body.getTerminator(), OpKind::Relu, {});
  second->setBodyLayer(1);
  second->addOperand(a);
  Value *b = body.createResult(second, "layer.b");
  body.getTerminator()->setBodyLayer(1);
  body.getTerminator()->addOperand(b);
  graph->createResult(repeat, "x_1");
  EXPECT_EQ(verify(), "");

  // An op inserted next to another shares its layer.
  EXPECT_EQ(body.createOpAfter(second, OpKind::Layout, {})->getBodyLayer(), 1u);
  body.eraseOp(body.getOps()[2].get());

  // Layer 0 reading layer 1's value runs against the pipeline.
  second->setBodyLayer(0);
  first->setBodyLayer(1);
  EXPECT_NE(verify().find("'relu' in body layer 0 reads '%layer.a' of layer 1, "
                          "against the forward order"),
            std::string::npos);
  first->setBodyLayer(2);
  EXPECT_NE(verify().find("'relu' is in layer 2 of a body of 2 layers"),
            std::string::npos);
}

} // namespace
