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

#include <optional>

namespace stg {

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

  Module &module;
  DiagnosticEngine &diags;
};

} // namespace stg

#endif // STG_LIB_PARSE_EXPRBUILDER_H
