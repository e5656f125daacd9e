//===- Graph.cpp - Values, ops and graphs of the STG IR -------------------===//

#include "stg/IR/Graph.h"

using namespace stg;

const Attribute *Op::getAttr(llvm::StringRef name) const {
  for (const NamedAttribute &attr : attrs)
    if (attr.name == name)
      return &attr.value;
  return nullptr;
}

void Op::setAttr(llvm::StringRef name, Attribute value) {
  for (NamedAttribute &attr : attrs) {
    if (attr.name == name) {
      attr.value = std::move(value);
      return;
    }
  }
  attrs.push_back({name.str(), std::move(value)});
}

void Op::setBody(std::unique_ptr<Graph> graph) {
  body = std::move(graph);
  if (body)
    body->setParentOp(this);
}

Op *Graph::createOp(OpKind kind, SourceLoc loc) {
  ops.push_back(std::make_unique<Op>(kind, loc));
  ops.back()->setParent(this);
  return ops.back().get();
}

Value *Graph::createResult(Op *op, std::string name) {
  values.push_back(std::make_unique<Value>(std::move(name), op,
                                           op->getResults().size()));
  op->addResult(values.back().get());
  return values.back().get();
}

Value *Graph::createArgument(std::string name) {
  values.push_back(std::make_unique<Value>(std::move(name), nullptr,
                                           arguments.size()));
  arguments.push_back(values.back().get());
  return values.back().get();
}

Op *Graph::getTerminator() const {
  if (ops.empty() || ops.back()->getKind() != OpKind::Yield)
    return nullptr;
  return ops.back().get();
}
