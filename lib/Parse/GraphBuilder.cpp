//===- GraphBuilder.cpp - Statements to ops, blocks inlined ---------------===//
//
// Scoping: a model or block body is a closed scope (blocks see only their
// parameters, their own names and the global dims and axes); a repeat body
// sees the names around it. Assigning, inside a repeat, a name bound outside
// makes it loop-carried: it becomes an argument of the body, the body yields
// its last value, and after the loop the name refers to the repeat's result.
// Everywhere else names are single-assignment.
//
//===----------------------------------------------------------------------===//

#include "GraphBuilder.h"

#include "stg/Support/LogicalResult.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Path.h"

#include <functional>
#include <numeric>

using namespace stg;

//===----------------------------------------------------------------------===//
// Scopes and names
//===----------------------------------------------------------------------===//

GraphBuilder::Binding *GraphBuilder::lookup(Scope &scope,
                                            llvm::StringRef name) {
  for (Scope *s = &scope; s; s = s->parent) {
    auto it = s->names.find(name);
    if (it != s->names.end())
      return &it->second;
  }
  return nullptr;
}

void GraphBuilder::bind(Scope &scope, llvm::StringRef name, Value *value,
                        SourceLoc loc) {
  auto [it, inserted] = scope.names.try_emplace(name, Binding{value, loc});
  if (inserted || scope.carried.count(name)) {
    it->second = Binding{value, loc};
    return;
  }
  diags.error(loc, "'" + name + "' is already defined");
  diags.note(it->second.loc, "previous definition is here");
}

void GraphBuilder::collectAssignedNames(
    STGParser::BodyContext *body, llvm::SmallVectorImpl<std::string> &names) {
  for (STGParser::StmtContext *stmt : body->stmt()) {
    if (auto *assign = dynamic_cast<STGParser::AssignStmtContext *>(stmt)) {
      for (auto *target : assign->target())
        if (!llvm::is_contained(names, target->ID()->getText()))
          names.push_back(target->ID()->getText());
    } else if (auto *repeat =
                   dynamic_cast<STGParser::RepeatStmtContext *>(stmt)) {
      collectAssignedNames(repeat->body(), names);
    } else if (auto *ifStmt = dynamic_cast<STGParser::IfStmtContext *>(stmt)) {
      for (STGParser::BodyContext *branch : ifStmt->body())
        collectAssignedNames(branch, names);
    }
  }
}

Value *GraphBuilder::convertLayout(Value *value, const TensorType &type,
                                   llvm::StringRef name, SourceLoc loc,
                                   Graph &graph) {
  if (value->hasType() && value->getType() == type)
    return value;
  Op *op = graph.createOp(OpKind::Layout, loc);
  op->addOperand(value);
  Value *result = graph.createResult(op, module.makeUniqueName(name));
  result->setType(type);
  result->setAnnotated(true);
  return result;
}

//===----------------------------------------------------------------------===//
// Statements
//===----------------------------------------------------------------------===//

void GraphBuilder::buildModel(STGParser::ModelDeclContext *ctx,
                              const SourceFile &file) {
  Graph *graph = module.createModel(ctx->ID()->getText(), file.loc(ctx->ID()));
  Scope scope;
  scope.graph = graph;
  scope.file = &file;
  buildBody(ctx->body(), scope);
}

void GraphBuilder::buildBody(STGParser::BodyContext *body, Scope &scope) {
  for (STGParser::StmtContext *stmt : body->stmt())
    if (!buildStatement(stmt, scope))
      return;
}

bool GraphBuilder::buildStatement(STGParser::StmtContext *stmt, Scope &scope) {
  const SourceFile &file = *scope.file;
  if (diags.reachedErrorLimit())
    return false;
  if (scope.returned) {
    diags.error(file.loc(stmt), "statement after 'return'");
    return false;
  }
  if (auto *param = dynamic_cast<STGParser::ParamStmtContext *>(stmt)) {
    for (auto *item : param->declItem())
      buildDecl(item, OpKind::Param, scope);
  } else if (auto *state = dynamic_cast<STGParser::StateStmtContext *>(stmt)) {
    for (auto *item : state->declItem())
      buildDecl(item, OpKind::State, scope);
  } else if (auto *assign =
                 dynamic_cast<STGParser::AssignStmtContext *>(stmt)) {
    buildAssign(assign, scope);
  } else if (auto *repeat =
                 dynamic_cast<STGParser::RepeatStmtContext *>(stmt)) {
    buildRepeat(repeat, scope);
  } else if (auto *ifStmt = dynamic_cast<STGParser::IfStmtContext *>(stmt)) {
    buildIf(ifStmt, scope);
  } else if (auto *ret = dynamic_cast<STGParser::ReturnStmtContext *>(stmt)) {
    buildReturn(ret, scope);
  }
  return true;
}

