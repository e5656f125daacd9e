//===- DistributionRules.cpp - How each op distributes --------------------===//
//
// Most ops are described by an index space, as einsum is: one index per
// operand dimension, shared where dimensions correspond, and the result's
// indices. A generic solver then decides, for each mesh axis, which index
// (if any) it partitions:
//
//   1. Every operand dimension partitioned over axis `a`, and the user's
//      declared result layout, vote for their index. Indices the op cannot
//      split (a normalised dimension, attention's key sequence) get no votes.
//   2. The index with the most votes wins `a`. Ties go to an index the
//      result keeps (a contracted one would cost a reduction of the result),
//      then to one a weight (param or state) votes for (weights are
//      anchors: gathering a sharded weight undoes tensor parallelism), then
//      to the earliest vote (the declared result, then operands in order).
//      This keeps the Megatron patterns: `x[S/sp] . w[F/tp]` gives tp to f
//      and gathers x; `h[F/tp] . w[F/tp]` gives tp to the contracted f (two
//      votes) and yields a PartialSum, not a gather; and FSDP's
//      `x[B/dp] . w[D/dp]` gives dp to b and gathers the weight.
//   3. An axis on an index the result does not have (a contracted index)
//      makes the result PartialSum over it.
//   4. PartialSum operands pass through only where the op is linear in them
//      (einsum in any one operand, add when all are partial, scale, ...);
//      elsewhere they are reduced first.
//
// Ops whose result layout cannot be derived (input, param, reshape, custom)
// produce what their type says. Explicit collectives are checked against
// their operands and transform the layout exactly as they claim.
//
//===----------------------------------------------------------------------===//

#include "stg/IR/DistributionRules.h"
#include "stg/IR/GradOp.h"
#include "stg/IR/ShapeRules.h"

#include "llvm/ADT/STLExtras.h"

#include <map>

using namespace stg;

Distribution stg::resolveDistribution(const Distribution &dist,
                                      const Axis **conflict) {
  Distribution resolved(dist.getRank());
  llvm::SmallVector<const Axis *, 8> seen;
  auto add = [&](const Axis *axis) -> const Axis * {
    const Axis *ranks = axis->resolve();
    if (!ranks)
      return nullptr;
    if (llvm::is_contained(seen, ranks)) {
      if (conflict && !*conflict)
        *conflict = ranks;
      return nullptr;
    }
    seen.push_back(ranks);
    return ranks;
  };
  for (unsigned d = 0; d < dist.getRank(); ++d)
    for (const Axis *axis : dist.getPartition(d))
      if (const Axis *ranks = add(axis))
        resolved.addPartition(d, ranks);
  for (const Axis *axis : dist.getPartialSum())
    if (const Axis *ranks = add(axis))
      resolved.addPartialSum(ranks);
  return resolved;
}

namespace {

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
  Linearity linearity = Linearity::None;
};

