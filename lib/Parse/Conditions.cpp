//===- Conditions.cpp - `if`: layer patterns and block flags --------------===//
//
// A repeat body chooses each layer's statements with `if` on the repeat's
// index (`if layer % 6 == 5`). The pattern must repeat: every condition
// takes the index modulo a number, and the least common multiple of those
// moduli is the period the repeat builds its body for, once per index. A
// block's bool attribute parameter (`if rope`) is the same for every
// layer: it chooses one branch where the block is inlined, and so does a
// bool option of the module (`if decode`: stagec sets `decode` for a
// decode step, where DeepSeek's MLA runs absorbed). Kept apart from
// the statements because it is a small language of its own (periods,
// evaluation, branches no layer takes).
//
//===----------------------------------------------------------------------===//

#include "GraphBuilder.h"

#include <functional>
#include <numeric>

using namespace stg;

//===----------------------------------------------------------------------===//
// Layer patterns
//===----------------------------------------------------------------------===//

/// The longest layer pattern: its period's layers are built one by one.
static constexpr unsigned MaxPatternPeriod = 64;

/// Moduli and compared values are small: a period of layers.
static std::optional<int64_t> readSmallInteger(antlr4::Token *token) {
  // getText() returns a temporary: keep it.
  std::string text = token->getText();
  llvm::StringRef digits = text;
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
  // A block's flag is the same for every layer; buildIf checks it.
  if (dynamic_cast<STGParser::FlagCondContext *>(cond))
    return true;
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
                llvm::Twine("'") + compare->rhs->getText() +
                    "' is too large");
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
  // checkFlags checked that the flag is a bool.
  if (auto *flag = dynamic_cast<STGParser::FlagCondContext *>(cond))
    return getFlag(flag->ID()->getText());
  // findPeriod checked the numbers.
  auto *compare = static_cast<STGParser::CompareCondContext *>(cond);
  int64_t lhs = index % *readSmallInteger(compare->modulus);
  int64_t rhs = *readSmallInteger(compare->rhs);
  std::string op = compare->op->getText();
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

void GraphBuilder::classifyCondition(STGParser::IndexCondContext *cond,
                                     bool &usesIndex, bool &usesFlags) {
  if (dynamic_cast<STGParser::FlagCondContext *>(cond)) {
    usesFlags = true;
    return;
  }
  if (dynamic_cast<STGParser::CompareCondContext *>(cond)) {
    usesIndex = true;
    return;
  }
  for (antlr4::tree::ParseTree *child : cond->children)
    if (auto *inner = dynamic_cast<STGParser::IndexCondContext *>(child))
      classifyCondition(inner, usesIndex, usesFlags);
}

bool GraphBuilder::checkFlags(STGParser::IndexCondContext *cond,
                              const SourceFile &file) {
  auto *flag = dynamic_cast<STGParser::FlagCondContext *>(cond);
  if (!flag) {
    bool ok = true;
    for (antlr4::tree::ParseTree *child : cond->children)
      if (auto *inner = dynamic_cast<STGParser::IndexCondContext *>(child))
        ok &= checkFlags(inner, file);
    return ok;
  }
  std::string name = flag->ID()->getText();
  const BlockAttrScope *attrs = exprs.getBlockAttrs();
  const BlockAttrValue *value = attrs ? attrs->lookup(name) : nullptr;
  if (value && value->kind == BlockAttrKind::Bool)
    return true;
  const Option *option = value ? nullptr : module.lookupOption(name);
  if (option && option->isBool())
    return true;
  SourceLoc loc = file.loc(flag->ID());
  if (value) {
    diags.error(loc, llvm::Twine("'if ") + name +
                         "' needs a bool; attribute parameter '" + name +
                         "' of block '" + attrs->block + "' is of kind " +
                         getBlockAttrKindName(value->kind));
    return false;
  }
  std::string owner =
      attrs ? (llvm::Twine("block '") + attrs->block + "'").str() : "a block";
  diags.error(loc, llvm::Twine("'") + name +
                       "' is not a bool attribute parameter of " + owner +
                       " nor a bool option: an 'if' tests one (`if rope`) "
                       "or compares a repeat's index (`layer % 2 == 0`)");
  return false;
}