void GraphBuilder::buildDecl(STGParser::DeclItemContext *item, OpKind kind,
                             Scope &scope) {
  const SourceFile &file = *scope.file;
  std::string name = item->ID()->getText();
  SourceLoc loc = file.loc(item->ID());
  auto type = exprs.buildType(item->type(), file);
  if (!type) {
    bind(scope, name, nullptr, loc);
    return;
  }
  Op *op = scope.graph->createOp(kind, loc);
  Value *value =
      scope.graph->createResult(op, module.makeUniqueName(scope.prefix + name));
  value->setType(*type);
  value->setAnnotated(true);
  bind(scope, name, value, loc);
}

void GraphBuilder::buildAssign(STGParser::AssignStmtContext *ctx,
                               Scope &scope) {
  const SourceFile &file = *scope.file;
  llvm::SmallVector<Target, 2> targets;
  bool typesOk = true;
  for (auto *target : ctx->target()) {
    Target t{target->ID()->getText(), std::nullopt, file.loc(target->ID())};
    if (target->type()) {
      t.type = exprs.buildType(target->type(), file);
      typesOk &= t.type.has_value();
    }
    targets.push_back(std::move(t));
  }
  std::optional<Values> values;
  if (typesOk)
    values = buildValue(ctx->value(), scope, targets);
  for (unsigned i = 0; i < targets.size(); ++i)
    bind(scope, targets[i].name, values ? (*values)[i] : nullptr,
         targets[i].loc);
}

void GraphBuilder::buildReturn(STGParser::ReturnStmtContext *ctx,
                               Scope &scope) {
  const SourceFile &file = *scope.file;
  if (!scope.allowsReturn) {
    diags.error(file.loc(ctx), scope.parent
                                   ? "'return' inside 'repeat'"
                                   : "'return' outside a block");
    scope.returned = nullptr;
    return;
  }
  auto values = buildValue(ctx->value(), scope, {});
  scope.returned = values ? values->front() : nullptr;
}

void GraphBuilder::buildRepeat(STGParser::RepeatStmtContext *ctx,
                               Scope &scope) {
  const SourceFile &file = *scope.file;
  SourceLoc loc = file.loc(ctx);
  std::optional<Expr> count = exprs.buildExpr(ctx->expr(), file);
  std::string indexName = ctx->ID() ? ctx->ID()->getText() : "layer";
  std::string loopName = indexName;
  // A second loop of the same name in this scope is `layer_1`, as blocks are.
  if (unsigned instance = scope.instances[loopName]++)
    loopName += ("_" + llvm::Twine(instance)).str();

  // Names the body assigns that are bound outside are loop-carried.
  llvm::SmallVector<std::string, 4> assigned, carried;
  collectAssignedNames(ctx->body(), assigned);
  for (const std::string &name : assigned)
    if (lookup(scope, name))
      carried.push_back(name);

  // Without a count the body is still checked; its results stay unbound.
  auto poisonResults = [&] {
    for (const std::string &name : carried)
      scope.names[name] = Binding{nullptr, loc};
  };
  std::optional<unsigned> period = findPeriod(ctx->body(), indexName, file);
  if (!period) {
    poisonResults();
    return;
  }
  if (*period == 1 || !count) {
    buildLoop(ctx, scope, count ? *count : Expr(1), loopName, indexName,
              carried, {0});
    if (*period == 1)
      checkBranchesTaken(ctx->body(), file);
    if (!count)
      poisonResults();
    return;
  }
  // A pattern of period P over N layers: floor(N/P) repetitions of a body
  // of P layers, then the remaining N mod P layers, each a repeat of its
  // own that runs once or not at all. N may be symbolic, so every one of
  // those P - 1 is there, with its count a formula.
  llvm::SmallVector<int64_t, 8> indices;
  for (unsigned index = 0; index < *period; ++index)
    indices.push_back(index);
  Expr periods = *makeFunction("floor", {*count / *period});
  // The layers' block calls are numbered across all the repeats
  // (`decoder`, `decoder_1`, ...), so every layer's names differ.
  llvm::StringMap<unsigned> instances;
  unsigned errorsBefore = diags.getNumErrors();
  buildLoop(ctx, scope, periods, loopName, indexName, carried, indices,
            &instances);
  // The same statements again would report the same errors again.
  if (diags.getNumErrors() != errorsBefore)
    return;
  Expr rest = *count - *period * periods;
  for (unsigned index = 0; index + 1 < *period; ++index) {
    Expr runs = *makeFunction(
        "min", {Expr(1), *makeFunction("max", {Expr(0), rest - int(index)})});
    buildLoop(ctx, scope, runs, loopName, indexName, carried, {int64_t(index)},
              &instances);
  }
  checkBranchesTaken(ctx->body(), file);
}

