//===- Parser.cpp - STG source files to STG IR ----------------------------===//
//
// Builds a Module in two phases. First every file is read in import order
// (depth first, each file once, cycles reported) and its top-level
// declarations are recorded: dims, axes, options, `set` statements, blocks
// and the model. Then the command-line overrides are applied, conditional
// axis aliases are resolved against the final option values, block
// signatures are checked, and the model is built with blocks inlined. Blocks
// the model never calls are built once on their own so that their errors are
// found too.
//
//===----------------------------------------------------------------------===//

#include "stg/Parse/Parser.h"
#include "GraphBuilder.h"
#include "SourceFile.h"

#include "stg/IR/Precision.h"
#include "stg/IR/Verifier.h"
#include "stg/Support/InputFile.h"

#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"

using namespace stg;

namespace {

class ModuleBuilder {
public:
  ModuleBuilder(const ParseOptions &options, DiagnosticEngine &diags)
      : options(options), diags(diags), module(std::make_unique<Module>()),
        exprs(*module, diags) {
    if (options.elementType)
      module->setElementTypeOverride(*options.elementType);
  }

  std::unique_ptr<Module> build(llvm::StringRef text, llvm::StringRef path);

private:
  void loadAndProcess(llvm::StringRef text, llvm::StringRef path,
                      llvm::StringRef canonical);
  void processFile(const SourceFile &file);
  void processImport(STGParser::ImportDeclContext *ctx, const SourceFile &file);
  void declareDims(STGParser::DimDeclContext *ctx, const SourceFile &file);
  void declareAxes(STGParser::AxisDeclContext *ctx, const SourceFile &file);
  void declareOptions(STGParser::OptionDeclContext *ctx,
                      const SourceFile &file);
  void applySet(STGParser::SetItemContext *ctx, const SourceFile &file);
  void declareBlock(STGParser::BlockDeclContext *ctx, const SourceFile &file);
  void declareModel(STGParser::ModelDeclContext *ctx, const SourceFile &file);

  void applyOverrides();
  void resolveAxes();
  void findMissingNames();
  void collectMissingNames(antlr4::tree::ParseTree *tree,
                           llvm::StringSet<> &names,
                           llvm::StringSet<> &visiting);
  void checkBlockSignatures();

  /// Reports if `name` already names a dim, axis or option.
  bool isFreshName(llvm::StringRef name, SourceLoc loc);
  std::optional<Option::Value> buildLiteral(STGParser::LiteralContext *ctx,
                                            const SourceFile &file);

  const ParseOptions &options;
  DiagnosticEngine &diags;
  std::unique_ptr<Module> module;
  ExprBuilder exprs;
  std::vector<std::unique_ptr<SourceFile>> files;
  llvm::StringSet<> loaded;
  std::vector<std::string> importStack;
  llvm::StringMap<BlockDecl> blocks;
  std::vector<std::string> blockOrder;
  /// The attribute parameters of the block collectMissingNames is in.
  llvm::StringSet<> attrParams;
  STGParser::ModelDeclContext *modelCtx = nullptr;
  const SourceFile *modelFile = nullptr;
};


std::string canonicalPath(llvm::StringRef path) {
  llvm::SmallString<256> real;
  if (llvm::sys::fs::real_path(path, real))
    return path.str();
  return std::string(real);
}

} // namespace

//===----------------------------------------------------------------------===//
// Files and imports
//===----------------------------------------------------------------------===//

std::unique_ptr<Module> ModuleBuilder::build(llvm::StringRef text,
                                             llvm::StringRef path) {
  loadAndProcess(text, path, canonicalPath(path));
  applyOverrides();
  resolveAxes();
  findMissingNames();
  checkBlockSignatures();

  GraphBuilder graphs(*module, diags, exprs, blocks);
  if (modelCtx)
    graphs.buildModel(modelCtx, *modelFile);
  for (const std::string &name : blockOrder) {
    BlockDecl &decl = blocks[name];
    // A library block that uses names this model lacks is meant for
    // another model: checked only where called.
    bool foreign = decl.imported && !decl.missingNames.empty();
    if (!decl.instantiated && !foreign && !diags.reachedErrorLimit())
      graphs.checkUncalledBlock(name, decl);
  }
  if (diags.hasErrors()) {
    // The builders stop at the error limit rather than report one error
    // more, and only that one would print the engine's "too many errors"
    // line; without it the output looks complete.
    if (diags.reachedErrorLimit())
      diags.error({}, "too many errors");
    return nullptr;
  }
  if (failed(verifyModule(*module, diags)))
    return nullptr;
  return std::move(module);
}

