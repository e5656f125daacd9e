//===- ShapeRules.cpp - Result shapes of every op -------------------------===//
//
// One rule per op kind. Operands are aligned as the op defines them
// (einsum by index letters, elementwise ops by broadcasting from the last
// dimension), and every extent comparison goes through ExtentComparator so
// that derived dims compare by value. Ops whose result shape cannot be
// computed (input, param, reshape, custom, dispatch, ...) take the type the
// user wrote.
//
//===----------------------------------------------------------------------===//

#include "stg/IR/ShapeRules.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/Sequence.h"
#include "llvm/ADT/StringExtras.h"

using namespace stg;

//===----------------------------------------------------------------------===//
// ExtentComparator
//===----------------------------------------------------------------------===//

ExtentComparator::ExtentComparator(const Module &module) {
  for (const auto &dim : module.getDims())
    if (dim->value && !GiNaC::is_a<GiNaC::numeric>(*dim->value))
      derived[dim->symbol] = *dim->value;
}

Expr ExtentComparator::expand(const Expr &a) const {
  Expr e = a;
  // Derived dims may refer to other derived dims; the chain is acyclic
  // (a dim refers only to earlier ones), so this terminates.
  // A substitution that divides by zero leaves the extent as it was: the
  // comparison then fails, and check-divisibility reports the pole.
  for (size_t i = 0; i <= derived.size(); ++i) {
    std::optional<Expr> next = trySubstitute(e, derived);
    if (!next || next->is_equal(e))
      break;
    e = *next;
  }
  return e;
}

bool ExtentComparator::equal(const Expr &a, const Expr &b) const {
  if (a.is_equal(b))
    return true;
  try {
    return (expand(a) - expand(b)).normal().is_zero();
  } catch (const std::domain_error &) {
    return false; // A pole: not provably equal.
  }
}

std::string stg::formatShape(llvm::ArrayRef<Expr> shape,
                             const ExprPrinter &printer) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    text += (i ? ", " : "") + printer.str(shape[i]);
  return text + "]";
}

//===----------------------------------------------------------------------===//
// Rules
//===----------------------------------------------------------------------===//

namespace {

class ShapeRule {
public:
  ShapeRule(const Op &op, const Module &module,
            const ExtentComparator &extents, DiagnosticEngine &diags,
            llvm::SmallVectorImpl<TensorType> &results)
      : op(op), module(module), extents(extents), diags(diags),
        results(results), printer(module.getPrinter()) {}

  LogicalResult run();

private:
  const TensorType &operandType(unsigned i) const {
    return op.getOperand(i)->getType();
  }
  std::string name(unsigned operand) const {
    return "'%" + op.getOperand(operand)->getName().str() + "'";
  }
  std::string shapeOf(unsigned operand) const {
    return formatShape(operandType(operand).getShape(), printer);
  }
  LogicalResult error(const llvm::Twine &message) {
    diags.error(op.getLoc(), message);
    return failure();
  }
  void addResult(ElementType elem, llvm::SmallVector<Expr, 4> shape) {
    Distribution dist(shape.size());
    results.push_back(TensorType(elem, std::move(shape), std::move(dist)));
  }
  void addResultLike(unsigned operand) {
    const TensorType &type = operandType(operand);
    addResult(type.getElementType(),
              llvm::SmallVector<Expr, 4>(type.getShape().begin(),
                                         type.getShape().end()));
  }
  long long intAttr(llvm::StringRef attr) const {
    return *getIntegerValue(op.getAttr(attr)->expr);
  }
  /// Resolves a possibly negative dimension index of operand `i`.
  std::optional<unsigned> dimIndex(llvm::StringRef attr, unsigned rank);

  LogicalResult annotated();
  LogicalResult einsum();
  LogicalResult broadcast();
  LogicalResult attention();
  LogicalResult attentionSinks();
  LogicalResult swigluClamped();
  LogicalResult reduce();
  LogicalResult transpose();
  LogicalResult concat();
  LogicalResult sliceOrSplit();
  LogicalResult embedding();
  LogicalResult route();
  LogicalResult reshape();
  LogicalResult sameAsOperand(std::initializer_list<const char *> dimAttrs);

