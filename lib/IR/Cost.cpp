//===- Cost.cpp - FLOPs and bytes of one op on one rank -------------------===//
//
// One formula per op kind, on local extents. An einsum costs 2 flops per
// point of its iteration space; attention the two products of a fused
// kernel over the (query, key) pairs its mask keeps (all, half for causal,
// exactly those inside the window for sliding or the chunk for chunked),
// plus 6 per kept score with logit soft-capping and 4 per query and head
// with sinks; elementwise ops and norms a small count per element.
// Backward ops built by autodiff as `grad[of=KIND]` cost their forward op
// times a factor (2.5 for fused attention, which recomputes the scores; 2
// otherwise).
//
// Bytes are the operands and results, read and written once; an unfused
// attention (`attention[kernel=unfused]`, as frameworks ran before fused
// kernels) also moves its score matrix through memory: in the forward pass
// the scores are written, read and written by softmax, read and written by
// dropout (`dropout=P`) with a one-byte mask, and read by the product with
// V, 6.5 passes over the b*heads*s*t scores (4 without dropout), 2 more to
// soft-cap them (`softcap=C`, one elementwise kernel); the backward pass
// twice that. A dropout op also writes its one-byte mask. A low-precision
// GEMM (`precision=fp8` from the precision pass) reads its operands in the
// format and adds the casts of those in its `quantize` list (getCastBytes;
// docs/cost-model.md, "Precision").
//
//===----------------------------------------------------------------------===//

#include "stg/IR/Cost.h"
#include "stg/IR/GradOp.h"

#include "llvm/ADT/STLExtras.h"

#include <cmath>
#include <map>

using namespace stg;

Expr stg::getLocalBytes(const Value &value) {
  return value.getType().getLocalBytes();
}

unsigned stg::getAttentionSequenceDim(const TensorType &type) {
  return type.getRank() >= 3 ? type.getRank() - 3 : 0;
}

namespace {

/// Score matrices of an attention on one rank: batch x heads.
Expr getScoreMatrices(const Op &op) {
  const TensorType &q = op.getOperand(0)->getType();
  unsigned seq = getAttentionSequenceDim(q);
  Expr matrices = 1;
  for (unsigned d = 0; d < seq; ++d)
    matrices = matrices * q.getLocalDim(d);
  if (q.getRank() >= 3)
    matrices = matrices * q.getLocalDim(q.getRank() - 2);
  return matrices;
}

} // namespace

Expr stg::getAttentionScores(const Op &op) {
  const TensorType &q = op.getOperand(0)->getType();
  const TensorType &k = op.getOperand(1)->getType();
  unsigned seq = getAttentionSequenceDim(q);
  return q.getLocalDim(seq) * k.getLocalDim(seq) * getScoreMatrices(op);
}

Expr stg::getAttentionQueryRows(const Op &op) {
  if (op.getKind() == OpKind::Grad &&
      getGradForwardKind(op) == OpKind::Attention) {
    ForwardStandIn forward(op);
    return getAttentionQueryRows(forward.get());
  }
  if (op.getKind() != OpKind::Attention)
    return 0;
  const TensorType &q = op.getOperand(0)->getType();
  return getScoreMatrices(op) * q.getLocalDim(getAttentionSequenceDim(q));
}