class Rule {
public:
  Rule(const Op &op, const Module &module,
       llvm::ArrayRef<std::optional<Distribution>> declared,
       DiagnosticEngine &diags, OpDistribution &out)
      : op(op), module(module), declared(declared), diags(diags), out(out) {
    for (const Value *operand : op.getOperands())
      current.push_back(resolveDistribution(
          operand->getType().getDistribution()));
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

} // namespace

//===----------------------------------------------------------------------===//
// Index spaces
//===----------------------------------------------------------------------===//

IndexSpace Rule::einsum() {
  const EinsumSpec &spec = op.getAttr("spec")->einsum;
  IndexSpace space;
  space.operands.assign(spec.inputs.begin(), spec.inputs.end());
  space.result = spec.output;
  space.linearity = Linearity::Any;
  // A repeated index in one operand (a diagonal) cannot be split.
  for (const std::string &term : spec.inputs)
    for (char c : term)
      if (llvm::count(term, c) > 1)
        space.whole += c;
  return space;
}

IndexSpace Rule::broadcast(Linearity linearity) {
  // Align from the last dimension; a broadcast dimension (extent 1 where the
  // result's is not) gets an index of its own.
  IndexSpace space;
  space.linearity = linearity;
  unsigned outRank = resultRank();
  const TensorType &result = op.getResult()->getType();
  for (unsigned k = 0; k < op.getOperands().size(); ++k) {
    const TensorType &type = op.getOperand(k)->getType();
    std::string idx;
    for (unsigned d = 0; d < type.getRank(); ++d) {
      unsigned outDim = outRank - type.getRank() + d;
      bool broadcasted =
          type.getDim(d).is_equal(1) && !result.getDim(outDim).is_equal(1);
      idx += broadcasted ? freshIndex() : index(outDim);
    }
    space.operands.push_back(idx);
  }
  space.result = identity(outRank);
  return space;
}

IndexSpace Rule::unary(Linearity linearity) {
  IndexSpace space;
  space.linearity = linearity;
  space.operands.push_back(identity(rank(0)));
  space.result = identity(rank(0));
  return space;
}

IndexSpace Rule::attention() {
  // q [..., s, h, e], k [..., t, h, e], v [..., t, h, f] -> [..., s, h, f];
  // rank 2 drops the head index. The key sequence t and the head size are
  // not split: context parallelism gathers k and v (all-gather CP).
  unsigned r = rank(0);
  std::string prefix = identity(r >= 3 ? r - 3 : 0);
  std::string heads = r >= 3 ? std::string(1, 'h') : std::string();
  IndexSpace space;
  space.operands = {prefix + "s" + heads + "e", prefix + "t" + heads + "e",
                    prefix + "t" + heads + "f"};
  space.result = prefix + "s" + heads + "f";
  space.whole = "tef";
  return space;
}

//===----------------------------------------------------------------------===//
// The solver
//===----------------------------------------------------------------------===//

LogicalResult Rule::solve(const IndexSpace &space) {
  llvm::SmallVector<std::string, 3> resultIndices = space.results;
  if (resultIndices.empty())
    resultIndices.push_back(space.result);
  // Sources of votes: the declared result first, then the operands.
  struct Source {
    const std::string *indices;
    const Distribution *dist;
    bool weight;
  };
  llvm::SmallVector<Source, 4> sources;
  if (!declared.empty() && declared.front() &&
      declared.front()->getRank() == space.result.size())
    sources.push_back({&space.result, &*declared.front(), false});
  for (unsigned k = 0; k < space.operands.size(); ++k) {
    const Op *def = k < op.getOperands().size()
                        ? op.getOperand(k)->getDefiningOp()
                        : nullptr;
    bool weight = def && (def->getKind() == OpKind::Param ||
                          def->getKind() == OpKind::State);
    sources.push_back({&space.operands[k], &current[k], weight});
  }

  // For each axis, in vote order: index -> its votes.
  struct Vote {
    unsigned count = 0;
    unsigned first = ~0u;
    bool kept = false;   ///< The result has this index.
    bool weight = false; ///< A weight voted for it.

    /// The order of step 2: more votes, kept, weight, earlier.
    bool beats(const Vote &other) const {
      if (count != other.count)
        return count > other.count;
      if (kept != other.kept)
        return kept;
      if (weight != other.weight)
        return weight;
      return first < other.first;
    }
  };
  std::map<const Axis *, std::map<char, Vote>> votes;
  std::vector<const Axis *> axisOrder;
  unsigned position = 0;
  for (const Source &source : sources) {
    for (unsigned d = 0; d < source.indices->size(); ++d) {
      char idx = (*source.indices)[d];
      for (const Axis *axis : source.dist->getPartition(d)) {
        ++position;
        if (space.whole.find(idx) != std::string::npos)
          continue;
        if (!votes.count(axis))
          axisOrder.push_back(axis);
        Vote &vote = votes[axis][idx];
        ++vote.count;
        vote.first = std::min(vote.first, position);
        vote.kept = llvm::any_of(resultIndices, [&](const std::string &r) {
          return r.find(idx) != std::string::npos;
        });
        vote.weight |= source.weight;
      }
    }
  }

  // Each axis goes to its best index; an index's axes keep vote order.
  std::map<char, std::vector<std::pair<unsigned, const Axis *>>> assigned;
  llvm::SmallVector<const Axis *, 4> used;
  for (const Axis *axis : axisOrder) {
    const auto &candidates = votes[axis];
    auto best = candidates.end();
    for (auto it = candidates.begin(); it != candidates.end(); ++it)
      if (best == candidates.end() || it->second.beats(best->second))
        best = it;
    assigned[best->first].push_back({best->second.first, axis});
    used.push_back(axis);
  }
  for (auto &[idx, axes] : assigned)
    llvm::sort(axes);

  auto layoutOf = [&](const std::string &indices) {
    Distribution dist(indices.size());
    for (unsigned d = 0; d < indices.size(); ++d) {
      auto it = assigned.find(indices[d]);
      if (it == assigned.end() || indices.find(indices[d]) != d)
        continue;
      for (auto &[order, axis] : it->second)
        dist.addPartition(d, axis);
    }
    return dist;
  };
  for (const std::string &indices : space.operands)
    out.operands.push_back(layoutOf(indices));
  // Each result: its indices' axes; axes on indices it lacks are summed.
  llvm::SmallVector<Distribution, 1> results;
  for (const std::string &indices : resultIndices) {
    Distribution result = layoutOf(indices);
    for (auto &[idx, axes] : assigned)
      if (indices.find(idx) == std::string::npos)
        for (auto &[order, axis] : axes)
          result.addPartialSum(axis);
    results.push_back(result);
  }

  // PartialSum operands: pass through where the op is linear in them.
  llvm::SmallVector<const Axis *, 4> partialAxes;
  for (const Distribution &dist : current)
    for (const Axis *axis : dist.getPartialSum())
      if (!llvm::is_contained(partialAxes, axis))
        partialAxes.push_back(axis);
  for (const Axis *axis : partialAxes) {
    if (llvm::is_contained(used, axis))
      continue; // The axis splits an index: partial operands are reduced.
    llvm::SmallVector<unsigned, 3> partial;
    for (unsigned k = 0; k < current.size(); ++k)
      if (current[k].on(axis).kind == Distribution::Kind::PartialSum)
        partial.push_back(k);
    llvm::SmallVector<unsigned, 3> keep;
    switch (space.linearity) {
    case Linearity::None:
      break;
    case Linearity::Any:
      keep.push_back(partial.front());
      break;
    case Linearity::All:
      if (partial.size() == current.size())
        keep = partial;
      break;
    case Linearity::First:
      if (partial.front() == 0)
        keep.push_back(0);
      break;
    }
    for (unsigned k : keep)
      out.operands[k].addPartialSum(axis);
    if (!keep.empty())
      for (Distribution &result : results)
        result.addPartialSum(axis);
  }
  for (unsigned i = 0; i < op.getResults().size(); ++i)
    out.results.push_back(results[std::min<size_t>(i, results.size() - 1)]);
  return success();
}

//===----------------------------------------------------------------------===//
// Ops with their own rule
//===----------------------------------------------------------------------===//

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

std::optional<IndexSpace> Rule::indexSpace() {
  auto dimIndex = [&](unsigned rankOf) {
    long long dim = *getIntegerValue(op.getAttr("dim")->expr);
    return unsigned(dim < 0 ? dim + rankOf : dim);
  };
  switch (op.getKind()) {
  case OpKind::Einsum:
    return einsum();
  case OpKind::Add:
  case OpKind::Sub:
    return broadcast(Linearity::All);
  case OpKind::Mul:
    return broadcast(Linearity::Any);
  case OpKind::Div:
    return broadcast(Linearity::First);
  case OpKind::Elementwise:
    return broadcast(Linearity::None);
  case OpKind::PScan: {
    IndexSpace space = broadcast(Linearity::None);
    space.whole += space.result[dimIndex(resultRank())];
    return space;
  }
  case OpKind::Silu:
  case OpKind::Gelu:
  case OpKind::Relu:
  case OpKind::Exp:
  case OpKind::Sigmoid:
  case OpKind::Tanh:
    return unary(Linearity::None);
  case OpKind::Scale:
    return unary(Linearity::First);
  case OpKind::RMSNorm:
  case OpKind::LayerNorm: {
    // Normalised over the last dimension, which stays whole; the weight and
    // bias run along it.
    IndexSpace space = unary(Linearity::None);
    char last = space.result.back();
    space.whole += last;
    for (unsigned k = 1; k < op.getOperands().size(); ++k)
      space.operands.push_back(std::string(rank(k), last));
    return space;
  }
  case OpKind::Softmax: {
    IndexSpace space = unary(Linearity::None);
    space.whole += space.result[dimIndex(rank(0))];
    return space;
  }
  case OpKind::Reduce: {
    IndexSpace space = unary(Linearity::First);
    char reduced = space.operands[0][dimIndex(rank(0))];
    space.result.erase(space.result.find(reduced), 1);
    if (op.getAttr("kind")->text == "max") {
      space.whole += reduced; // A partial max is not a sum.
      space.linearity = Linearity::None;
    }
    return space;
  }
  case OpKind::Attention:
    return attention();
  case OpKind::Transpose: {
    IndexSpace space = unary(Linearity::First);
    space.result.clear();
    for (const Expr &d : op.getAttr("perm")->list)
      space.result += space.operands[0][*getIntegerValue(d)];
    return space;
  }
  case OpKind::Concat: {
    IndexSpace space;
    space.linearity = Linearity::All;
    space.result = identity(resultRank());
    for (unsigned k = 0; k < op.getOperands().size(); ++k)
      space.operands.push_back(space.result);
    space.whole += space.result[dimIndex(resultRank())];
    return space;
  }
  case OpKind::Slice:
  case OpKind::Split: {
    IndexSpace space = unary(Linearity::First);
    space.whole += space.result[dimIndex(rank(0))];
    return space;
  }
  case OpKind::Embedding: {
    // A lookup is a contraction with a one-hot matrix: a vocabulary split
    // over `a` makes the result PartialSum over `a` (vocab-parallel).
    IndexSpace space;
    space.linearity = Linearity::Any;
    std::string ids = identity(rank(0));
    space.operands = {ids, "VD"};
    space.result = ids + "D";
    return space;
  }
  case OpKind::CrossEntropy: {
    // The loss sums over tokens: splitting them (data parallelism) gives a
    // PartialSum loss; see run() for the vocabulary.
    IndexSpace space;
    space.operands.push_back(identity(rank(0)));
    if (op.getOperands().size() > 1)
      space.operands.push_back(identity(rank(1)));
    return space;
  }
  case OpKind::Conv1D: {
    // Along the sequence (dimension -2): kept whole, so no halo exchange.
    IndexSpace space = unary(Linearity::None);
    if (rank(0) >= 2)
      space.whole += space.result[rank(0) - 2];
    if (op.getOperands().size() > 1) {
      std::string weight(1, space.result.back());
      while (weight.size() < rank(1))
        weight += freshIndex();
      space.whole += weight.substr(1);
      space.operands.push_back(weight.substr(0, rank(1)));
    }
    return space;
  }
  case OpKind::Route: {
    IndexSpace space = unary(Linearity::None);
    space.whole += space.result.back();
    space.result.back() = freshIndex();
    space.whole += space.result.back();
    return space;
  }
  default:
    return std::nullopt; // Ops with a rule of their own.
  }
}

LogicalResult Rule::run() {
  switch (op.getKind()) {
  case OpKind::Input:
  case OpKind::Param:
  case OpKind::State:
  case OpKind::Custom:
  case OpKind::Layout:
    return declaredResults();
  case OpKind::Reshape:
    return reshape();
  case OpKind::Dispatch:
    return dispatch();
  case OpKind::Combine:
    return combine();
  case OpKind::AllReduce:
  case OpKind::AllGather:
  case OpKind::ReduceScatter:
  case OpKind::AllToAll:
  case OpKind::Broadcast:
  case OpKind::Shard:
    return collective();
  case OpKind::Grad:
    return grad();
  case OpKind::Adam:
    // The step runs on the weight's shard; the gradient must match it.
    out.operands = {current[0], current[0]};
    out.results = {current[0]};
    return success();
  case OpKind::CrossEntropy: {
    // Vocab-parallel cross entropy reduces its max and sum of exponentials
    // inside the kernel, so every rank of the vocabulary's axes ends with the
    // same loss. (Those two [tokens]-sized reductions are not modelled as
    // collectives yet.)
    if (failed(solve(*indexSpace())))
      return failure();
    if (rank(0) == 0)
      return success();
    llvm::ArrayRef<const Axis *> vocab =
        out.operands[0].getPartition(rank(0) - 1);
    Distribution loss(0);
    for (const Axis *axis : out.results[0].getPartialSum())
      if (!llvm::is_contained(vocab, axis))
        loss.addPartialSum(axis);
    out.results[0] = loss;
    return success();
  }
  case OpKind::Repeat:
  case OpKind::Yield:
    llvm_unreachable("repeat and yield are distributed by the pass");
  default:
    return solve(*indexSpace());
  }
}

LogicalResult Rule::grad() {
  // The gradient runs in its forward op's index space, transposed: the
  // result gradients index like the forward results, each computed operand
  // gradient like its forward operand. It is linear in the result gradients.
  OpKind forwardKind = getGradForwardKind(op);
  unsigned outs = *getIntegerValue(op.getAttr("outs")->expr);
  llvm::SmallVector<unsigned, 3> wrt;
  for (const Expr &w : op.getAttr("wrt")->list)
    wrt.push_back(*getIntegerValue(w));

  ForwardStandIn forward(op);
  OpDistribution unused;
  Rule forwardRule(forward.get(), module, {}, diags, unused);
  if (std::optional<IndexSpace> space = forwardRule.indexSpace()) {
    IndexSpace backward;
    backward.linearity = Linearity::First;
    backward.whole = space->whole;
    for (unsigned k = 0; k < outs; ++k)
      backward.operands.push_back(space->result);
    backward.operands.append(space->operands.begin(), space->operands.end());
    for (unsigned w : wrt)
      backward.results.push_back(space->operands[w]);
    return solve(backward);
  }

  // Data movement (layouts, collectives) and user-costed ops: each operand
  // gradient takes its operand's layout, a PartialSum becoming Duplicated
  // (every rank's partial contribution gets the whole gradient). The result
  // gradients are needed in that layout, which costs the conjugate
  // collective; the grad op itself then moves nothing.
  out.operands.assign(current.begin(), current.end());
  for (unsigned w : wrt)
    out.results.push_back(current[outs + w].withoutPartialSum());
  // MoE: the gradient of combine is a dispatch and the other way round, so
  // each costs the AllToAll its forward op costs, in reverse.
  auto slotsSplitLike = [&](const Distribution &tokens, unsigned rank) {
    Distribution slots(rank);
    for (unsigned d = 0; d + 1 < tokens.getRank(); ++d)
      for (const Axis *axis : tokens.getPartition(d))
        if (rank >= 2)
          slots.addPartition(1, axis);
    return slots;
  };
  if (forwardKind == OpKind::Combine && outs == 1)
    for (unsigned i = 0; i < wrt.size(); ++i)
      if (wrt[i] == 0)
        out.results[i] = slotsSplitLike(current[0], rank(outs));
  if (forwardKind == OpKind::Dispatch && outs == 1) {
    out.operands[0] = slotsSplitLike(current[outs], rank(0));
    return success();
  }
  if (outs == 1 && wrt.size() == 1 &&
      op.getOperand(0)->getType().getRank() == out.results[0].getRank())
    out.operands[0] = out.results[0];
  return success();
}

LogicalResult stg::inferOpDistribution(
    const Op &op, const Module &module,
    llvm::ArrayRef<std::optional<Distribution>> declared,
    DiagnosticEngine &diags, OpDistribution &result) {
  return Rule(op, module, declared, diags, result).run();
}
