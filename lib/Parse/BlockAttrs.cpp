//===- BlockAttrs.cpp - Attribute parameters of blocks --------------------===//
//
// Declaration: a parameter names a kind, a default, or both; the kind of a
// default alone is what it is written as (`true`, `"causal"`, `0`). A name
// may not be a dim, axis or option, so that a word in the body means one
// thing. A call gives values positionally or by name, as an op's attributes
// are; each is checked against the parameter's kind at the call, so that a
// wrong value is reported where it is written, not deep in the body.
//
//===----------------------------------------------------------------------===//

#include "BlockAttrs.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

using namespace stg;

/// The bare word an attribute value is, if it is one.
static antlr4::tree::TerminalNode *getWord(STGParser::AttrValueContext *ctx) {
  auto *exprCtx = dynamic_cast<STGParser::ExprAttrContext *>(ctx);
  auto *sym = exprCtx
                  ? dynamic_cast<STGParser::SymExprContext *>(exprCtx->expr())
                  : nullptr;
  return sym ? sym->ID() : nullptr;
}

static const char *describeKind(BlockAttrKind kind) {
  switch (kind) {
  case BlockAttrKind::Bool:
    return "true or false";
  case BlockAttrKind::String:
    return "a string (\"text\" or a word)";
  case BlockAttrKind::Expr:
    return "a number or an expression over dims";
  }
  llvm_unreachable("every kind is described");
}

/// Builds `ctx` as a value of `kind`; `where` names the parameter for
/// errors. A bare word naming one of the caller's attribute parameters
/// forwards its value.
static std::optional<BlockAttrValue>
buildValue(BlockAttrKind kind, STGParser::AttrValueContext *ctx,
           const SourceFile &file, const std::string &where, Module &module,
           ExprBuilder &exprs, DiagnosticEngine &diags) {
  BlockAttrValue value;
  value.kind = kind;
  antlr4::tree::TerminalNode *word = getWord(ctx);
  const BlockAttrScope *outer = exprs.getBlockAttrs();
  const BlockAttrValue *forwarded =
      word && outer ? outer->lookup(word->getText()) : nullptr;
  auto wrongKind = [&]() -> std::optional<BlockAttrValue> {
    std::string found = ctx->getText();
    if (!dynamic_cast<STGParser::StringAttrContext *>(ctx))
      found = "'" + found + "'";
    if (forwarded)
      found += ", an attribute parameter of kind " +
               std::string(getBlockAttrKindName(forwarded->kind)) +
               " of block '" + outer->block + "'";
    diags.error(file.loc(ctx),
                where + " takes " + describeKind(kind) + "; found " + found);
    return std::nullopt;
  };
  if (forwarded) {
    // The Expr case goes through buildExpr, which also reads the caller's.
    if (forwarded->kind != kind)
      return wrongKind();
    if (kind != BlockAttrKind::Expr)
      return *forwarded;
  }
  switch (kind) {
  case BlockAttrKind::Bool:
    if (!dynamic_cast<STGParser::BoolAttrContext *>(ctx))
      return wrongKind();
    value.flag = ctx->getText() == "true";
    return value;
  case BlockAttrKind::String:
    if (auto *string = dynamic_cast<STGParser::StringAttrContext *>(ctx)) {
      value.text = unquoteString(string->STRING()->getText());
      return value;
    }
    // A word, as an op's choice is written (`mask=sliding`), unless it
    // names a dim, axis or option: then it is a mistake, not a word.
    if (!word || module.lookupDim(word->getText()) ||
        module.lookupAxis(word->getText()) ||
        module.lookupOption(word->getText()))
      return wrongKind();
    value.text = word->getText();
    return value;
  case BlockAttrKind::Expr: {
    auto *exprCtx = dynamic_cast<STGParser::ExprAttrContext *>(ctx);
    if (!exprCtx)
      return wrongKind();
    std::optional<Expr> expr = exprs.buildExpr(exprCtx->expr(), file);
    if (!expr)
      return std::nullopt;
    value.expr = *expr;
    return value;
  }
  }
  llvm_unreachable("every kind is built");
}