  const Op &op;
  const Module &module;
  const ExtentComparator &extents;
  DiagnosticEngine &diags;
  llvm::SmallVectorImpl<TensorType> &results;
  ExprPrinter printer;
};

} // namespace

std::optional<unsigned> ShapeRule::dimIndex(llvm::StringRef attr,
                                            unsigned rank) {
  long long dim = intAttr(attr);
  long long resolved = dim < 0 ? dim + rank : dim;
  if (resolved < 0 || resolved >= rank) {
    diags.error(op.getLoc(), "'" + op.getKindName() + "' " + attr + " " +
                                 llvm::Twine(dim) +
                                 " is out of range for rank " +
                                 llvm::Twine(rank));
    return std::nullopt;
  }
  return unsigned(resolved);
}

LogicalResult ShapeRule::run() {
  switch (op.getKind()) {
  case OpKind::Input:
  case OpKind::Param:
  case OpKind::State:
  case OpKind::Custom:
  case OpKind::Layout:
  case OpKind::Dispatch:
  case OpKind::Combine:
    return annotated();
  case OpKind::Reshape:
    return reshape();
  case OpKind::Einsum:
    return einsum();
  case OpKind::Add:
  case OpKind::Sub:
  case OpKind::Mul:
  case OpKind::Div:
  case OpKind::Elementwise:
  case OpKind::PScan:
    return broadcast();
  case OpKind::SwigluClamped:
    return swigluClamped();
  case OpKind::Relu2:
  case OpKind::Silu:
  case OpKind::Gelu:
  case OpKind::Relu:
  case OpKind::Exp:
  case OpKind::Sigmoid:
  case OpKind::Tanh:
  case OpKind::Scale:
  case OpKind::RMSNorm:
  case OpKind::LayerNorm:
  case OpKind::AllReduce:
  case OpKind::Broadcast:
  case OpKind::Adam:
    return sameAsOperand({});
  case OpKind::Conv1D:
    // A decode step's state holds the last inputs, laid out as the input.
    if (op.getOperands().size() > 2 &&
        operandType(2).getRank() != operandType(0).getRank())
      return error("'conv1d' state " + name(2) + " " + shapeOf(2) +
                   " must have the rank of its input " + name(0) + " " +
                   shapeOf(0));
    return sameAsOperand({});
  case OpKind::Dropout:
    return sameAsOperand({});
  case OpKind::DropoutMask:
    addResult(ElementType::I8, llvm::SmallVector<Expr, 4>(
                                   operandType(0).getShape().begin(),
                                   operandType(0).getShape().end()));
    return success();
  case OpKind::Softmax:
    return sameAsOperand({"dim"});
  case OpKind::AllGather:
  case OpKind::ReduceScatter:
  case OpKind::Shard:
    return sameAsOperand({"dim"});
  case OpKind::AllToAll:
    return sameAsOperand({"from_dim", "to_dim"});
  case OpKind::Attention:
    return attention();
  case OpKind::Reduce:
    return reduce();
  case OpKind::Transpose:
    return transpose();
  case OpKind::Concat:
    return concat();
  case OpKind::Slice:
  case OpKind::Split:
    return sliceOrSplit();
  case OpKind::Embedding:
    return embedding();
  case OpKind::CrossEntropy:
    addResult(ElementType::FP32, {});
    return success();
  case OpKind::Route:
    return route();
  case OpKind::Grad: {
    // Each computed gradient has its forward operand's shape.
    unsigned outs = intAttr("outs");
    for (const Expr &w : op.getAttr("wrt")->list)
      addResultLike(outs + *getIntegerValue(w));
    return success();
  }
  case OpKind::Repeat:
  case OpKind::Yield:
    break;
  }
  llvm_unreachable("repeat and yield are handled by the shape pass");
}

