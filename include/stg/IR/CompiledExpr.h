//===- CompiledExpr.h - Exact evaluation without substitution ---*- C++ -*-===//
//
// Binding an expression with GiNaC (Module::bindAll) substitutes into it
// and re-evaluates the tree: microseconds, and the plan search binds every
// op's costs for every plan's numbers. A CompiledExpr is the expression
// turned once into a small stack program over rationals with checked
// 128-bit arithmetic, run with the bound value of each symbol it mentions.
//
// It answers only when it can answer exactly: an expression it cannot
// compile (a float, a non-integer power, a function other than the
// language's), a symbol without a rational value, a zero divisor or an
// overflow all give nothing, and the caller binds with GiNaC instead. What
// it does answer is the number GiNaC's substitution evaluates to, since
// both compute in the rationals (CompiledExprTest checks the two against each
// other).
//
//===----------------------------------------------------------------------===//

#ifndef STG_IR_COMPILEDEXPR_H
#define STG_IR_COMPILEDEXPR_H

#include "stg/IR/Expr.h"

#include "llvm/ADT/ArrayRef.h"

#include <map>
#include <optional>
#include <vector>

namespace stg {

/// An exact rational num/den: den > 0, in lowest terms.
struct Rational {
  __int128 num = 0, den = 1;

  bool isInteger() const { return den == 1; }
  bool operator==(const Rational &other) const {
    return num == other.num && den == other.den;
  }
  /// `value` as a rational, if it is one whose numerator and denominator
  /// fit 64 bits.
  static std::optional<Rational> fromNumeric(const Expr &value);
};

/// The symbols a set of compiled expressions mentions, each with a slot:
/// the evaluation's values are given per slot.
class SymbolSlots {
public:
  unsigned getSlot(const GiNaC::symbol &symbol);
  const std::vector<Expr> &getSymbols() const { return symbols; }

private:
  std::map<Expr, unsigned, GiNaC::ex_is_less> slots;
  std::vector<Expr> symbols;
};

class CompiledExpr {
public:
  /// An invalid program: evaluates to nothing.
  CompiledExpr() = default;
  /// `e` compiled, its symbols given slots in `slots`; invalid if it holds
  /// anything but rationals, symbols, sums, products, integer powers and
  /// ceil, floor, min and max.
  static CompiledExpr compile(const Expr &e, SymbolSlots &slots);

  bool isValid() const { return valid; }
  /// The exact value with symbol slot i bound to `values[i]` (nothing: no
  /// value), or nothing: see the file comment.
  std::optional<Rational>
  evaluate(llvm::ArrayRef<std::optional<Rational>> values) const;

private:
  enum class OpCode : uint8_t {
    Constant, ///< Push constants[operand].
    Symbol,   ///< Push the value of slot operand.
    Add,      ///< Pop operand values, push their sum.
    Mul,      ///< Pop operand values, push their product.
    Pow,      ///< Replace the top by its operand-th power (signed).
    Floor,
    Ceil,
    Min, ///< Pop two, push the lesser.
    Max
  };
  struct Instruction {
    OpCode code;
    int64_t operand = 0;
  };
  bool compileNode(const Expr &e, SymbolSlots &slots);

  std::vector<Instruction> program;
  std::vector<Rational> constants;
  unsigned maxDepth = 0;
  bool valid = false;
};

} // namespace stg

#endif // STG_IR_COMPILEDEXPR_H
