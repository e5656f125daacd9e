//===- GraphBuilder.h - Statements to ops, blocks inlined -------*- C++ -*-===//
//
// Builds the model graph from its body. A block call is inlined: the block's
// body is built again in a fresh scope whose prefix gives every value a
// hierarchical name (`layer.decoder.swiglu.w_up`). Typed block parameters and
// results become `layout` ops where the value's known type differs, so the
// collective matcher later sees every place a layout is demanded.
//
//===----------------------------------------------------------------------===//

#ifndef STG_LIB_PARSE_GRAPHBUILDER_H
#define STG_LIB_PARSE_GRAPHBUILDER_H

#include "BlockAttrs.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

namespace stg {

/// A declared block: where its text is and its checked signature.
struct BlockDecl {
  STGParser::BlockDeclContext *ctx = nullptr;
  const SourceFile *file = nullptr;
  std::vector<std::optional<TensorType>> paramTypes;
  std::vector<BlockAttrParam> attrParams;
  std::optional<TensorType> resultType;
  bool signatureValid = true;
  bool instantiated = false;
  /// Declared in an imported file (a library), not the one compiled.
  bool imported = false;
  /// The names its expressions (and the blocks it calls) use that the
  /// module does not declare. A library block with some is reported once,
  /// at its first call, and not at all if nothing calls it.
  std::vector<std::string> missingNames;
  bool missingReported = false;
};

class GraphBuilder {
public:
  GraphBuilder(Module &module, DiagnosticEngine &diags, ExprBuilder &exprs,
               llvm::StringMap<BlockDecl> &blocks)
      : module(module), diags(diags), exprs(exprs), blocks(blocks) {}

  void buildModel(STGParser::ModelDeclContext *ctx, const SourceFile &file);
  /// Instantiates a block nothing called into a scratch graph, so that its
  /// body is checked as if it were used.
  void checkUncalledBlock(llvm::StringRef name, BlockDecl &decl);

private:
  struct Binding {
    Value *value = nullptr; ///< Null after an error: uses stay silent.
    SourceLoc loc;
  };
  struct Scope {
    std::string prefix;
    Graph *graph = nullptr;
    Scope *parent = nullptr; ///< Enclosing scope of a repeat body.
    const SourceFile *file = nullptr;
    bool allowsReturn = false;
    llvm::StringMap<Binding> names;
    llvm::StringSet<> carried; ///< Loop-carried: may be rebound.
    llvm::StringMap<unsigned> instances;
    std::optional<Value *> returned;
    /// In a repeat body: the name of the repeat's index and the index the
    /// body is being built for (a layer pattern builds it once per index of
    /// its period). Empty outside repeats and in blocks.
    std::string indexName;
    int64_t index = 0;
    /// The `if` branches being built around the statement.
    unsigned ifDepth = 0;
  };
  struct Target {
    std::string name;
    std::optional<TensorType> type;
    SourceLoc loc;
  };
  using Values = llvm::SmallVector<Value *, 1>;

  void buildBody(STGParser::BodyContext *body, Scope &scope);
  /// False once building should stop (after `return`, at the error limit).
  bool buildStatement(STGParser::StmtContext *stmt, Scope &scope);
  void buildDecl(STGParser::DeclItemContext *item, OpKind kind, Scope &scope);
  void buildAssign(STGParser::AssignStmtContext *ctx, Scope &scope);
  void buildRepeat(STGParser::RepeatStmtContext *ctx, Scope &scope);
  /// One repeat op of `count` repetitions whose body runs the repeat
  /// statement's body once for each of `indices` (a layer each).
  /// `instances`, if given, numbers block calls across several loops.
  void buildLoop(STGParser::RepeatStmtContext *ctx, Scope &scope,
                 const Expr &count, llvm::StringRef loopName,
                 llvm::StringRef indexName, llvm::ArrayRef<std::string> carried,
                 llvm::ArrayRef<int64_t> indices,
                 llvm::StringMap<unsigned> *instances = nullptr);
  void buildIf(STGParser::IfStmtContext *ctx, Scope &scope);
  /// The layers of a repeat body written as a period, one statement each:
  /// two or more statements, every one assigning a loop-carried name from
  /// a block call (`x = mamba_layer(x); x = attention_layer(x);`). 1 for
  /// any other body.
  unsigned countStatementLayers(STGParser::BodyContext *body,
                                llvm::ArrayRef<std::string> carried);
  /// The period of the layer pattern of a repeat body: the least common
  /// multiple of the moduli its conditions take the index by (1 without
  /// conditions). Nothing after reporting a condition that is not periodic.
  std::optional<unsigned> findPeriod(STGParser::BodyContext *body,
                                     llvm::StringRef indexName,
                                     const SourceFile &file);
  bool findModuli(STGParser::IndexCondContext *cond, llvm::StringRef indexName,
                  const SourceFile &file, unsigned &period);
  bool holds(STGParser::IndexCondContext *cond, int64_t index);
  /// Whether `cond` compares a repeat's index and whether it tests a
  /// flag: a block's attribute parameter (`if rope`) or a bool option.
  void classifyCondition(STGParser::IndexCondContext *cond, bool &usesIndex,
                         bool &usesFlags);
  /// Reports a flag that is neither a bool attribute parameter of the block
  /// being built nor a bool option.
  bool checkFlags(STGParser::IndexCondContext *cond, const SourceFile &file);
  /// The value of a flag checkFlags accepted.
  bool getFlag(llvm::StringRef name) const;
  /// Reports the branches of `body`'s conditions no index took.
  void checkBranchesTaken(STGParser::BodyContext *body, const SourceFile &file);
  void buildReturn(STGParser::ReturnStmtContext *ctx, Scope &scope);

