//===- KVCache.cpp - Turn a forward pass into one decode step -------------===//
//
// Autoregressive decoding runs the model on one new token per sequence, and
// each attention reads the keys and values of the whole context from a KV
// cache instead of computing them. This pass rewrites a (distributed)
// forward pass into such a step: the sequence dim (the one dim in the
// extent of attention queries' sequence dimension, usually S) becomes 1,
// every attention's keys and values are read from `state` tensors of
// CTX positions laid out like the keys and values they replace (heads over
// tp), and the mask is dropped (one query sees the whole context). CTX is
// the model's `dim CTX` if it declares one (`stagec --context N` sets it),
// else the sequence length the model had. A sliding-window attention keeps
// only the last W positions: its cache has min(CTX, W) of them (the
// language's min, symbolic until bound) and sees them all, so its mask is
// dropped too. A chunked attention (chunks of C aligned at 0) caches its
// current chunk, min(CTX, C) positions, and is priced at the worst case,
// the last token of a chunk, which sees them all. With the model's option
// `kv_window_cache = "whole"` both cache the whole context instead, as an
// engine that reserves it does (TensorRT-LLM sizes a window layer's blocks
// as full attention's), and the step reads it all: serving takes only the
// cache's size from such a step (IterationCost.cpp). The new token's keys and
// values are still computed (they are appended to the cache); the cache is
// counted as per-rank state memory. The model's option `kv_cache_dtype`
// (`--kv-cache-dtype fp8`, as serving engines quantize the cache) stores
// the keys and values in that type; the attention reads them so. Where an
// attention's values are its keys' leading channels (absorbed MLA: keys
// [latent | RoPE key], values the latent), the values are a slice of the
// key cache, read in place, as FlashMLA keeps one cache of 576 a token.
//
// No decode step needs more keys than the attention has at the full
// context (its keys with the sequence dim at CTX): a cache larger than
// that cannot be right (a model that reshapes the sequence into the batch
// would otherwise keep a context per token) and is an error at the
// attention.
//
// A recurrent layer (Mamba) decodes as inference frameworks run it
// (mamba_ssm's selective_state_update and causal_conv1d_update): it keeps a
// fixed-size state per sequence instead of a cache that grows with the
// context. A `pscan` gets its initial state as a third operand, a `state`
// tensor of one position laid out like the scan's result (channels over
// tp): one step of h = a * h + b. A causal `conv1d` gets its last K - 1
// inputs as a third operand, a `state` laid out like its input.
//
// Runs after `distribute` (the cache takes the keys' resolved layout) and
// before `match-collectives`: a layout change that fed an attention's keys
// and has no other use (a gather over cp) is dropped with them.
//
//===----------------------------------------------------------------------===//

#include "stg/IR/Cost.h"
#include "stg/IR/ShapeRules.h"
#include "stg/Passes/Passes.h"

#include <set>

using namespace stg;

#define DEBUG_TYPE "kv-cache"

namespace {

class KVCachePass : public Pass {
public:
  llvm::StringRef getName() const override { return DEBUG_TYPE; }
  LogicalResult run(Module &module, DiagnosticEngine &diags) override;

private:
  /// The dims in `e` (not axis degrees).
  std::set<const Dim *> findDims(const Expr &e) const;
  /// A `state` tensor before `anchor`, laid out like `like` with
  /// `positions` on dimension `dim`, named after `like` plus `suffix`.
  Value *makeState(Op &anchor, const Value &like, unsigned dim,
                   const Expr &positions, llvm::StringRef suffix,
                   std::optional<ElementType> type = std::nullopt);
  Value *makeCache(Op &attention, unsigned operand, const Expr &context);
  /// Reads the attention's values from the leading channels of its key
  /// cache `keys`, as FlashMLA does, rather than from a cache of their own.
  void shareKeyCache(Op &attention, Value &keys);
  /// Makes `replacement` the attention's operand `operand`, dropping a
  /// layout change that fed only it.
  void replaceOperand(Op &attention, unsigned operand, Value *replacement);
  /// Fails, at the attention, if a cache of `positions` would hold more
  /// than its keys at the full context (the sequence dim at `context`);
  /// runs once the sequence dim is 1.
  LogicalResult checkCacheBound(const Op &attention, const Expr &positions,
                                const Expr &context, DiagnosticEngine &diags);
  /// Gives a scan or a causal convolution its state: one step of its
  /// recurrence.
  LogicalResult addRecurrentState(Op &op, DiagnosticEngine &diags);

  Module *module = nullptr;
  /// The sequence dim, which decode makes 1.
  const Dim *sequenceDim = nullptr;
  /// The KV cache's element type, if the model's option sets one.
  std::optional<ElementType> cacheType;
};

} // namespace

