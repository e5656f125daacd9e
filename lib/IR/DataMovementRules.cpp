//===- DataMovementRules.cpp - Layouts of ops with a rule of their own ----===//
//
// The ops no index space describes. Sources (input, param, state, custom,
// layout) produce the layout their type declares. Reshape carries the
// partition of a dimension group's major dimension and gathers a minor one.
// MoE dispatch and combine move tokens between expert slots. An explicit
// collective is checked against its operand and transforms the layout
// exactly as it claims.
//
//===----------------------------------------------------------------------===//

#include "DistributionRule.h"
#include "stg/IR/ShapeRules.h"

#include "llvm/ADT/STLExtras.h"

using namespace stg;
using namespace stg::distribution;

LogicalResult Rule::declaredResults() {
  out.operands.assign(current.begin(), current.end());
  for (unsigned i = 0; i < op.getResults().size(); ++i) {
    if (!declared[i]) {
      diags.error(op.getLoc(), "'" + op.getKindName() +
                                   "' needs a result type to be distributed");
      return failure();
    }
    out.results.push_back(*declared[i]);
  }
  return success();
}

LogicalResult Rule::reshape() {
  // Dimensions regroup: [B, S, D] -> [B, S, NH, DH] maps D to (NH, DH). A
  // partition of the major dimension of a group carries to the major result
  // dimension (D/tp becomes NH/tp); one of a minor dimension cannot, so the
  // operand is gathered first. A PartialSum passes (reshape is linear).
  ExtentComparator extents(module);
  llvm::ArrayRef<Expr> from = op.getOperand(0)->getType().getShape();
  llvm::ArrayRef<Expr> to = op.getResult()->getType().getShape();
  // Group boundaries: the shortest prefixes with equal element counts.
  llvm::SmallVector<std::pair<unsigned, unsigned>, 4> groups; // group starts
  unsigned a = 0, b = 0;
  bool grouped = true;
  while (a < from.size() && b < to.size()) {
    groups.push_back({a, b});
    Expr left = from[a], right = to[b];
    unsigned na = a + 1, nb = b + 1;
    bool closed = extents.equal(left, right);
    for (unsigned i = a + 1; !closed && i <= from.size(); ++i) {
      Expr lhs = 1;
      for (unsigned k = a; k < i; ++k)
        lhs = lhs * from[k];
      Expr rhs = 1;
      for (unsigned j = b + 1; j <= to.size(); ++j) {
        rhs = rhs * to[j - 1];
        if (extents.equal(lhs, rhs)) {
          na = i, nb = j, closed = true;
          break;
        }
      }
    }
    if (!closed) {
      grouped = false;
      break;
    }
    a = na, b = nb;
  }
  const Distribution &in = current[0];
  Distribution needed(in.getRank()), result(to.size());
  for (unsigned g = 0; grouped && g < groups.size(); ++g)
    for (const Axis *axis : in.getPartition(groups[g].first)) {
      needed.addPartition(groups[g].first, axis);
      result.addPartition(groups[g].second, axis);
    }
  for (const Axis *axis : in.getPartialSum()) {
    needed.addPartialSum(axis);
    result.addPartialSum(axis);
  }
  out.operands.push_back(needed);
  out.results.push_back(result);
  return success();
}

LogicalResult Rule::dispatch() {
  // Each rank fills capacity slots for its own tokens, for every expert:
  // the slot dimension (1) is split over the axes that split the tokens.
  // The layout written on the result (experts split over ep) then costs the
  // AllToAll that real dispatch performs.
  if (failed(declaredResults()))
    return failure();
  Distribution natural(resultRank());
  const Distribution &tokens = current[0];
  for (unsigned d = 0; d + 1 < tokens.getRank(); ++d)
    for (const Axis *axis : tokens.getPartition(d))
      if (natural.getRank() >= 2)
        natural.addPartition(1, axis);
  out.operands[0] = Distribution(tokens.getRank()); // No PartialSum.
  for (unsigned d = 0; d < tokens.getRank(); ++d)
    for (const Axis *axis : tokens.getPartition(d))
      out.operands[0].addPartition(d, axis);
  out.results.assign(op.getResults().size(), natural);
  return success();
}

LogicalResult Rule::combine() {
  // The inverse of dispatch: expert outputs return to the ranks that own the
  // tokens, so the operand is needed with its slot dimension (1) split as
  // the result's tokens are, which the matcher makes an AllToAll.
  if (failed(declaredResults()))
    return failure();
  const Distribution &result = out.results.front();
  Distribution needed(rank(0));
  for (unsigned d = 0; d + 1 < result.getRank(); ++d)
    for (const Axis *axis : result.getPartition(d))
      if (needed.getRank() >= 2)
        needed.addPartition(1, axis);
  out.operands[0] = needed;
  return success();
}