namespace {

/// The language's min(a, b) and max(a, b): symbolic until bound, then
/// exact. A difference that is already a number decides at once (S - 1
/// against S), which keeps the usual formulas short.
Expr minOf(const Expr &a, const Expr &b) {
  Expr difference = a - b;
  if (GiNaC::is_a<GiNaC::numeric>(difference))
    return GiNaC::ex_to<GiNaC::numeric>(difference) <= 0 ? a : b;
  return *makeFunction("min", {a, b});
}

Expr maxOf(const Expr &a, const Expr &b) {
  Expr difference = a - b;
  if (GiNaC::is_a<GiNaC::numeric>(difference))
    return GiNaC::ex_to<GiNaC::numeric>(difference) >= 0 ? a : b;
  return *makeFunction("max", {a, b});
}

/// floor(x), symbolic until x is a number.
Expr floorOf(const Expr &x) { return *makeFunction("floor", {x}); }

/// Pairs of the first n positions: the sum over j = 1..n of min(j, W), the
/// query at position j - 1 seeing min(j, W) keys. While n <= W that is
/// n(n + 1)/2; each later position adds W.
Expr windowPrefixPairs(const Expr &n, const Expr &window) {
  if (n.is_zero())
    return 0;
  Expr m = minOf(n, window);
  return m * (m + 1) / 2 + (n - m) * window;
}

/// Pairs of the first n positions under chunks of C: each whole chunk keeps
/// C(C + 1)/2, the r positions of a partial last one r(r + 1)/2.
Expr chunkPrefixPairs(const Expr &n, const Expr &chunk) {
  if (n.is_zero())
    return 0;
  Expr whole = floorOf(n / chunk);
  Expr rest = n - whole * chunk;
  return whole * chunk * (chunk + 1) / 2 + rest * (rest + 1) / 2;
}

} // namespace

std::optional<RecurrentState> stg::getRecurrentState(const Op &op) {
  if (op.getKind() == OpKind::PScan) {
    const Value *result = op.getResult();
    std::optional<long long> dim = getIntegerValue(op.getAttr("dim")->expr);
    long long rank = result->getType().getRank();
    if (!dim || *dim < -rank || *dim >= rank)
      return std::nullopt;
    return RecurrentState{result, unsigned(*dim < 0 ? *dim + rank : *dim), 1};
  }
  if (op.getKind() == OpKind::Conv1D) {
    const Value *input = op.getOperand(0);
    unsigned rank = input->getType().getRank();
    if (rank < 2)
      return std::nullopt;
    return RecurrentState{input, rank - 2, op.getAttr("kernel")->expr - 1};
  }
  return std::nullopt;
}

bool stg::isWindowedMask(llvm::StringRef mask) {
  return mask == "sliding" || mask == "chunked";
}

Expr stg::getCachedPositions(const Op &attention, const Expr &keys) {
  if (!isWindowedMask(attention.getAttr("mask")->text))
    return keys;
  return minOf(keys, attention.getAttr("window")->expr);
}

Expr stg::getWindowPairs(const Expr &queries, const Expr &keys,
                         const Expr &window) {
  // The queries are the last `queries` of the `keys` positions (with more
  // queries than keys, the first ones see none): the pairs of all positions
  // less those of the positions before the first query.
  Expr before = maxOf(keys - queries, 0);
  return windowPrefixPairs(keys, window) - windowPrefixPairs(before, window);
}

Expr stg::getChunkPairs(const Expr &queries, const Expr &keys,
                        const Expr &chunk) {
  Expr before = maxOf(keys - queries, 0);
  return chunkPrefixPairs(keys, chunk) - chunkPrefixPairs(before, chunk);
}

namespace {

bool isSoftCapped(const Op &attention) {
  return !attention.getAttr("softcap")->expr.is_zero();
}

/// The extra bytes of an unfused attention's score matrix, or 0: the
/// scores written, read and written by softmax, read by the product with V
/// (4 passes); with dropout on the probabilities also read and written
/// again, with a one-byte mask (6.5 passes); soft-capping reads and writes
/// them once more (2 passes). The whole matrix, whatever the mask: an
/// unfused kernel masks scores it has written.
Expr unfusedScoreBytes(const Op &attention) {
  if (attention.getAttr("kernel")->text != "unfused")
    return 0;
  unsigned element =
      getElementTypeBytes(attention.getOperand(0)->getType().getElementType());
  Expr passes = attention.getAttr("dropout")->expr.is_zero() ? Expr(4)
                                                              : Expr(13) / 2;
  if (isSoftCapped(attention))
    passes = passes + 2;
  return passes * element * getAttentionScores(attention);
}

} // namespace

std::optional<Precision> stg::getLowPrecision(const Op &op) {
  const Attribute *attr = op.getAttr("precision");
  if (!attr)
    return std::nullopt;
  std::optional<Precision> precision = parsePrecision(attr->text);
  if (!precision || !isLowPrecision(*precision))
    return std::nullopt;
  return precision;
}

