//===- Autodiff.cpp - Reverse-mode differentiation ------------------------===//
//
// Derives the backward pass of a training step from the forward model, so
// that nobody writes backward graphs by hand. Starting from the loss (every
// `cross_entropy` result, seeded with a gradient of one), the ops are walked
// in reverse and each contributes the gradients of its operands; several
// contributions to one value are summed with `add`. Per op:
//
//   einsum       one einsum per operand: the result gradient contracted with
//                the other operands, e.g. dX = einsum[bsf,df->bsd](dY, W)
//                and dW = einsum[bsd,bsf->df](X, dY), each costing what the
//                forward einsum costs (so a step is 3x the forward FLOPs)
//   add, sub     the gradient itself (summed over broadcast dimensions)
//   scale        scaled by the same factor; transpose: the inverse permutation
//   reshape      reshaped back; concat: slices; split: a concat
//   repeat       a backward repeat running the repetitions in reverse, whose
//                body is the reverse of the forward body (below)
//   anything else one `grad[of=KIND]` op computing all its operand gradients
//                at once (attention's dq, dk, dv; a norm's dx and dweight),
//                with the forward op's attributes; its cost is the kind's
//                documented backward cost and its layout follows the forward
//                op's index space (DistributionRules.cpp)
//
// Runs before `distribute`, which then lays out forward and backward alike.
// Gradients are left for it to place, except that the gradient of every value
// whose layout the user wrote (and of every weight) is anchored to that
// layout with a `layout` op, a PartialSum becoming Duplicated. The matcher
// then produces the conjugate collectives: a forward AllGather before a
// column-parallel einsum becomes a backward ReduceScatter, and the weight
// gradients, PartialSum over the data-parallel axes they are replicated on,
// are reduced over exactly those axes (AllReduce, or ReduceScatter for
// sharded weights). The weight gradients are recorded in the Module for the
// optimizer.
//
// A backward repeat's body uses the forward body's values, meaning those of
// the same repetition (Op::getForwardRepeat). Weights defined outside a
// repeat but used inside it (shared across repetitions) are not supported
// yet and are reported.
//
//===----------------------------------------------------------------------===//

#include "stg/IR/ShapeRules.h"
#include "stg/Passes/Passes.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

using namespace stg;

#define DEBUG_TYPE "autodiff"

namespace {

class AutodiffPass : public Pass {
public:
  llvm::StringRef getName() const override { return DEBUG_TYPE; }
  LogicalResult run(Module &module, DiagnosticEngine &diags) override;

private:
  using Grads = llvm::DenseMap<Value *, Value *>;

  void markRequiresGrad(const Graph &graph);
  /// Differentiates `forward`'s ops in reverse, appending to `backward`.
  void differentiate(const Graph &forward, Graph &backward, Grads &grads);
  void differentiateOp(Op &op, Graph &backward, Grads &grads);
  void differentiateRepeat(Op &repeat, Graph &backward, Grads &grads);

  /// The finished gradient of `value`, anchored to its written layout.
  Value *takeGradient(Value *value, Graph &backward, Grads &grads,
                      SourceLoc loc);
  void accumulate(Value *value, Value *gradient, Graph &backward, Grads &grads,
                  SourceLoc loc, bool hintPrimalLayout = true);
  /// Creates an op at the end of `backward` and types its results.
  Op *create(Graph &backward, OpKind kind, SourceLoc loc,
             llvm::ArrayRef<Value *> operands,
             llvm::ArrayRef<std::string> resultNames);
  std::string gradName(const Value *value) {
    return module->makeUniqueName(value->getName().str() + ".grad");
  }

  Module *module = nullptr;
  DiagnosticEngine *diags = nullptr;
  std::unique_ptr<ExtentComparator> extents;
  llvm::DenseSet<const Value *> requiresGrad;
  /// The body layer of the forward op being differentiated: its backward
  /// ops run in the same layer.
  unsigned bodyLayer = 0;
};

} // namespace

//===----------------------------------------------------------------------===//
// Which values need gradients
//===----------------------------------------------------------------------===//

