//===- BlockAttrs.h - Attribute parameters of blocks ------------*- C++ -*-===//
//
// A block may take attributes as an op does (`attn[mask = "sliding",
// window = WIN](x)`), so that variants of one layer (sliding, chunked,
// global, NoPE attention) are one block. Each parameter has a kind (bool,
// string or expr) and an optional default; its value is fixed where the
// block is inlined, and the body's expressions, attribute values and `if`
// conditions read it.
//
//===----------------------------------------------------------------------===//

#ifndef STG_LIB_PARSE_BLOCKATTRS_H
#define STG_LIB_PARSE_BLOCKATTRS_H

#include "ExprBuilder.h"

namespace stg {

/// A block's attribute parameter, as declared.
struct BlockAttrParam {
  std::string name;
  SourceLoc loc;
  BlockAttrKind kind = BlockAttrKind::Expr;
  /// None: every call must give it.
  std::optional<BlockAttrValue> defaultValue;
};

/// Checks the attribute parameters of `ctx` (names, kinds, defaults) and
/// appends them to `params`. False after an error.
bool declareBlockAttrs(STGParser::BlockDeclContext *ctx, const SourceFile &file,
                       Module &module, ExprBuilder &exprs,
                       DiagnosticEngine &diags,
                       std::vector<BlockAttrParam> &params);

/// The values the brackets of a call to `block` give its parameters, the
/// defaults filled in. Values are built where the call is, so a bare name
/// may forward one of the caller's own attribute parameters.
std::optional<BlockAttrScope>
bindBlockAttrs(llvm::StringRef block, llvm::ArrayRef<BlockAttrParam> params,
               STGParser::AttrListContext *attrs, SourceLoc callLoc,
               const SourceFile &callerFile, Module &module, ExprBuilder &exprs,
               DiagnosticEngine &diags);

/// The values a block nothing calls is checked with: the defaults, and for
/// a parameter without one a stand-in of its kind (a fresh symbol, an empty
/// string, false).
BlockAttrScope defaultBlockAttrs(llvm::StringRef block,
                                 llvm::ArrayRef<BlockAttrParam> params);

} // namespace stg

#endif // STG_LIB_PARSE_BLOCKATTRS_H
