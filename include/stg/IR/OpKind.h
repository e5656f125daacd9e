//===- OpKind.h - Op kinds, their arity and attribute schemas ---*- C++ -*-===//
//
// The static description of every builtin op: its spelling, how many operands
// it takes, whether its result type must be written, and the attributes it
// accepts (positionally or by name). The parser checks calls against it and
// the verifier checks the IR against it, so both agree by construction.
//
//===----------------------------------------------------------------------===//

#ifndef STG_IR_OPKIND_H
#define STG_IR_OPKIND_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <optional>

namespace stg {

enum class OpKind {
#define STG_OP(Enum, Name, Min, Max, Flags) Enum,
#include "stg/IR/Ops.def"
};

/// Flags of Ops.def.
enum OpFlags : unsigned {
  NeedsType = 1u << 0,   ///< The result type must be written by the user.
  Internal = 1u << 1,    ///< Created by the compiler only.
  Elementwise = 1u << 2, ///< Same-shape (broadcasting) elementwise op.
  Collective = 1u << 3,  ///< Communication across an axis group.
  MultiResult = 1u << 4, ///< May define more than one value.
};

/// What an attribute's value must be.
enum class AttrKind {
  Int,    ///< An integer constant (a dimension index).
  Expr,   ///< A symbolic expression over dims.
  Ident,  ///< One of a fixed set of words (`sum|max|mean`).
  String, ///< A quoted string.
  Axes,   ///< One axis or a tuple of axes: `tp`, `(dp, ep)`.
  IntList, ///< The remaining positional integers: `transpose[0, 2, 1]`.
  Einsum   ///< An einsum spec: `bsd,df->bsf`.
};

struct AttrSpec {
  const char *name;
  AttrKind kind;
  /// Spelling of the default; null means the attribute is required.
  const char *defaultValue = nullptr;
  /// For AttrKind::Ident: the accepted words, separated by '|'.
  const char *choices = nullptr;
  /// Set by the compiler (a collective's per-rank bytes), never written.
  bool computed = false;
};

struct OpInfo {
  OpKind kind;
  llvm::StringRef name;
  int minOperands;
  int maxOperands; ///< -1: unbounded.
  unsigned flags;
  llvm::ArrayRef<AttrSpec> attrs;

  bool has(OpFlags flag) const { return flags & flag; }
  bool acceptsOperandCount(unsigned n) const {
    return n >= unsigned(minOperands) &&
           (maxOperands < 0 || n <= unsigned(maxOperands));
  }
  const AttrSpec *findAttr(llvm::StringRef attrName) const;
};

const OpInfo &getOpInfo(OpKind kind);
/// Looks up a user-callable op by spelling (internal ops are not found).
std::optional<OpKind> lookupOpKind(llvm::StringRef name);
llvm::ArrayRef<OpInfo> getAllOpInfos();

} // namespace stg

#endif // STG_IR_OPKIND_H
