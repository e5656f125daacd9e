//===- ExprBuilder.cpp - Expressions, types and attributes ----------------===//
//
// Dims and axes share one namespace of symbols. In a shape, a trailing
// division by axes (`S/(sp*cp)`) is a Partition, anything else is arithmetic
// on the extent (`D/NH`). Attributes are matched to the op's schema
// positionally first, then by name.
//
//===----------------------------------------------------------------------===//

#include "ExprBuilder.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

using namespace stg;

const char *stg::getBlockAttrKindName(BlockAttrKind kind) {
  switch (kind) {
  case BlockAttrKind::Bool: return "bool";
  case BlockAttrKind::String: return "string";
  case BlockAttrKind::Expr: return "expr";
  }
  llvm_unreachable("every kind is named");
}

void ExprBuilder::reportAttrParamKind(SourceLoc loc, llvm::StringRef name,
                                      const BlockAttrValue &value,
                                      const llvm::Twine &expected) {
  std::string shown;
  if (value.kind == BlockAttrKind::Bool)
    shown = value.flag ? "a bool, true" : "a bool, false";
  else if (value.kind == BlockAttrKind::String)
    shown = "a string, \"" + value.text + "\"";
  else
    shown = "an expression, " + module.getPrinter().str(value.expr);
  diags.error(loc, "attribute parameter '" + name + "' of block '" +
                       blockAttrs->block + "' is " + shown +
                       "; here it must be " + expected);
  if (blockAttrs->callLoc.isValid())
    diags.note(blockAttrs->callLoc,
               "block '" + blockAttrs->block + "' is called here");
}

//===----------------------------------------------------------------------===//
// Expressions
//===----------------------------------------------------------------------===//

/// Powers of powers grow numbers doubly exponentially: ((((2^64)^64)^64)^64)
/// has five million digits and takes GiNaC seconds; one more level, minutes.
/// A power whose numbers could pass this many bits is refused.
constexpr long kMaxPowerBits = 4096;

/// The size in bits of the largest number in `e`.
static long numberBits(const Expr &e) {
  if (GiNaC::is_a<GiNaC::numeric>(e)) {
    const auto &n = GiNaC::ex_to<GiNaC::numeric>(e);
    return n.is_rational() ? n.numer().int_length() + n.denom().int_length()
                           : 0;
  }
  long bits = 0;
  for (size_t i = 0, end = e.nops(); i < end; ++i)
    bits = std::max(bits, numberBits(e.op(i)));
  return bits;
}

std::optional<Expr> ExprBuilder::buildExpr(STGParser::ExprContext *ctx,
                                           const SourceFile &file) {
  // GiNaC reports arithmetic impossibilities (1/0) by throwing.
  try {
    return buildExprUnchecked(ctx, file);
  } catch (const std::exception &e) {
    diags.error(file.loc(ctx), llvm::Twine("invalid expression: ") + e.what());
    return std::nullopt;
  }
}