bool stg::declareBlockAttrs(STGParser::BlockDeclContext *ctx,
                            const SourceFile &file, Module &module,
                            ExprBuilder &exprs, DiagnosticEngine &diags,
                            std::vector<BlockAttrParam> &params) {
  std::string block = ctx->ID()->getText();
  // Defaults are built outside any call: a bare name there is a dim.
  const BlockAttrScope *outer = exprs.setBlockAttrs(nullptr);
  bool ok = true;
  for (STGParser::BlockAttrParamContext *paramCtx : ctx->blockAttrParam()) {
    BlockAttrParam param;
    param.name = paramCtx->name->getText();
    param.loc = file.loc(paramCtx->name);
    auto fail = [&] { ok = false; };
    if (auto it = llvm::find_if(params,
                                [&](const BlockAttrParam &other) {
                                  return other.name == param.name;
                                });
        it != params.end()) {
      diags.error(param.loc,
                  "attribute parameter '" + param.name + "' is declared twice");
      diags.note(it->loc, "previous declaration is here");
      fail();
      continue;
    }
    for (STGParser::BlockParamContext *tensor : ctx->blockParam()) {
      if (tensor->ID()->getText() == param.name) {
        diags.error(param.loc, "'" + param.name +
                                   "' is both an attribute parameter and a "
                                   "tensor parameter of block '" +
                                   block + "'");
        fail();
      }
    }
    // A word in the body must mean one thing.
    SourceLoc shadowed;
    const char *what = nullptr;
    if (const Dim *dim = module.lookupDim(param.name))
      shadowed = dim->loc, what = "dim";
    else if (const Axis *axis = module.lookupAxis(param.name))
      shadowed = axis->loc, what = "axis";
    else if (const Option *option = module.lookupOption(param.name))
      shadowed = option->loc, what = "option";
    if (what) {
      diags.error(param.loc, "attribute parameter '" + param.name +
                                 "' of block '" + block + "' shadows the " +
                                 what + " '" + param.name +
                                 "'; give it another name");
      diags.note(shadowed, llvm::Twine("the ") + what + " is declared here");
      fail();
    }

    std::optional<BlockAttrKind> kind;
    if (paramCtx->kind) {
      std::string name = paramCtx->kind->getText();
      if (name == "bool")
        kind = BlockAttrKind::Bool;
      else if (name == "string")
        kind = BlockAttrKind::String;
      else if (name == "expr")
        kind = BlockAttrKind::Expr;
      else {
        diags.error(file.loc(paramCtx->kind),
                    "unknown kind '" + name +
                        "' of an attribute parameter: bool, string or expr");
        fail();
        continue;
      }
    }
    STGParser::AttrValueContext *defaultCtx = paramCtx->attrValue();
    if (!kind && !defaultCtx) {
      diags.error(param.loc, "attribute parameter '" + param.name +
                                 "' needs a kind or a default: '" + param.name +
                                 ": expr' (every call gives it) or '" +
                                 param.name + " = 0'");
      fail();
      continue;
    }
    if (!kind) {
      if (dynamic_cast<STGParser::BoolAttrContext *>(defaultCtx))
        kind = BlockAttrKind::Bool;
      else if (dynamic_cast<STGParser::StringAttrContext *>(defaultCtx))
        kind = BlockAttrKind::String;
      else if (dynamic_cast<STGParser::ExprAttrContext *>(defaultCtx))
        kind = BlockAttrKind::Expr;
      else {
        diags.error(file.loc(defaultCtx),
                    "the default of attribute parameter '" + param.name +
                        "' must be true or false, a string or an "
                        "expression over dims");
        fail();
        continue;
      }
    }
    param.kind = *kind;
    if (defaultCtx) {
      std::string where = "attribute parameter '" + param.name +
                          "' of block '" + block + "' (kind " +
                          getBlockAttrKindName(*kind) + ")";
      param.defaultValue =
          buildValue(*kind, defaultCtx, file, where, module, exprs, diags);
      if (!param.defaultValue) {
        fail();
        continue;
      }
    }
    params.push_back(std::move(param));
  }
  exprs.setBlockAttrs(outer);
  return ok;
}

