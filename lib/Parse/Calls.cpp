//===- Calls.cpp - Names, op calls and builtin ops ------------------------===//
//
// A value is a name or a call; a call reaches a builtin op or a block (a
// block may wrap the builtin of its name). Builtin calls are checked here
// against the op's operand count and attribute schema, with the rules the
// schema cannot say (attention's mask and window). Block calls go on to
// BlockInlining.cpp. Kept apart from the statements so that each file reads
// as one step of the front end.
//
//===----------------------------------------------------------------------===//

#include "GraphBuilder.h"

#include "stg/Support/LogicalResult.h"

#include "llvm/ADT/STLExtras.h"

using namespace stg;

//===----------------------------------------------------------------------===//
// Values and calls
//===----------------------------------------------------------------------===//

std::optional<GraphBuilder::Values>
GraphBuilder::buildValue(STGParser::ValueContext *ctx, Scope &scope,
                         llvm::ArrayRef<Target> targets) {
  const SourceFile &file = *scope.file;
  if (auto *call = dynamic_cast<STGParser::CallAttrValueContext *>(ctx))
    return buildCall(call->ID(), call->attrList(), true, call->value(), scope,
                     targets);
  if (auto *call = dynamic_cast<STGParser::CallValueContext *>(ctx))
    return buildCall(call->ID(), nullptr, false, call->value(), scope, targets);

  auto *nameCtx = static_cast<STGParser::NameValueContext *>(ctx);
  std::string name = nameCtx->ID()->getText();
  SourceLoc loc = file.loc(nameCtx->ID());
  Binding *binding = lookup(scope, name);
  if (!binding) {
    if (module.lookupDim(name))
      diags.error(loc, "'" + name + "' is a dim, not a tensor");
    else if (module.lookupAxis(name))
      diags.error(loc, "'" + name + "' is an axis, not a tensor");
    else if (blocks.count(name))
      diags.error(loc,
                  "'" + name + "' is a block; call it as " + name + "(...)");
    else if (lookupOpKind(name))
      diags.error(loc, "'" + name + "' is an op; call it as " + name + "(...)");
    else
      diags.error(loc, "unknown name '" + name + "'");
    return std::nullopt;
  }
  if (!binding->value)
    return std::nullopt;
  if (targets.size() > 1) {
    diags.error(targets[1].loc, "a tensor name defines one value, but " +
                                    llvm::Twine(targets.size()) +
                                    " names are assigned");
    return std::nullopt;
  }
  Value *value = binding->value;
  // `y: T = x;` states the layout y has: a layout op if x differs.
  if (!targets.empty() && targets[0].type)
    value = convertLayout(value, *targets[0].type,
                          scope.prefix + targets[0].name, targets[0].loc,
                          *scope.graph);
  return Values{value};
}