std::optional<Expr>
ExprBuilder::buildExprUnchecked(STGParser::ExprContext *ctx,
                                const SourceFile &file) {
  if (auto *paren = dynamic_cast<STGParser::ParenExprContext *>(ctx))
    return buildExprUnchecked(paren->expr(), file);
  if (auto *neg = dynamic_cast<STGParser::NegExprContext *>(ctx)) {
    auto operand = buildExprUnchecked(neg->expr(), file);
    if (!operand)
      return std::nullopt;
    return -*operand;
  }
  if (auto *sym = dynamic_cast<STGParser::SymExprContext *>(ctx)) {
    std::string name = sym->ID()->getText();
    // A block's attribute parameters never shadow a dim or an axis (their
    // declaration is checked), so looking them up first changes nothing
    // else.
    if (const BlockAttrValue *param =
            blockAttrs ? blockAttrs->lookup(name) : nullptr) {
      if (param->kind == BlockAttrKind::Expr)
        return param->expr;
      reportAttrParamKind(file.loc(sym->ID()), name, *param,
                          "a number or an expression over dims");
      return std::nullopt;
    }
    if (module.lookupDim(name) || module.lookupAxis(name))
      return Expr(*module.getSymbols().lookup(name));
    if (module.lookupOption(name))
      diags.error(file.loc(sym->ID()),
                  "'" + name + "' is an option, not a dim or axis");
    else
      diags.error(file.loc(sym->ID()), "unknown dim or axis '" + name + "'");
    return std::nullopt;
  }
  if (auto *call = dynamic_cast<STGParser::CallExprContext *>(ctx)) {
    std::vector<Expr> arguments;
    for (STGParser::ExprContext *argument : call->expr()) {
      std::optional<Expr> value = buildExprUnchecked(argument, file);
      if (!value)
        return std::nullopt;
      arguments.push_back(*value);
    }
    std::string name = call->ID()->getText();
    std::optional<Expr> result = makeFunction(name, arguments);
    if (!result)
      diags.error(file.loc(call->ID()),
                  "unknown function '" + name + "' of " +
                      llvm::Twine(arguments.size()) +
                      " argument(s); expressions have " +
                      getFunctionSignatures());
    return result;
  }
  if (auto *integer = dynamic_cast<STGParser::IntExprContext *>(ctx)) {
    std::string digits = integer->INT()->getText();
    if (digits.size() > 30) {
      diags.error(file.loc(ctx), "integer '" + digits + "' is too large");
      return std::nullopt;
    }
    return Expr(GiNaC::numeric(digits.c_str()));
  }
  if (auto *decimal = dynamic_cast<STGParser::FloatExprContext *>(ctx)) {
    auto value = parseDecimal(decimal->FLOAT()->getText());
    if (!value)
      diags.error(file.loc(ctx),
                  "number '" + decimal->FLOAT()->getText() + "' is out of range");
    return value;
  }
  auto binary = [&](STGParser::ExprContext *lhsCtx,
                    STGParser::ExprContext *rhsCtx, char op)
      -> std::optional<Expr> {
    auto lhs = buildExprUnchecked(lhsCtx, file);
    auto rhs = buildExprUnchecked(rhsCtx, file);
    if (!lhs || !rhs)
      return std::nullopt;
    switch (op) {
    case '+': return *lhs + *rhs;
    case '-': return *lhs - *rhs;
    case '*': return *lhs * *rhs;
    case '/':
      if (rhs->is_zero()) {
        diags.error(file.loc(rhsCtx), "division by zero");
        return std::nullopt;
      }
      return *lhs / *rhs;
    default: {
      auto exponent = getIntegerValue(*rhs);
      if (!exponent || *exponent < -64 || *exponent > 64) {
        diags.error(file.loc(rhsCtx),
                    "an exponent must be an integer between -64 and 64");
        return std::nullopt;
      }
      if (*exponent < 0 && lhs->is_zero()) {
        diags.error(file.loc(rhsCtx), "division by zero");
        return std::nullopt;
      }
      if (numberBits(*lhs) * std::abs(*exponent) > kMaxPowerBits) {
        diags.error(file.loc(lhsCtx),
                    "power too large: its value would have more than " +
                        llvm::Twine(kMaxPowerBits) + " bits");
        return std::nullopt;
      }
      return GiNaC::pow(*lhs, *rhs);
    }
    }
  };
  if (auto *pow = dynamic_cast<STGParser::PowExprContext *>(ctx))
    return binary(pow->expr(0), pow->expr(1), '^');
  if (auto *mul = dynamic_cast<STGParser::MulExprContext *>(ctx))
    return binary(mul->expr(0), mul->expr(1), mul->op->getText()[0]);
  if (auto *add = dynamic_cast<STGParser::AddExprContext *>(ctx))
    return binary(add->expr(0), add->expr(1), add->op->getText()[0]);
  diags.error(file.loc(ctx), "unsupported expression");
  return std::nullopt;
}

//===----------------------------------------------------------------------===//
// Types
//===----------------------------------------------------------------------===//

bool ExprBuilder::collectAxisProduct(STGParser::ExprContext *ctx,
                                     llvm::SmallVectorImpl<const Axis *> &axes) {
  if (auto *paren = dynamic_cast<STGParser::ParenExprContext *>(ctx))
    return collectAxisProduct(paren->expr(), axes);
  if (auto *sym = dynamic_cast<STGParser::SymExprContext *>(ctx)) {
    const Axis *axis = module.lookupAxis(sym->ID()->getText());
    if (!axis)
      return false;
    axes.push_back(axis);
    return true;
  }
  if (auto *mul = dynamic_cast<STGParser::MulExprContext *>(ctx))
    return mul->op->getText() == "*" && collectAxisProduct(mul->expr(0), axes) &&
           collectAxisProduct(mul->expr(1), axes);
  return false;
}