void AutodiffPass::markRequiresGrad(const Graph &graph) {
  for (const auto &op : graph.getOps()) {
    if (op->getKind() == OpKind::Param) {
      requiresGrad.insert(op->getResult());
      continue;
    }
    if (const Graph *body = op->getBody()) {
      // A carried value needs gradients if it enters needing them, or if the
      // body makes it so (a weight in the body): then from the second
      // repetition on. Two rounds reach the fixed point.
      for (int round = 0; round < 2; ++round) {
        for (unsigned i = 0; i < body->getArguments().size(); ++i)
          if (requiresGrad.count(op->getOperand(i)) ||
              requiresGrad.count(body->getTerminator()->getOperand(i)))
            requiresGrad.insert(body->getArguments()[i]);
        markRequiresGrad(*body);
      }
      for (unsigned i = 0; i < op->getResults().size(); ++i)
        if (requiresGrad.count(body->getArguments()[i]))
          requiresGrad.insert(op->getResult(i));
      continue;
    }
    bool needs = llvm::any_of(op->getOperands(), [&](const Value *v) {
      return requiresGrad.count(v);
    });
    if (needs && op->getKind() != OpKind::Input &&
        op->getKind() != OpKind::State)
      for (const Value *result : op->getResults())
        requiresGrad.insert(result);
  }
}

//===----------------------------------------------------------------------===//
// Building gradients
//===----------------------------------------------------------------------===//

Op *AutodiffPass::create(Graph &backward, OpKind kind, SourceLoc loc,
                         llvm::ArrayRef<Value *> operands,
                         llvm::ArrayRef<std::string> resultNames) {
  Op *op = backward.createOp(kind, loc);
  op->setPhase(Phase::Backward);
  op->setBodyLayer(bodyLayer);
  for (Value *operand : operands)
    op->addOperand(operand);
  for (const std::string &name : resultNames)
    backward.createResult(op, name);
  return op;
}

/// Types the results of `op` by its shape rule.
/// A low-precision linear's gradient einsums run in its precision (the
/// `precision` pass). The one for an operand it cast (an activation: the
/// data gradient) casts the incoming gradient, its operand 0; the one for
/// the weight reuses the casts of the forward input and of that gradient.
static void setGradientPrecision(const Op &forward, unsigned operand,
                                 Op &gradient) {
  const Attribute *precision = forward.getAttr("precision");
  const Attribute *quantize = forward.getAttr("quantize");
  if (!precision)
    return;
  gradient.setAttr("precision", *precision);
  bool castOperand = quantize && llvm::any_of(quantize->list, [&](const Expr &e) {
    return e.is_equal(Expr(operand));
  });
  if (castOperand)
    gradient.setAttr("quantize", Attribute::getList({Expr(0)}));
}

static void typeResults(Op &op, const Module &module,
                        const ExtentComparator &extents,
                        DiagnosticEngine &diags) {
  llvm::SmallVector<TensorType, 1> types;
  if (failed(inferResultTypes(op, module, extents, diags, types)))
    return;
  for (unsigned i = 0; i < types.size(); ++i)
    op.getResult(i)->setType(types[i]);
}

void AutodiffPass::accumulate(Value *value, Value *gradient, Graph &backward,
                              Grads &grads, SourceLoc loc,
                              bool hintPrimalLayout) {
  // A gradient would rather share its primal's layout; `distribute` weighs
  // that (for FSDP it keeps dX batch-split and gathers the weight).
  if (hintPrimalLayout && !gradient->getLayoutHint() &&
      !gradient->isAnnotated() &&
      gradient->getDefiningOp() &&
      gradient->getDefiningOp()->getKind() != OpKind::Input)
    gradient->setLayoutHint(value);
  auto [it, inserted] = grads.try_emplace(value, gradient);
  if (inserted)
    return;
  Op *sum = create(backward, OpKind::Add, loc, {it->second, gradient},
                   {gradName(value)});
  // A weight used twice (tied embeddings) sums its gradient contributions
  // once per step, after each has accumulated over the micro-batches in its
  // weight-gradient kernel: with pipeline stages, one transfer per step.
  if (value->isParam())
    sum->setPhase(Phase::GradientSync);
  typeResults(*sum, *module, *extents, *diags);
  sum->getResult()->setLayoutHint(value);
  it->second = sum->getResult();
}