std::set<const Dim *> KVCachePass::findDims(const Expr &e) const {
  std::set<const Dim *> dims;
  for (const std::string &name : getSymbolNames(e))
    if (const Dim *dim = module->lookupDim(name))
      dims.insert(dim);
  return dims;
}

Value *KVCachePass::makeState(Op &anchor, const Value &like, unsigned dim,
                              const Expr &positions, llvm::StringRef suffix,
                              std::optional<ElementType> elementType) {
  const TensorType &type = like.getType();
  llvm::SmallVector<Expr, 4> shape(type.getShape().begin(),
                                   type.getShape().end());
  shape[dim] = positions;
  Graph &graph = *anchor.getParent();
  Op *state = graph.createOpBefore(&anchor, OpKind::State, anchor.getLoc());
  // Named after the value itself, not a layout change of it.
  Op *def = like.getDefiningOp();
  const Value *named =
      def && def->getKind() == OpKind::Layout ? def->getOperand(0) : &like;
  Value *value = graph.createResult(
      state, module->makeUniqueName(named->getName().str() + suffix.str()));
  value->setType(TensorType(elementType.value_or(type.getElementType()), shape,
                            type.getDistribution()));
  value->setAnnotated(true);
  return value;
}

Value *KVCachePass::makeCache(Op &attention, unsigned operand,
                              const Expr &context) {
  Value *original = attention.getOperand(operand);
  Value *cache = makeState(attention, *original,
                           getAttentionSequenceDim(original->getType()),
                           context, ".cache", cacheType);
  replaceOperand(attention, operand, cache);
  return cache;
}

void KVCachePass::replaceOperand(Op &attention, unsigned operand,
                                 Value *replacement) {
  Value *original = attention.getOperand(operand);
  attention.setOperand(operand, replacement);
  // A layout change that only fed this operand goes with it.
  Op *def = original->getDefiningOp();
  bool used = false;
  module->getModel()->walk([&](Op &op) {
    for (Value *use : op.getOperands())
      used |= use == original;
  });
  if (def && def->getKind() == OpKind::Layout && !used)
    def->getParent()->eraseOp(def);
}

/// `value` before any layout change.
static const Value *skipLayouts(const Value *value) {
  while (const Op *def = value->getDefiningOp()) {
    if (def->getKind() != OpKind::Layout)
      break;
    value = def->getOperand(0);
  }
  return value;
}

/// Whether the attention's values are the leading channels of its keys:
/// keys that concatenate the values with more channels along their last
/// dimension, as absorbed MLA's [latent | RoPE key] keys and latent values.
static bool valuesLeadKeys(const Op &attention) {
  const Value *keys = skipLayouts(attention.getOperand(1));
  const Op *concat = keys->getDefiningOp();
  if (!concat || concat->getKind() != OpKind::Concat)
    return false;
  int64_t dim = getIntegerValue(concat->getAttr("dim")->expr).value_or(-1);
  unsigned rank = keys->getType().getRank();
  return (dim == int64_t(rank) - 1 || dim == -1) &&
         skipLayouts(concat->getOperand(0)) ==
             skipLayouts(attention.getOperand(2));
}

void KVCachePass::shareKeyCache(Op &attention, Value &keys) {
  Value *values = attention.getOperand(2);
  const TensorType &keyType = keys.getType();
  unsigned last = keyType.getRank() - 1;
  Expr channels = values->getType().getDim(last);
  llvm::SmallVector<Expr, 4> shape(keyType.getShape().begin(),
                                   keyType.getShape().end());
  shape[last] = channels;
  Graph &graph = *attention.getParent();
  Op *view =
      graph.createOpBefore(&attention, OpKind::Slice, attention.getLoc());
  view->addOperand(&keys);
  view->setAttr("dim", Attribute::getExpr(AttrKind::Int, int(last)));
  view->setAttr("size", Attribute::getExpr(AttrKind::Expr, channels));
  view->setAttr("offset", Attribute::getExpr(AttrKind::Expr, 0));
  const Value *named = skipLayouts(values);
  Value *cache = graph.createResult(
      view, module->makeUniqueName(named->getName().str() + ".cache"));
  cache->setType(
      TensorType(keyType.getElementType(), shape, keyType.getDistribution()));
  replaceOperand(attention, 2, cache);
}

