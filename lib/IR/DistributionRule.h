//===- DistributionRule.h - The per-op distribution solver ------*- C++ -*-===//
//
// Private to lib/IR: the rule object that decides one op's operand and
// result layouts. DistributionSolver.cpp has the index spaces and the
// generic solver, DataMovementRules.cpp the ops with a rule of their own
// (declared results, reshape, MoE dispatch and combine, collectives), and
// DistributionRules.cpp the dispatch from op kind to rule.
//
//===----------------------------------------------------------------------===//

#ifndef STG_LIB_IR_DISTRIBUTIONRULE_H
#define STG_LIB_IR_DISTRIBUTIONRULE_H

#include "stg/IR/DistributionRules.h"

#include "llvm/ADT/SmallVector.h"

#include <optional>
#include <string>

namespace stg {
namespace distribution {

/// Where PartialSum operands may pass through an op.
enum class Linearity {
  None,  ///< Nonlinear: partial operands are reduced first.
  Any,   ///< Multilinear (einsum, mul): one partial operand passes.
  All,   ///< A sum (add, concat): passes when every operand is partial.
  First, ///< Linear in operand 0 only (scale, div, transpose, slice).
};

/// One index character per operand dimension, and the result's.
struct IndexSpace {
  llvm::SmallVector<std::string, 3> operands;
  std::string result;
  /// One index string per result when they differ (grad ops); otherwise
  /// `result` serves every result.
  llvm::SmallVector<std::string, 3> results;
  std::string whole; ///< Indices that must not be partitioned.
  /// Votes for the index votesFrom[i] count for votesTo[i] instead: an
  /// axis that splits one dimension of the operands splits another in the
  /// op (Ulysses attention: the query sequence's axis splits the heads).
  std::string votesFrom, votesTo;
  Linearity linearity = Linearity::None;
};

class Rule {
public:
  Rule(const Op &op, const Module &module,
       llvm::ArrayRef<std::optional<Distribution>> declared,
       DiagnosticEngine &diags, OpDistribution &out)
      : op(op), module(module), declared(declared), diags(diags), out(out) {
    for (const Value *operand : op.getOperands())
      current.push_back(
          resolveDistribution(operand->getType().getDistribution()));
  }

  LogicalResult run();

private:
  unsigned rank(unsigned operand) const {
    return op.getOperand(operand)->getType().getRank();
  }
  unsigned resultRank() const { return op.getResult()->getType().getRank(); }
  static char index(unsigned i) { return char(1 + i); }
  char freshIndex() { return char(100 + fresh++); }
  std::string identity(unsigned n) {
    std::string idx;
    for (unsigned i = 0; i < n; ++i)
      idx += index(i);
    return idx;
  }

  IndexSpace einsum();
  IndexSpace broadcast(Linearity linearity);
  IndexSpace unary(Linearity linearity);
  IndexSpace attention();
  LogicalResult solve(const IndexSpace &space);
  /// The index space of index-space ops; none for ops with their own rule.
  std::optional<IndexSpace> indexSpace();
  LogicalResult grad();

  LogicalResult declaredResults();
  LogicalResult reshape();
  LogicalResult dispatch();
  LogicalResult combine();
  LogicalResult collective();
  std::string describe(const Distribution &dist, const Axis *axis) const;

  const Op &op;
  const Module &module;
  llvm::ArrayRef<std::optional<Distribution>> declared;
  DiagnosticEngine &diags;
  OpDistribution &out;
  llvm::SmallVector<Distribution, 3> current;
  unsigned fresh = 0;
};

} // namespace distribution
} // namespace stg

#endif // STG_LIB_IR_DISTRIBUTIONRULE_H