Value *AutodiffPass::takeGradient(Value *value, Graph &backward, Grads &grads,
                                  SourceLoc loc) {
  auto it = grads.find(value);
  if (it == grads.end())
    return nullptr;
  Value *gradient = it->second;
  bool anchored = value->isAnnotated() || value->isParam();
  if (!anchored || !value->hasType())
    return gradient;
  // The written layout, with a PartialSum replaced by Duplicated: each rank's
  // partial contribution receives the whole gradient.
  const TensorType &type = value->getType();
  Op *anchor = create(backward, OpKind::Layout, loc, {gradient},
                      {gradName(value)});
  // A weight's gradient reduction (its layout change) is gradient sync.
  if (value->isParam())
    anchor->setPhase(Phase::GradientSync);
  anchor->getResult()->setType(
      type.withDistribution(type.getDistribution().withoutPartialSum()));
  anchor->getResult()->setAnnotated(true);
  it->second = anchor->getResult();
  return anchor->getResult();
}

void AutodiffPass::differentiate(const Graph &forward, Graph &backward,
                                 Grads &grads) {
  // A snapshot: at the top level, backward ops go into the same graph.
  std::vector<Op *> ops;
  for (const auto &op : forward.getOps())
    ops.push_back(op.get());
  for (auto it = ops.rbegin(); it != ops.rend(); ++it) {
    Op &op = **it;
    if (op.getKind() == OpKind::Yield)
      continue;
    bodyLayer = op.getBodyLayer();
    if (op.getKind() == OpKind::Param) {
      if (Value *gradient =
              takeGradient(op.getResult(), backward, grads, op.getLoc()))
        module->setGradient(op.getResult(), gradient);
      continue;
    }
    if (op.getKind() == OpKind::Repeat)
      differentiateRepeat(op, backward, grads);
    else
      differentiateOp(op, backward, grads);
  }
}

