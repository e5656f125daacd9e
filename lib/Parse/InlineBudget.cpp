//===- InlineBudget.cpp - Ops an inlining would build, counted first ------===//
//
// Inlining multiplies: a block that calls another twice doubles its ops,
// and a layer pattern of period P builds its body 2P - 1 times, so a page
// of text can ask for billions of ops. Before a block call or a pattern is
// built, the ops it would add are counted from the parse tree (an upper
// bound: every declaration, op and possible `layout`, the larger branch of
// an `if`, called blocks counted once and remembered) and charged against
// MaxInlinedOps. The outermost expansion is charged with all it contains,
// so the error is at the call that crosses the limit, and nothing is built
// past it.
//
//===----------------------------------------------------------------------===//

#include "GraphBuilder.h"

#include "stg/Parse/Limits.h"

#include "llvm/ADT/STLExtras.h"

#include <limits>

using namespace stg;

static uint64_t addSat(uint64_t a, uint64_t b) {
  uint64_t sum;
  return __builtin_add_overflow(a, b, &sum)
             ? std::numeric_limits<uint64_t>::max()
             : sum;
}

static uint64_t mulSat(uint64_t a, uint64_t b) {
  uint64_t product;
  return __builtin_mul_overflow(a, b, &product)
             ? std::numeric_limits<uint64_t>::max()
             : product;
}

uint64_t
GraphBuilder::countValueOps(STGParser::ValueContext *value,
                            llvm::SmallVectorImpl<std::string> &active) {
  antlr4::tree::TerminalNode *callee = nullptr;
  std::vector<STGParser::ValueContext *> args;
  if (auto *call = dynamic_cast<STGParser::CallAttrValueContext *>(value))
    callee = call->ID(), args = call->value();
  else if (auto *call = dynamic_cast<STGParser::CallValueContext *>(value))
    callee = call->ID(), args = call->value();
  if (!callee)
    return 1; // A name: at most a `layout` op.
  uint64_t ops = 0;
  for (STGParser::ValueContext *arg : args)
    ops = addSat(ops, countValueOps(arg, active));
  // As buildCall resolves it: inside a block that wraps the builtin of its
  // name, the name is the builtin.
  std::string name = callee->getText();
  auto block = blocks.find(name);
  bool builtin = lookupOpKind(name).has_value();
  if (block == blocks.end() || (builtin && llvm::is_contained(active, name)))
    return addSat(ops, 1);
  // Arguments and the result may each need a `layout`.
  ops = addSat(ops, block->second.ctx->blockParam().size() + 1);
  return addSat(ops, countBlockOps(name, block->second, active));
}

uint64_t
GraphBuilder::countBlockOps(llvm::StringRef name, const BlockDecl &decl,
                            llvm::SmallVectorImpl<std::string> &active) {
  // A block that calls itself is an error reported where it is built.
  if (llvm::is_contained(active, name))
    return 0;
  auto known = blockOps.find(decl.ctx);
  if (known != blockOps.end())
    return known->second;
  active.push_back(name.str());
  uint64_t ops = countBodyOps(decl.ctx->body(), active);
  active.pop_back();
  blockOps[decl.ctx] = ops;
  return ops;
}

uint64_t
GraphBuilder::countRepeatOps(STGParser::RepeatStmtContext *ctx,
                             llvm::SmallVectorImpl<std::string> &active) {
  uint64_t once = addSat(countBodyOps(ctx->body(), active), 2);
  return mulSat(countRepeatBuilds(ctx), once);
}

uint64_t
GraphBuilder::countBodyOps(STGParser::BodyContext *body,
                           llvm::SmallVectorImpl<std::string> &active) {
  uint64_t ops = 0;
  for (STGParser::StmtContext *stmt : body->stmt()) {
    uint64_t stmtOps = 0;
    if (auto *param = dynamic_cast<STGParser::ParamStmtContext *>(stmt)) {
      stmtOps = param->declItem().size();
    } else if (auto *state =
                   dynamic_cast<STGParser::StateStmtContext *>(stmt)) {
      stmtOps = state->declItem().size();
    } else if (auto *assign =
                   dynamic_cast<STGParser::AssignStmtContext *>(stmt)) {
      stmtOps = countValueOps(assign->value(), active);
    } else if (auto *ret = dynamic_cast<STGParser::ReturnStmtContext *>(stmt)) {
      stmtOps = countValueOps(ret->value(), active);
    } else if (auto *repeat =
                   dynamic_cast<STGParser::RepeatStmtContext *>(stmt)) {
      stmtOps = countRepeatOps(repeat, active);
    } else if (auto *ifStmt = dynamic_cast<STGParser::IfStmtContext *>(stmt)) {
      // One branch is built each time the statement is.
      for (STGParser::BodyContext *branch : ifStmt->body())
        stmtOps = std::max(stmtOps, countBodyOps(branch, active));
    }
    ops = addSat(ops, stmtOps);
  }
  return ops;
}

bool GraphBuilder::chargeOps(uint64_t ops, SourceLoc loc,
                             const llvm::Twine &what, llvm::StringRef why) {
  if (budgetExceeded)
    return false;
  uint64_t total = addSat(chargedOps, ops);
  if (total <= MaxInlinedOps) {
    chargedOps = total;
    return true;
  }
  budgetExceeded = true;
  std::string amount = ops == std::numeric_limits<uint64_t>::max()
                           ? "more than 2^64"
                           : "about " + std::to_string(ops);
  std::string before =
      chargedOps ? " (after " + std::to_string(chargedOps) + " before it)" : "";
  diags.error(loc, what + " would inline " + amount + " ops" + before +
                       ", more than the limit of " +
                       llvm::Twine(MaxInlinedOps) + " (" + why + ")");
  return false;
}
