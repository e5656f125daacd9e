//===- CheckDivisibility.cpp - Do the numbers fit the mesh? ---------------===//
//
// Binds every dim to its value and every axis to its degree (`--set tp=8`;
// an unset axis has degree 1) and checks what instantiation needs: each dim
// has a value and is an integer (a derived `DH = D / NH` divides exactly),
// and each partitioned dimension of each value splits evenly over its axes.
// One exception, from grouped-query attention: an extent that some weight
// partitions (KV heads) or a constant (MQA's single KV head), smaller than its partition degree that divides it
// (8 KV heads over tp = 16), is replicated, each rank holding one slice, as
// Megatron-LM does with KV heads. A data extent (a batch of 1 over dp = 8)
// gets no such leniency: it is an error. Errors name the dim, the axes and
// the values, at the op or declaration at fault.
//
//===----------------------------------------------------------------------===//

#include "stg/Passes/Passes.h"

#include <map>
#include <set>

using namespace stg;

#define DEBUG_TYPE "check-divisibility"

namespace {

class CheckDivisibilityPass : public Pass {
public:
  llvm::StringRef getName() const override { return DEBUG_TYPE; }
  LogicalResult run(Module &module, DiagnosticEngine &diags) override;

private:
  void checkValue(const Value &value, SourceLoc loc);
  void checkSlice(const Op &op);

  Module *module = nullptr;
  DiagnosticEngine *diags = nullptr;
  std::set<std::string> reported;
  /// Extents that weights partition (head counts): these may be smaller
  /// than the degree, each rank then holding one replicated slice. Data
  /// extents (the batch, the sequence) may not.
  std::set<std::string> replicable;
  /// Extents bound, by expression: most values share a few (the search
  /// checks every plan, and substitution costs microseconds).
  std::map<Expr, std::optional<Expr>, GiNaC::ex_is_less> boundExtents;
};

} // namespace

void CheckDivisibilityPass::checkValue(const Value &value, SourceLoc loc) {
  if (!value.hasType())
    return;
  const TensorType &type = value.getType();
  ExprPrinter printer = module->getPrinter();
  for (unsigned d = 0; d < type.getRank(); ++d) {
    auto [known, added] = boundExtents.try_emplace(type.getDim(d));
    if (added)
      known->second = module->bindAll(type.getDim(d));
    const std::optional<Expr> &bound = known->second;
    if (!bound) {
      // A dim that divides by zero itself is reported at its declaration.
      std::string extent = printer.str(type.getDim(d));
      bool dimFails = llvm::any_of(
          getSymbolNames(type.getDim(d)), [&](const std::string &name) {
            const Dim *dim = module->lookupDim(name);
            return dim && !module->bindDims(Expr(dim->symbol));
          });
      if (!dimFails && reported.insert(extent).second)
        diags->error(loc, "dimension " + llvm::Twine(d) + " of '%" +
                              value.getName() + "' is " + extent +
                              ", which divides by zero with " +
                              module->describeBindings(type.getDim(d)));
      continue;
    }
    auto size = getIntegerValue(*bound);
    if (!size)
      continue; // A dim without a value is reported at its declaration.
    if (*size < 1) {
      // A dim is reported at its declaration; a formula over dims here.
      std::string extent = printer.str(type.getDim(d));
      if (!GiNaC::is_a<GiNaC::symbol>(type.getDim(d)) &&
          reported.insert(extent).second)
        diags->error(loc, "dimension " + llvm::Twine(d) + " of '%" +
                              value.getName() + "' is " + extent + " = " +
                              llvm::Twine(*size) +
                              ", not a positive integer, with " +
                              module->describeBindings(type.getDim(d)));
      continue;
    }
    long long degree = 1;
    std::string axes;
    for (const Axis *axis : type.getDistribution().getPartition(d))
      if (const Axis *ranks = axis->resolve()) {
        degree *= ranks->size.value_or(1);
        axes += (axes.empty() ? "" : "*") + axis->name;
      }
    if (degree == 1 || *size % degree == 0)
      continue;
    std::string extent = printer.str(type.getDim(d));
    bool isConstant = GiNaC::is_a<GiNaC::numeric>(type.getDim(d));
    if (*size > 0 && *size < degree && degree % *size == 0 &&
        (isConstant || replicable.count(extent)))
      continue; // Replicated: each rank holds one (GQA's KV heads).
    // One report per extent and axes: the first value that has it, usually
    // the declaration, not every value derived from it.
    if (!reported.insert(extent + "/" + axes).second)
      continue;
    std::string why = isConstant || replicable.count(extent)
                          ? " ranks do not divide (nor is " +
                                std::to_string(degree) + " a multiple of it)"
                          : " ranks do not divide";
    diags->error(loc, "dimension " + llvm::Twine(d) + " of '%" +
                          value.getName() + "' is " + extent + " = " +
                          llvm::Twine(*size) + ", which " + axes + " = " +
                          llvm::Twine(degree) + why);
  }
}