void AutodiffPass::differentiateOp(Op &op, Graph &backward, Grads &grads) {
  SourceLoc loc = op.getLoc();
  llvm::SmallVector<Value *, 2> outputGrads;
  for (Value *result : op.getResults())
    if (Value *gradient = takeGradient(result, backward, grads, loc))
      outputGrads.push_back(gradient);
  if (outputGrads.empty())
    return; // Does not reach the loss.
  llvm::SmallVector<unsigned, 3> wrt;
  for (unsigned k = 0; k < op.getOperands().size(); ++k)
    if (requiresGrad.count(op.getOperand(k)))
      wrt.push_back(k);
  if (wrt.empty())
    return;
  if (outputGrads.size() != op.getResults().size()) {
    diags->error(loc, "autodiff: a result of '" + op.getKindName() +
                          "' does not reach the loss while another does; "
                          "that case is not supported yet");
    return;
  }
  Value *dy = outputGrads.front();
  auto contribute = [&](unsigned k, Op *gradOp) {
    typeResults(*gradOp, *module, *extents, *diags);
    accumulate(op.getOperand(k), gradOp->getResult(), backward, grads, loc);
  };
  auto sameShape = [&](const Value *a, const Value *b) {
    const TensorType &ta = a->getType(), &tb = b->getType();
    if (ta.getRank() != tb.getRank())
      return false;
    for (unsigned d = 0; d < ta.getRank(); ++d)
      if (!extents->equal(ta.getDim(d), tb.getDim(d)))
        return false;
    return true;
  };

  switch (op.getKind()) {
  case OpKind::Einsum: {
    const EinsumSpec &spec = op.getAttr("spec")->einsum;
    for (unsigned k : wrt) {
      // The result gradient takes the differentiated operand's place.
      EinsumSpec back;
      llvm::SmallVector<Value *, 3> operands;
      for (unsigned j = 0; j < spec.inputs.size(); ++j) {
        back.inputs.push_back(j == k ? spec.output : spec.inputs[j]);
        operands.push_back(j == k ? dy : op.getOperand(j));
      }
      back.output = spec.inputs[k];
      for (char index : back.output)
        if (llvm::none_of(back.inputs, [&](const std::string &in) {
              return in.find(index) != std::string::npos;
            })) {
          diags->error(loc, "autodiff: einsum index '" + std::string(1, index) +
                                "' is summed away within one operand; its "
                                "gradient is not supported yet");
          return;
        }
      Op *einsum = create(backward, OpKind::Einsum, loc, operands,
                          {gradName(op.getOperand(k))});
      einsum->setAttr("spec", Attribute::getEinsum(back));
      setGradientPrecision(op, k, *einsum);
      contribute(k, einsum);
    }
    return;
  }
  case OpKind::Add:
  case OpKind::Sub: {
    // The gradient passes as it is, unless an operand was broadcast (its
    // gradient sums over those dimensions) or negated: the grad op below.
    bool passes = llvm::all_of(wrt, [&](unsigned k) {
      return sameShape(op.getOperand(k), dy) &&
             !(op.getKind() == OpKind::Sub && k == 1);
    });
    // A bias (an operand of lower rank matching dy's trailing dimensions)
    // gets dy summed over the leading ones: reductions of dy alone, so the
    // forward operands need not be kept for the backward pass.
    auto isBias = [&](unsigned k) {
      const TensorType &bias = op.getOperand(k)->getType();
      const TensorType &full = dy->getType();
      if (op.getKind() != OpKind::Add || bias.getRank() >= full.getRank())
        return false;
      unsigned lead = full.getRank() - bias.getRank();
      for (unsigned d = 0; d < bias.getRank(); ++d)
        if (!extents->equal(bias.getDim(d), full.getDim(lead + d)))
          return false;
      return true;
    };
    bool biasAdd = op.getKind() == OpKind::Add &&
                   llvm::all_of(wrt, [&](unsigned k) {
                     return sameShape(op.getOperand(k), dy) || isBias(k);
                   });
    if (!passes && !biasAdd)
      break;
    for (unsigned k : wrt) {
      if (sameShape(op.getOperand(k), dy)) {
        accumulate(op.getOperand(k), dy, backward, grads, loc);
        continue;
      }
      Value *sum = dy;
      unsigned lead =
          dy->getType().getRank() - op.getOperand(k)->getType().getRank();
      for (unsigned d = 0; d < lead; ++d) {
        Op *reduce = create(backward, OpKind::Reduce, loc, {sum},
                            {d + 1 == lead ? gradName(op.getOperand(k))
                                           : module->makeUniqueName(
                                                 dy->getName().str() + ".sum")});
        reduce->setAttr("kind", Attribute::getText(AttrKind::Ident, "sum"));
        reduce->setAttr("dim", Attribute::getExpr(AttrKind::Int, 0));
        typeResults(*reduce, *module, *extents, *diags);
        sum = reduce->getResult();
      }
      // No hint of the bias's layout: the sums stay partial over the axes
      // that split the summed dimensions, and the bias's anchor reduces
      // them (an FSDP-sharded bias is reduce-scattered, not the activation
      // gradient moved to match it).
      accumulate(op.getOperand(k), sum, backward, grads, loc,
                 /*hintPrimalLayout=*/false);
    }
    return;
  }
  case OpKind::Dropout: {
    // dx = dy * mask: the backward keeps the one-byte mask the forward
    // kernel wrote, not the input.
    Graph &forward = *op.getParent();
    Op *maskOp = forward.createOpAfter(&op, OpKind::DropoutMask, op.getLoc());
    maskOp->setPhase(op.getPhase());
    maskOp->addOperand(op.getOperand(0));
    forward.createResult(maskOp, module->makeUniqueName(
                                     op.getResult()->getName().str() + ".mask"));
    typeResults(*maskOp, *module, *extents, *diags);
    Op *product = create(backward, OpKind::Mul, loc,
                         {dy, maskOp->getResult()},
                         {gradName(op.getOperand(0))});
    contribute(0, product);
    return;
  }
  case OpKind::Scale: {
    Op *scale = create(backward, OpKind::Scale, loc, {dy},
                       {gradName(op.getOperand(0))});
    scale->setAttr("factor", *op.getAttr("factor"));
    contribute(0, scale);
    return;
  }
  case OpKind::Transpose: {
    const auto &perm = op.getAttr("perm")->list;
    llvm::SmallVector<Expr, 4> inverse(perm.size());
    for (unsigned i = 0; i < perm.size(); ++i)
      inverse[*getIntegerValue(perm[i])] = Expr(i);
    Op *transpose = create(backward, OpKind::Transpose, loc, {dy},
                           {gradName(op.getOperand(0))});
    transpose->setAttr("perm", Attribute::getList(inverse));
    contribute(0, transpose);
    return;
  }
  case OpKind::Reshape: {
    Op *reshape = create(backward, OpKind::Reshape, loc, {dy},
                         {gradName(op.getOperand(0))});
    const TensorType &in = op.getOperand(0)->getType();
    reshape->getResult()->setType(
        in.withDistribution(Distribution(in.getRank())));
    accumulate(op.getOperand(0), reshape->getResult(), backward, grads, loc);
    return;
  }
  case OpKind::Concat: {
    long long dim = *getIntegerValue(op.getAttr("dim")->expr);
    unsigned rank = dy->getType().getRank();
    unsigned d = dim < 0 ? dim + rank : dim;
    Expr offset = 0;
    for (unsigned k = 0; k < op.getOperands().size(); ++k) {
      Expr size = op.getOperand(k)->getType().getDim(d);
      if (llvm::is_contained(wrt, k)) {
        Op *slice = create(backward, OpKind::Slice, loc, {dy},
                           {gradName(op.getOperand(k))});
        slice->setAttr("dim", Attribute::getExpr(AttrKind::Int, Expr(d)));
        slice->setAttr("size", Attribute::getExpr(AttrKind::Expr, size));
        slice->setAttr("offset", Attribute::getExpr(AttrKind::Expr, offset));
        contribute(k, slice);
      }
      offset = offset + size;
    }
    return;
  }
  case OpKind::Split: {
    Op *concat = create(backward, OpKind::Concat, loc, outputGrads,
                        {gradName(op.getOperand(0))});
    concat->setAttr("dim", *op.getAttr("dim"));
    contribute(0, concat);
    return;
  }
  default:
    break;
  }

  // Everything else: one grad op for all operand gradients.
  llvm::SmallVector<Value *, 6> operands(outputGrads.begin(),
                                         outputGrads.end());
  operands.append(op.getOperands().begin(), op.getOperands().end());
  llvm::SmallVector<std::string, 3> names;
  llvm::SmallVector<Expr, 4> wrtList;
  for (unsigned k : wrt) {
    names.push_back(gradName(op.getOperand(k)));
    wrtList.push_back(Expr(k));
  }
  Op *grad = create(backward, OpKind::Grad, loc, operands, names);
  grad->setAttr("of", Attribute::getText(AttrKind::String, op.getKindName().str()));
  grad->setAttr("outs", Attribute::getExpr(AttrKind::Int,
                                           Expr(unsigned(outputGrads.size()))));
  grad->setAttr("wrt", Attribute::getList(wrtList));
  for (const NamedAttribute &attr : op.getAttrs())
    grad->setAttr(attr.name, attr.value);
  typeResults(*grad, *module, *extents, *diags);
  for (unsigned i = 0; i < wrt.size(); ++i)
    accumulate(op.getOperand(wrt[i]), grad->getResult(i), backward, grads, loc);
}