std::string Rule::describe(const Distribution &dist, const Axis *axis) const {
  auto on = dist.on(axis);
  switch (on.kind) {
  case Distribution::Kind::Duplicated:
    return "Duplicated on " + axis->name;
  case Distribution::Kind::PartialSum:
    return "PartialSum over " + axis->name;
  case Distribution::Kind::Partition:
    return "partitioned over " + axis->name + " on dimension " +
           std::to_string(on.dim);
  }
  llvm_unreachable("unknown distribution kind");
}

LogicalResult Rule::collective() {
  const Distribution &in = current[0];
  Distribution result = in;
  llvm::SmallVector<const Axis *, 2> axes;
  for (const Axis *axis : op.getAttr("axes")->axes) {
    const Axis *ranks = axis->resolve();
    if (!ranks)
      continue; // Degree 1: nothing to communicate over.
    if (llvm::is_contained(axes, ranks)) {
      diags.error(op.getLoc(), "'" + op.getKindName() + "' lists the ranks of "
                               "axis '" + ranks->name + "' twice ('" +
                                   axis->name + "' is an alias of it)");
      return failure();
    }
    axes.push_back(ranks);
  }
  auto intAttr = [&](const char *name) {
    long long v = *getIntegerValue(op.getAttr(name)->expr);
    return unsigned(v < 0 ? v + in.getRank() : v);
  };
  auto rebuild = [&](auto partitionOf, auto keepPartial) {
    Distribution next(in.getRank());
    for (unsigned d = 0; d < in.getRank(); ++d)
      for (const Axis *axis : partitionOf(d))
        next.addPartition(d, axis);
    for (const Axis *axis : in.getPartialSum())
      if (keepPartial(axis))
        next.addPartialSum(axis);
    return next;
  };
  auto notIn = [&](const Axis *axis) { return !llvm::is_contained(axes, axis); };
  auto partitionsWithout = [&](unsigned d) {
    llvm::SmallVector<const Axis *, 2> kept;
    for (const Axis *axis : in.getPartition(d))
      if (notIn(axis))
        kept.push_back(axis);
    return kept;
  };

  auto keepAll = [](const Axis *) { return true; };
  // The partitions (without this collective's axes, if `moving`), with its
  // axes appended on dimension `dim`.
  auto appendedOn = [&](unsigned dim, bool moving) {
    return [&, dim, moving](unsigned d) {
      llvm::SmallVector<const Axis *, 2> p =
          moving ? partitionsWithout(d)
                 : llvm::SmallVector<const Axis *, 2>(in.getPartition(d).begin(),
                                                     in.getPartition(d).end());
      if (d == dim)
        p.append(axes.begin(), axes.end());
      return p;
    };
  };

  Distribution::Kind needed = Distribution::Kind::PartialSum;
  unsigned neededDim = 0;
  switch (op.getKind()) {
  case OpKind::AllReduce:
    result = rebuild([&](unsigned d) { return in.getPartition(d); }, notIn);
    break;
  case OpKind::ReduceScatter:
    result = rebuild(appendedOn(intAttr("dim"), false), notIn);
    break;
  case OpKind::AllGather:
    needed = Distribution::Kind::Partition;
    neededDim = intAttr("dim");
    result = rebuild(partitionsWithout, keepAll);
    break;
  case OpKind::AllToAll:
    needed = Distribution::Kind::Partition;
    neededDim = intAttr("from_dim");
    result = rebuild(appendedOn(intAttr("to_dim"), true), keepAll);
    break;
  case OpKind::Broadcast:
    needed = Distribution::Kind::Duplicated;
    break;
  case OpKind::Shard:
    needed = Distribution::Kind::Duplicated;
    result = rebuild(appendedOn(intAttr("dim"), false), keepAll);
    break;
  default:
    llvm_unreachable("not a collective");
  }
  for (const Axis *axis : axes) {
    auto on = in.on(axis);
    if (on.kind == needed &&
        (needed != Distribution::Kind::Partition || on.dim == neededDim))
      continue;
    std::string want =
        needed == Distribution::Kind::PartialSum ? "PartialSum over " + axis->name
        : needed == Distribution::Kind::Duplicated
            ? "Duplicated on " + axis->name
            : "partitioned over " + axis->name + " on dimension " +
                  std::to_string(neededDim);
    diags.error(op.getLoc(), "'" + op.getKindName() + "' over " + axis->name +
                                 " needs '%" + op.getOperand(0)->getName() +
                                 "' to be " + want + ", but it is " +
                                 describe(in, axis));
    return failure();
  }
  out.operands.push_back(in);
  out.results.push_back(result);
  return success();
}
