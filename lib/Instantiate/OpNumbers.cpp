//===- OpNumbers.cpp - An op's costs, evaluated once ----------------------===//
//
// A cost is a count: once bound it must be a non-negative integer, else
// the op's line gets an error naming the op, the formula and the binding
// (a `custom` op's FLOPs that go negative in a decode step, S = 1). The one
// exception is attention and its gradient, whose formulas are averages by
// design (the 2.5x backward, a context-parallel rank's share of the masked
// pairs, an unfused kernel's half-byte dropout mask per score): those round
// up, as a kernel does whole operations (docs/cost-model.md).
//
//===----------------------------------------------------------------------===//

#include "stg/Instantiate/OpNumbers.h"

#include "stg/IR/Cost.h"
#include "stg/IR/GradOp.h"

#include <cmath>
#include <map>

using namespace stg;

std::optional<int64_t> OpNumberCache::evaluate(const Expr &e, SourceLoc loc,
                                               llvm::StringRef what,
                                               bool roundUp) {
  ExprPrinter printer = module.getPrinter();
  std::optional<Expr> bound = module.bindAll(e);
  auto fail = [&](const llvm::Twine &why) {
    diags->error(loc, "cannot instantiate the " + what + ", " + printer.str(e) +
                          ": " + why);
    return std::nullopt;
  };
  if (!bound)
    return fail("it divides by zero with " + module.describeBindings(e));
  if (GiNaC::is_a<GiNaC::numeric>(*bound)) {
    const auto &number = GiNaC::ex_to<GiNaC::numeric>(*bound);
    double real = number.to_double();
    std::string value = printer.str(*bound);
    std::string bindings = ", with " + module.describeBindings(e);
    if (!number.is_real() || real < 0)
      return fail("it is negative, " + value + bindings);
    if (real >= 9.2e18)
      return fail("it is " + value + ", more than 2^63" + bindings);
    if (!number.is_integer() && !roundUp)
      return fail("it is " + value + ", not a whole number" + bindings);
    // Exact integers stay exact (a double has 53 bits); a fraction rounds
    // up: a kernel does whole operations.
    if (number.is_integer())
      return int64_t(number.to_long());
    return int64_t(std::ceil(real));
  }
  std::string names;
  for (const std::string &name : getSymbolNames(*bound))
    names += (names.empty() ? "" : ", ") + name;
  return fail("no value for " + names);
}

GemmShape OpNumberCache::getGemmShape(const Op &einsum) {
  const EinsumSpec &spec = einsum.getAttr("spec")->einsum;
  if (spec.inputs.size() != 2)
    return {};
  std::map<char, int64_t> extent;
  for (unsigned k = 0; k < 2; ++k)
    for (unsigned d = 0; d < spec.inputs[k].size(); ++d) {
      std::optional<Expr> bound = module.bindAll(
          einsum.getOperand(k)->getType().getLocalDim(d));
      std::optional<long long> value =
          bound ? getIntegerValue(*bound) : std::nullopt;
      if (!value || *value <= 0)
        return {};
      extent[spec.inputs[k][d]] = *value;
    }
  GemmShape gemm{1, 1, 1, 1};
  for (const auto &[index, size] : extent) {
    bool inFirst = spec.inputs[0].find(index) != std::string::npos;
    bool inSecond = spec.inputs[1].find(index) != std::string::npos;
    bool inOutput = spec.output.find(index) != std::string::npos;
    int64_t &dim = !inOutput              ? gemm.k
                   : inFirst && inSecond ? gemm.batch
                   : inFirst             ? gemm.m
                                         : gemm.n;
    dim *= size;
  }
  return gemm;
}

/// True for attention and its gradient, whose costs are averages by design
/// and round up.
static bool isAttention(const Op &op) {
  return op.getKind() == OpKind::Attention ||
         (op.getKind() == OpKind::Grad &&
          getGradForwardKind(op) == OpKind::Attention);
}

bool OpNumberCache::checkWindow(const Op &op, llvm::StringRef what) {
  const Attribute *mask = op.getAttr("mask");
  if (!isAttention(op) || !mask || mask->text != "sliding")
    return true;
  const Expr &window = op.getAttr("window")->expr;
  std::optional<int64_t> positions =
      evaluate(window, op.getLoc(), ("window of " + what).str(), false);
  if (!positions)
    return false;
  if (*positions >= 1)
    return true;
  diags->error(op.getLoc(), "cannot instantiate the window of " + what + ", " +
                                module.getPrinter().str(window) +
                                ": it is 0, not a positive number of "
                                "positions, with " +
                                module.describeBindings(window));
  return false;
}

const OpNumbers *OpNumberCache::get(const Op &op) {
  auto [it, inserted] = ops.try_emplace(&op);
  if (!inserted)
    return it->second ? &*it->second : nullptr;
  OpNumbers numbers;
  // The kind and the name, so that one op among a layer's is found.
  std::string what = ("'" + op.getKindName() + "'").str();
  if (!op.getResults().empty())
    what += " '%" + op.getResults().front()->getName().str() + "'";
  if (!checkWindow(op, what))
    return nullptr;
  bool roundUp = isAttention(op);
  if (op.getInfo().has(Collective)) {
    std::optional<int64_t> bytes = evaluate(
        op.getAttr("bytes")->expr, op.getLoc(), "size of " + what, false);
    if (!bytes)
      return nullptr;
    numbers.commBytes = *bytes;
  } else {
    std::optional<int64_t> flops =
        evaluate(getFlops(op), op.getLoc(), "FLOPs of " + what, roundUp);
    std::optional<int64_t> bytes = evaluate(getBytesAccessed(op), op.getLoc(),
                                            "bytes of " + what, roundUp);
    if (!flops || !bytes)
      return nullptr;
    numbers.flops = *flops;
    numbers.bytesAccessed = *bytes;
    if (op.getKind() == OpKind::Einsum)
      numbers.gemm = getGemmShape(op);
  }
  it->second = numbers;
  return &*it->second;
}

std::optional<int64_t> OpNumberCache::getLocalBytes(const Value &value,
                                                    SourceLoc loc) {
  auto [it, inserted] = values.try_emplace(&value);
  if (inserted)
    it->second = evaluate(stg::getLocalBytes(value), loc,
                          "size of '%" + value.getName().str() + "'", false);
  return it->second;
}