LogicalResult KVCachePass::checkCacheBound(const Op &attention,
                                           const Expr &positions,
                                           const Expr &context,
                                           DiagnosticEngine &diags) {
  const TensorType &keys = attention.getOperand(1)->getType();
  unsigned seq = getAttentionSequenceDim(keys);
  GiNaC::exmap atContext;
  atContext[sequenceDim->symbol] = context;
  llvm::SmallVector<Expr, 4> cacheShape, fullShape;
  bool scalesWithSequence = false;
  for (unsigned d = 0; d < keys.getRank(); ++d) {
    const Expr &extent = keys.getDim(d);
    std::optional<Expr> full = trySubstitute(extent, atContext);
    if (!full)
      return success(); // A pole: check-divisibility reports it.
    fullShape.push_back(*full);
    cacheShape.push_back(d == seq ? positions : extent);
    scalesWithSequence |= d != seq && findDims(extent).count(sequenceDim);
  }
  Expr cacheSize = 1, fullSize = 1;
  for (unsigned d = 0; d < keys.getRank(); ++d) {
    cacheSize = cacheSize * cacheShape[d];
    fullSize = fullSize * fullShape[d];
  }
  // Dims bound (the sequence at 1), axis degrees not: a global extent
  // that mentions one (`B = MB * dp`) cancels in the ratio, or the check
  // waits for a decidable model.
  std::optional<Expr> cache = module->bindDims(cacheSize),
                      all = module->bindDims(fullSize);
  if (!cache || !all || all->is_zero())
    return success();
  Expr ratio = (*cache / *all).normal();
  if (!GiNaC::is_a<GiNaC::numeric>(ratio) ||
      GiNaC::ex_to<GiNaC::numeric>(ratio) <= 1)
    return success();
  ExprPrinter printer = module->getPrinter();
  std::string why =
      scalesWithSequence
          ? "its other dimensions grow with the sequence dim '" +
                sequenceDim->name +
                "' (a sequence reshaped into the batch?); decode needs the "
                "sequence on the attention's sequence dimension"
          : "its keys have fewer positions than the context";
  diags.error(attention.getLoc(),
              "kv-cache: a decode step's KV cache " +
                  formatShape(cacheShape, printer) + " of " +
                  printer.str(*cache) + " elements, with " +
                  module->describeBindings(cacheSize) +
                  ", would be larger than all of the attention's keys at "
                  "the full context, " +
                  formatShape(fullShape, printer) + " of " +
                  printer.str(*all) + " elements: " + why);
  return failure();
}

LogicalResult KVCachePass::addRecurrentState(Op &op, DiagnosticEngine &diags) {
  bool scan = op.getKind() == OpKind::PScan;
  std::string what = scan ? "scan" : "convolution";
  std::optional<RecurrentState> state = getRecurrentState(op);
  if (!state ||
      !findDims(state->like->getType().getDim(state->dim)).count(sequenceDim)) {
    diags.error(op.getLoc(),
                "kv-cache: the " + what + " runs along " +
                    (state ? module->getPrinter().str(
                                 state->like->getType().getDim(state->dim))
                     : scan ? std::string("no dimension of its result")
                            : std::string("no sequence dimension")) +
                    ", not the sequence dim '" + sequenceDim->name +
                    "'; decode keeps a state only for a " + what + " over it");
    return failure();
  }
  if (!scan) {
    std::optional<Expr> width = module->bindDims(op.getAttr("kernel")->expr);
    if (width && width->is_equal(Expr(1)))
      return success(); // Sees only the new token: no state.
    if (op.getOperands().size() != 2) {
      diags.error(op.getLoc(),
                  "kv-cache: decoding a conv1d passes its state after its "
                  "weight, conv1d(x, weight, state); this one has no weight");
      return failure();
    }
  }
  op.addOperand(
      makeState(op, *state->like, state->dim, state->positions, ".state"));
  return success();
}

