//===- CheckDivisibility.cpp - Do the numbers fit the mesh? ---------------===//
//
// Binds every dim to its value and every axis to its degree (`--set tp=8`;
// an unset axis has degree 1) and checks what instantiation needs: each dim
// has a value and is an integer (a derived `DH = D / NH` divides exactly),
// and each partitioned dimension of each value splits evenly over its axes.
// One exception, from grouped-query attention: the key heads an attention
// splits over an axis (`distribute` marks them, Axis::replicatedExtents) or
// a constant (MQA's single KV head), smaller than its partition degree that
// divides it (8 KV heads over tp = 16), is replicated, each rank holding
// one slice, as Megatron-LM and vLLM do with KV heads. Any other extent
// (query heads, experts, a batch of 1 over dp = 8, the heads an all-to-all
// splits) gets no such leniency: it is an error, as those frameworks
// refuse it. Errors name the dim, the axes and the values, at the op or
// declaration at fault.
//
// Thousands of values share a few dozen extents, so the check collects the
// distinct (extent, axes) pairs once (DivisibilityCheck) and binds only
// those: the plan search checks one module under thousands of bindings.
//
//===----------------------------------------------------------------------===//

#include "stg/Passes/DivisibilityCheck.h"
#include "stg/Passes/Passes.h"

#include <map>
#include <set>

using namespace stg;

#define DEBUG_TYPE "check-divisibility"

DivisibilityCheck::DivisibilityCheck(const Module &module) : module(module) {
  const Graph *model = module.getModel();
  if (!model)
    return;
  ExprPrinter printer = module.getPrinter();
  countsRepeats.assign(module.getDims().size(), false);
  model->walk([&](Op &op) {
    if (op.getKind() == OpKind::Slice && op.getOperand(0)->hasType())
      slices.push_back(&op);
    if (op.getBody())
      for (size_t index = 0; index < countsRepeats.size(); ++index)
        if (op.getAttr("count")->expr.is_equal(module.getDims()[index]->symbol))
          countsRepeats[index] = true;
  });
  // Only what `distribute` lets its axes replicate (grouped-query
  // attention's key heads, Axis::replicatedExtents) may be fewer than the
  // ranks, as vLLM and Megatron-LM allow: fewer query heads or experts than
  // ranks is an error there too.
  auto mayReplicate = [](const Expr &extent,
                         llvm::ArrayRef<const Axis *> axes) {
    return llvm::any_of(axes, [&](const Axis *axis) {
      const Axis *ranks = axis->resolve();
      return ranks && ranks->mayReplicate(extent);
    });
  };
  using Key = std::pair<Expr, llvm::SmallVector<const Axis *, 2>>;
  auto less = [](const Key &a, const Key &b) {
    if (!a.first.is_equal(b.first))
      return GiNaC::ex_is_less()(a.first, b.first);
    return a.second < b.second;
  };
  // An all-to-all splits its result exactly: the heads of Ulysses'
  // attention cannot be replicated as a weight's can.
  std::set<Key, decltype(less)> exchanged(less);
  model->walk([&](Op &op) {
    if (op.getKind() != OpKind::AllToAll || !op.getResult()->hasType())
      return;
    const TensorType &type = op.getResult()->getType();
    for (unsigned d = 0; d < type.getRank(); ++d) {
      llvm::ArrayRef<const Axis *> axes =
          type.getDistribution().getPartition(d);
      exchanged.insert(Key{type.getDim(d), {axes.begin(), axes.end()}});
    }
  });
  std::set<Key, decltype(less)> seen(less);
  model->walkValues([&](const Value *value) {
    if (!value->hasType())
      return;
    const TensorType &type = value->getType();
    const Op *def = value->getDefiningOp();
    for (unsigned d = 0; d < type.getRank(); ++d) {
      llvm::ArrayRef<const Axis *> axes =
          type.getDistribution().getPartition(d);
      Key key{type.getDim(d), {axes.begin(), axes.end()}};
      if (!seen.insert(key).second)
        continue;
      std::string text = printer.str(key.first);
      bool constant = GiNaC::is_a<GiNaC::numeric>(key.first);
      bool replicable = (constant || mayReplicate(key.first, key.second)) &&
                        !exchanged.count(key);
      extents.push_back({key.first, std::move(text), std::move(key.second), d,
                         value, def ? def->getLoc() : module.getModelLoc(),
                         GiNaC::is_a<GiNaC::symbol>(key.first), replicable});
    }
  });
}

