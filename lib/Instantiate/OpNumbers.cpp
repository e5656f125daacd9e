//===- OpNumbers.cpp - An op's costs, evaluated once ----------------------===//

#include "OpNumbers.h"

#include "stg/IR/Cost.h"

#include <cmath>

using namespace stg;

std::optional<int64_t> OpNumberCache::evaluate(const Expr &e, SourceLoc loc,
                                               llvm::StringRef what) {
  Expr bound = module.bindAll(e);
  if (std::optional<long long> value = getIntegerValue(bound))
    return *value;
  if (GiNaC::is_a<GiNaC::numeric>(bound)) {
    // Fractional costs (half the scores of a causal mask over an odd
    // length) round up: a kernel does whole operations.
    double real = GiNaC::ex_to<GiNaC::numeric>(bound).to_double();
    if (real >= 0 && real < 9.2e18)
      return int64_t(std::ceil(real));
  }
  std::string names;
  for (const std::string &name : getSymbolNames(bound))
    names += (names.empty() ? "" : ", ") + name;
  diags.error(loc, "cannot instantiate the " + what + " " +
                       module.getPrinter().str(bound) +
                       (names.empty() ? llvm::Twine(": not a finite number")
                                      : ": no value for " + names));
  return std::nullopt;
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
