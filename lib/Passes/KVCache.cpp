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
// dropped too. The new token's keys and values are still computed (they
// are appended to the cache); the cache is counted as per-rank state
// memory.
//
// Runs after `distribute` (the cache takes the keys' resolved layout) and
// before `match-collectives`: a layout change that fed an attention's keys
// and has no other use (a gather over cp) is dropped with them.
//
//===----------------------------------------------------------------------===//

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
  Value *makeCache(Op &attention, unsigned operand, const Expr &context);

  Module *module = nullptr;
};

} // namespace

std::set<const Dim *> KVCachePass::findDims(const Expr &e) const {
  std::set<const Dim *> dims;
  for (const std::string &name : getSymbolNames(e))
    if (const Dim *dim = module->lookupDim(name))
      dims.insert(dim);
  return dims;
}

/// The sequence dimension of an attention operand: [batch..., seq, heads,
/// size], or [seq, size] for rank 2.
static unsigned getSequenceDim(const TensorType &type) {
  return type.getRank() >= 3 ? type.getRank() - 3 : 0;
}

Value *KVCachePass::makeCache(Op &attention, unsigned operand,
                              const Expr &context) {
  Value *original = attention.getOperand(operand);
  const TensorType &type = original->getType();
  llvm::SmallVector<Expr, 4> shape(type.getShape().begin(),
                                   type.getShape().end());
  shape[getSequenceDim(type)] = context;
  Graph &graph = *attention.getParent();
  Op *state = graph.createOpBefore(&attention, OpKind::State, attention.getLoc());
  // Named after the keys or values themselves, not a layout change of them.
  Op *def = original->getDefiningOp();
  const Value *named =
      def && def->getKind() == OpKind::Layout ? def->getOperand(0) : original;
  std::string base = named->getName().str();
  Value *cache = graph.createResult(
      state, module->makeUniqueName(base + ".cache"));
  cache->setType(TensorType(type.getElementType(), shape,
                            type.getDistribution()));
  cache->setAnnotated(true);
  attention.setOperand(operand, cache);
  // A layout change that only fed this operand goes with it.
  bool used = false;
  module->getModel()->walk([&](Op &op) {
    for (Value *use : op.getOperands())
      used |= use == original;
  });
  if (def && def->getKind() == OpKind::Layout && !used)
    def->getParent()->eraseOp(def);
  return cache;
}

LogicalResult KVCachePass::run(Module &m, DiagnosticEngine &diags) {
  module = &m;
  Graph *model = m.getModel();
  if (!model)
    return success();
  llvm::SmallVector<Op *, 8> attentions;
  model->walk([&](Op &op) {
    if (op.getKind() == OpKind::Attention)
      attentions.push_back(&op);
  });
  if (attentions.empty()) {
    diags.error(m.getModelLoc(), "kv-cache: the model has no attention to "
                                 "read a KV cache; decode needs one");
    return failure();
  }
  for (Op *op : attentions)
    if (!op->getOperand(0)->hasType()) {
      diags.error(op->getLoc(), "kv-cache needs shapes: run shape-infer and "
                                "distribute first");
      return failure();
    }

  // The sequence dim: the one dim in every query's sequence extent.
  const TensorType &query = attentions.front()->getOperand(0)->getType();
  std::set<const Dim *> dims = findDims(query.getDim(getSequenceDim(query)));
  if (dims.size() != 1) {
    diags.error(attentions.front()->getLoc(),
                "kv-cache: the sequence extent of the attention's queries, " +
                    m.getPrinter().str(query.getDim(getSequenceDim(query))) +
                    ", must involve exactly one dim");
    return failure();
  }
  Dim *sequence = m.lookupDim((*dims.begin())->name);
  Dim *context = m.lookupDim("CTX");
  if (!context) {
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
    if (attention->getAttr("mask")->text == "sliding") {
      const Expr &written = attention->getAttr("window")->expr;
      std::optional<Expr> window = trySubstitute(written, sequenceLength);
      if (!window) {
        diags.error(attention->getLoc(),
                    "kv-cache: the window " + m.getPrinter().str(written) +
                        " divides by zero with " + m.describeBindings(written));
        return failure();
      }
      positions = *makeFunction("min", {context->symbol, *window});
      attention->setAttr("window", Attribute::getExpr(AttrKind::Expr, 0));
    }
    makeCache(*attention, 1, positions);
    makeCache(*attention, 2, positions);
    attention->setAttr("mask", Attribute::getText(AttrKind::Ident, "none"));
  }
  return success();
}

std::unique_ptr<Pass> stg::createKVCachePass() {
  return std::make_unique<KVCachePass>();
}