LogicalResult KVCachePass::run(Module &m, DiagnosticEngine &diags) {
  module = &m;
  Graph *model = m.getModel();
  if (!model)
    return success();
  if (const Option *option = m.lookupOption("kv_cache_dtype")) {
    const auto *name = std::get_if<std::string>(&option->value);
    cacheType = name ? parseElementType(*name) : std::nullopt;
    if (!cacheType || (*cacheType != ElementType::BF16 &&
                       *cacheType != ElementType::FP16 &&
                       *cacheType != ElementType::FP8 &&
                       *cacheType != ElementType::FP32)) {
      diags.error(option->loc, "option 'kv_cache_dtype' must name a KV cache "
                               "type: bf16, fp16, fp8 or fp32");
      return failure();
    }
  }
  bool wholeWindows = false;
  if (const Option *option = m.lookupOption("kv_window_cache")) {
    const auto *name = std::get_if<std::string>(&option->value);
    if (!name || (*name != "window" && *name != "whole")) {
      diags.error(option->loc, "option 'kv_window_cache' is \"window\" (a "
                               "window's positions) or \"whole\" (the "
                               "whole context)");
      return failure();
    }
    wholeWindows = *name == "whole";
  }
  llvm::SmallVector<Op *, 8> attentions, scans, convs;
  model->walk([&](Op &op) {
    if (op.getKind() == OpKind::Attention)
      attentions.push_back(&op);
    else if (op.getKind() == OpKind::PScan)
      scans.push_back(&op);
    else if (op.getKind() == OpKind::Conv1D)
      convs.push_back(&op);
  });
  if (attentions.empty() && scans.empty() && convs.empty()) {
    diags.error(m.getModelLoc(),
                "kv-cache: the model has no attention to read a KV cache "
                "and no recurrent layer (pscan, conv1d) to keep a state; "
                "decode needs one or the other");
    return failure();
  }
  for (const auto *ops : {&attentions, &scans, &convs})
    for (Op *op : *ops)
      if (!op->getOperand(0)->hasType()) {
        diags.error(op->getLoc(), "kv-cache needs shapes: run shape-infer "
                                  "and distribute first");
        return failure();
      }

  // The sequence dim: the one dim in every query's sequence extent, or,
  // without attention, in the first scan's or convolution's.
  Op *first = !attentions.empty() ? attentions.front()
              : !scans.empty()    ? scans.front()
                                  : convs.front();
  Expr extent;
  if (first->getKind() == OpKind::Attention) {
    const TensorType &query = first->getOperand(0)->getType();
    extent = query.getDim(getAttentionSequenceDim(query));
  } else if (std::optional<RecurrentState> state = getRecurrentState(*first)) {
    extent = state->like->getType().getDim(state->dim);
  } else {
    extent = 1;
  }
  std::set<const Dim *> dims = findDims(extent);
  if (dims.size() != 1) {
    std::string what = first->getKind() == OpKind::Attention
                           ? "the sequence extent of the attention's queries"
                       : first->getKind() == OpKind::PScan
                           ? "the extent the scan runs along"
                           : "the extent the convolution runs along";
    diags.error(first->getLoc(), "kv-cache: " + what + ", " +
                                     m.getPrinter().str(extent) +
                                     ", must involve exactly one dim");
    return failure();
  }
  Dim *sequence = m.lookupDim((*dims.begin())->name);
  sequenceDim = sequence;
  // Only attention reads a context; a recurrent layer's state has no length.
  Dim *context = m.lookupDim("CTX");
  if (!context && !attentions.empty()) {
    if (!sequence->value) {
      diags.error(sequence->loc, "kv-cache: dim '" + sequence->name +
                                     "' has no value to take as the context "
                                     "length; declare `dim CTX`");
      return failure();
    }
    std::optional<Expr> length = m.bindDims(Expr(sequence->symbol));
    if (!length) {
      diags.error(sequence->loc, "kv-cache: dim '" + sequence->name +
                                     "' divides by zero with " +
                                     m.describeBindings(*sequence->value));
      return failure();
    }
    context = m.addDim("CTX", sequence->loc);
    context->value = *length;
  }
  // A window written over the sequence dim (`window=S/2`) keeps its length
  // when the sequence becomes the one new token.
  GiNaC::exmap sequenceLength;
  if (sequence->value)
    sequenceLength[sequence->symbol] = *sequence->value;
  sequence->value = Expr(1);

  for (Op *attention : attentions) {
    Expr positions = context->symbol;
    if (isWindowedMask(attention->getAttr("mask")->text)) {
      const Expr &written = attention->getAttr("window")->expr;
      std::optional<Expr> window = trySubstitute(written, sequenceLength);
      if (!window) {
        diags.error(attention->getLoc(),
                    "kv-cache: the window " + m.getPrinter().str(written) +
                        " divides by zero with " + m.describeBindings(written));
        return failure();
      }
      if (!wholeWindows)
        positions = *makeFunction("min", {context->symbol, *window});
      attention->setAttr("window", Attribute::getExpr(AttrKind::Expr, 0));
    }
    if (failed(checkCacheBound(*attention, positions, context->symbol, diags)))
      return failure();
    bool shared = valuesLeadKeys(*attention);
    Value *keys = makeCache(*attention, 1, positions);
    if (shared)
      shareKeyCache(*attention, *keys);
    else
      makeCache(*attention, 2, positions);
    attention->setAttr("mask", Attribute::getText(AttrKind::Ident, "none"));
  }
  for (const auto *ops : {&scans, &convs})
    for (Op *op : *ops)
      if (failed(addRecurrentState(*op, diags)))
        return failure();
  return success();
}

std::unique_ptr<Pass> stg::createKVCachePass() {
  return std::make_unique<KVCachePass>();
}
