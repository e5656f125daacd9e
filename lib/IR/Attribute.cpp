//===- Attribute.cpp - Op attributes --------------------------------------===//

#include "stg/IR/Attribute.h"

#include "llvm/ADT/STLExtras.h"

using namespace stg;

void EinsumSpec::print(llvm::raw_ostream &os) const {
  llvm::interleave(inputs, os, ",");
  os << "->" << output;
}

Attribute Attribute::getExpr(AttrKind kind, Expr value) {
  Attribute attr;
  attr.kind = kind;
  attr.expr = std::move(value);
  return attr;
}

Attribute Attribute::getText(AttrKind kind, std::string value) {
  Attribute attr;
  attr.kind = kind;
  attr.text = std::move(value);
  return attr;
}

Attribute Attribute::getAxes(llvm::SmallVector<const Axis *, 2> axes) {
  Attribute attr;
  attr.kind = AttrKind::Axes;
  attr.axes = std::move(axes);
  return attr;
}

Attribute Attribute::getList(llvm::SmallVector<Expr, 4> values) {
  Attribute attr;
  attr.kind = AttrKind::IntList;
  attr.list = std::move(values);
  return attr;
}

Attribute Attribute::getEinsum(EinsumSpec spec) {
  Attribute attr;
  attr.kind = AttrKind::Einsum;
  attr.einsum = std::move(spec);
  return attr;
}

void Attribute::print(llvm::raw_ostream &os,
                      const ExprPrinter &printer) const {
  switch (kind) {
  case AttrKind::Int:
  case AttrKind::Expr:
    printer.print(os, expr);
    return;
  case AttrKind::Ident:
    os << text;
    return;
  case AttrKind::String:
    os << '"';
    os.write_escaped(text);
    os << '"';
    return;
  case AttrKind::Axes:
    if (axes.size() == 1) {
      os << axes.front()->name;
      return;
    }
    os << '(';
    llvm::interleave(
        axes, os, [&](const Axis *axis) { os << axis->name; }, ", ");
    os << ')';
    return;
  case AttrKind::IntList:
    os << '(';
    llvm::interleave(
        list, os, [&](const Expr &e) { printer.print(os, e); }, ", ");
    os << ')';
    return;
  case AttrKind::Einsum:
    einsum.print(os);
    return;
  }
}