void GraphBuilder::buildLoop(STGParser::RepeatStmtContext *ctx, Scope &scope,
                             const Expr &count, llvm::StringRef loopName,
                             llvm::StringRef indexName,
                             llvm::ArrayRef<std::string> carried,
                             llvm::ArrayRef<int64_t> indices,
                             llvm::StringMap<unsigned> *instances) {
  const SourceFile &file = *scope.file;
  SourceLoc loc = file.loc(ctx);
  Op *repeat = scope.graph->createOp(OpKind::Repeat, loc);
  repeat->setAttr("count", Attribute::getExpr(AttrKind::Expr, count));
  repeat->setAttr("name", Attribute::getText(AttrKind::String, loopName.str()));
  repeat->setBody(std::make_unique<Graph>(scope.prefix + loopName.str()));
  Graph &body = *repeat->getBody();
  body.setNumLayers(indices.size());

  Scope inner;
  inner.prefix = scope.prefix + loopName.str() + ".";
  inner.graph = &body;
  inner.parent = &scope;
  inner.file = &file;
  inner.indexName = indexName.str();
  if (instances)
    inner.instances = std::move(*instances);
  bool poisoned = false;
  for (const std::string &name : carried) {
    Value *initial = lookup(scope, name)->value;
    if (!initial) {
      poisoned = true;
      inner.names[name] = Binding{nullptr, loc};
      inner.carried.insert(name);
      continue;
    }
    repeat->addOperand(initial);
    Value *arg = body.createArgument(module.makeUniqueName(inner.prefix + name));
    if (initial->hasType())
      arg->setType(initial->getType());
    inner.names[name] = Binding{arg, loc};
    inner.carried.insert(name);
  }
  // Runs `build` and puts the ops it appends to the body in `layer`.
  auto buildLayer = [&](unsigned layer, llvm::function_ref<bool()> build) {
    size_t firstOp = body.getOps().size();
    bool more = build();
    for (size_t i = firstOp; i < body.getOps().size(); ++i)
      body.getOps()[i]->setBodyLayer(layer);
    return more;
  };
  unsigned statementLayers =
      indices.size() == 1 ? countStatementLayers(ctx->body(), carried) : 1;
  if (statementLayers > 1) {
    // A period written out, a layer a statement.
    body.setNumLayers(statementLayers);
    inner.index = indices.front();
    std::vector<STGParser::StmtContext *> statements = ctx->body()->stmt();
    for (unsigned layer = 0; layer < statements.size(); ++layer)
      if (!buildLayer(layer,
                      [&] { return buildStatement(statements[layer], inner); }))
        break;
  } else if (indices.size() == 1) {
    inner.index = indices.front();
    buildBody(ctx->body(), inner);
  } else {
    // Each layer of the period has its own local names; the loop-carried
    // ones flow from one layer to the next.
    for (unsigned layer = 0; layer < indices.size(); ++layer) {
      Scope copy;
      copy.prefix = inner.prefix;
      copy.graph = &body;
      copy.parent = &inner;
      copy.file = &file;
      copy.carried = inner.carried;
      copy.instances = std::move(inner.instances);
      copy.indexName = inner.indexName;
      copy.index = indices[layer];
      buildLayer(layer, [&] {
        buildBody(ctx->body(), copy);
        return true;
      });
      inner.instances = std::move(copy.instances);
      for (const std::string &name : carried)
        if (auto it = copy.names.find(name); it != copy.names.end())
          inner.names[name] = it->second;
    }
  }

  if (instances)
    *instances = std::move(inner.instances);

  Op *yield = body.createOp(OpKind::Yield, file.loc(ctx->body()->stop));
  yield->setBodyLayer(body.getNumLayers() - 1);
  for (const std::string &name : carried) {
    Value *next = inner.names[name].value;
    poisoned |= !next;
    if (next)
      yield->addOperand(next);
  }
  for (const std::string &name : carried) {
    Value *result = nullptr;
    if (!poisoned) {
      result = scope.graph->createResult(
          repeat, module.makeUniqueName(scope.prefix + name));
      Value *initial = lookup(scope, name)->value;
      if (initial->hasType())
        result->setType(initial->getType());
    }
    // Rebinding an outer name is what the repeat means; not a redefinition.
    scope.names[name] = Binding{result, loc};
  }
}