void ModuleBuilder::loadAndProcess(llvm::StringRef text, llvm::StringRef path,
                                   llvm::StringRef canonical) {
  loaded.insert(canonical);
  auto file = SourceFile::parse(text, path, diags);
  if (!file)
    return;
  files.push_back(std::move(file));
  importStack.push_back(canonical.str());
  processFile(*files.back());
  importStack.pop_back();
}

void ModuleBuilder::processFile(const SourceFile &file) {
  for (STGParser::TopStmtContext *stmt : file.getTree()->topStmt()) {
    if (diags.reachedErrorLimit())
      return;
    if (auto *ctx = stmt->importDecl())
      processImport(ctx, file);
    else if (auto *ctx = stmt->dimDecl())
      declareDims(ctx, file);
    else if (auto *ctx = stmt->axisDecl())
      declareAxes(ctx, file);
    else if (auto *ctx = stmt->optionDecl())
      declareOptions(ctx, file);
    else if (auto *ctx = stmt->setDecl())
      for (auto *item : ctx->setItem())
        applySet(item, file);
    else if (auto *ctx = stmt->blockDecl())
      declareBlock(ctx, file);
    else if (auto *ctx = stmt->modelDecl())
      declareModel(ctx, file);
  }
}

void ModuleBuilder::processImport(STGParser::ImportDeclContext *ctx,
                                  const SourceFile &file) {
  std::string name = unquoteString(ctx->STRING()->getText());
  SourceLoc loc = file.loc(ctx->STRING());
  if (name.empty()) {
    diags.error(loc, "empty import path");
    return;
  }

  // The importing file's directory, then -I, then the templates.
  std::vector<std::string> searchDirs;
  llvm::StringRef ownDir = llvm::sys::path::parent_path(file.getPath());
  searchDirs.push_back(ownDir.empty() ? "." : ownDir.str());
  searchDirs.insert(searchDirs.end(), options.includeDirs.begin(),
                    options.includeDirs.end());
  searchDirs.insert(searchDirs.end(), options.templateDirs.begin(),
                    options.templateDirs.end());

  std::string found;
  if (llvm::sys::path::is_absolute(name)) {
    if (llvm::sys::fs::is_regular_file(name))
      found = name;
  } else {
    for (const std::string &dir : searchDirs) {
      llvm::SmallString<256> candidate(dir);
      llvm::sys::path::append(candidate, name);
      llvm::sys::path::remove_dots(candidate, /*remove_dot_dot=*/true);
      if (llvm::sys::fs::is_regular_file(candidate)) {
        found = std::string(candidate);
        break;
      }
    }
  }
  if (found.empty()) {
    std::string searched;
    for (const std::string &dir : searchDirs)
      searched += (searched.empty() ? "" : ", ") + dir;
    diags.error(loc, "cannot find import '" + name + "' (searched: " +
                         searched + ")");
    return;
  }

  std::string canonical = canonicalPath(found);
  auto onStack = llvm::find(importStack, canonical);
  if (onStack != importStack.end()) {
    std::string cycle;
    for (auto it = onStack; it != importStack.end(); ++it)
      cycle += llvm::sys::path::filename(*it).str() + " -> ";
    cycle += llvm::sys::path::filename(canonical).str();
    diags.error(loc, "import cycle: " + cycle);
    return;
  }
  if (loaded.count(canonical))
    return; // Imported before through another path: declarations exist.

  auto buffer = readInputFile(found, MaxSourceBytes, "model source");
  if (!buffer) {
    diags.error(loc, "cannot read import: " +
                         llvm::toString(buffer.takeError()));
    return;
  }
  loadAndProcess((*buffer)->getBuffer(), found, canonical);
}