bool GraphBuilder::getFlag(llvm::StringRef name) const {
  if (const BlockAttrScope *attrs = exprs.getBlockAttrs())
    if (const BlockAttrValue *value = attrs->lookup(name))
      return value->flag;
  return std::get<bool>(module.lookupOption(name)->value);
}

void GraphBuilder::buildIf(STGParser::IfStmtContext *ctx, Scope &scope) {
  std::vector<STGParser::IndexCondContext *> conds = ctx->indexCond();
  bool usesIndex = false, usesFlags = false, flagsOk = true;
  for (STGParser::IndexCondContext *cond : conds) {
    classifyCondition(cond, usesIndex, usesFlags);
    flagsOk &= checkFlags(cond, *scope.file);
  }
  if (usesIndex && scope.indexName.empty()) {
    diags.error(scope.file->loc(ctx),
                "'if' chooses by a repeat's index, so it belongs in a repeat "
                "body (not in a block or the model's top level)");
    return;
  }
  if (!flagsOk)
    return;
  std::vector<STGParser::BodyContext *> branches = ctx->body();
  // Branch i runs if condition i holds and none before it; a last branch
  // without a condition is the `else`.
  for (size_t i = 0; i < branches.size(); ++i) {
    if (i < conds.size() && !holds(conds[i], scope.index))
      continue;
    takenBranches.insert(branches[i]);
    // Under a block's flag, a branch may rebind a name bound before the
    // `if` (`if rope { q = rope_q(q); }`): the branch is chosen at
    // inlining, so the rebinding is as single as a loop-carried one.
    llvm::SmallVector<std::string, 4> assigned, rebound;
    if (usesFlags)
      collectAssignedNames(branches[i], assigned);
    for (const std::string &name : assigned)
      if (scope.names.count(name) && scope.carried.insert(name).second)
        rebound.push_back(name);
    ++scope.ifDepth;
    buildBody(branches[i], scope);
    --scope.ifDepth;
    for (const std::string &name : rebound)
      scope.carried.erase(name);
    return;
  }
}

void GraphBuilder::checkBranchesTaken(STGParser::BodyContext *body,
                                      const SourceFile &file) {
  for (STGParser::StmtContext *stmt : body->stmt()) {
    auto *ifStmt = dynamic_cast<STGParser::IfStmtContext *>(stmt);
    if (!ifStmt)
      continue;
    // A block's flag chooses one branch for all layers.
    bool usesIndex = false, usesFlags = false;
    for (STGParser::IndexCondContext *cond : ifStmt->indexCond())
      classifyCondition(cond, usesIndex, usesFlags);
    if (usesFlags)
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

uint64_t GraphBuilder::countRepeatBuilds(STGParser::RepeatStmtContext *ctx) {
  // findPeriod's least common multiple, quietly: a wrong modulus is
  // reported when the repeat is built, and counts as none here.
  uint64_t period = 1;
  std::function<void(antlr4::tree::ParseTree *)> visit =
      [&](antlr4::tree::ParseTree *tree) {
        if (dynamic_cast<STGParser::RepeatStmtContext *>(tree) &&
            tree != ctx)
          return; // A nested repeat has its own period.
        if (auto *compare =
                dynamic_cast<STGParser::CompareCondContext *>(tree)) {
          std::optional<int64_t> modulus =
              compare->modulus ? readSmallInteger(compare->modulus)
                               : std::nullopt;
          if (modulus && *modulus >= 1 && *modulus <= MaxPatternPeriod &&
              std::lcm<uint64_t>(period, *modulus) <= MaxPatternPeriod)
            period = std::lcm<uint64_t>(period, *modulus);
          return;
        }
        for (antlr4::tree::ParseTree *child : tree->children)
          visit(child);
      };
  visit(ctx);
  return 2 * period - 1;
}