LogicalResult ShapeRule::annotated() {
  for (const Value *result : op.getResults()) {
    if (!result->isAnnotated())
      return error("'" + op.getKindName() +
                   "' needs a result type: write 'name: [...] = " +
                   op.getKindName() + "(...)'");
    results.push_back(result->getType());
  }
  if (op.getKind() == OpKind::Layout) {
    llvm::ArrayRef<Expr> from = operandType(0).getShape();
    llvm::ArrayRef<Expr> to = results.front().getShape();
    bool same = from.size() == to.size() &&
                llvm::all_of(llvm::seq<size_t>(0, from.size()), [&](size_t i) {
                  return extents.equal(from[i], to[i]);
                });
    if (!same)
      return error("value " + name(0) + " has shape " + shapeOf(0) +
                   " but " + formatShape(to, printer) + " is expected here");
  }
  return success();
}

LogicalResult ShapeRule::reshape() {
  if (failed(annotated()))
    return failure();
  Expr before = operandType(0).getNumElementsLogical();
  Expr after = results.front().getNumElementsLogical();
  if (!extents.equal(before, after))
    return error("reshape changes the element count from " +
                 printer.str(before) + " to " + printer.str(after));
  return success();
}

LogicalResult ShapeRule::einsum() {
  const EinsumSpec &spec = op.getAttr("spec")->einsum;
  llvm::SmallVector<std::pair<char, unsigned>, 8> firstSeen; // index -> operand
  std::map<char, Expr> extentOf;
  for (unsigned i = 0; i < spec.inputs.size(); ++i) {
    const std::string &term = spec.inputs[i];
    const TensorType &type = operandType(i);
    if (term.size() != type.getRank())
      return error("einsum term '" + term + "' has " +
                   llvm::Twine(term.size()) + " indices but operand " +
                   name(i) + " has rank " + llvm::Twine(type.getRank()));
    for (unsigned d = 0; d < term.size(); ++d) {
      char index = term[d];
      auto [it, inserted] = extentOf.try_emplace(index, type.getDim(d));
      if (inserted) {
        firstSeen.push_back({index, i});
        continue;
      }
      if (!extents.equal(it->second, type.getDim(d))) {
        unsigned first = llvm::find_if(firstSeen, [&](auto &entry) {
                           return entry.first == index;
                         })->second;
        return error("einsum index '" + std::string(1, index) + "' is " +
                     printer.str(it->second) + " in " + name(first) +
                     " but " + printer.str(type.getDim(d)) + " in " +
                     name(i));
      }
    }
  }
  llvm::SmallVector<Expr, 4> shape;
  for (char index : spec.output)
    shape.push_back(extentOf.at(index));
  addResult(operandType(0).getElementType(), std::move(shape));
  return success();
}

LogicalResult ShapeRule::broadcast() {
  // Numpy broadcasting: align from the last dimension; extents must agree
  // or be 1.
  llvm::SmallVector<Expr, 4> shape;
  for (unsigned i = 0; i < op.getOperands().size(); ++i) {
    llvm::ArrayRef<Expr> other = operandType(i).getShape();
    if (other.size() > shape.size())
      shape.insert(shape.begin(), other.size() - shape.size(), Expr(1));
    unsigned offset = shape.size() - other.size();
    for (unsigned d = 0; d < other.size(); ++d) {
      Expr &into = shape[offset + d];
      if (extents.equal(into, other[d]) || other[d].is_equal(1))
        continue;
      if (into.is_equal(1)) {
        into = other[d];
        continue;
      }
      return error("'" + op.getKindName() + "' operands " + name(0) + " " +
                   shapeOf(0) + " and " + name(i) + " " + shapeOf(i) +
                   " do not broadcast: " + printer.str(into) + " vs " +
                   printer.str(other[d]));
    }
  }
  addResult(operandType(0).getElementType(), std::move(shape));
  return success();
}

LogicalResult ShapeRule::sameAsOperand(
    std::initializer_list<const char *> dimAttrs) {
  for (const char *attr : dimAttrs)
    if (!dimIndex(attr, operandType(0).getRank()))
      return failure();
  addResultLike(0);
  return success();
}