//===----------------------------------------------------------------------===//
// Declarations
//===----------------------------------------------------------------------===//

bool ModuleBuilder::isFreshName(llvm::StringRef name, SourceLoc loc) {
  SourceLoc previous;
  const char *what = nullptr;
  if (Dim *dim = module->lookupDim(name))
    previous = dim->loc, what = "dim";
  else if (Axis *axis = module->lookupAxis(name))
    previous = axis->loc, what = "axis";
  else if (Option *option = module->lookupOption(name))
    previous = option->loc, what = "option";
  if (!what)
    return true;
  diags.error(loc, "'" + name + "' is already declared as " +
                       (llvm::StringRef(what) == "dim" ? "a " : "an ") +
                       what);
  diags.note(previous, "previous declaration is here");
  return false;
}

void ModuleBuilder::declareDims(STGParser::DimDeclContext *ctx,
                                const SourceFile &file) {
  for (auto *item : ctx->dimItem()) {
    std::string name = item->ID()->getText();
    SourceLoc loc = file.loc(item->ID());
    // A default that fails to build is reported; the dim is still declared
    // so that its uses do not each report it unknown.
    std::optional<Expr> value;
    if (item->expr())
      value = exprs.buildExpr(item->expr(), file);
    if (!isFreshName(name, loc))
      continue;
    module->addDim(name, loc)->value = value;
  }
}

void ModuleBuilder::declareAxes(STGParser::AxisDeclContext *ctx,
                                const SourceFile &file) {
  for (auto *item : ctx->axisItem()) {
    std::string name = item->name->getText();
    SourceLoc loc = file.loc(item->name);
    const Axis *alias = nullptr;
    // An unknown alias target is reported; the axis is still declared (as a
    // plain axis) so that its uses do not each report it unknown.
    if (item->alias) {
      alias = module->lookupAxis(item->alias->getText());
      if (!alias)
        diags.error(file.loc(item->alias),
                    "unknown axis '" + item->alias->getText() + "'");
    }
    if (!isFreshName(name, loc))
      continue;
    Axis *axis = module->addAxis(name, loc);
    axis->alias = alias;
    if (item->cond) {
      axis->condition = item->cond->getText();
      axis->conditionLoc = file.loc(item->cond);
      axis->negated = item->neg != nullptr;
    }
  }
}

std::optional<Option::Value>
ModuleBuilder::buildLiteral(STGParser::LiteralContext *ctx,
                            const SourceFile &file) {
  std::string text = ctx->getText();
  if (text == "true" || text == "false")
    return Option::Value(text == "true");
  if (ctx->STRING())
    return Option::Value(unquoteString(text));
  auto number = parseDecimal(text);
  if (!number) {
    diags.error(file.loc(ctx), "number '" + text + "' is out of range");
    return std::nullopt;
  }
  return Option::Value(*number);
}

void ModuleBuilder::declareOptions(STGParser::OptionDeclContext *ctx,
                                   const SourceFile &file) {
  for (auto *item : ctx->optionItem()) {
    std::string name = item->ID()->getText();
    SourceLoc loc = file.loc(item->ID());
    auto value = buildLiteral(item->literal(), file);
    if (!value || !isFreshName(name, loc))
      continue;
    if (name == "dtype") {
      auto *text = std::get_if<std::string>(&*value);
      if (!text || !parseElementType(*text)) {
        diags.error(file.loc(item->literal()),
                    "option 'dtype' must be an element type name such as "
                    "\"bf16\" or \"fp32\"");
        continue;
      }
    }
    module->addOption(name, *value, loc);
  }
}

static const char *describeOptionKind(const Option::Value &value) {
  if (std::holds_alternative<bool>(value))
    return "true or false";
  if (std::holds_alternative<Expr>(value))
    return "a number";
  return "a string";
}

