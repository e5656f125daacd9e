//===- ShapeRules.h - Result shapes of every op ------------------*- C++ -*-===//
//
// The shape rule of each builtin op: from its operands' logical shapes and
// its attributes, the logical shape and element type of each result, with a
// located error when the operands do not fit together (an einsum index with
// two extents, shapes that do not broadcast, a reshape that changes the
// element count). Distributions are not decided here; see DistributionRules.
//
//===----------------------------------------------------------------------===//

#ifndef STG_IR_SHAPERULES_H
#define STG_IR_SHAPERULES_H

#include "stg/IR/Module.h"
#include "stg/Support/LogicalResult.h"

namespace stg {

/// Decides when two extents are the same: derived dims (`DH = D/NH`) are
/// expanded first, so `DH*NH` equals `D`.
class ExtentComparator {
public:
  explicit ExtentComparator(const Module &module);
  bool equal(const Expr &a, const Expr &b) const;
  /// `a` with derived dims expanded.
  Expr expand(const Expr &a) const;

private:
  GiNaC::exmap derived;
};

/// Computes the result types of `op` (logical shape, element type, and an
/// all-Duplicated distribution) from its operand types, which must be known.
/// Reports problems at the op's location and returns failure.
LogicalResult inferResultTypes(const Op &op, const Module &module,
                               const ExtentComparator &extents,
                               DiagnosticEngine &diags,
                               llvm::SmallVectorImpl<TensorType> &results);

/// `[B, S, D]`, for messages.
std::string formatShape(llvm::ArrayRef<Expr> shape, const ExprPrinter &printer);

} // namespace stg

#endif // STG_IR_SHAPERULES_H