bool ExprBuilder::mentionsAxis(antlr4::tree::ParseTree *tree) {
  if (auto *sym = dynamic_cast<STGParser::SymExprContext *>(tree))
    return module.lookupAxis(sym->ID()->getText()) != nullptr;
  return llvm::any_of(tree->children, [&](antlr4::tree::ParseTree *child) {
    return mentionsAxis(child);
  });
}

STGParser::ExprContext *
ExprBuilder::splitPartition(STGParser::ExprContext *ctx,
                            llvm::SmallVectorImpl<const Axis *> &axes,
                            const SourceFile &file, bool &failed) {
  auto *div = dynamic_cast<STGParser::MulExprContext *>(ctx);
  if (!div || div->op->getText() != "/")
    return ctx;
  llvm::SmallVector<const Axis *, 2> divisorAxes;
  if (!collectAxisProduct(div->expr(1), divisorAxes)) {
    // Plain arithmetic (`D/NH`), unless an axis hides in the divisor.
    if (mentionsAxis(div->expr(1))) {
      diags.error(file.loc(div->expr(1)),
                  "a partition divides by axes only; '" +
                      div->expr(1)->getText() + "' mixes axes and dims");
      failed = true;
    }
    return ctx;
  }
  // `X/a/b` is `(X/a)/b`: the inner divisions are major.
  STGParser::ExprContext *extent =
      splitPartition(div->expr(0), axes, file, failed);
  axes.append(divisorAxes.begin(), divisorAxes.end());
  return extent;
}

std::optional<TensorType> ExprBuilder::buildType(STGParser::TypeContext *ctx,
                                                 const SourceFile &file) {
  ElementType elementType = module.getDefaultElementType();
  bool failed = false;
  if (ctx->elem) {
    auto parsed = parseElementType(ctx->elem->getText());
    if (!parsed) {
      diags.error(file.loc(ctx->elem),
                  "unknown element type '" + ctx->elem->getText() +
                      "' (expected bf16, fp16, fp32, fp8, i8, i32, i64 or bool)");
      failed = true;
    } else {
      elementType = *parsed;
    }
  }
  auto dimCtxs = ctx->expr();
  llvm::SmallVector<Expr, 4> shape;
  Distribution distribution(dimCtxs.size());
  for (unsigned d = 0; d < dimCtxs.size(); ++d) {
    llvm::SmallVector<const Axis *, 2> axes;
    STGParser::ExprContext *extentCtx =
        splitPartition(dimCtxs[d], axes, file, failed);
    auto extent = buildExpr(extentCtx, file);
    if (!extent) {
      failed = true;
      continue;
    }
    shape.push_back(*extent);
    for (const Axis *axis : axes)
      distribution.addPartition(d, axis);
  }
  if (auto *partial = ctx->axisSet()) {
    for (auto *id : partial->ID()) {
      if (const Axis *axis = lookupAxisOrReport(id, file))
        distribution.addPartialSum(axis);
      else
        failed = true;
    }
  }
  if (failed)
    return std::nullopt;
  if (const Axis *axis = distribution.findRepeatedAxis()) {
    diags.error(file.loc(ctx), "axis '" + axis->name +
                                   "' is used twice in this type; a tensor "
                                   "has one layout per axis");
    return std::nullopt;
  }
  return TensorType(elementType, std::move(shape), std::move(distribution));
}

const Axis *ExprBuilder::lookupAxisOrReport(antlr4::tree::TerminalNode *id,
                                            const SourceFile &file) {
  std::string name = id->getText();
  if (const Axis *axis = module.lookupAxis(name))
    return axis;
  if (module.lookupDim(name))
    diags.error(file.loc(id), "'" + name + "' is a dim, not an axis");
  else
    diags.error(file.loc(id), "unknown axis '" + name + "'");
  return nullptr;
}

