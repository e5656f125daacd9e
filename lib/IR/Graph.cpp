//===- Graph.cpp - Values, ops and graphs of the STG IR -------------------===//

#include "stg/IR/Graph.h"

#include "llvm/ADT/STLExtras.h"

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

Op *Graph::insertOp(size_t position, OpKind kind, SourceLoc loc) {
  auto it = ops.insert(ops.begin() + position, std::make_unique<Op>(kind, loc));
  (*it)->setParent(this);
  return it->get();
}

size_t Graph::indexOf(const Op *op) const {
  for (size_t i = 0; i < ops.size(); ++i)
    if (ops[i].get() == op)
      return i;
  llvm_unreachable("op is not in this graph");
}

Op *Graph::createOp(OpKind kind, SourceLoc loc) {
  return insertOp(ops.size(), kind, loc);
}

Op *Graph::createOpBefore(Op *anchor, OpKind kind, SourceLoc loc) {
  Op *op = insertOp(indexOf(anchor), kind, loc);
  op->setBodyLayer(anchor->getBodyLayer());
  return op;
}

Op *Graph::createOpAfter(Op *anchor, OpKind kind, SourceLoc loc) {
  Op *op = insertOp(indexOf(anchor) + 1, kind, loc);
  op->setBodyLayer(anchor->getBodyLayer());
  return op;
}

void Graph::eraseOp(Op *op) {
  for (Value *result : op->getResults())
    llvm::erase_if(values, [&](const std::unique_ptr<Value> &v) {
      return v.get() == result;
    });
  ops.erase(ops.begin() + indexOf(op));
}

void Graph::walk(llvm::function_ref<void(Op &)> fn) const {
  for (const auto &op : ops) {
    fn(*op);
    if (const Graph *body = op->getBody())
      body->walk(fn);
  }
}

void Graph::walkValues(llvm::function_ref<void(const Value *)> fn) const {
  for (const Value *arg : arguments)
    fn(arg);
  for (const auto &op : ops) {
    for (const Value *result : op->getResults())
      fn(result);
    if (const Graph *body = op->getBody())
      body->walkValues(fn);
  }
}

Graph::Users Graph::collectUsers() const {
  Users users;
  walk([&](Op &op) {
    for (const Value *operand : op.getOperands())
      users[operand].push_back(&op);
  });
  return users;
}

bool Graph::allValuesTyped() const {
  bool typed = true;
  walkValues([&](const Value *v) { typed &= v->hasType(); });
  return typed;
}

void Graph::replaceUsesOf(Value *from, Value *to, const Op *except) {
  walk([&](Op &op) {
    if (&op == except)
      return;
    for (unsigned i = 0, e = op.getOperands().size(); i < e; ++i)
      if (op.getOperand(i) == from)
        op.setOperand(i, to);
  });
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