std::optional<Precision> stg::getWeightPrecision(const Op &op) {
  const Attribute *attr = op.getAttr("weights");
  return attr ? parsePrecision(attr->text) : std::nullopt;
}

Expr stg::getExactPrecisionBytes(Precision precision) {
  return GiNaC::numeric(int(getPrecisionBytes(precision) * 32), 32);
}

/// The bytes of the cast of `op`'s operand `operand`, where its
/// `quantize` list names it: read in its element type, written in the low
/// precision.
static Expr getOperandCastBytes(const Op &op, unsigned operand) {
  std::optional<Precision> precision = getLowPrecision(op);
  const Attribute *quantize = op.getAttr("quantize");
  if (!precision || !quantize || operand >= op.getOperands().size())
    return 0;
  bool listed = llvm::any_of(quantize->list, [&](const Expr &index) {
    return GiNaC::is_a<GiNaC::numeric>(index) &&
           GiNaC::ex_to<GiNaC::numeric>(index).to_int() == int(operand);
  });
  if (!listed)
    return 0;
  const Value *value = op.getOperand(operand);
  // A gathered operand was cast before the gather, on this rank's shard.
  const Op *def = value->getDefiningOp();
  if (def && def->getKind() == OpKind::AllGather && def->getAttr("precision"))
    value = def->getOperand(0);
  return getLocalBytes(*value) + value->getType().getLocalNumElements() *
                                     getExactPrecisionBytes(*precision);
}

Expr stg::getCastBytes(const Op &op) {
  Expr bytes = 0;
  for (unsigned operand = 0; operand < op.getOperands().size(); ++operand)
    bytes = bytes + getOperandCastBytes(op, operand);
  return bytes;
}

/// Whether `operand` is an attention's values that are a slice of its keys
/// (kv-cache's shared key cache): read with the keys, not again.
static bool readsWithKeys(const Op &op, const Value &operand) {
  if (op.getKind() != OpKind::Attention || &operand != op.getOperand(2))
    return false;
  const Op *def = operand.getDefiningOp();
  return def && def->getKind() == OpKind::Slice &&
         def->getOperand(0) == op.getOperand(1);
}

/// The bytes a low-precision GEMM reads of an operand: its quantized copy.
static Expr getQuantizedBytes(const Value &operand, Precision precision) {
  return operand.getType().getLocalNumElements() *
         getExactPrecisionBytes(precision);
}

/// The bytes an einsum reads of `operand`: a weight served in a weight-only
/// format in that format, else the recipe's quantized copy under a
/// low-precision recipe, else the operand itself.
static Expr getOperandBytes(const Op &einsum, const Value &operand) {
  if (std::optional<Precision> weights = getWeightPrecision(einsum))
    if (operand.isParam())
      return getQuantizedBytes(operand, *weights);
  if (std::optional<Precision> precision = getLowPrecision(einsum))
    return getQuantizedBytes(operand, *precision);
  return getLocalBytes(operand);
}

bool stg::isLinearGemm(const Op &op) {
  return op.getKind() == OpKind::Einsum && op.getOperands().size() == 2 &&
         op.getOperand(1)->isParam();
}

bool stg::canShareKernel(const Op &op, const Op &other) {
  if (!isLinearGemm(op) || !isLinearGemm(other))
    return false;
  const EinsumSpec &spec = op.getAttr("spec")->einsum;
  const EinsumSpec &otherSpec = other.getAttr("spec")->einsum;
  auto format = [](const Op &einsum) {
    return std::make_pair(getLowPrecision(einsum), getWeightPrecision(einsum));
  };
  return spec.inputs == otherSpec.inputs && spec.output == otherSpec.output &&
         format(op) == format(other);
}

Expr stg::getGemmInputBytes(const Op &einsum) {
  return getOperandBytes(einsum, *einsum.getOperand(0));
}

Expr stg::getGemmInputCastBytes(const Op &einsum) {
  return getOperandCastBytes(einsum, 0);
}

