//===- Verifier.cpp - Structural checks of the STG IR ---------------------===//
//
// A single walk over the module in program order, tracking the values that
// are visible (defined earlier in this graph or an enclosing one).
//
//===----------------------------------------------------------------------===//

#include "stg/IR/Verifier.h"
#include "stg/IR/Module.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringSet.h"

using namespace stg;

namespace {

class Verifier {
public:
  Verifier(const Module &module, DiagnosticEngine &diags)
      : module(module), diags(diags) {}

  LogicalResult verify();

private:
  void verifyGraph(const Graph &graph);
  void verifyOp(const Op &op);
  void verifyRepeat(const Op &op);
  void verifyBodyLayer(const Op &op, const Graph &graph);
  void define(const Value *value, SourceLoc loc);
  void fail(SourceLoc loc, const llvm::Twine &message) {
    diags.error(loc, "invalid IR: " + message);
    ok = false;
  }

  const Module &module;
  DiagnosticEngine &diags;
  llvm::DenseSet<const Value *> visible;
  llvm::StringSet<> names;
  bool ok = true;
};

} // namespace

LogicalResult Verifier::verify() {
  if (const Graph *model = module.getModel())
    verifyGraph(*model);
  return success(ok);
}

void Verifier::define(const Value *value, SourceLoc loc) {
  if (!names.insert(value->getName()).second)
    fail(loc, "value name '%" + value->getName() + "' is defined twice");
  visible.insert(value);
  if (value->hasType())
    if (const Axis *axis = value->getType().getDistribution().findRepeatedAxis())
      fail(loc, "type of '%" + value->getName() + "' uses axis '" +
                    axis->name + "' twice");
}

void Verifier::verifyGraph(const Graph &graph) {
  SourceLoc graphLoc = graph.getParentOp() ? graph.getParentOp()->getLoc()
                                           : module.getModelLoc();
  for (const Value *arg : graph.getArguments())
    define(arg, graphLoc);
  for (const auto &op : graph.getOps()) {
    if (op->getParent() != &graph)
      fail(op->getLoc(), "op '" + op->getKindName() + "' has a wrong parent");
    if (op->getKind() == OpKind::Yield && op.get() != graph.getTerminator())
      fail(op->getLoc(), "'yield' must be the last op of a repeat body");
    verifyBodyLayer(*op, graph);
    verifyOp(*op);
  }
}

void Verifier::verifyBodyLayer(const Op &op, const Graph &graph) {
  unsigned layer = op.getBodyLayer();
  if (layer >= graph.getNumLayers()) {
    fail(op.getLoc(), "'" + op.getKindName() + "' is in layer " +
                          llvm::Twine(layer) + " of a body of " +
                          llvm::Twine(graph.getNumLayers()) + " layers");
    return;
  }
  // Within a repetition, data flows from a layer to the later ones forward
  // and to the earlier ones backward; an edge the other way would be an
  // edge against the pipeline.
  bool backward =
      graph.getParentOp() && graph.getParentOp()->getForwardRepeat();
  for (const Value *operand : op.getOperands()) {
    const Op *def = operand->getDefiningOp();
    if (!def || def->getParent() != &graph)
      continue;
    unsigned from = def->getBodyLayer();
    if (backward ? from < layer : from > layer)
      fail(op.getLoc(), "'" + op.getKindName() + "' in body layer " +
                            llvm::Twine(layer) + " reads '%" +
                            operand->getName() + "' of layer " +
                            llvm::Twine(from) + ", against the " +
                            (backward ? "backward" : "forward") + " order");
  }
}

void Verifier::verifyOp(const Op &op) {
  const OpInfo &info = op.getInfo();
  for (const Value *operand : op.getOperands())
    if (!visible.count(operand))
      fail(op.getLoc(), "operand '%" + operand->getName() + "' of '" +
                            info.name + "' is not defined before its use");
  if (op.getKind() != OpKind::Repeat &&
      !info.acceptsOperandCount(op.getOperands().size()))
    fail(op.getLoc(), "'" + info.name + "' has " +
                          llvm::Twine(op.getOperands().size()) + " operands");
  size_t numResults = op.getResults().size();
  if (op.getKind() == OpKind::Yield ? numResults != 0
      : !info.has(MultiResult) ? numResults != 1
                               : false)
    fail(op.getLoc(), "'" + info.name + "' has " + llvm::Twine(numResults) +
                          " results");
  for (const AttrSpec &spec : info.attrs) {
    const Attribute *attr = op.getAttr(spec.name);
    if (!attr)
      fail(op.getLoc(), "'" + info.name + "' lacks attribute '" + spec.name +
                            "'");
    else if (attr->kind != spec.kind)
      fail(op.getLoc(), "attribute '" + llvm::Twine(spec.name) + "' of '" +
                            info.name + "' has the wrong kind");
  }
  for (const NamedAttribute &attr : op.getAttrs()) {
    if (info.findAttr(attr.name))
      continue;
    // A grad op carries its forward op's attributes too.
    if (op.getKind() == OpKind::Grad)
      if (auto forward = lookupOpKind(op.getAttr("of")->text))
        if (getOpInfo(*forward).findAttr(attr.name))
          continue;
    fail(op.getLoc(), "'" + info.name + "' has unknown attribute '" +
                          attr.name + "'");
  }
  if (info.has(NeedsType))
    for (const Value *result : op.getResults())
      if (!result->hasType())
        fail(op.getLoc(), "result of '" + info.name + "' has no type");
  if (op.getKind() == OpKind::Repeat)
    verifyRepeat(op);
  else if (op.getBody())
    fail(op.getLoc(), "'" + info.name + "' cannot have a body");
  for (const Value *result : op.getResults())
    define(result, op.getLoc());
}

void Verifier::verifyRepeat(const Op &op) {
  const Graph *body = op.getBody();
  if (!body) {
    fail(op.getLoc(), "'repeat' has no body");
    return;
  }
  size_t carried = op.getOperands().size();
  if (body->getArguments().size() != carried || op.getResults().size() != carried)
    fail(op.getLoc(), "'repeat' carries " + llvm::Twine(carried) +
                          " values but its body takes " +
                          llvm::Twine(body->getArguments().size()) +
                          " and it defines " +
                          llvm::Twine(op.getResults().size()));
  const Op *yield = body->getTerminator();
  if (!yield)
    fail(op.getLoc(), "'repeat' body does not end in 'yield'");
  else if (yield->getOperands().size() != carried)
    fail(yield->getLoc(), "'yield' passes " +
                              llvm::Twine(yield->getOperands().size()) +
                              " values, the repeat carries " +
                              llvm::Twine(carried));
  // Values defined in the body are not visible after it. A backward body
  // sees its forward body's values (those of the same repetition).
  llvm::DenseSet<const Value *> outer = visible;
  if (const Op *forward = op.getForwardRepeat()) {
    forward->getBody()->walkValues([&](const Value *v) { visible.insert(v); });
    if (forward->getBody()->getNumLayers() != body->getNumLayers())
      fail(op.getLoc(), "a backward repeat's body has " +
                            llvm::Twine(body->getNumLayers()) +
                            " layers, its forward body " +
                            llvm::Twine(forward->getBody()->getNumLayers()));
  }
  verifyGraph(*body);
  visible = std::move(outer);
}

LogicalResult stg::verifyModule(const Module &module, DiagnosticEngine &diags) {
  return Verifier(module, diags).verify();
}