/// True if `e` mentions `dim`, directly or through the values of other dims.
/// Values only ever refer to dims declared before them, and every `set` is
/// checked here, so the dims' values never form a cycle and this terminates.
static bool dependsOn(const Expr &e, const Dim &dim, Module &module) {
  if (e.has(dim.symbol))
    return true;
  for (const auto &other : module.getDims())
    if (other->value && e.has(other->symbol) &&
        dependsOn(*other->value, dim, module))
      return true;
  return false;
}

void ModuleBuilder::applySet(STGParser::SetItemContext *ctx,
                             const SourceFile &file) {
  std::string name = ctx->ID()->getText();
  SourceLoc loc = file.loc(ctx->ID());
  std::optional<Option::Value> value;
  if (ctx->literal())
    value = buildLiteral(ctx->literal(), file);
  else if (auto expr = exprs.buildExpr(ctx->expr(), file))
    value = Option::Value(*expr);
  if (!value)
    return;
  if (Dim *dim = module->lookupDim(name)) {
    if (!std::holds_alternative<Expr>(*value)) {
      diags.error(file.loc(ctx->literal()),
                  "dim '" + name + "' takes a number or an expression");
      return;
    }
    // Values are symbolic: `set S = 2 * S` would define S by itself, not
    // double its old value.
    if (dependsOn(std::get<Expr>(*value), *dim, *module)) {
      diags.error(file.loc(ctx->expr()), "dim '" + name +
                                             "' cannot be set in terms of "
                                             "itself");
      return;
    }
    dim->value = std::get<Expr>(*value);
    return;
  }
  if (Option *option = module->lookupOption(name)) {
    if (option->value.index() != value->index()) {
      // At the value, as for a dim: the value is what is wrong.
      diags.error(ctx->literal() ? file.loc(ctx->literal())
                                 : file.loc(ctx->expr()),
                  "option '" + name + "' takes " +
                      describeOptionKind(option->value));
      return;
    }
    option->value = *value;
    return;
  }
  diags.error(loc, "cannot set '" + name + "': no dim or option has that name");
}

void ModuleBuilder::declareBlock(STGParser::BlockDeclContext *ctx,
                                 const SourceFile &file) {
  std::string name = ctx->ID()->getText();
  SourceLoc loc = file.loc(ctx->ID());
  if (ctx->over) {
    auto it = blocks.find(name);
    if (it == blocks.end()) {
      diags.error(file.loc(ctx->over),
                  "'override block " + name + "' replaces nothing: no block '" +
                      name + "' is declared before it; remove 'override' to "
                      "declare one");
      return;
    }
    // Every caller, in any file, gets the new body.
    it->second = BlockDecl();
    it->second.ctx = ctx;
    it->second.file = &file;
    return;
  }
  auto [it, inserted] = blocks.try_emplace(name);
  if (!inserted) {
    diags.error(loc, "block '" + name + "' is already declared; to replace "
                     "it, write 'override block " + name + "'");
    diags.note(it->second.file->loc(it->second.ctx->ID()),
               "previous declaration is here");
    return;
  }
  it->second.ctx = ctx;
  it->second.file = &file;
  blockOrder.push_back(name);
}

void ModuleBuilder::declareModel(STGParser::ModelDeclContext *ctx,
                                 const SourceFile &file) {
  if (modelCtx) {
    diags.error(file.loc(ctx->ID()), "a program has one model; '" +
                                         ctx->ID()->getText() +
                                         "' is a second");
    diags.note(modelFile->loc(modelCtx->ID()), "the first model is here");
    return;
  }
  modelCtx = ctx;
  modelFile = &file;
}

//===----------------------------------------------------------------------===//
// After all files
//===----------------------------------------------------------------------===//

