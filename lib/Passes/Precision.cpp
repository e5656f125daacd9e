//===- Precision.cpp - Assign each op the precision a recipe runs it in ---===//
//
// A low-precision recipe (`--precision fp8`, the model's `option precision`)
// is not one element type: Transformer Engine and Megatron-Core run the
// linear layers' GEMMs of the decoder layers in the low precision and keep
// everything else in bf16 (the attention core unless FP8 attention is
// asked for, softmax, norms, the router, the embedding and the output
// layer, which are not TE modules). Tensors between ops stay bf16; a GEMM
// reads quantized copies of its operands. This pass writes that onto the
// ops, so the cost model and the device model read it per op and
// `stage-opt` shows it:
//
//   precision = fp8    on each einsum inside a repeat body with a `param`
//                      operand (a linear layer; experts' grouped GEMMs
//                      included) whose result does not feed a `route`
//                      (the router), and on `attention` ops when the
//                      model's `low_precision_attention` option is on;
//   quantize = [i]     on such an einsum, the operands it casts from bf16
//                      itself (its activations; weights are cast once a
//                      step and kept), for the cast's bytes.
//
// Runs before `autodiff`, which gives a linear's data-gradient and weight-
// gradient einsums its precision (and the data gradient's cast of the
// incoming gradient). A recipe of bf16 or fp16 writes nothing: an op with
// no `precision` computes in its element type's (fp32: tf32).
//
// Inference may also quantize weights alone (the `weight_precision` option,
// `--weight-precision`): a served checkpoint in MXFP4 or INT4-like formats
// (gpt-oss's experts, AWQ) whose GEMMs dequantize the weights as they load
// them and compute in the recipe's precision (W4A16 under bf16). Such an
// einsum gets
//
//   weights = mxfp4    the format its weight operands are stored and read
//                      in; with `weight_precision_scope = "experts"` only
//                      the experts' GEMMs (an einsum over a dispatch's
//                      slots), as gpt-oss ships them.
//
//===----------------------------------------------------------------------===//

#include "stg/IR/Precision.h"
#include "stg/IR/Cost.h"
#include "stg/Passes/Passes.h"

#include "llvm/ADT/DenseSet.h"

using namespace stg;

#define DEBUG_TYPE "precision"

namespace {

class PrecisionPass : public Pass {
public:
  llvm::StringRef getName() const override { return DEBUG_TYPE; }
  LogicalResult run(Module &module, DiagnosticEngine &diags) override;
};

/// The recipe the module asks for: its `precision` option, bf16 without
/// one; nothing after reporting an option that names no recipe.
std::optional<Precision> getRecipe(const Module &module,
                                   DiagnosticEngine &diags) {
  const Option *option = module.lookupOption("precision");
  if (!option)
    return Precision::BF16;
  std::optional<Precision> recipe = module.getPrecisionRecipe();
  if (!recipe) {
    diags.error(option->loc, "option 'precision' must name a recipe: " +
                                 getRecipeNames(" or "));
    return std::nullopt;
  }
  return recipe;
}

/// True if `value` feeds a `route` op, directly or through elementwise ops
/// (a router bias): the router, which stays in bf16.
bool feedsRouter(const Value *value, const Graph::Users &users) {
  llvm::SmallVector<const Value *, 4> work{value};
  llvm::DenseSet<const Value *> seen;
  while (!work.empty()) {
    const Value *current = work.pop_back_val();
    if (!seen.insert(current).second)
      continue;
    auto found = users.find(current);
    if (found == users.end())
      continue;
    for (const Op *user : found->second) {
      if (user->getKind() == OpKind::Route)
        return true;
      if (user->getInfo().has(Elementwise))
        for (const Value *result : user->getResults())
          work.push_back(result);
    }
  }
  return false;
}

/// The module's weight-only format and whether it is for the experts
/// alone; nothing without one, or after reporting an option that names no
/// format narrower than bf16 or no scope.
struct WeightFormat {
  Precision format;
  bool expertsOnly;
};
std::optional<WeightFormat>
getWeightFormat(const Module &module, DiagnosticEngine &diags, bool &failed) {
  const Option *option = module.lookupOption("weight_precision");
  if (!option)
    return std::nullopt;
  const auto *name = std::get_if<std::string>(&option->value);
  std::optional<Precision> format = name ? parsePrecision(*name) : std::nullopt;
  if (!format || !isLowPrecision(*format)) {
    diags.error(option->loc, "option 'weight_precision' must name a format "
                             "narrower than 16 bits: fp8, mxfp8, mxfp6, "
                             "mxfp4 or nvfp4");
    failed = true;
    return std::nullopt;
  }
  bool expertsOnly = false;
  if (const Option *scope = module.lookupOption("weight_precision_scope")) {
    const auto *text = std::get_if<std::string>(&scope->value);
    if (!text || (*text != "all" && *text != "experts")) {
      diags.error(scope->loc, "option 'weight_precision_scope' must be "
                              "\"all\" or \"experts\"");
      failed = true;
      return std::nullopt;
    }
    expertsOnly = *text == "experts";
  }
  return WeightFormat{*format, expertsOnly};
}

} // namespace

LogicalResult PrecisionPass::run(Module &module, DiagnosticEngine &diags) {
  std::optional<Precision> recipe = getRecipe(module, diags);
  if (!recipe)
    return failure();
  bool failed = false;
  std::optional<WeightFormat> weights = getWeightFormat(module, diags, failed);
  if (failed)
    return failure();
  if ((!isLowPrecision(*recipe) && !weights) || !module.getModel())
    return success();
  const Option *attentionOption =
      module.lookupOption("low_precision_attention");
  bool lowPrecisionAttention =
      attentionOption && attentionOption->isBool() &&
      std::get<bool>(attentionOption->value);

  Graph::Users users = module.getModel()->collectUsers();
  Attribute precision =
      Attribute::getText(AttrKind::Ident, getPrecisionName(*recipe).str());
  module.getModel()->walk([&](Op &op) {
    // Top-level ops (embedding, output layer, loss) stay in bf16.
    if (!op.getParent() || !op.getParent()->getParentOp())
      return;
    if (op.getKind() == OpKind::Attention && lowPrecisionAttention &&
        isLowPrecision(*recipe)) {
      op.setAttr("precision", precision);
      return;
    }
    if (op.getKind() != OpKind::Einsum ||
        llvm::none_of(op.getOperands(),
                      [](const Value *value) { return value->isParam(); }) ||
        feedsRouter(op.getResult(), users))
      return;
    if (weights && (!weights->expertsOnly || getExpertWeightReads(op)))
      op.setAttr("weights",
                 Attribute::getText(AttrKind::Ident,
                                    getPrecisionName(weights->format).str()));
    if (!isLowPrecision(*recipe))
      return;
    op.setAttr("precision", precision);
    llvm::SmallVector<Expr, 4> casts;
    for (unsigned i = 0; i < op.getOperands().size(); ++i)
      if (!op.getOperand(i)->isParam())
        casts.push_back(Expr(i));
    op.setAttr("quantize", Attribute::getList(std::move(casts)));
  });
  return success();
}

std::unique_ptr<Pass> stg::createPrecisionPass() {
  return std::make_unique<PrecisionPass>();
}