unsigned
GraphBuilder::countStatementLayers(STGParser::BodyContext *body,
                                   llvm::ArrayRef<std::string> carried) {
  std::vector<STGParser::StmtContext *> statements = body->stmt();
  if (statements.size() < 2)
    return 1;
  for (STGParser::StmtContext *stmt : statements) {
    auto *assign = dynamic_cast<STGParser::AssignStmtContext *>(stmt);
    if (!assign || assign->target().size() != 1 ||
        !llvm::is_contained(carried, assign->target(0)->ID()->getText()))
      return 1;
    antlr4::tree::TerminalNode *callee = nullptr;
    if (auto *call =
            dynamic_cast<STGParser::CallValueContext *>(assign->value()))
      callee = call->ID();
    else if (auto *call = dynamic_cast<STGParser::CallAttrValueContext *>(
                 assign->value()))
      callee = call->ID();
    if (!callee || !blocks.count(callee->getText()))
      return 1;
  }
  return statements.size();
}

//===----------------------------------------------------------------------===//
// Layer patterns
//===----------------------------------------------------------------------===//

/// The longest layer pattern: its period's layers are built one by one.
static constexpr unsigned MaxPatternPeriod = 64;

/// Moduli and compared values are small: a period of layers.
static std::optional<int64_t> readSmallInteger(antlr4::Token *token) {
  llvm::StringRef digits = token->getText();
  int64_t value;
  if (digits.size() > 9 || digits.getAsInteger(10, value))
    return std::nullopt;
  return value;
}

bool GraphBuilder::findModuli(STGParser::IndexCondContext *cond,
                              llvm::StringRef indexName, const SourceFile &file,
                              unsigned &period) {
  if (auto *paren = dynamic_cast<STGParser::ParenCondContext *>(cond))
    return findModuli(paren->indexCond(), indexName, file, period);
  if (auto *negation = dynamic_cast<STGParser::NotCondContext *>(cond))
    return findModuli(negation->indexCond(), indexName, file, period);
  if (auto *both = dynamic_cast<STGParser::AndCondContext *>(cond))
    return findModuli(both->indexCond(0), indexName, file, period) &
           findModuli(both->indexCond(1), indexName, file, period);
  if (auto *either = dynamic_cast<STGParser::OrCondContext *>(cond))
    return findModuli(either->indexCond(0), indexName, file, period) &
           findModuli(either->indexCond(1), indexName, file, period);
  auto *compare = static_cast<STGParser::CompareCondContext *>(cond);
  std::string name = compare->ID()->getText();
  if (name != indexName) {
    diags.error(file.loc(compare->ID()),
                "a condition tests the repeat's index '" + indexName +
                    "', not '" + name + "'");
    return false;
  }
  if (!compare->modulus) {
    diags.error(file.loc(compare),
                "'" + name + " " + compare->op->getText() + " " +
                    compare->rhs->getText() +
                    "' holds for no repeating pattern of layers: take the "
                    "index modulo the period ('" +
                    name +
                    " % 6 == 5'); give the first or last layers a repeat of "
                    "their own, as templates/deepseek.stg does");
    return false;
  }
  std::optional<int64_t> modulus = readSmallInteger(compare->modulus);
  if (!modulus || *modulus < 1 || *modulus > MaxPatternPeriod) {
    diags.error(file.loc(compare->modulus),
                "the modulus must be 1 to " + llvm::Twine(MaxPatternPeriod) +
                    ", not " + compare->modulus->getText());
    return false;
  }
  if (!readSmallInteger(compare->rhs)) {
    diags.error(file.loc(compare->rhs),
                "'" + compare->rhs->getText() + "' is too large");
    return false;
  }
  uint64_t combined = std::lcm<uint64_t>(period, *modulus);
  if (combined > MaxPatternPeriod) {
    diags.error(file.loc(compare),
                "the layer pattern repeats every " + llvm::Twine(combined) +
                    " layers, more than the " + llvm::Twine(MaxPatternPeriod) +
                    " it may");
    return false;
  }
  period = combined;
  return true;
}