std::optional<GraphBuilder::Values>
GraphBuilder::buildCall(antlr4::tree::TerminalNode *callee,
                        STGParser::AttrListContext *attrs, bool hasBrackets,
                        std::vector<STGParser::ValueContext *> args,
                        Scope &scope, llvm::ArrayRef<Target> targets) {
  const SourceFile &file = *scope.file;
  std::string name = callee->getText();
  SourceLoc loc = file.loc(callee);
  // A block may wrap the builtin of the same name (`block embedding(ids)`
  // calling `embedding(ids, table)`): inside that block the name is the
  // builtin, everywhere else the block.
  std::optional<OpKind> kind = lookupOpKind(name);
  auto block = blocks.find(name);
  if (kind && block != blocks.end() && !llvm::is_contained(activeBlocks, name))
    kind = std::nullopt;
  if (!kind && block == blocks.end()) {
    if (lookup(scope, name))
      diags.error(loc, "'" + name + "' is a tensor, not an op or block");
    else
      diags.error(loc, "unknown op or block '" + name + "'");
    return std::nullopt;
  }

  // Operands first: nested calls are built before the op that uses them.
  llvm::SmallVector<Value *, 4> operands;
  bool failed = false;
  for (STGParser::ValueContext *arg : args) {
    auto values = buildValue(arg, scope, {});
    if (!values) {
      failed = true;
      continue;
    }
    operands.push_back(values->front());
  }
  if (failed)
    return std::nullopt;

  if (kind)
    return buildBuiltin(*kind, callee->getSymbol(), attrs, operands, scope,
                        targets);

  if (hasBrackets && !block->second.ctx->blockAttrParam().size()) {
    diags.error(loc, "block '" + name + "' takes no attributes");
    return std::nullopt;
  }
  if (targets.size() > 1) {
    diags.error(targets[1].loc, "block '" + name + "' returns one value, but " +
                                    llvm::Twine(targets.size()) +
                                    " names are assigned");
    return std::nullopt;
  }
  Value *result =
      instantiateBlock(name, block->second, operands, attrs, loc, scope);
  if (!result)
    return std::nullopt;
  if (!targets.empty() && targets[0].type)
    result = convertLayout(result, *targets[0].type,
                           scope.prefix + targets[0].name, targets[0].loc,
                           *scope.graph);
  return Values{result};
}

/// What attention's attribute schema cannot say: a sliding or chunked mask
/// needs a window (the chunk size for chunked), a positive integer or an
/// expression over dims (not axis degrees: the window is a model size, and
/// the decode cache is sized from it), and no other mask takes one; a soft cap is a non-negative number (the cost
/// only asks whether capping is on, so a symbolic cap would be ambiguous).
static LogicalResult checkAttentionAttrs(llvm::ArrayRef<NamedAttribute> attrs,
                                         const Module &module, SourceLoc loc,
                                         DiagnosticEngine &diags) {
  auto find = [&](llvm::StringRef name) -> const Attribute & {
    for (const NamedAttribute &attr : attrs)
      if (attr.name == name)
        return attr.value;
    llvm_unreachable("the schema has every attention attribute");
  };
  const std::string &mask = find("mask").text;
  bool sliding = mask == "sliding" || mask == "chunked";
  const Expr &window = find("window").expr;
  ExprPrinter printer = module.getPrinter();
  if (!sliding && !window.is_zero()) {
    diags.error(loc, "attention window=" + printer.str(window) +
                         " needs mask=sliding or mask=chunked; the mask is '" +
                         find("mask").text + "'");
    return failure();
  }
  if (sliding) {
    for (const std::string &name : getSymbolNames(window))
      if (module.lookupAxis(name)) {
        diags.error(loc, "attention window=" + printer.str(window) +
                             " uses the axis degree '" + name +
                             "'; a window is an expression over dims");
        return failure();
      }
    bool isNumber = GiNaC::is_a<GiNaC::numeric>(window);
    std::optional<long long> positions = getIntegerValue(window);
    if (window.is_zero() || (isNumber && (!positions || *positions < 1))) {
      diags.error(loc,
                  "attention[mask=" + mask + "] needs window=W, " +
                      (mask == "sliding"
                           ? "the number of positions a query sees (itself "
                             "included)"
                           : "the chunk size") +
                      ": a positive integer or an expression over dims" +
                      (window.is_zero() ? std::string()
                                        : "; found " + printer.str(window)));
      return failure();
    }
  }
  const Expr &cache = find("cache").expr;
  for (const std::string &name : getSymbolNames(cache))
    if (module.lookupAxis(name)) {
      diags.error(loc, "attention cache=" + printer.str(cache) +
                           " uses the axis degree '" + name +
                           "'; the channels a position caches are an "
                           "expression over dims");
      return failure();
    }
  if (GiNaC::is_a<GiNaC::numeric>(cache) &&
      (!getIntegerValue(cache) || *getIntegerValue(cache) < 0)) {
    diags.error(loc, "attention cache=" + printer.str(cache) +
                         " must be the channels a position caches, a "
                         "non-negative integer or an expression over dims "
                         "(0: the keys and values)");
    return failure();
  }
  const Expr &cap = find("softcap").expr;
  if (!GiNaC::is_a<GiNaC::numeric>(cap) ||
      GiNaC::ex_to<GiNaC::numeric>(cap).is_negative()) {
    diags.error(loc, "attention softcap=" + printer.str(cap) +
                         " must be a non-negative number, the cap of the "
                         "logits (0: no capping)");
    return failure();
  }
  return success();
}

