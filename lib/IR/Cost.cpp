//===- Cost.cpp - FLOPs and bytes of one op on one rank -------------------===//
//
// One formula per op kind, on local extents. An einsum costs 2 flops per
// point of its iteration space; attention the two products of a fused
// kernel; elementwise ops and norms a small count per element. Backward ops
// built by autodiff as `grad[of=KIND]` cost their forward op times a factor
// (2.5 for fused attention, which recomputes the scores; 2 otherwise).
//
// Bytes are the operands and results, read and written once; an unfused
// attention (`attention[kernel=unfused]`, as frameworks ran before fused
// kernels) also moves its score matrix through memory: in the forward pass
// the scores are written, read and written by softmax, read and written by
// dropout (`dropout=P`) with a one-byte mask, and read by the product with
// V, 6.5 passes over the b*heads*s*t scores (4 without dropout); the
// backward pass twice that. A dropout op also writes its one-byte mask.
//
//===----------------------------------------------------------------------===//

#include "stg/IR/Cost.h"
#include "stg/IR/GradOp.h"

#include <map>

using namespace stg;

Expr stg::getLocalBytes(const Value &value) {
  return value.getType().getLocalBytes();
}

Expr stg::getAttentionScores(const Op &op) {
  const TensorType &q = op.getOperand(0)->getType();
  const TensorType &k = op.getOperand(1)->getType();
  // [batch..., seq, heads, size]; rank 2 is [seq, size].
  unsigned r = q.getRank();
  unsigned seq = r >= 3 ? r - 3 : 0;
  Expr scores = q.getLocalDim(seq) * k.getLocalDim(seq);
  for (unsigned d = 0; d < seq; ++d)
    scores = scores * q.getLocalDim(d);
  if (r >= 3)
    scores = scores * q.getLocalDim(r - 2);
  return scores;
}

namespace {

/// The extra bytes of an unfused attention's score matrix, or 0: the
/// scores written, read and written by softmax, read by the product with V
/// (4 passes); with dropout on the probabilities also read and written
/// again, with a one-byte mask (6.5 passes).
Expr unfusedScoreBytes(const Op &attention) {
  if (attention.getAttr("kernel")->text != "unfused")
    return 0;
  unsigned element =
      getElementTypeBytes(attention.getOperand(0)->getType().getElementType());
  Expr passes = attention.getAttr("dropout")->expr.is_zero() ? Expr(4)
                                                              : Expr(13) / 2;
  return passes * element * getAttentionScores(attention);
}

} // namespace

Expr stg::getBytesAccessed(const Op &op) {
  Expr bytes = 0;
  for (const Value *operand : op.getOperands())
    bytes = bytes + getLocalBytes(*operand);
  for (const Value *result : op.getResults())
    bytes = bytes + getLocalBytes(*result);
  if (op.getKind() == OpKind::Attention)
    bytes = bytes + unfusedScoreBytes(op);
  if (op.getKind() == OpKind::Dropout) // The one-byte mask it writes.
    bytes = bytes + op.getResult()->getType().getLocalNumElements();
  if (op.getKind() == OpKind::Grad &&
      getGradForwardKind(op) == OpKind::Attention) {
    ForwardStandIn forward(op);
    bytes = bytes + 2 * unfusedScoreBytes(forward.get());
  }
  return bytes;
}

namespace {

Expr localElements(const Value *value) {
  return value->getType().getLocalNumElements();
}

/// Flops per element of the result for simple ops.
std::optional<unsigned> flopsPerElement(OpKind kind) {
  switch (kind) {
  case OpKind::Add:
  case OpKind::Sub:
  case OpKind::Mul:
  case OpKind::Div:
  case OpKind::Relu:
  case OpKind::Exp:
  case OpKind::Scale:
    return 1;
  case OpKind::Silu:
  case OpKind::Sigmoid:
  case OpKind::Tanh:
    return 4;
  case OpKind::Gelu:
    return 8;
  case OpKind::RMSNorm:
    return 4;
  case OpKind::LayerNorm:
    return 8;
  case OpKind::Softmax:
    return 5;
  case OpKind::PScan:
    return 2;
  case OpKind::Adam:
    return 12;
  case OpKind::Dropout:
    return 2; // A random draw's compare and the scale.
  default:
    return std::nullopt;
  }
}

Expr einsumFlops(const Op &op) {
  // 2 * the product of every index's local extent.
  const EinsumSpec &spec = op.getAttr("spec")->einsum;
  std::map<char, Expr> extent;
  for (unsigned k = 0; k < spec.inputs.size(); ++k)
    for (unsigned d = 0; d < spec.inputs[k].size(); ++d)
      extent.emplace(spec.inputs[k][d],
                     op.getOperand(k)->getType().getLocalDim(d));
  Expr flops = 2;
  for (auto &[index, e] : extent)
    flops = flops * e;
  return flops;
}

Expr attentionFlops(const Op &op) {
  // QK^T and PV: 2*S*T*E + 2*S*T*F per head and batch; causal halves it.
  const TensorType &q = op.getOperand(0)->getType();
  const TensorType &v = op.getOperand(2)->getType();
  unsigned r = q.getRank();
  Expr flops = 2 * getAttentionScores(op) *
               (q.getLocalDim(r - 1) + v.getLocalDim(r - 1));
  if (op.getAttr("mask")->text == "causal")
    flops = flops / 2;
  return flops;
}

} // namespace

Expr stg::getFlops(const Op &op) {
  if (auto perElement = flopsPerElement(op.getKind()))
    return *perElement * localElements(op.getResult());
  switch (op.getKind()) {
  case OpKind::Einsum:
    return einsumFlops(op);
  case OpKind::Attention:
    return attentionFlops(op);
  case OpKind::Elementwise:
    return op.getAttr("flops")->expr * localElements(op.getResult());
  case OpKind::Reduce:
    return localElements(op.getOperand(0));
  case OpKind::CrossEntropy:
    return 5 * localElements(op.getOperand(0));
  case OpKind::Conv1D:
    return 2 * op.getAttr("kernel")->expr * localElements(op.getResult());
  case OpKind::Route:
    return 2 * localElements(op.getOperand(0));
  case OpKind::Custom:
    return op.getAttr("flops")->expr;
  case OpKind::Grad: {
    // Cost the forward op, then apply the backward factor.
    OpKind kind = getGradForwardKind(op);
    ForwardStandIn forward(op);
    if (kind == OpKind::Embedding)
      return localElements(op.getOperand(0)); // Scatter-add of the rows.
    Expr flops = getFlops(forward.get());
    return kind == OpKind::Attention ? flops * 5 / 2 : flops * 2;
  }
  default:
    return 0;
  }
}
