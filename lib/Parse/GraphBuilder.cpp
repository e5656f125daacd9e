//===- GraphBuilder.cpp - Statements to ops, blocks inlined ---------------===//
//
// Scoping: a model or block body is a closed scope (blocks see only their
// parameters, their own names and the global dims and axes); a repeat body
// sees the names around it. Assigning, inside a repeat, a name bound outside
// makes it loop-carried: it becomes an argument of the body, the body yields
// its last value, and after the loop the name refers to the repeat's result.
// Everywhere else names are single-assignment (but a branch of `if` on a
// block's flag may rebind a name). This file holds the scopes and the
// statements; `if` is in Conditions.cpp, values and op calls in Calls.cpp,
// block calls in BlockInlining.cpp (their attribute parameters in
// BlockAttrs.cpp), the count of what inlining builds in InlineBudget.cpp.
//
//===----------------------------------------------------------------------===//

#include "GraphBuilder.h"

#include "llvm/ADT/STLExtras.h"

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
  if (scope.ifDepth) {
    diags.error(file.loc(ctx), "'return' inside 'if': a block returns once, "
                               "as its last statement; assign the value in "
                               "the branches and return it after the 'if'");
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
  // The body is built 2P - 1 times, so nested patterns multiply: charged
  // here, before any is built.
  if (!chargeOps(chargedDepth ? 0 : countRepeatOps(ctx, activeBlocks), loc,
                 "this layer pattern",
                 "a pattern of period P builds its body 2P - 1 times, so "
                 "nested ones multiply")) {
    poisonResults();
    return;
  }
  unsigned errorsBefore = diags.getNumErrors();
  ++chargedDepth;
  buildLoop(ctx, scope, periods, loopName, indexName, carried, indices,
            &instances);
  // The same statements again would report the same errors again.
  if (diags.getNumErrors() == errorsBefore) {
    Expr rest = *count - *period * periods;
    for (unsigned index = 0; index + 1 < *period; ++index) {
      Expr runs = *makeFunction(
          "min",
          {Expr(1), *makeFunction("max", {Expr(0), rest - int(index)})});
      buildLoop(ctx, scope, runs, loopName, indexName, carried,
                {int64_t(index)}, &instances);
    }
    checkBranchesTaken(ctx->body(), file);
  }
  --chargedDepth;
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