Expr stg::getBytesAccessed(const Op &op) {
  // A custom kernel's bytes are what its author wrote, when written.
  if (op.getKind() == OpKind::Custom && !op.getAttr("bytes")->expr.is_zero())
    return op.getAttr("bytes")->expr;
  Expr bytes = 0;
  if (op.getKind() == OpKind::Einsum &&
      (getLowPrecision(op) || getWeightPrecision(op))) {
    // A low-precision GEMM reads its operands' quantized copies, and its
    // casts read and write theirs; weights served in a weight-only format
    // are read in it.
    for (const Value *operand : op.getOperands())
      bytes = bytes + getOperandBytes(op, *operand);
    bytes = bytes + getCastBytes(op);
  } else if (op.getKind() == OpKind::Embedding) {
    // A lookup reads the ids and the rows it returns, not the whole table.
    bytes = getLocalBytes(*op.getOperand(0)) + getLocalBytes(*op.getResult());
  } else {
    for (const Value *operand : op.getOperands())
      if (!readsWithKeys(op, *operand))
        bytes = bytes + getLocalBytes(*operand);
  }
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
/// A dispatch, the route it follows and the tokens it dispatches (all
/// ranks').
struct RoutedDispatch {
  const Op *dispatch, *route;
  Expr tokens;
};
} // namespace

/// The dispatch whose slots `value` carries, and its route: its producer,
/// or back along first operands through the ops between (collectives, the
/// experts' other GEMMs and activations), not past a combine (the tokens
/// after it are whole again).
static std::optional<RoutedDispatch> findDispatch(const Value &value) {
  const Value *slots = &value;
  for (unsigned depth = 0; depth < 8; ++depth) {
    const Op *def = slots->getDefiningOp();
    if (!def || def->getOperands().empty() || def->getKind() == OpKind::Combine)
      return std::nullopt;
    if (def->getKind() == OpKind::Dispatch) {
      const Op *route = def->getOperands().size() < 2
                            ? nullptr
                            : def->getOperand(1)->getDefiningOp();
      const TensorType &input = def->getOperand(0)->getType();
      if (!route || route->getKind() != OpKind::Route || input.getRank() < 1)
        return std::nullopt;
      return RoutedDispatch{def, route,
                            input.getNumElementsLogical() /
                                input.getDim(input.getRank() - 1)};
    }
    slots = def->getOperand(0);
  }
  return std::nullopt;
}

std::optional<ExpertWeightReads> stg::getExpertWeightReads(const Op &op) {
  if (op.getKind() != OpKind::Einsum || op.getOperands().size() != 2)
    return std::nullopt;
  // [e, c, ...] x [e, ...]: the expert index first in both and in the
  // result, the slots one the weight does not have.
  const EinsumSpec &spec = op.getAttr("spec")->einsum;
  const std::string &slotsSpec = spec.inputs[0], &weightSpec = spec.inputs[1];
  if (slotsSpec.size() < 2 || weightSpec.empty() || spec.output.empty() ||
      slotsSpec[0] != weightSpec[0] || spec.output[0] != slotsSpec[0] ||
      weightSpec.find(slotsSpec[1]) != std::string::npos ||
      spec.output.find(slotsSpec[1]) == std::string::npos)
    return std::nullopt;
  std::optional<RoutedDispatch> found = findDispatch(*op.getOperand(0));
  if (!found)
    return std::nullopt;
  // The tokens dispatched, over the ranks among which the slots here are a
  // share (data-parallel replicas of the experts, context parallelism).
  const TensorType &slots = op.getOperand(0)->getType();
  Expr tokens = found->tokens * slots.getLocalDim(1) / slots.getDim(1);
  Expr weightBytes = getOperandBytes(op, *op.getOperand(1));
  return ExpertWeightReads{weightBytes, tokens,
                           found->route->getAttr("topk")->expr,
                           found->route->getAttr("experts")->expr};
}