LogicalResult ShapeRule::attention() {
  // q [..., S, H, E], k and v [..., T, G, E(v)]: result [..., S, H, Ev].
  const TensorType &q = operandType(0), &k = operandType(1),
                   &v = operandType(2);
  if (q.getRank() < 2 || k.getRank() != q.getRank() ||
      v.getRank() != q.getRank())
    return error("attention needs q, k and v of one rank (at least 2); found " +
                 shapeOf(0) + ", " + shapeOf(1) + ", " + shapeOf(2));
  unsigned last = q.getRank() - 1;
  if (!extents.equal(q.getDim(last), k.getDim(last)))
    return error("attention q " + shapeOf(0) + " and k " + shapeOf(1) +
                 " differ in head size");
  for (unsigned d = 0; d + 1 < last; ++d)
    if (!extents.equal(k.getDim(d), v.getDim(d)))
      return error("attention k " + shapeOf(1) + " and v " + shapeOf(2) +
                   " differ in dimension " + llvm::Twine(d));
  if (op.getOperands().size() > 3 && failed(attentionSinks()))
    return failure();
  llvm::SmallVector<Expr, 4> shape(q.getShape().begin(), q.getShape().end());
  shape[last] = v.getDim(last);
  addResult(q.getElementType(), std::move(shape));
  return success();
}

LogicalResult ShapeRule::attentionSinks() {
  // One logit per query head: [H] for q [..., S, H, E].
  const TensorType &q = operandType(0), &sinks = operandType(3);
  if (q.getRank() < 3)
    return error("attention sinks " + name(3) + " need q with a head "
                 "dimension, [..., S, H, E]; q is " + shapeOf(0));
  const Expr &heads = q.getDim(q.getRank() - 2);
  if (sinks.getRank() != 1 || !extents.equal(sinks.getDim(0), heads))
    return error("attention sinks " + name(3) + " " + shapeOf(3) +
                 " must be one logit per head of q " + shapeOf(0) + ", [" +
                 printer.str(heads) + "]");
  return success();
}

LogicalResult ShapeRule::swigluClamped() {
  // The constants are positive numbers, not dims: they do not change the
  // cost, so a symbolic one could only be a mistake.
  for (const char *attr : {"alpha", "limit"}) {
    const Expr &value = op.getAttr(attr)->expr;
    if (!GiNaC::is_a<GiNaC::numeric>(value) ||
        !GiNaC::ex_to<GiNaC::numeric>(value).is_positive())
      return error("swiglu_clamped " + llvm::Twine(attr) + "=" +
                   printer.str(value) + " must be a positive number");
  }
  return broadcast();
}

LogicalResult ShapeRule::reduce() {
  auto dim = dimIndex("dim", operandType(0).getRank());
  if (!dim)
    return failure();
  llvm::SmallVector<Expr, 4> shape(operandType(0).getShape().begin(),
                                   operandType(0).getShape().end());
  shape.erase(shape.begin() + *dim);
  addResult(operandType(0).getElementType(), std::move(shape));
  return success();
}

LogicalResult ShapeRule::transpose() {
  const auto &perm = op.getAttr("perm")->list;
  unsigned rank = operandType(0).getRank();
  llvm::SmallVector<bool, 4> used(rank, false);
  llvm::SmallVector<Expr, 4> shape;
  for (const Expr &entry : perm) {
    long long d = *getIntegerValue(entry);
    if (perm.size() != rank || d < 0 || d >= rank || used[d])
      return error("transpose permutation is not a permutation of the " +
                   llvm::Twine(rank) + " dimensions of " + name(0));
    used[d] = true;
    shape.push_back(operandType(0).getDim(d));
  }
  if (perm.size() != rank)
    return error("transpose permutation is not a permutation of the " +
                 llvm::Twine(rank) + " dimensions of " + name(0));
  addResult(operandType(0).getElementType(), std::move(shape));
  return success();
}

