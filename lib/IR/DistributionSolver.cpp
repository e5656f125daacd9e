//===- DistributionSolver.cpp - Index spaces and the layout solver --------===//
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
//===----------------------------------------------------------------------===//

#include "DistributionRule.h"

#include "llvm/ADT/STLExtras.h"

#include <map>

using namespace stg;
using namespace stg::distribution;

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
  // not split: context parallelism gathers k and v (all-gather CP). Sinks,
  // one logit per head, follow q's heads; their gradient sums over the
  // batch and the queries (PartialSum where those are split). With
  // `cp_comm_type = "a2a"` (Ulysses) an axis that splits the queries splits
  // the heads instead: all-to-alls bring q, k and v whole in the sequence,
  // and the result back. One key/value head shared by all (MQA, absorbed
  // MLA) is not split with the queries' heads: every rank holds it, as
  // Megatron-LM replicates key/value heads fewer than tp.
  unsigned r = rank(0);
  std::string prefix = identity(r >= 3 ? r - 3 : 0);
  std::string heads = r >= 3 ? std::string(1, 'h') : std::string();
  std::string keyHeads = heads;
  if (r >= 3 && op.getOperand(1)->getType().getDim(r - 2).is_equal(1) &&
      !op.getOperand(0)->getType().getDim(r - 2).is_equal(1))
    keyHeads = "g";
  IndexSpace space;
  space.operands = {prefix + "s" + heads + "e", prefix + "t" + keyHeads + "e",
                    prefix + "t" + keyHeads + "f"};
  if (op.getOperands().size() > 3)
    space.operands.push_back(heads);
  space.result = prefix + "s" + heads + "f";
  space.whole = "tef";
  if (keyHeads != heads)
    space.whole += keyHeads;
  if (!heads.empty() && module.hasContextParallelAllToAll()) {
    space.votesFrom = "st";
    space.votesTo = "hh";
  }
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
      size_t redirect = space.votesFrom.find(idx);
      if (redirect != std::string::npos)
        idx = space.votesTo[redirect];
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