std::optional<unsigned> GraphBuilder::findPeriod(STGParser::BodyContext *body,
                                                 llvm::StringRef indexName,
                                                 const SourceFile &file) {
  unsigned period = 1;
  bool ok = true;
  std::function<void(STGParser::BodyContext *)> visit =
      [&](STGParser::BodyContext *statements) {
        for (STGParser::StmtContext *stmt : statements->stmt()) {
          auto *ifStmt = dynamic_cast<STGParser::IfStmtContext *>(stmt);
          if (!ifStmt)
            continue;
          for (STGParser::IndexCondContext *cond : ifStmt->indexCond())
            ok &= findModuli(cond, indexName, file, period);
          for (STGParser::BodyContext *branch : ifStmt->body())
            visit(branch);
        }
      };
  visit(body);
  if (!ok)
    return std::nullopt;
  return period;
}

bool GraphBuilder::holds(STGParser::IndexCondContext *cond, int64_t index) {
  if (auto *paren = dynamic_cast<STGParser::ParenCondContext *>(cond))
    return holds(paren->indexCond(), index);
  if (auto *negation = dynamic_cast<STGParser::NotCondContext *>(cond))
    return !holds(negation->indexCond(), index);
  if (auto *both = dynamic_cast<STGParser::AndCondContext *>(cond))
    return holds(both->indexCond(0), index) && holds(both->indexCond(1), index);
  if (auto *either = dynamic_cast<STGParser::OrCondContext *>(cond))
    return holds(either->indexCond(0), index) ||
           holds(either->indexCond(1), index);
  // findPeriod checked the numbers.
  auto *compare = static_cast<STGParser::CompareCondContext *>(cond);
  int64_t lhs = index % *readSmallInteger(compare->modulus);
  int64_t rhs = *readSmallInteger(compare->rhs);
  llvm::StringRef op = compare->op->getText();
  if (op == "==")
    return lhs == rhs;
  if (op == "!=")
    return lhs != rhs;
  if (op == "<")
    return lhs < rhs;
  if (op == "<=")
    return lhs <= rhs;
  if (op == ">")
    return lhs > rhs;
  return lhs >= rhs;
}

void GraphBuilder::buildIf(STGParser::IfStmtContext *ctx, Scope &scope) {
  if (scope.indexName.empty()) {
    diags.error(scope.file->loc(ctx),
                "'if' chooses by a repeat's index, so it belongs in a repeat "
                "body (not in a block or the model's top level)");
    return;
  }
  std::vector<STGParser::IndexCondContext *> conds = ctx->indexCond();
  std::vector<STGParser::BodyContext *> branches = ctx->body();
  // Branch i runs if condition i holds and none before it; a last branch
  // without a condition is the `else`.
  for (size_t i = 0; i < branches.size(); ++i) {
    if (i < conds.size() && !holds(conds[i], scope.index))
      continue;
    takenBranches.insert(branches[i]);
    buildBody(branches[i], scope);
    return;
  }
}

void GraphBuilder::checkBranchesTaken(STGParser::BodyContext *body,
                                      const SourceFile &file) {
  for (STGParser::StmtContext *stmt : body->stmt()) {
    auto *ifStmt = dynamic_cast<STGParser::IfStmtContext *>(stmt);
    if (!ifStmt)
      continue;
    for (STGParser::BodyContext *branch : ifStmt->body()) {
      if (!takenBranches.count(branch)) {
        diags.error(file.loc(branch),
                    "no layer takes this branch: for every index, its "
                    "condition fails or an earlier one holds");
        return;
      }
      checkBranchesTaken(branch, file);
    }
  }
}

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

  if (hasBrackets) {
    diags.error(loc, "block '" + name + "' takes no attributes");
    return std::nullopt;
  }
  if (targets.size() > 1) {
    diags.error(targets[1].loc, "block '" + name + "' returns one value, but " +
                                    llvm::Twine(targets.size()) +
                                    " names are assigned");
    return std::nullopt;
  }
  Value *result = instantiateBlock(name, block->second, operands, loc, scope);
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

Value *GraphBuilder::instantiateBlock(llvm::StringRef name, BlockDecl &decl,
                                      llvm::ArrayRef<Value *> args,
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

  activeBlocks.push_back(name);
  buildBody(decl.ctx->body(), scope);
  activeBlocks.pop_back();

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
  if (!decl.signatureValid)
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
  activeBlocks.push_back(name);
  buildBody(decl.ctx->body(), scope);
  activeBlocks.pop_back();
}