void ModuleBuilder::applyOverrides() {
  for (const auto &[name, text] : options.overrides) {
    Option::Value value = text;
    if (text == "true" || text == "false")
      value = text == "true";
    else if (auto number = parseDecimal(text))
      value = *number;
    if (Dim *dim = module->lookupDim(name)) {
      if (!std::holds_alternative<Expr>(value)) {
        diags.error({}, "--set " + name + "=" + text + ": dim '" + name +
                            "' takes a positive number, such as 8" +
                            (llvm::StringRef(text).startswith("-")
                                 ? "; dims are never negative"
                                 : ""));
        continue;
      }
      dim->value = std::get<Expr>(value);
    } else if (Option *option = module->lookupOption(name)) {
      if (std::holds_alternative<std::string>(option->value))
        value = text; // A string option takes the text as written.
      if (option->value.index() != value.index()) {
        diags.error({}, "--set " + name + "=" + text + ": option '" + name +
                            "' takes " + describeOptionKind(option->value));
        continue;
      }
      if (name == "dtype" && !parseElementType(text)) {
        diags.error({}, "--set dtype=" + text + ": not an element type");
        continue;
      }
      if (name == "precision" && !parseRecipe(text)) {
        diags.error({}, "--set precision=" + text + ": not a recipe (" +
                            getRecipeNames() + ")");
        continue;
      }
      option->value = value;
    } else if (Axis *axis = module->lookupAxis(name)) {
      // The mesh: how many ranks an axis has.
      auto degree = getIntegerValue(std::holds_alternative<Expr>(value)
                                        ? std::get<Expr>(value)
                                        : Expr(0));
      if (axis->alias) {
        diags.error({}, "--set " + name + "=" + text + ": axis '" + name +
                            "' is an alias of '" + axis->alias->name +
                            "'; set the degree of '" + axis->alias->name +
                            "'");
      } else if (!degree || *degree < 1) {
        diags.error({}, "--set " + name + "=" + text + ": the degree of axis '" +
                            name + "' must be a positive integer");
      } else {
        axis->size = *degree;
      }
    } else {
      diags.error({}, "--set " + name + "=" + text +
                          ": no dim, option or axis named '" + name + "'");
    }
  }
  for (const auto &[name, on] : options.switches)
    if (Option *option = module->lookupOption(name); option && option->isBool())
      option->value = on;
}

void ModuleBuilder::resolveAxes() {
  for (const auto &axis : module->getAxes()) {
    if (axis->condition.empty())
      continue;
    Option *option = module->lookupOption(axis->condition);
    if (!option || !option->isBool()) {
      diags.error(axis->conditionLoc, "axis '" + axis->name + "' depends on '" +
                                          axis->condition +
                                          "', which is not a boolean option");
      continue;
    }
    axis->active = std::get<bool>(option->value) != axis->negated;
  }
}

void ModuleBuilder::collectMissingNames(antlr4::tree::ParseTree *tree,
                                        llvm::StringSet<> &names,
                                        llvm::StringSet<> &visiting) {
  // A bare word in brackets is an attribute's choice (`attention[causal]`).
  if (auto *attr = dynamic_cast<STGParser::ExprAttrContext *>(tree))
    if (dynamic_cast<STGParser::SymExprContext *>(attr->expr()))
      return;
  if (auto *sym = dynamic_cast<STGParser::SymExprContext *>(tree)) {
    std::string name = sym->ID()->getText();
    if (!module->lookupDim(name) && !module->lookupAxis(name) &&
        !module->lookupOption(name) && !attrParams.count(name))
      names.insert(name);
    return;
  }
  // A block's body may name its attribute parameters; what it calls, its
  // own.
  if (auto *block = dynamic_cast<STGParser::BlockDeclContext *>(tree)) {
    llvm::StringSet<> own;
    for (auto *param : block->blockAttrParam())
      own.insert(param->name->getText());
    std::swap(own, attrParams);
    for (antlr4::tree::ParseTree *child : tree->children)
      collectMissingNames(child, names, visiting);
    std::swap(own, attrParams);
    return;
  }
  // What a called block lacks, its caller lacks too.
  antlr4::tree::TerminalNode *callee = nullptr;
  if (auto *call = dynamic_cast<STGParser::CallValueContext *>(tree))
    callee = call->ID();
  else if (auto *call = dynamic_cast<STGParser::CallAttrValueContext *>(tree))
    callee = call->ID();
  if (callee) {
    auto block = blocks.find(callee->getText());
    if (block != blocks.end() && visiting.insert(block->first()).second)
      collectMissingNames(block->second.ctx, names, visiting);
  }
  for (antlr4::tree::ParseTree *child : tree->children)
    collectMissingNames(child, names, visiting);
}

