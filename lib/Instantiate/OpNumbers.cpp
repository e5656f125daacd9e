//===- OpNumbers.cpp - An op's costs, evaluated once ----------------------===//

#include "stg/Instantiate/OpNumbers.h"

#include "stg/IR/Cost.h"

#include <cmath>
#include <map>

using namespace stg;

std::optional<int64_t> OpNumberCache::evaluate(const Expr &e, SourceLoc loc,
                                               llvm::StringRef what) {
  ExprPrinter printer = module.getPrinter();
  std::optional<Expr> bound = module.bindAll(e);
  auto fail = [&](const llvm::Twine &why) {
    diags->error(loc, "cannot instantiate the " + what + " " + printer.str(e) +
                         ": " + why);
    return std::nullopt;
  };
  if (!bound)
    return fail("it divides by zero with " + module.describeBindings(e));
  if (GiNaC::is_a<GiNaC::numeric>(*bound)) {
    const auto &number = GiNaC::ex_to<GiNaC::numeric>(*bound);
    // Fractional costs (half the scores of a causal mask over an odd
    // length) round up: a kernel does whole operations.
    double real = number.to_double();
    if (number.is_real() && real >= 0 && real < 9.2e18)
      return int64_t(std::ceil(real));
    std::string value = printer.str(*bound);
    return fail(llvm::Twine(real < 0 ? "it is negative, " : "it is ") + value +
                (real < 0 ? "" : ", more than 2^63") + ", with " +
                module.describeBindings(e));
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

const OpNumbers *OpNumberCache::get(const Op &op) {
  auto [it, inserted] = ops.try_emplace(&op);
  if (!inserted)
    return it->second ? &*it->second : nullptr;
  OpNumbers numbers;
  std::string what = ("'" + op.getKindName() + "'").str();
  if (op.getInfo().has(Collective)) {
    std::optional<int64_t> bytes =
        evaluate(op.getAttr("bytes")->expr, op.getLoc(), "size of " + what);
    if (!bytes)
      return nullptr;
    numbers.commBytes = *bytes;
  } else {
    std::optional<int64_t> flops =
        evaluate(getFlops(op), op.getLoc(), "FLOPs of " + what);
    std::optional<int64_t> bytes =
        evaluate(getBytesAccessed(op), op.getLoc(), "bytes of " + what);
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
                          "size of '%" + value.getName().str() + "'");
  return it->second;
}
