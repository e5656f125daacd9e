//===- DivisibilityCheck.h - Do the numbers fit the mesh? -------*- C++ -*-===//
//
// What the check-divisibility pass checks, split in two for callers that
// check one module under many bindings (the plan search): the constructor
// collects once what does not depend on the numbers (each distinct split
// extent of the module's values, with the first value that has it), and
// check() binds and checks those under the module's current dims and
// degrees. The diagnostics are the pass's, in the same order.
//
//===----------------------------------------------------------------------===//

#ifndef STG_PASSES_DIVISIBILITYCHECK_H
#define STG_PASSES_DIVISIBILITYCHECK_H

#include "stg/IR/Module.h"
#include "stg/Support/Diagnostics.h"
#include "stg/Support/LogicalResult.h"

#include "llvm/ADT/SmallVector.h"

#include <string>
#include <vector>

namespace stg {

class DivisibilityCheck {
public:
  /// Collects the extents to check. The module's ops and types must not
  /// change while the check is used; its dim values and degrees may.
  explicit DivisibilityCheck(const Module &module);

  /// Checks that each dim has a positive integer value, each slice lies in
  /// its extent and each partitioned extent splits evenly over its axes
  /// (or, an extent some weight partitions, is replicated: GQA's KV heads),
  /// reporting each problem once, at the first value that has it.
  LogicalResult check(DiagnosticEngine &diags) const;

  /// Under the module's current dims and degrees: the extents replicated
  /// rather than split (KV heads fewer than tp), as `extent/axes` joined by
  /// `;`, empty if none. The programs' structure depends on it beyond
  /// which axes are above 1: the plan search keys its shared programs on it.
  std::string getReplicatedExtents() const;

  /// One dimension of a value, the first of the module's values (in walk
  /// order) with its extent and partition axes.
  struct SplitExtent {
    Expr extent;
    std::string text; ///< As printed.
    llvm::SmallVector<const Axis *, 2> axes;
    unsigned dim;
    const Value *value;
    SourceLoc loc;
    bool symbol;     ///< A dim's own symbol: reported at its declaration.
    bool replicable; ///< Some weight partitions it, or it is a constant.
  };

private:
  const Module &module;
  std::vector<SplitExtent> extents;
  std::vector<const Op *> slices;
  /// Per dim of the module: whether it is a repeat's count, which may be 0
  /// (a run of layers a model has only as an option: `dim MTP = 0`).
  std::vector<char> countsRepeats;
};

} // namespace stg

#endif // STG_PASSES_DIVISIBILITYCHECK_H
