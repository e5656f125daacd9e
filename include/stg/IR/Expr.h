//===- Expr.h - Symbolic expressions over dims and axes ---------*- C++ -*-===//
//
// Shapes, costs and attribute values in the STG IR are GiNaC expressions over
// the module's symbols: `dim` sizes (B, S, D, ...) and mesh-axis degrees (dp,
// tp, ...). GiNaC identifies a symbol by object, not by name, so every symbol
// is created once through a SymbolTable and looked up there afterwards.
//
// GiNaC's own printer orders factors by hash and writes `NH^(-1)*D`; the
// ExprPrinter here writes `D/NH`, ordering symbols by declaration, so IR text
// is readable and stable for tests.
//
//===----------------------------------------------------------------------===//

#ifndef STG_IR_EXPR_H
#define STG_IR_EXPR_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

#include <ginac/ginac.h>
// CLN, under GiNaC, defines a function-like macro `Mutable` that no header
// uses but that breaks protobuf's headers (Chakra) included after this one.
#undef Mutable

#include <optional>
#include <set>
#include <string>

namespace stg {

using Expr = GiNaC::ex;

/// Owns the GiNaC symbols of one module, in declaration order.
class SymbolTable {
public:
  /// Returns the symbol called `name`, creating it (with the next ordinal) if
  /// it does not exist yet.
  GiNaC::symbol getOrCreate(llvm::StringRef name);
  /// Returns the symbol called `name`, if declared.
  std::optional<GiNaC::symbol> lookup(llvm::StringRef name) const;
  /// Declaration order of `sym`; symbols not from this table sort last.
  unsigned ordinal(const GiNaC::symbol &sym) const;

private:
  struct Entry {
    GiNaC::symbol symbol;
    unsigned ordinal;
  };
  llvm::StringMap<Entry> symbols;
};

/// Prints expressions as `2*B*S*D/tp`, `D/NH`, `S/2 + 1`.
class ExprPrinter {
public:
  explicit ExprPrinter(const SymbolTable *symbols = nullptr)
      : symbols(symbols) {}
  void print(llvm::raw_ostream &os, const Expr &e) const;
  std::string str(const Expr &e) const;

private:
  enum class Prec { Sum, Product, Power, Atom };
  void print(llvm::raw_ostream &os, const Expr &e, Prec context) const;
  void printProduct(llvm::raw_ostream &os, const Expr &e, Prec context) const;
  void printSum(llvm::raw_ostream &os, const Expr &e, Prec context) const;
  unsigned orderKey(const Expr &e) const;
  void sortOperands(std::vector<Expr> &operands) const;
  /// True if the term of `sum` that leads in printing order is negative.
  bool leadsNegative(const Expr &sum) const;

  const SymbolTable *symbols;
};

/// The integer functions of the language: `ceil(x)`, `floor(x)`,
/// `min(x, y)`, `max(x, y)`. Symbolic until their arguments are numbers,
/// then folded exactly (GiNaC evaluates a function as binding substitutes
/// into it). Nothing for an unknown name or the wrong number of arguments.
std::optional<Expr> makeFunction(llvm::StringRef name,
                                 llvm::ArrayRef<Expr> arguments);

/// The functions makeFunction makes.
enum class IntegerFunction { Floor, Ceil, Min, Max };
/// Which of them `e` is an application of, if any (CompiledExpr).
std::optional<IntegerFunction> getIntegerFunction(const Expr &e);

/// The names makeFunction knows, with their arity, for messages.
llvm::StringRef getFunctionSignatures();

/// Parses a decimal literal ("0.125", "1e-3", "42") into an exact rational.
std::optional<Expr> parseDecimal(llvm::StringRef text);

/// `e.subs(values)` for `values` keyed by symbols, or nothing if the result
/// divides by zero (GiNaC evaluates as it substitutes, and throws on a
/// pole).
std::optional<Expr> trySubstitute(const Expr &e, const GiNaC::exmap &values);

/// The integer value of `e` if it is an integer constant.
std::optional<long long> getIntegerValue(const Expr &e);

/// The names of the symbols `e` mentions, sorted, each once.
std::set<std::string> getSymbolNames(const Expr &e);

} // namespace stg

#endif // STG_IR_EXPR_H