  /// Evaluates a value; `targets` are the names it is assigned to, if any.
  std::optional<Values> buildValue(STGParser::ValueContext *ctx, Scope &scope,
                                   llvm::ArrayRef<Target> targets);
  std::optional<Values> buildCall(antlr4::tree::TerminalNode *callee,
                                  STGParser::AttrListContext *attrs,
                                  bool hasBrackets,
                                  std::vector<STGParser::ValueContext *> args,
                                  Scope &scope, llvm::ArrayRef<Target> targets);
  std::optional<Values> buildBuiltin(OpKind kind, antlr4::Token *opToken,
                                     STGParser::AttrListContext *attrs,
                                     llvm::ArrayRef<Value *> operands,
                                     Scope &scope,
                                     llvm::ArrayRef<Target> targets);
  Value *instantiateBlock(llvm::StringRef name, BlockDecl &decl,
                          llvm::ArrayRef<Value *> args,
                          STGParser::AttrListContext *attrs, SourceLoc callLoc,
                          Scope &caller);

  /// The inlining budget (InlineBudget.cpp): an upper bound on the ops a
  /// body, a value or a block adds once every block call in it is inlined,
  /// saturating at UINT64_MAX. `active` holds the blocks being counted.
  uint64_t countBodyOps(STGParser::BodyContext *body,
                        llvm::SmallVectorImpl<std::string> &active);
  uint64_t countValueOps(STGParser::ValueContext *value,
                         llvm::SmallVectorImpl<std::string> &active);
  uint64_t countBlockOps(llvm::StringRef name, const BlockDecl &decl,
                         llvm::SmallVectorImpl<std::string> &active);
  /// A repeat statement builds its body 2P - 1 times for a layer pattern
  /// of period P (Conditions.cpp), each time with a repeat and a yield.
  uint64_t countRepeatBuilds(STGParser::RepeatStmtContext *ctx);
  uint64_t countRepeatOps(STGParser::RepeatStmtContext *ctx,
                          llvm::SmallVectorImpl<std::string> &active);
  /// Takes `ops` from the budget for an expansion at `loc` (`what` says
  /// which, `why` how it multiplies); an expansion inside a charged one
  /// passes 0. False, after an error the first time, once it is spent.
  bool chargeOps(uint64_t ops, SourceLoc loc, const llvm::Twine &what,
                 llvm::StringRef why);

  /// Returns `value` if it already has `type`, else a `layout` op's result.
  Value *convertLayout(Value *value, const TensorType &type,
                       llvm::StringRef name, SourceLoc loc, Graph &graph);
  Binding *lookup(Scope &scope, llvm::StringRef name);
  void bind(Scope &scope, llvm::StringRef name, Value *value, SourceLoc loc);
  void collectAssignedNames(STGParser::BodyContext *body,
                            llvm::SmallVectorImpl<std::string> &names);

  Module &module;
  DiagnosticEngine &diags;
  ExprBuilder &exprs;
  llvm::StringMap<BlockDecl> &blocks;
  llvm::SmallVector<std::string, 8> activeBlocks;
  /// The `if` branches some layer took.
  llvm::DenseSet<const STGParser::BodyContext *> takenBranches;
  /// Ops charged to the inlining budget, whether an expansion being built
  /// was charged (what it inlines is counted in it), and whether the
  /// budget was exceeded (every later expansion stops quietly).
  uint64_t chargedOps = 0;
  unsigned chargedDepth = 0;
  bool budgetExceeded = false;
  llvm::DenseMap<const STGParser::BlockDeclContext *, uint64_t> blockOps;
};

} // namespace stg

#endif // STG_LIB_PARSE_GRAPHBUILDER_H