//===----------------------------------------------------------------------===//
// Attributes
//===----------------------------------------------------------------------===//

std::optional<EinsumSpec>
ExprBuilder::buildEinsumSpec(STGParser::EinsumSpecContext *ctx,
                             unsigned numOperands, const SourceFile &file) {
  EinsumSpec spec;
  std::string current;
  bool seenArrow = false;
  for (antlr4::tree::ParseTree *child : ctx->children) {
    std::string text = child->getText();
    if (text == ",") {
      spec.inputs.push_back(current);
      current.clear();
    } else if (text == "->") {
      spec.inputs.push_back(current);
      current.clear();
      seenArrow = true;
    } else {
      current = text;
    }
  }
  if (seenArrow)
    spec.output = current;
  if (spec.inputs.size() != numOperands) {
    size_t numInputs = spec.inputs.size();
    diags.error(file.loc(ctx),
                "einsum spec '" + ctx->getText() + "' has " +
                    llvm::Twine(numInputs) +
                    (numInputs == 1 ? " input" : " inputs") +
                    " but the call has " + llvm::Twine(numOperands) +
                    (numOperands == 1 ? " operand" : " operands"));
    return std::nullopt;
  }
  for (char index : spec.output) {
    if (!llvm::any_of(spec.inputs, [&](const std::string &in) {
          return in.find(index) != std::string::npos;
        })) {
      diags.error(file.loc(ctx), "einsum result index '" + std::string(1, index) +
                                     "' does not appear in any input");
      return std::nullopt;
    }
    if (llvm::count(spec.output, index) > 1) {
      diags.error(file.loc(ctx), "einsum result index '" + std::string(1, index) +
                                     "' appears twice");
      return std::nullopt;
    }
  }
  return spec;
}

Attribute ExprBuilder::buildDefault(const AttrSpec &spec) {
  if (spec.kind == AttrKind::Ident || spec.kind == AttrKind::String)
    return Attribute::getText(spec.kind, spec.defaultValue);
  return Attribute::getExpr(spec.kind, GiNaC::numeric(spec.defaultValue));
}

