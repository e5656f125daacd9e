//===- BlockInlining.cpp - Block calls copied into their caller -----------===//
//
// A block call builds the block's body again in a fresh scope whose prefix
// names every value hierarchically (`layer.decoder.swiglu_1.u`); typed
// parameters and the result become `layout` ops where the value's type
// differs. A block nothing calls is built once into a scratch graph, so its
// errors are found too. Kept apart from the calls of builtin ops because
// what a block call checks (recursion, arguments, a library block's missing
// dims) is its own.
//
//===----------------------------------------------------------------------===//

#include "GraphBuilder.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Path.h"

using namespace stg;

//===----------------------------------------------------------------------===//
// Inlining
//===----------------------------------------------------------------------===//

Value *GraphBuilder::instantiateBlock(llvm::StringRef name, BlockDecl &decl,
                                      llvm::ArrayRef<Value *> args,
                                      STGParser::AttrListContext *attrs,
                                      SourceLoc callLoc, Scope &caller) {
  const SourceFile &file = *decl.file;
  if (llvm::is_contained(activeBlocks, name)) {
    diags.error(callLoc, "block '" + name + "' instantiates itself");
    diags.note(file.loc(decl.ctx->ID()), "block '" + name + "' is declared here");
    return nullptr;
  }
  auto params = decl.ctx->blockParam();
  if (args.size() != params.size()) {
    diags.error(callLoc, "block '" + name + "' takes " +
                             llvm::Twine(params.size()) +
                             (params.size() == 1 ? " argument" : " arguments") +
                             ", found " + llvm::Twine(args.size()));
    diags.note(file.loc(decl.ctx->ID()), "block '" + name + "' is declared here");
    return nullptr;
  }
  if (decl.imported && !decl.missingNames.empty()) {
    if (!decl.missingReported) {
      decl.missingReported = true;
      SourceLoc declared = file.loc(decl.ctx->ID());
      diags.error(callLoc,
                  "block '" + name + "' (" +
                      llvm::sys::path::filename(declared.file) + ":" +
                      llvm::Twine(declared.line) + ") uses " +
                      llvm::join(decl.missingNames, ", ") +
                      ", which this model does not declare: declare each "
                      "as a dim (`dim " + decl.missingNames.front() +
                      " = ...;`) or an axis before the model");
    }
    return nullptr;
  }
  if (!decl.signatureValid)
    return nullptr;
  // The caller's attribute parameters are in force until the body starts.
  std::optional<BlockAttrScope> attrValues =
      bindBlockAttrs(name, decl.attrParams, attrs, callLoc, *caller.file,
                     module, exprs, diags);
  if (!attrValues)
    return nullptr;
  if (!chargeOps(chargedDepth ? 0 : countBlockOps(name, decl, activeBlocks),
                 callLoc, "calling block '" + name + "' here",
                 "a block that calls another n times has n times its ops"))
    return nullptr;
  decl.instantiated = true;

  unsigned instance = caller.instances[name]++;
  Scope scope;
  scope.prefix = caller.prefix + name.str();
  if (instance)
    scope.prefix += ("_" + llvm::Twine(instance)).str();
  scope.prefix += '.';
  scope.graph = caller.graph;
  scope.file = &file;
  scope.allowsReturn = true;
  for (unsigned i = 0; i < params.size(); ++i) {
    Value *arg = args[i];
    if (decl.paramTypes[i])
      arg = convertLayout(arg, *decl.paramTypes[i],
                          scope.prefix + params[i]->ID()->getText(), callLoc,
                          *scope.graph);
    bind(scope, params[i]->ID()->getText(), arg, file.loc(params[i]->ID()));
  }

  activeBlocks.push_back(name.str());
  const BlockAttrScope *callerAttrs = exprs.setBlockAttrs(&*attrValues);
  ++chargedDepth;
  buildBody(decl.ctx->body(), scope);
  --chargedDepth;
  exprs.setBlockAttrs(callerAttrs);
  activeBlocks.pop_back();
  if (budgetExceeded)
    return nullptr;

  if (!scope.returned) {
    diags.error(callLoc, "block '" + name + "' returns no value");
    diags.note(file.loc(decl.ctx->ID()), "block '" + name + "' is declared here");
    return nullptr;
  }
  Value *result = *scope.returned;
  if (result && decl.resultType)
    result = convertLayout(result, *decl.resultType, scope.prefix + "out",
                           callLoc, *scope.graph);
  return result;
}

void GraphBuilder::checkUncalledBlock(llvm::StringRef name, BlockDecl &decl) {
  // After the budget error, the blocks it left uncalled are the ones too
  // large to build.
  if (!decl.signatureValid || budgetExceeded)
    return;
  // '<' cannot start an identifier, so these names never meet user names.
  Graph scratch("<check>");
  Scope scope;
  scope.prefix = "<check>." + name.str() + ".";
  scope.graph = &scratch;
  scope.file = decl.file;
  scope.allowsReturn = true;
  auto params = decl.ctx->blockParam();
  for (unsigned i = 0; i < params.size(); ++i) {
    SourceLoc loc = decl.file->loc(params[i]->ID());
    Op *input = scratch.createOp(OpKind::Input, loc);
    Value *arg = scratch.createResult(
        input, module.makeUniqueName(scope.prefix + params[i]->ID()->getText()));
    if (decl.paramTypes[i])
      arg->setType(*decl.paramTypes[i]);
    bind(scope, params[i]->ID()->getText(), arg, loc);
  }
  // A block without a result is legal on its own; only calls need one.
  // Its scratch graph is freed after, so it has a budget of its own.
  BlockAttrScope attrValues = defaultBlockAttrs(name, decl.attrParams);
  const BlockAttrScope *outerAttrs = exprs.setBlockAttrs(&attrValues);
  uint64_t modelOps = std::exchange(chargedOps, 0);
  activeBlocks.push_back(name.str());
  buildBody(decl.ctx->body(), scope);
  activeBlocks.pop_back();
  chargedOps = modelOps;
  exprs.setBlockAttrs(outerAttrs);
}