void CheckDivisibilityPass::checkSlice(const Op &slice) {
  // The window [offset, offset + size) must lie inside the extent, which
  // only numbers can tell.
  const TensorType &type = slice.getOperand(0)->getType();
  long long dim = *getIntegerValue(slice.getAttr("dim")->expr);
  if (dim < 0)
    dim += type.getRank();
  auto number = [&](const Expr &e) -> std::optional<long long> {
    std::optional<Expr> bound = module->bindAll(e);
    return bound ? getIntegerValue(*bound) : std::nullopt;
  };
  std::optional<long long> extent = number(type.getDim(dim));
  std::optional<long long> size = number(slice.getAttr("size")->expr);
  std::optional<long long> offset = number(slice.getAttr("offset")->expr);
  if (!extent || !size || !offset)
    return; // Reported with the dims or the types.
  if (*size >= 1 && *offset >= 0 && *offset + *size <= *extent)
    return;
  diags->error(slice.getLoc(),
               "slice [" + llvm::Twine(*offset) + ", " +
                   llvm::Twine(*offset + *size) + ") of dimension " +
                   llvm::Twine(dim) + " is not inside its extent " +
                   module->getPrinter().str(type.getDim(dim)) + " = " +
                   llvm::Twine(*extent));
}

LogicalResult CheckDivisibilityPass::run(Module &m, DiagnosticEngine &d) {
  module = &m;
  diags = &d;
  reported.clear();
  replicable.clear();
  boundExtents.clear();
  unsigned errorsBefore = d.getNumErrors();
  ExprPrinter printer = m.getPrinter();
  for (const auto &dim : m.getDims()) {
    if (!dim->value) {
      d.error(dim->loc, "dim '" + dim->name + "' has no value: give it one "
                        "with `set` or --set " + dim->name + "=N");
      continue;
    }
    std::optional<Expr> value = m.bindAll(Expr(dim->symbol));
    if (!value) {
      d.error(dim->loc, "dim '" + dim->name + "' is " +
                            printer.str(*dim->value) +
                            ", which divides by zero with " +
                            m.describeBindings(*dim->value));
      continue;
    }
    auto integer = getIntegerValue(*value);
    if (!integer || *integer < 1)
      d.error(dim->loc, "dim '" + dim->name + "' is " +
                            printer.str(*dim->value) + " = " +
                            printer.str(*value) +
                            ", not a positive integer");
  }
  if (Graph *model = m.getModel()) {
    model->walk([&](Op &op) {
      if (op.getKind() != OpKind::Param || !op.getResult()->hasType())
        return;
      const TensorType &type = op.getResult()->getType();
      for (unsigned d = 0; d < type.getRank(); ++d)
        if (!type.getDistribution().getPartition(d).empty())
          replicable.insert(printer.str(type.getDim(d)));
    });
    model->walk([&](Op &op) {
      if (op.getKind() == OpKind::Slice && op.getOperand(0)->hasType())
        checkSlice(op);
    });
    model->walkValues([&](const Value *value) {
      const Op *def = value->getDefiningOp();
      checkValue(*value, def ? def->getLoc() : m.getModelLoc());
    });
  }
  return success(d.getNumErrors() == errorsBefore);
}

std::unique_ptr<Pass> stg::createCheckDivisibilityPass() {
  return std::make_unique<CheckDivisibilityPass>();
}
