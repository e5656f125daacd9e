//===- DistributionRules.h - How each op distributes ------------*- C++ -*-===//
//
// The distribution rule of each builtin op, GSPMD style. Given the current
// layouts of an op's operands (and the layout the user wrote for its result,
// if any), the rule decides how the op runs on the mesh: the layout it needs
// each operand in, and the layout its result naturally comes out in. The
// `distribute` pass closes the gaps with `layout` ops; the collective
// matcher turns those into communication.
//
// Rules work on resolved layouts: alias axes are replaced by the axis whose
// ranks they use (`sp` becomes `tp` when sequence parallelism is on) and
// inactive axes are dropped, because what matters is which ranks hold what.
//
//===----------------------------------------------------------------------===//

#ifndef STG_IR_DISTRIBUTIONRULES_H
#define STG_IR_DISTRIBUTIONRULES_H

#include "stg/IR/Module.h"
#include "stg/Support/LogicalResult.h"

namespace stg {

/// `dist` with every axis replaced by the axis whose ranks it uses and
/// inactive axes dropped. Returns the physical axis that ends up twice, if
/// any (then the layout is impossible).
Distribution resolveDistribution(const Distribution &dist,
                                 const Axis **conflict = nullptr);

/// What a rule decides for one op.
struct OpDistribution {
  /// The layout each operand must have when the op runs.
  llvm::SmallVector<Distribution, 3> operands;
  /// The layout each result comes out in.
  llvm::SmallVector<Distribution, 1> results;
};

/// Applies the rule of `op`, whose operands must have types. `declared`
/// holds, per result, the layout the user wrote (resolved), if any; rules use
/// it as a vote, never as a constraint. Explicit collectives are checked
/// against their operands' layouts; a mismatch is reported at the op.
LogicalResult inferOpDistribution(
    const Op &op, const Module &module,
    llvm::ArrayRef<std::optional<Distribution>> declared,
    DiagnosticEngine &diags, OpDistribution &result);

} // namespace stg

#endif // STG_IR_DISTRIBUTIONRULES_H
