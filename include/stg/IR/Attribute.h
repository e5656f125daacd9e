//===- Attribute.h - Op attributes ------------------------------*- C++ -*-===//
//
// The bracketed part of a call: `einsum[bsd,df->bsf]`, `reduce[sum, 2]`,
// `allgather[1, (dp, ep)]`, `custom[name="rope", flops=6*B*S*D]`. Each value
// is stored already checked against the op's AttrSpec, under its schema name.
//
//===----------------------------------------------------------------------===//

#ifndef STG_IR_ATTRIBUTE_H
#define STG_IR_ATTRIBUTE_H

#include "stg/IR/Expr.h"
#include "stg/IR/OpKind.h"
#include "stg/IR/TensorType.h"

#include "llvm/ADT/SmallVector.h"

#include <string>

namespace stg {

/// `bsd,df->bsf`: one index string per operand and one for the result. Each
/// character is one index.
struct EinsumSpec {
  llvm::SmallVector<std::string, 3> inputs;
  std::string output;

  void print(llvm::raw_ostream &os) const;
};

struct Attribute {
  AttrKind kind = AttrKind::Expr;
  Expr expr;                            ///< Int, Expr.
  std::string text;                     ///< Ident, String.
  llvm::SmallVector<const Axis *, 2> axes; ///< Axes.
  llvm::SmallVector<Expr, 4> list;      ///< IntList.
  EinsumSpec einsum;                    ///< Einsum.

  static Attribute getExpr(AttrKind kind, Expr value);
  static Attribute getText(AttrKind kind, std::string value);
  static Attribute getAxes(llvm::SmallVector<const Axis *, 2> axes);
  static Attribute getList(llvm::SmallVector<Expr, 4> values);
  static Attribute getEinsum(EinsumSpec spec);

  void print(llvm::raw_ostream &os, const ExprPrinter &printer) const;
};

struct NamedAttribute {
  std::string name;
  Attribute value;
};

} // namespace stg

#endif // STG_IR_ATTRIBUTE_H