std::optional<Attribute>
ExprBuilder::buildAttrValue(const OpInfo &info, const AttrSpec &spec,
                            STGParser::AttrValueContext *ctx,
                            const SourceFile &file) {
  auto *exprCtx = dynamic_cast<STGParser::ExprAttrContext *>(ctx);
  auto *tupleCtx = dynamic_cast<STGParser::TupleAttrContext *>(ctx);
  auto *stringCtx = dynamic_cast<STGParser::StringAttrContext *>(ctx);
  auto *word = exprCtx
                   ? dynamic_cast<STGParser::SymExprContext *>(exprCtx->expr())
                   : nullptr;
  std::string where =
      "attribute '" + std::string(spec.name) + "' of '" + info.name.str() + "'";
  // A bare word naming a block's attribute parameter stands for its value
  // (`attention[mask=mask]` in `block attn[mask = "causal"]`).
  const BlockAttrValue *param = nullptr;
  if (word && blockAttrs)
    param = blockAttrs->lookup(word->getText());
  switch (spec.kind) {
  case AttrKind::Int:
  case AttrKind::Expr: {
    if (!exprCtx) {
      diags.error(file.loc(ctx), where + " must be " +
                                     (spec.kind == AttrKind::Int
                                          ? "an integer"
                                          : "an expression"));
      return std::nullopt;
    }
    auto value = buildExpr(exprCtx->expr(), file);
    if (!value)
      return std::nullopt;
    if (spec.kind == AttrKind::Int && !getIntegerValue(*value)) {
      diags.error(file.loc(ctx), where + " must be an integer");
      return std::nullopt;
    }
    return Attribute::getExpr(spec.kind, *value);
  }
  case AttrKind::Ident: {
    llvm::SmallVector<llvm::StringRef, 4> choices;
    llvm::StringRef(spec.choices).split(choices, '|');
    if (param && param->kind != BlockAttrKind::String) {
      reportAttrParamKind(file.loc(ctx), word->getText(), *param,
                          "one of " + llvm::join(choices, ", "));
      return std::nullopt;
    }
    if (param) {
      if (param->standIn)
        return Attribute::getText(spec.kind, choices.front().str());
      if (llvm::is_contained(choices, param->text))
        return Attribute::getText(spec.kind, param->text);
      diags.error(file.loc(ctx), where + " must be one of " +
                                     llvm::join(choices, ", ") + "; found '" +
                                     param->text + "', the value of '" +
                                     word->getText() + "'");
      if (blockAttrs->callLoc.isValid())
        diags.note(blockAttrs->callLoc,
                   "block '" + blockAttrs->block + "' is called here");
      return std::nullopt;
    }
    if (!word || !llvm::is_contained(choices, word->getText())) {
      diags.error(file.loc(ctx), where + " must be one of " +
                                     llvm::join(choices, ", ") + "; found '" +
                                     ctx->getText() + "'");
      return std::nullopt;
    }
    return Attribute::getText(spec.kind, word->getText());
  }
  case AttrKind::String: {
    if (param && param->kind == BlockAttrKind::String)
      return Attribute::getText(spec.kind, param->text);
    if (param) {
      reportAttrParamKind(file.loc(ctx), word->getText(), *param,
                          "a quoted string");
      return std::nullopt;
    }
    if (!stringCtx) {
      diags.error(file.loc(ctx), where + " must be a quoted string");
      return std::nullopt;
    }
    return Attribute::getText(spec.kind,
                              unquoteString(stringCtx->STRING()->getText()));
  }
  case AttrKind::Axes: {
    llvm::SmallVector<STGParser::AttrValueContext *, 2> items;
    if (tupleCtx)
      for (auto *item : tupleCtx->attrValue())
        items.push_back(item);
    else
      items.push_back(ctx);
    llvm::SmallVector<const Axis *, 2> axes;
    for (auto *item : items) {
      auto *itemExpr = dynamic_cast<STGParser::ExprAttrContext *>(item);
      STGParser::ExprContext *inner = itemExpr ? itemExpr->expr() : nullptr;
      // `(tp)` is a tuple of one axis, as `@ (tp)` is in a type.
      while (auto *paren = dynamic_cast<STGParser::ParenExprContext *>(inner))
        inner = paren->expr();
      auto *itemWord = dynamic_cast<STGParser::SymExprContext *>(inner);
      if (!itemWord) {
        diags.error(file.loc(item),
                    where + " must be an axis or a tuple of axes");
        return std::nullopt;
      }
      const Axis *axis = lookupAxisOrReport(itemWord->ID(), file);
      if (!axis)
        return std::nullopt;
      if (llvm::is_contained(axes, axis)) {
        diags.error(file.loc(item), "axis '" + axis->name + "' is listed twice");
        return std::nullopt;
      }
      axes.push_back(axis);
    }
    return Attribute::getAxes(std::move(axes));
  }
  case AttrKind::IntList:
  case AttrKind::Einsum:
    break;
  }
  llvm_unreachable("list and einsum attributes are built by the caller");
}