/// The ranks `split` is split over under the current degrees, and its axes
/// as a message names them (`cp*tp`).
static std::pair<long long, std::string>
getSplitDegree(const DivisibilityCheck::SplitExtent &split) {
  long long degree = 1;
  std::string axes;
  for (const Axis *axis : split.axes)
    if (const Axis *ranks = axis->resolve()) {
      degree *= ranks->size.value_or(1);
      axes += (axes.empty() ? "" : "*") + axis->name;
    }
  return {degree, axes};
}

namespace {

/// One check's state: what it reported, and the extents it bound.
class Checker {
public:
  Checker(const Module &module, DiagnosticEngine &diags)
      : module(module), diags(diags), printer(module.getPrinter()) {}
  void checkDims(llvm::ArrayRef<char> countsRepeats);
  void checkSlice(const Op &slice);
  void checkExtent(const DivisibilityCheck::SplitExtent &split);

private:
  const Module &module;
  DiagnosticEngine &diags;
  ExprPrinter printer;
  std::set<std::string> reported;
  /// Extents bound, by expression: values of several axes share one.
  std::map<Expr, std::optional<Expr>, GiNaC::ex_is_less> boundExtents;
};

} // namespace

void Checker::checkDims(llvm::ArrayRef<char> countsRepeats) {
  std::vector<std::optional<Expr>> values = module.bindAllDims();
  for (size_t index = 0; index < values.size(); ++index) {
    const auto &dim = module.getDims()[index];
    if (!dim->value) {
      diags.error(dim->loc, "dim '" + dim->name +
                                "' has no value: give it one "
                                "with `set` or --set " +
                                dim->name + "=N");
      continue;
    }
    const std::optional<Expr> &value = values[index];
    if (!value) {
      diags.error(dim->loc, "dim '" + dim->name + "' is " +
                                printer.str(*dim->value) +
                                ", which divides by zero with " +
                                module.describeBindings(*dim->value));
      continue;
    }
    auto integer = getIntegerValue(*value);
    // A repeat's count may be 0 (DivisibilityCheck::countsRepeats).
    bool mayBeZero = index < countsRepeats.size() && countsRepeats[index];
    if (!integer || *integer < (mayBeZero ? 0 : 1))
      diags.error(dim->loc,
                  "dim '" + dim->name + "' is " + printer.str(*dim->value) +
                      " = " + printer.str(*value) + ", not a positive integer");
  }
}

void Checker::checkSlice(const Op &slice) {
  // The window [offset, offset + size) must lie inside the extent, which
  // only numbers can tell.
  const TensorType &type = slice.getOperand(0)->getType();
  long long dim = *getIntegerValue(slice.getAttr("dim")->expr);
  if (dim < 0)
    dim += type.getRank();
  auto number = [&](const Expr &e) -> std::optional<long long> {
    std::optional<Expr> bound = module.bindAll(e);
    return bound ? getIntegerValue(*bound) : std::nullopt;
  };
  std::optional<long long> extent = number(type.getDim(dim));
  std::optional<long long> size = number(slice.getAttr("size")->expr);
  std::optional<long long> offset = number(slice.getAttr("offset")->expr);
  if (!extent || !size || !offset)
    return; // Reported with the dims or the types.
  if (*size >= 1 && *offset >= 0 && *offset + *size <= *extent)
    return;
  diags.error(slice.getLoc(),
              "slice [" + llvm::Twine(*offset) + ", " +
                  llvm::Twine(*offset + *size) + ") of dimension " +
                  llvm::Twine(dim) + " is not inside its extent " +
                  printer.str(type.getDim(dim)) + " = " + llvm::Twine(*extent));
}