void ModuleBuilder::findMissingNames() {
  const SourceFile *compiled = files.empty() ? nullptr : files.front().get();
  for (const std::string &name : blockOrder) {
    BlockDecl &decl = blocks[name];
    decl.imported = decl.file != compiled;
    llvm::StringSet<> names, visiting;
    visiting.insert(name);
    collectMissingNames(decl.ctx, names, visiting);
    for (const auto &entry : names)
      decl.missingNames.push_back(entry.getKey().str());
    llvm::sort(decl.missingNames);
  }
}

void ModuleBuilder::checkBlockSignatures() {
  for (const std::string &name : blockOrder) {
    BlockDecl &decl = blocks[name];
    if (decl.imported && !decl.missingNames.empty()) {
      decl.signatureValid = false; // Reported at its first call, if any.
      continue;
    }
    const SourceFile &file = *decl.file;
    BlockSignature signature;
    signature.name = name;
    signature.loc = file.loc(decl.ctx->ID());
    llvm::StringMap<SourceLoc> paramNames;
    for (auto *param : decl.ctx->blockParam()) {
      std::string paramName = param->ID()->getText();
      SourceLoc loc = file.loc(param->ID());
      auto [it, inserted] = paramNames.try_emplace(paramName, loc);
      if (!inserted) {
        diags.error(loc, "parameter '" + paramName + "' is declared twice");
        decl.signatureValid = false;
      }
      auto type = exprs.buildType(param->type(), file);
      decl.paramTypes.push_back(type);
      decl.signatureValid &= type.has_value();
      if (type)
        signature.params.push_back({paramName, *type});
    }
    decl.signatureValid &= declareBlockAttrs(decl.ctx, file, *module, exprs,
                                             diags, decl.attrParams);
    if (decl.ctx->type()) {
      decl.resultType = exprs.buildType(decl.ctx->type(), file);
      decl.signatureValid &= decl.resultType.has_value();
      signature.result = decl.resultType;
    }
    bool hasReturn = llvm::any_of(decl.ctx->body()->stmt(), [](auto *stmt) {
      return dynamic_cast<STGParser::ReturnStmtContext *>(stmt) != nullptr;
    });
    if (decl.ctx->type() && !hasReturn) {
      diags.error(signature.loc, "block '" + name +
                                     "' declares a result type but has no "
                                     "'return'");
      decl.signatureValid = false;
    }
    module->addBlockSignature(std::move(signature));
  }
}

//===----------------------------------------------------------------------===//
// Entry points
//===----------------------------------------------------------------------===//

std::vector<std::string> stg::getDefaultTemplateDirs() {
  std::vector<std::string> dirs;
  if (auto fromEnv = llvm::sys::Process::GetEnv("STAGEC_TEMPLATES"))
    dirs.push_back(*fromEnv);
  for (const char *dir : {STG_INSTALL_TEMPLATES_DIR, STG_SOURCE_TEMPLATES_DIR})
    if (llvm::sys::fs::is_directory(dir))
      dirs.push_back(dir);
  return dirs;
}

std::unique_ptr<Module> stg::parseSource(llvm::StringRef source,
                                         llvm::StringRef name,
                                         const ParseOptions &options,
                                         DiagnosticEngine &diags) {
  try {
    return ModuleBuilder(options, diags).build(source, name);
  } catch (const std::exception &e) {
    // Neither ANTLR nor GiNaC should throw here; if one does, say so
    // instead of crashing.
    diags.error({}, llvm::Twine("internal error: ") + e.what());
    return nullptr;
  }
}

std::unique_ptr<Module> stg::parseFile(llvm::StringRef path,
                                       const ParseOptions &options,
                                       DiagnosticEngine &diags) {
  auto buffer = readInputFile(path, MaxSourceBytes, "model source");
  if (!buffer) {
    diags.error({}, llvm::toString(buffer.takeError()));
    return nullptr;
  }
  return parseSource((*buffer)->getBuffer(), path == "-" ? "<stdin>" : path,
                     options, diags);
}