std::optional<BlockAttrScope>
stg::bindBlockAttrs(llvm::StringRef block,
                    llvm::ArrayRef<BlockAttrParam> params,
                    STGParser::AttrListContext *attrs, SourceLoc callLoc,
                    const SourceFile &callerFile, Module &module,
                    ExprBuilder &exprs, DiagnosticEngine &diags) {
  const SourceFile &file = callerFile;
  if (attrs && attrs->einsumSpec()) {
    diags.error(file.loc(attrs),
                "block '" + block + "' does not take an einsum spec");
    return std::nullopt;
  }
  std::string known;
  for (const BlockAttrParam &param : params)
    known += (known.empty() ? "" : ", ") + param.name;

  // Each written attribute to its parameter, as an op's are to its schema.
  llvm::SmallVector<STGParser::AttrContext *, 4> given(params.size(), nullptr);
  bool seenNamed = false;
  unsigned position = 0;
  auto written =
      attrs ? attrs->attr() : std::vector<STGParser::AttrContext *>();
  for (STGParser::AttrContext *attr : written) {
    unsigned index;
    if (attr->anyName()) {
      seenNamed = true;
      std::string name = attr->anyName()->getText();
      auto it = llvm::find_if(params, [&](const BlockAttrParam &param) {
        return param.name == name;
      });
      if (it == params.end()) {
        diags.error(file.loc(attr->anyName()),
                    "block '" + block + "' has no attribute '" + name +
                        "'; it takes " + known);
        return std::nullopt;
      }
      index = it - params.begin();
    } else {
      if (seenNamed) {
        diags.error(file.loc(attr), "positional attribute after a named one");
        return std::nullopt;
      }
      if (position >= params.size()) {
        diags.error(file.loc(attr),
                    "block '" + block + "' takes " +
                        llvm::Twine(params.size()) +
                        (params.size() == 1 ? " attribute" : " attributes") +
                        " (" + known + "), this is one too many");
        return std::nullopt;
      }
      index = position++;
    }
    if (given[index]) {
      diags.error(file.loc(attr),
                  "attribute '" + params[index].name + "' is given twice");
      return std::nullopt;
    }
    given[index] = attr;
  }

  BlockAttrScope scope;
  scope.block = block.str();
  scope.callLoc = callLoc;
  for (unsigned i = 0; i < params.size(); ++i) {
    const BlockAttrParam &param = params[i];
    if (!given[i]) {
      if (!param.defaultValue) {
        diags.error(callLoc, "block '" + block + "' needs attribute '" +
                                 param.name + "' (" +
                                 getBlockAttrKindName(param.kind) +
                                 ", without a default)");
        diags.note(param.loc, "'" + param.name + "' is declared here");
        return std::nullopt;
      }
      scope.values[param.name] = *param.defaultValue;
      continue;
    }
    std::string where =
        "attribute '" + param.name + "' of block '" + block.str() + "'";
    auto value = buildValue(param.kind, given[i]->attrValue(), file, where,
                            module, exprs, diags);
    if (!value)
      return std::nullopt;
    scope.values[param.name] = std::move(*value);
  }
  return scope;
}

BlockAttrScope stg::defaultBlockAttrs(llvm::StringRef block,
                                      llvm::ArrayRef<BlockAttrParam> params) {
  BlockAttrScope scope;
  scope.block = block.str();
  for (const BlockAttrParam &param : params) {
    if (param.defaultValue) {
      scope.values[param.name] = *param.defaultValue;
      continue;
    }
    BlockAttrValue &value = scope.values[param.name];
    value.kind = param.kind;
    value.standIn = true;
    // '<' cannot start a name: the symbol never meets a dim.
    if (param.kind == BlockAttrKind::Expr)
      value.expr = GiNaC::symbol("<" + param.name + ">");
  }
  return scope;
}