LogicalResult ShapeRule::concat() {
  unsigned rank = operandType(0).getRank();
  auto dim = dimIndex("dim", rank);
  if (!dim)
    return failure();
  llvm::SmallVector<Expr, 4> shape(operandType(0).getShape().begin(),
                                   operandType(0).getShape().end());
  for (unsigned i = 1; i < op.getOperands().size(); ++i) {
    const TensorType &other = operandType(i);
    if (other.getRank() != rank)
      return error("concat operands " + name(0) + " " + shapeOf(0) + " and " +
                   name(i) + " " + shapeOf(i) + " differ in rank");
    for (unsigned d = 0; d < rank; ++d) {
      if (d == *dim)
        shape[d] = shape[d] + other.getDim(d);
      else if (!extents.equal(shape[d], other.getDim(d)))
        return error("concat operands " + name(0) + " " + shapeOf(0) +
                     " and " + name(i) + " " + shapeOf(i) +
                     " differ in dimension " + llvm::Twine(d));
    }
  }
  addResult(operandType(0).getElementType(), std::move(shape));
  return success();
}

LogicalResult ShapeRule::sliceOrSplit() {
  auto dim = dimIndex("dim", operandType(0).getRank());
  if (!dim)
    return failure();
  llvm::SmallVector<Expr, 4> shape(operandType(0).getShape().begin(),
                                   operandType(0).getShape().end());
  unsigned parts = 1;
  if (op.getKind() == OpKind::Split) {
    parts = intAttr("parts");
    shape[*dim] = shape[*dim] / parts;
  } else {
    // Where the numbers are known, the window [offset, offset + size) must
    // lie inside the extent; in exact arithmetic, as offsets near 2^63
    // wrapped in 64 bits. Symbolic ones are checked once bound
    // (check-divisibility).
    const Expr &size = op.getAttr("size")->expr;
    const Expr &offset = op.getAttr("offset")->expr;
    const Expr &extent = shape[*dim];
    auto number = [](const Expr &e) -> const GiNaC::numeric * {
      return GiNaC::is_a<GiNaC::numeric>(e) ? &GiNaC::ex_to<GiNaC::numeric>(e)
                                            : nullptr;
    };
    const GiNaC::numeric *n = number(size), *o = number(offset);
    bool outside = (n && (!n->is_integer() || *n < 1)) ||
                   (o && (!o->is_integer() || o->is_negative()));
    if (!outside && n && o && number(extent))
      outside = *o + *n > *number(extent);
    // No extent is that large (dims are integers below 2^62).
    if (!outside && ((n && *n > GiNaC::numeric(1LL << 62)) ||
                     (o && *o > GiNaC::numeric(1LL << 62))))
      outside = true;
    if (outside)
      return error("slice [" + printer.str(offset) + ", " +
                   printer.str(offset + size) + ") of dimension " +
                   llvm::Twine(*dim) + " is not inside its extent " +
                   printer.str(extent));
    shape[*dim] = size;
  }
  for (unsigned i = 0; i < parts; ++i)
    addResult(operandType(0).getElementType(), shape);
  return success();
}

LogicalResult ShapeRule::embedding() {
  const TensorType &table = operandType(1);
  if (table.getRank() != 2)
    return error("embedding table " + name(1) + " must have rank 2 [V, D]; "
                 "found " + shapeOf(1));
  llvm::SmallVector<Expr, 4> shape(operandType(0).getShape().begin(),
                                   operandType(0).getShape().end());
  shape.push_back(table.getDim(1));
  addResult(table.getElementType(), std::move(shape));
  return success();
}

LogicalResult ShapeRule::route() {
  const TensorType &logits = operandType(0);
  if (logits.getRank() == 0 ||
      !extents.equal(logits.getDim(logits.getRank() - 1),
                     op.getAttr("experts")->expr))
    return error("route over " + printer.str(op.getAttr("experts")->expr) +
                 " experts needs router logits whose last dimension is that "
                 "count; found " + shapeOf(0));
  llvm::SmallVector<Expr, 4> shape(logits.getShape().begin(),
                                   logits.getShape().end() - 1);
  shape.push_back(op.getAttr("topk")->expr);
  addResult(logits.getElementType(), std::move(shape));
  return success();
}

LogicalResult stg::inferResultTypes(const Op &op, const Module &module,
                                    const ExtentComparator &extents,
                                    DiagnosticEngine &diags,
                                    llvm::SmallVectorImpl<TensorType> &results) {
  return ShapeRule(op, module, extents, diags, results).run();
}