std::optional<SlotFill> stg::getSlotFill(const Op &op) {
  if (op.getPhase() != Phase::Forward || op.getOperands().empty() ||
      op.getResults().empty())
    return std::nullopt;
  // A dispatch writes its slots; anything else reads them first.
  bool dispatch = op.getKind() == OpKind::Dispatch;
  const Value &slotValue = dispatch ? *op.getResult() : *op.getOperand(0);
  std::optional<RoutedDispatch> found = findDispatch(slotValue);
  if (!found)
    return std::nullopt;
  const TensorType &slots = found->dispatch->getResult()->getType();
  if (slots.getRank() < 2)
    return std::nullopt;
  SlotFill fill{found->tokens * found->route->getAttr("topk")->expr *
                    found->dispatch->getAttr("capacity")->expr / 100,
                slots.getDim(0) * slots.getDim(1)};
  if (dispatch || op.getKind() == OpKind::Combine)
    fill.slotBytes = getLocalBytes(slotValue);
  return fill;
}

double stg::getSlotFillFraction(double copies, double rows) {
  if (!(copies > 0) || !(rows > 0) || copies >= rows)
    return 1;
  return copies / rows;
}

double stg::getActiveExpertFraction(double tokens, double topk,
                                    double experts) {
  if (!(experts > 0) || !(tokens > 0) || topk >= experts)
    return 1;
  return 1 - std::pow(1 - topk / experts, tokens);
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
  case OpKind::Relu2: // max(x, 0), then its square.
    return 2;
  case OpKind::Silu:
  case OpKind::Sigmoid:
  case OpKind::Tanh:
    return 4;
  case OpKind::SwigluClamped:
    // Clamps: gate's upper bound 1, up's two bounds 2; alpha * gate 1, its
    // sigmoid 4, gate * sigmoid 1, up + 1 1, the product 1.
    return 11;
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

/// Scores the mask keeps on one rank: batch x heads x kept (query, key)
/// pairs. Causal keeps half of S x T (the usual convention); sliding and
/// chunked keep exactly the pairs inside the window or the query's chunk.
/// Under context parallelism a rank holds S/cp of the S queries and all T
/// keys, and gets its share of the pairs, as a load-balanced split gives
/// it (for causal, half its S/cp x T).
Expr maskedScores(const Op &op) {
  llvm::StringRef mask = op.getAttr("mask")->text;
  Expr scores = getAttentionScores(op);
  if (mask == "causal")
    return scores / 2;
  if (!isWindowedMask(mask))
    return scores;
  const TensorType &q = op.getOperand(0)->getType();
  const TensorType &k = op.getOperand(1)->getType();
  unsigned seq = getAttentionSequenceDim(q);
  Expr queries = q.getDim(seq), localQueries = q.getLocalDim(seq);
  Expr keys = k.getLocalDim(seq); // Whole on every rank: k is gathered.
  const Expr &window = op.getAttr("window")->expr;
  Expr pairs = mask == "sliding" ? getWindowPairs(queries, keys, window)
                                 : getChunkPairs(queries, keys, window);
  return getScoreMatrices(op) * pairs * localQueries / queries;
}

Expr attentionFlops(const Op &op) {
  // QK^T and PV: 2*E + 2*F per kept score (head size E, value size F);
  // soft-capping, cap * tanh(score / cap), 6 more (a scale, tanh at 4 as
  // the tanh op, a scale).
  const TensorType &q = op.getOperand(0)->getType();
  const TensorType &v = op.getOperand(2)->getType();
  unsigned r = q.getRank();
  Expr perScore = 2 * (q.getLocalDim(r - 1) + v.getLocalDim(r - 1));
  if (isSoftCapped(op))
    perScore = perScore + 6;
  Expr flops = maskedScores(op) * perScore;
  // Sinks: per softmax row (query and head), the sink joins the row's max
  // (a compare), is shifted by it and exponentiated (2, exp at 1 as the exp
  // op) and added to the denominator (1).
  if (op.getOperands().size() > 3)
    flops = flops + 4 * getScoreMatrices(op) *
                        q.getLocalDim(getAttentionSequenceDim(q));
  return flops;
}

} // namespace

Expr stg::getAttentionExponentials(const Op &op) {
  if (op.getKind() == OpKind::Grad &&
      getGradForwardKind(op) == OpKind::Attention) {
    ForwardStandIn forward(op);
    return getAttentionExponentials(forward.get());
  }
  if (op.getKind() != OpKind::Attention)
    return 0;
  return maskedScores(op);
}

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