void AutodiffPass::differentiateRepeat(Op &repeat, Graph &backward,
                                       Grads &grads) {
  SourceLoc loc = repeat.getLoc();
  Graph &forwardBody = *repeat.getBody();
  Op *yield = forwardBody.getTerminator();
  llvm::SmallVector<unsigned, 2> carried;
  llvm::SmallVector<Value *, 2> resultGrads;
  for (unsigned i = 0; i < repeat.getResults().size(); ++i) {
    if (!requiresGrad.count(repeat.getResult(i)))
      continue;
    Value *gradient = takeGradient(repeat.getResult(i), backward, grads, loc);
    if (!gradient)
      continue;
    carried.push_back(i);
    resultGrads.push_back(gradient);
  }
  if (carried.empty())
    return;

  Op *reverse = backward.createOp(OpKind::Repeat, loc);
  reverse->setPhase(Phase::Backward);
  reverse->setAttr("count", *repeat.getAttr("count"));
  reverse->setAttr("name", *repeat.getAttr("name"));
  reverse->setForwardRepeat(&repeat);
  reverse->setBody(std::make_unique<Graph>(forwardBody.getName().str()));
  Graph &body = *reverse->getBody();
  body.setNumLayers(forwardBody.getNumLayers());
  unsigned outerLayer = bodyLayer;

  // Each repetition starts from the gradient of what the forward one
  // yielded, in its last layer.
  bodyLayer = forwardBody.getNumLayers() - 1;
  Grads inner;
  for (unsigned n = 0; n < carried.size(); ++n) {
    unsigned i = carried[n];
    reverse->addOperand(resultGrads[n]);
    Value *arg = body.createArgument(gradName(yield->getOperand(i)));
    arg->setType(resultGrads[n]->getType());
    accumulate(yield->getOperand(i), arg, body, inner, loc);
  }
  differentiate(forwardBody, body, inner);
  // What is left reaches the loop-carried inputs, in the first layer.
  bodyLayer = 0;

  llvm::DenseSet<const Value *> local;
  forwardBody.walkValues([&](const Value *v) { local.insert(v); });
  // A value from outside the loop used in every repetition would need its
  // gradient summed over them; report it rather than drop it. (Values are
  // visited in name order so the report is deterministic.)
  std::vector<Value *> outer;
  for (auto &[value, gradient] : inner)
    if (!local.count(value) && requiresGrad.count(value))
      outer.push_back(value);
  llvm::sort(outer, [](const Value *a, const Value *b) {
    return a->getName() < b->getName();
  });
  for (const Value *value : outer) {
    bool weight = value->isParam();
    diags->error(loc, "autodiff: " + llvm::Twine(weight ? "weight" : "value") +
                          " '%" + value->getName() +
                          "' is defined outside the repeat and used in every "
                          "repetition; summing its gradient over them is not "
                          "supported yet");
  }

  Op *next = body.createOp(OpKind::Yield, loc);
  next->setPhase(Phase::Backward);
  for (unsigned i : carried) {
    Value *arg = forwardBody.getArguments()[i];
    Value *gradient = takeGradient(arg, body, inner, loc);
    if (!gradient) {
      diags->error(loc, "autodiff: the loop-carried '%" + arg->getName() +
                            "' gets no gradient from the repeat body");
      return;
    }
    next->addOperand(gradient);
  }
  bodyLayer = outerLayer;
  for (unsigned n = 0; n < carried.size(); ++n) {
    Value *initial = repeat.getOperand(carried[n]);
    Value *result = backward.createResult(reverse, gradName(initial));
    result->setType(resultGrads[n]->getType());
    accumulate(initial, result, backward, grads, loc);
  }
}

