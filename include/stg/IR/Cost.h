//===- Cost.h - FLOPs and bytes of one op on one rank -----------*- C++ -*-===//
//
// The work an op does on one rank, symbolically: floating-point operations
// and bytes read plus written, from the local (partitioned) extents of its
// operands and results. These are what a Chakra COMP node carries (num_ops,
// tensor_size) once the dims are bound. The formulas are documented in
// docs/cost-model.md; every builtin op has one, and a gradient op's cost is
// its forward op's times the kind's backward factor.
//
//===----------------------------------------------------------------------===//

#ifndef STG_IR_COST_H
#define STG_IR_COST_H

#include "stg/IR/Graph.h"
#include "stg/IR/Precision.h"

#include <optional>

namespace stg {

/// Floating-point operations of `op` on one rank. Data movement (layouts,
/// reshapes, collectives) costs none.
Expr getFlops(const Op &op);

/// Bytes `op` reads and writes on one rank: its operands' and results'
/// local sizes.
Expr getBytesAccessed(const Op &op);

/// The precision of an op that the `precision` pass ran in a format
/// narrower than 16 bits (fp8 and the microscaling formats), or nothing.
std::optional<Precision> getLowPrecision(const Op &op);

/// The format an einsum's weights are served in under weight-only
/// quantization (its `weights` attribute, from the `precision` pass), or
/// nothing.
std::optional<Precision> getWeightPrecision(const Op &op);

/// Bytes of an element of `precision` as an exact number (every format's
/// size, block scales included, is a multiple of 1/32 byte).
Expr getExactPrecisionBytes(Precision precision);

/// Bytes the casts of a low-precision GEMM move on one rank: each operand
/// in its `quantize` list read in its element type and written in the
/// GEMM's precision (an operand gathered in that precision was cast on
/// its shard, before the gather). 0 for any other op. Part of getBytesAccessed, and
/// priced apart from the GEMM (the casts are kernels of their own).
Expr getCastBytes(const Op &op);

/// Bytes of `value` on one rank.
Expr getLocalBytes(const Value &value);

/// Whether `op` is a linear layer's GEMM, an einsum of an input by a
/// weight, and `other` one that can run in the same kernel when both read
/// the same input: the same contraction, precision and weight format, as
/// a layer's q, k and v projections (one QKV weight) or a gated MLP's gate
/// and up (one weight) run in inference engines.
bool isLinearGemm(const Op &op);
bool canShareKernel(const Op &op, const Op &other);

/// What a linear GEMM moves of its input: the input as it reads it, and
/// the bytes of its cast where the recipe casts it (part of getCastBytes).
/// GEMMs that share a kernel move both once.
Expr getGemmInputBytes(const Op &einsum);
Expr getGemmInputCastBytes(const Op &einsum);

/// What decides how much of an experts' GEMM's weights a step reads: a
/// grouped GEMM reads the weights of the experts that got tokens, and with
/// few tokens (a decode step's) most get none. For an einsum over the
/// slots of `dispatch` (through the collectives and ops that carry them)
/// and a weight indexed by expert first: the weight's bytes as
/// getBytesAccessed counts them, the tokens routed to this rank's copy of
/// the experts, and the route's top-k and expert count. Nothing for any
/// other op.
struct ExpertWeightReads {
  Expr weightBytes, tokens, topk, experts;
};
std::optional<ExpertWeightReads> getExpertWeightReads(const Op &op);

/// The rows an op on an experts' slots computes (a forward op between a
/// dispatch and its combine: the experts' GEMMs, their activations and the
/// collectives that move the slots): `copies`, the tokens routed times the
/// top-k times the dispatch's capacity over 100, of `rows`, the experts
/// times their slots. The slots round each rank's share of an expert up
/// to whole slots, so a decode step's few tokens fill few of them (one
/// token to 8 of 256 experts: 8 of 256 rows); a dropless grouped GEMM, and
/// the exchanges around it, move only the tokens. The dispatch and the
/// combine themselves write and read the slots beside whole tokens:
/// `slotBytes` says which of their bytes are the slots'. Nothing for any
/// other op.
struct SlotFill {
  Expr copies, rows;
  std::optional<Expr> slotBytes;
};
std::optional<SlotFill> getSlotFill(const Op &op);

/// The share of an op's slot rows that `getSlotFill`'s formulas say hold
/// tokens, once bound: copies / rows, at most 1 (and 1 where either is not
/// a positive number).
double getSlotFillFraction(double copies, double rows);

/// The expected fraction of E experts that get at least one of `tokens`
/// tokens, each routed to k of them uniformly at random: 1 - (1 - k/E)^n.
double getActiveExpertFraction(double tokens, double topk, double experts);

/// Entries of an attention op's score matrix on one rank: batch x heads x
/// queries x keys.
Expr getAttentionScores(const Op &attention);

/// The exponentials a fused attention kernel computes on one rank, one a
/// kept score, for attention and its gradient (whose kernel recomputes
/// the probabilities); 0 for any other op.
Expr getAttentionExponentials(const Op &op);

/// Query rows of a fused attention kernel on one rank (batch x heads x
/// local queries), for attention and its gradient; 0 for any other op. A
/// kernel does fixed work per row besides its products (DeviceModel.h).
Expr getAttentionQueryRows(const Op &op);

/// The sequence dimension of an attention operand: [batch..., seq, heads,
/// size], or [seq, size] for rank 2.
unsigned getAttentionSequenceDim(const TensorType &type);

/// Of `keys` positions, those an attention keeps for the queries after
/// them (its KV cache): all, a sliding window's last `window`, or a chunked
/// mask's chunk (`window`, the worst case: the last query of a chunk sees
/// all of it).
Expr getCachedPositions(const Op &attention, const Expr &keys);

/// True for the masks that take a `window`: sliding (the positions a query
/// sees) and chunked (the chunk size).
bool isWindowedMask(llvm::StringRef mask);

/// What a recurrent op carries from one position to the next: laid out
/// like `like` with `positions` on dimension `dim`, the one it runs along.
/// A `pscan` keeps the last position of its result (its `dim`, negative
/// from the end), a causal `conv1d` the last kernel - 1 of its input
/// (dimension -2).
struct RecurrentState {
  const Value *like;
  unsigned dim;
  Expr positions;
};
/// Nothing for another op, or a dimension out of range.
std::optional<RecurrentState> getRecurrentState(const Op &op);

/// The (query, key) pairs a causal sliding window of `window` positions
/// keeps when the `queries` queries are the last positions of the `keys`
/// keys: the pairs with 0 <= query - key < window. Exact and non-negative
/// for any positive integers (one query in decode, a window longer than
/// the keys); symbolic until they are numbers.
Expr getWindowPairs(const Expr &queries, const Expr &keys, const Expr &window);

/// The (query, key) pairs a causal chunked mask keeps (Llama 4's
/// attention_chunk_size): positions are cut into chunks of `chunk` aligned
/// at 0, and a query sees the keys of its own chunk up to itself. The
/// queries are the last `queries` of the `keys` positions, as for
/// getWindowPairs; exact and non-negative for any positive integers.
Expr getChunkPairs(const Expr &queries, const Expr &keys, const Expr &chunk);

} // namespace stg

#endif // STG_IR_COST_H