static std::string describeArity(const OpInfo &info) {
  if (info.minOperands == info.maxOperands)
    return std::to_string(info.minOperands) +
           (info.minOperands == 1 ? " operand" : " operands");
  if (info.maxOperands < 0)
    return "at least " + std::to_string(info.minOperands) +
           (info.minOperands == 1 ? " operand" : " operands");
  return std::to_string(info.minOperands) + " to " +
         std::to_string(info.maxOperands) + " operands";
}

std::optional<GraphBuilder::Values>
GraphBuilder::buildBuiltin(OpKind kind, antlr4::Token *opToken,
                           STGParser::AttrListContext *attrCtx,
                           llvm::ArrayRef<Value *> operands, Scope &scope,
                           llvm::ArrayRef<Target> targets) {
  const SourceFile &file = *scope.file;
  const OpInfo &info = getOpInfo(kind);
  SourceLoc loc = file.loc(opToken);
  if (!info.acceptsOperandCount(operands.size())) {
    diags.error(loc, "'" + info.name + "' takes " + describeArity(info) +
                         ", found " + llvm::Twine(operands.size()));
    return std::nullopt;
  }
  auto attrs = exprs.buildAttrs(info, attrCtx, opToken, operands.size(), file);
  if (!attrs)
    return std::nullopt;
  if (kind == OpKind::Attention &&
      failed(checkAttentionAttrs(*attrs, module, loc, diags)))
    return std::nullopt;

  unsigned numResults = 1;
  if (kind == OpKind::Split) {
    long long parts = *getIntegerValue(attrs->back().value.expr);
    if (parts < 1 || parts > 64) {
      diags.error(loc, "'split' needs between 1 and 64 parts");
      return std::nullopt;
    }
    numResults = unsigned(parts);
    if (targets.size() != numResults) {
      diags.error(targets.empty() ? loc : targets.front().loc,
                  "'split' into " + llvm::Twine(numResults) +
                      " parts defines " + llvm::Twine(numResults) +
                      " values; assign them as a, b, ... = split[...](x)");
      return std::nullopt;
    }
  } else if (targets.size() > 1) {
    diags.error(targets[1].loc, "'" + info.name + "' defines one value, but " +
                                    llvm::Twine(targets.size()) +
                                    " names are assigned");
    return std::nullopt;
  }
  if (info.has(NeedsType)) {
    bool typed = !targets.empty() &&
                 llvm::all_of(targets, [](const Target &t) { return t.type; });
    if (!typed) {
      diags.error(loc, "'" + info.name + "' needs a result type: write "
                       "'name: [...] = " + info.name + "(...)'");
      return std::nullopt;
    }
  }

  Op *op = scope.graph->createOp(kind, loc);
  for (Value *operand : operands)
    op->addOperand(operand);
  for (NamedAttribute &attr : *attrs)
    op->setAttr(attr.name, std::move(attr.value));
  Values results;
  for (unsigned i = 0; i < numResults; ++i) {
    std::string base = targets.empty() ? info.name.str() : targets[i].name;
    Value *result =
        scope.graph->createResult(op, module.makeUniqueName(scope.prefix + base));
    if (!targets.empty() && targets[i].type) {
      result->setType(*targets[i].type);
      result->setAnnotated(true);
    }
    results.push_back(result);
  }
  return results;
}
