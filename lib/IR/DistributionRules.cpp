//===- DistributionRules.cpp - Which rule distributes each op ------------===//
//
// Maps each op kind to its index space (DistributionSolver.cpp solves it)
// or to a rule of its own (DataMovementRules.cpp). Gradient ops run in their
// forward op's index space, transposed.
//
//===----------------------------------------------------------------------===//

#include "DistributionRule.h"
#include "stg/IR/GradOp.h"

#include "llvm/ADT/STLExtras.h"

using namespace stg;
using namespace stg::distribution;

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
  case OpKind::SwigluClamped:
    return broadcast(Linearity::None);
  case OpKind::PScan: {
    IndexSpace space = broadcast(Linearity::None);
    space.whole += space.result[dimIndex(resultRank())];
    return space;
  }
  case OpKind::Silu:
  case OpKind::Gelu:
  case OpKind::Relu:
  case OpKind::Relu2:
  case OpKind::Exp:
  case OpKind::Sigmoid:
  case OpKind::Tanh:
    return unary(Linearity::None);
  case OpKind::Scale:
  case OpKind::Dropout: // Linear in x, given the mask.
    return unary(Linearity::First);
  case OpKind::DropoutMask:
    return unary(Linearity::None);
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
    // A decode step's state, the last kernel - 1 inputs: laid out as the
    // input, its positions whole.
    if (op.getOperands().size() > 2 && rank(2) == rank(0) && rank(0) >= 2) {
      std::string state = space.result;
      state[rank(0) - 2] = freshIndex();
      space.whole += state[rank(0) - 2];
      space.operands.push_back(state);
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
    backward.votesFrom = space->votesFrom;
    backward.votesTo = space->votesTo;
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
