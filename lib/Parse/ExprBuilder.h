//===- ExprBuilder.h - Expressions, types and attributes --------*- C++ -*-===//
//
// Turns the small leaves of the parse tree into IR pieces: symbolic
// expressions over dims and axes, tensor types (deciding that the `/tp` in
// `D/tp` is a partition because `tp` is an axis), and op attributes checked
// against the op's schema.
//
//===----------------------------------------------------------------------===//

#ifndef STG_LIB_PARSE_EXPRBUILDER_H
#define STG_LIB_PARSE_EXPRBUILDER_H

#include "SourceFile.h"

#include "stg/IR/Attribute.h"
#include "stg/IR/Module.h"

#include "llvm/ADT/StringMap.h"

#include <optional>

namespace stg {

/// The kind of a block's attribute parameter: what a call may give it and
/// where the body may use it.
enum class BlockAttrKind { Bool, String, Expr };

/// `bool`, `string` or `expr`, as written in a block's brackets.
const char *getBlockAttrKindName(BlockAttrKind kind);

/// A block attribute parameter's value at one call (or its default).
struct BlockAttrValue {
  BlockAttrKind kind = BlockAttrKind::Expr;
  bool flag = false;
  std::string text;
  Expr expr;
  /// A stand-in for a required parameter while a block nothing calls is
  /// checked: any choice of an op's attribute accepts it.
  bool standIn = false;
};

/// The attribute parameters in force while one call's body is built.
struct BlockAttrScope {
  std::string block;
  SourceLoc callLoc;
  llvm::StringMap<BlockAttrValue> values;

  const BlockAttrValue *lookup(llvm::StringRef name) const {
    auto it = values.find(name);
    return it == values.end() ? nullptr : &it->second;
  }
};

class ExprBuilder {
public:
  ExprBuilder(Module &module, DiagnosticEngine &diags)
      : module(module), diags(diags) {}

  /// A symbolic expression; every name must be a dim or an axis.
  std::optional<Expr> buildExpr(STGParser::ExprContext *ctx,
                                const SourceFile &file);
  std::optional<TensorType> buildType(STGParser::TypeContext *ctx,
                                      const SourceFile &file);
  /// Checks `[...]` of a call to `info` and returns the attributes in
  /// schema order, defaults filled in.
  std::optional<llvm::SmallVector<NamedAttribute, 2>>
  buildAttrs(const OpInfo &info, STGParser::AttrListContext *ctx,
             antlr4::Token *opToken, unsigned numOperands,
             const SourceFile &file);

  /// The attribute parameters that names in expressions and attribute
  /// values resolve to first (a block body's), or null; returns the last.
  const BlockAttrScope *setBlockAttrs(const BlockAttrScope *scope) {
    std::swap(scope, blockAttrs);
    return scope;
  }
  const BlockAttrScope *getBlockAttrs() const { return blockAttrs; }

private:
  std::optional<Expr> buildExprUnchecked(STGParser::ExprContext *ctx,
                                         const SourceFile &file);
  /// Peels `X/a`, `X/(a*b)`, `X/a/b` into the extent X and the axes.
  STGParser::ExprContext *
  splitPartition(STGParser::ExprContext *ctx,
                 llvm::SmallVectorImpl<const Axis *> &axes,
                 const SourceFile &file, bool &failed);
  bool mentionsAxis(antlr4::tree::ParseTree *tree);
  bool collectAxisProduct(STGParser::ExprContext *ctx,
                          llvm::SmallVectorImpl<const Axis *> &axes);
  const Axis *lookupAxisOrReport(antlr4::tree::TerminalNode *id,
                                 const SourceFile &file);
  std::optional<EinsumSpec> buildEinsumSpec(STGParser::EinsumSpecContext *ctx,
                                            unsigned numOperands,
                                            const SourceFile &file);
  std::optional<Attribute> buildAttrValue(const OpInfo &info,
                                          const AttrSpec &spec,
                                          STGParser::AttrValueContext *ctx,
                                          const SourceFile &file);
  Attribute buildDefault(const AttrSpec &spec);

  /// Reports a use of a block attribute parameter of the wrong kind,
  /// with a note at the call that gave it.
  void reportAttrParamKind(SourceLoc loc, llvm::StringRef name,
                           const BlockAttrValue &value,
                           const llvm::Twine &expected);

  Module &module;
  DiagnosticEngine &diags;
  const BlockAttrScope *blockAttrs = nullptr;
};

} // namespace stg

#endif // STG_LIB_PARSE_EXPRBUILDER_H