void Checker::checkExtent(const DivisibilityCheck::SplitExtent &split) {
  auto [known, added] = boundExtents.try_emplace(split.extent);
  if (added)
    known->second = module.bindAll(split.extent);
  const std::optional<Expr> &bound = known->second;
  llvm::StringRef name = split.value->getName();
  if (!bound) {
    // A dim that divides by zero itself is reported at its declaration.
    bool dimFails = llvm::any_of(
        getSymbolNames(split.extent), [&](const std::string &symbol) {
          const Dim *dim = module.lookupDim(symbol);
          return dim && !module.bindDims(Expr(dim->symbol));
        });
    if (!dimFails && reported.insert(split.text).second)
      diags.error(split.loc, "dimension " + llvm::Twine(split.dim) + " of '%" +
                                 name + "' is " + split.text +
                                 ", which divides by zero with " +
                                 module.describeBindings(split.extent));
    return;
  }
  auto size = getIntegerValue(*bound);
  if (!size)
    return; // A dim without a value is reported at its declaration.
  if (*size < 1) {
    // A dim is reported at its declaration; a formula over dims here.
    if (!split.symbol && reported.insert(split.text).second)
      diags.error(split.loc, "dimension " + llvm::Twine(split.dim) + " of '%" +
                                 name + "' is " + split.text + " = " +
                                 llvm::Twine(*size) +
                                 ", not a positive integer, with " +
                                 module.describeBindings(split.extent));
    return;
  }
  auto [degree, axes] = getSplitDegree(split);
  if (degree == 1 || *size % degree == 0)
    return;
  if (*size > 0 && *size < degree && degree % *size == 0 && split.replicable)
    return; // Replicated: each rank holds one (GQA's KV heads).
  // One report per extent and axes: the first value that has it, usually
  // the declaration, not every value derived from it.
  if (!reported.insert(split.text + "/" + axes).second)
    return;
  std::string why = split.replicable
                        ? " ranks do not divide (nor is " +
                              std::to_string(degree) + " a multiple of it)"
                        : " ranks do not divide";
  diags.error(split.loc, "dimension " + llvm::Twine(split.dim) + " of '%" +
                             name + "' is " + split.text + " = " +
                             llvm::Twine(*size) + ", which " + axes + " = " +
                             llvm::Twine(degree) + why);
}

LogicalResult DivisibilityCheck::check(DiagnosticEngine &diags) const {
  unsigned errorsBefore = diags.getNumErrors();
  Checker checker(module, diags);
  checker.checkDims(countsRepeats);
  for (const Op *slice : slices)
    checker.checkSlice(*slice);
  for (const SplitExtent &split : extents)
    checker.checkExtent(split);
  return success(diags.getNumErrors() == errorsBefore);
}

std::string DivisibilityCheck::getReplicatedExtents() const {
  std::string replicated;
  for (const SplitExtent &split : extents) {
    if (!split.replicable)
      continue;
    auto [degree, axes] = getSplitDegree(split);
    if (degree == 1)
      continue;
    std::optional<Expr> bound = module.bindAll(split.extent);
    std::optional<long long> size =
        bound ? getIntegerValue(*bound) : std::nullopt;
    if (size && *size < degree)
      replicated += (replicated.empty() ? "" : ";") + split.text + "/" + axes;
  }
  return replicated;
}

namespace {

class CheckDivisibilityPass : public Pass {
public:
  llvm::StringRef getName() const override { return DEBUG_TYPE; }
  LogicalResult run(Module &module, DiagnosticEngine &diags) override {
    return DivisibilityCheck(module).check(diags);
  }
};

} // namespace

std::unique_ptr<Pass> stg::createCheckDivisibilityPass() {
  return std::make_unique<CheckDivisibilityPass>();
}