std::optional<llvm::SmallVector<NamedAttribute, 2>>
ExprBuilder::buildAttrs(const OpInfo &info, STGParser::AttrListContext *ctx,
                        antlr4::Token *opToken, unsigned numOperands,
                        const SourceFile &file) {
  llvm::SmallVector<NamedAttribute, 2> result;
  bool isEinsum = info.kind == OpKind::Einsum;
  if (ctx && ctx->einsumSpec()) {
    if (!isEinsum) {
      diags.error(file.loc(ctx), "'" + info.name +
                                     "' does not take an einsum spec");
      return std::nullopt;
    }
    auto spec = buildEinsumSpec(ctx->einsumSpec(), numOperands, file);
    if (!spec)
      return std::nullopt;
    result.push_back({"spec", Attribute::getEinsum(std::move(*spec))});
    return result;
  }
  if (isEinsum) {
    diags.error(file.loc(opToken),
                "einsum needs an index spec, as in einsum[bsd,df->bsf](x, w)");
    return std::nullopt;
  }

  // Assign each written attribute to a schema slot.
  llvm::SmallVector<std::pair<const AttrSpec *, STGParser::AttrContext *>, 4>
      assigned;
  llvm::SmallVector<STGParser::AttrValueContext *, 4> listItems;
  const AttrSpec *listSpec = nullptr;
  bool seenNamed = false;
  unsigned position = 0;
  auto attrs = ctx ? ctx->attr() : std::vector<STGParser::AttrContext *>();
  for (STGParser::AttrContext *attr : attrs) {
    const AttrSpec *spec = nullptr;
    if (attr->anyName()) {
      seenNamed = true;
      std::string name = attr->anyName()->getText();
      spec = info.findAttr(name);
      if (spec && spec->computed) {
        diags.error(file.loc(attr->anyName()),
                    "attribute '" + name + "' of '" + info.name +
                        "' is computed by the compiler");
        return std::nullopt;
      }
      if (!spec) {
        std::string known;
        for (const AttrSpec &s : info.attrs)
          if (!s.computed)
            known += (known.empty() ? "" : ", ") + std::string(s.name);
        diags.error(file.loc(attr->anyName()),
                    "'" + info.name + "' has no attribute '" + name + "'" +
                        (known.empty() ? llvm::Twine("")
                                       : llvm::Twine("; it takes ") + known));
        return std::nullopt;
      }
    } else {
      if (seenNamed) {
        diags.error(file.loc(attr),
                    "positional attribute after a named one");
        return std::nullopt;
      }
      size_t writable = llvm::count_if(
          info.attrs, [](const AttrSpec &s) { return !s.computed; });
      if (position < writable)
        spec = &info.attrs[position];
      else if (writable && info.attrs[writable - 1].kind == AttrKind::IntList)
        spec = &info.attrs[writable - 1];
      if (!spec && writable == 0) {
        diags.error(file.loc(attr), "'" + info.name + "' takes no attributes");
        return std::nullopt;
      }
      if (!spec) {
        diags.error(file.loc(attr),
                    "'" + info.name + "' takes " + llvm::Twine(writable) +
                        (writable == 1 ? " attribute" : " attributes") +
                        ", this is one too many");
        return std::nullopt;
      }
      ++position;
    }
    if (spec->kind == AttrKind::IntList) {
      listSpec = spec;
      if (auto *tuple =
              dynamic_cast<STGParser::TupleAttrContext *>(attr->attrValue()))
        for (auto *item : tuple->attrValue())
          listItems.push_back(item);
      else
        listItems.push_back(attr->attrValue());
      continue;
    }
    for (auto &[other, otherCtx] : assigned) {
      if (other == spec) {
        diags.error(file.loc(attr), llvm::Twine("attribute '") + spec->name +
                                        "' is given twice");
        return std::nullopt;
      }
    }
    assigned.push_back({spec, attr});
  }

  for (const AttrSpec &spec : info.attrs) {
    if (spec.kind == AttrKind::IntList) {
      if (&spec != listSpec) {
        diags.error(file.loc(opToken), "'" + info.name + "' needs attribute '" +
                                           spec.name + "'");
        return std::nullopt;
      }
      llvm::SmallVector<Expr, 4> values;
      for (auto *item : listItems) {
        auto *itemExpr = dynamic_cast<STGParser::ExprAttrContext *>(item);
        auto value = itemExpr ? buildExpr(itemExpr->expr(), file) : std::nullopt;
        if (!value || !getIntegerValue(*value)) {
          if (itemExpr && !value)
            return std::nullopt;
          diags.error(file.loc(item), llvm::Twine("attribute '") + spec.name +
                                          "' of '" + info.name +
                                          "' must list integers");
          return std::nullopt;
        }
        values.push_back(*value);
      }
      result.push_back({spec.name, Attribute::getList(std::move(values))});
      continue;
    }
    auto it = llvm::find_if(assigned,
                            [&](const auto &entry) { return entry.first == &spec; });
    if (it == assigned.end()) {
      if (!spec.defaultValue) {
        diags.error(file.loc(opToken), "'" + info.name + "' needs attribute '" +
                                           spec.name + "'");
        return std::nullopt;
      }
      result.push_back({spec.name, buildDefault(spec)});
      continue;
    }
    auto value = buildAttrValue(info, spec, it->second->attrValue(), file);
    if (!value)
      return std::nullopt;
    result.push_back({spec.name, std::move(*value)});
  }
  return result;
}