//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

LogicalResult AutodiffPass::run(Module &m, DiagnosticEngine &d) {
  module = &m;
  diags = &d;
  extents = std::make_unique<ExtentComparator>(m);
  requiresGrad.clear();
  Graph *model = m.getModel();
  if (!model)
    return success();
  if (!model->allValuesTyped()) {
    d.error({}, "'autodiff' needs every value's shape: run shape-infer first "
                "(--passes=shape-infer,autodiff)");
    return failure();
  }

  llvm::SmallVector<Value *, 1> losses;
  for (const auto &op : model->getOps())
    if (op->getKind() == OpKind::CrossEntropy)
      losses.push_back(op->getResult());
  if (losses.empty()) {
    d.error(m.getModelLoc(), "autodiff needs a loss: model '" +
                                 model->getName() +
                                 "' computes no cross_entropy");
    return failure();
  }
  markRequiresGrad(*model);

  unsigned errorsBefore = d.getNumErrors();
  Grads grads;
  for (Value *loss : losses) {
    // The seed: d(loss)/d(loss) = 1, the same on every rank.
    Op *seed = model->createOp(OpKind::Input, loss->getDefiningOp()->getLoc());
    seed->setPhase(Phase::Backward);
    Value *one = model->createResult(seed, gradName(loss));
    const TensorType &type = loss->getType();
    one->setType(type.withDistribution(Distribution(type.getRank())));
    one->setAnnotated(true);
    grads[loss] = one;
  }
  differentiate(*model, *model, grads);
  return success(d.getNumErrors() == errorsBefore);
}

std::unique_ptr<Pass> stg::createAutodiffPass() {
  return std::make_unique<AutodiffPass>();
}
