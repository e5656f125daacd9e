//===- CompiledExpr.cpp - Exact evaluation without substitution -----------===//
//
// Rationals in lowest terms over __int128 with every operation checked:
// an overflow gives nothing rather than a wrong number, so the caller's
// GiNaC path (arbitrary precision) takes over. Keeping lowest terms makes
// "is it an integer" a test of the denominator, as GiNaC's is.
//
//===----------------------------------------------------------------------===//

#include "stg/IR/CompiledExpr.h"

#include "llvm/ADT/SmallVector.h"

#include <numeric>

using namespace stg;

namespace {

using Int = __int128;
using UInt = unsigned __int128;

/// Exponents beyond this are left to GiNaC: no cost formula has them.
constexpr int64_t MaxExponent = 256;

UInt magnitude(Int value) {
  return value < 0 ? UInt(0) - UInt(value) : UInt(value);
}

UInt gcd(UInt a, UInt b) {
  if (a <= UINT64_MAX && b <= UINT64_MAX)
    return std::gcd(uint64_t(a), uint64_t(b));
  while (b) {
    UInt rest = a % b;
    a = b;
    b = rest;
  }
  return a;
}

/// a / b for b > 0, in 64 bits when both fit: a 128-bit division is a
/// library call, and the costs' numbers almost always fit.
Int quotient(Int a, Int b) {
  if (a >= INT64_MIN && a <= INT64_MAX && b <= INT64_MAX)
    return int64_t(a) / int64_t(b);
  return a / b;
}

/// a * b into `product`, false on overflow; one machine multiply when
/// both fit 64 bits (a checked 128-bit multiply is a library call).
bool multiplyChecked(Int a, Int b, Int &product) {
  if (a >= INT64_MIN && a <= INT64_MAX && b >= INT64_MIN && b <= INT64_MAX) {
    product = Int(int64_t(a)) * int64_t(b);
    return true;
  }
  return !__builtin_mul_overflow(a, b, &product);
}

std::optional<Rational> makeRational(Int num, Int den) {
  if (den == 0)
    return std::nullopt;
  if (den < 0) {
    if (__builtin_sub_overflow(Int(0), num, &num) ||
        __builtin_sub_overflow(Int(0), den, &den))
      return std::nullopt;
  }
  if (num == 0)
    return Rational{0, 1};
  Int common = Int(gcd(magnitude(num), UInt(den)));
  return Rational{quotient(num, common), quotient(den, common)};
}

std::optional<Rational> add(const Rational &a, const Rational &b) {
  Int num;
  if (a.isInteger() && b.isInteger()) {
    if (__builtin_add_overflow(a.num, b.num, &num))
      return std::nullopt;
    return Rational{num, 1};
  }
  Int common = Int(gcd(UInt(a.den), UInt(b.den)));
  Int left, right, den;
  if (__builtin_mul_overflow(a.num, quotient(b.den, common), &left) ||
      __builtin_mul_overflow(b.num, quotient(a.den, common), &right) ||
      __builtin_add_overflow(left, right, &num) ||
      __builtin_mul_overflow(a.den, quotient(b.den, common), &den))
    return std::nullopt;
  return makeRational(num, den);
}

std::optional<Rational> multiply(const Rational &a, const Rational &b) {
  Int num, den;
  if (a.isInteger() && b.isInteger()) {
    if (__builtin_mul_overflow(a.num, b.num, &num))
      return std::nullopt;
    return Rational{num, 1};
  }
  if (a.num == 0 || b.num == 0)
    return Rational{0, 1};
  // Cancel across first: the factors are in lowest terms, so the product
  // is too.
  Int first = Int(gcd(magnitude(a.num), UInt(b.den)));
  Int second = Int(gcd(magnitude(b.num), UInt(a.den)));
  if (__builtin_mul_overflow(quotient(a.num, first), quotient(b.num, second),
                             &num) ||
      __builtin_mul_overflow(quotient(a.den, second), quotient(b.den, first),
                             &den))
    return std::nullopt;
  return Rational{num, den};
}

std::optional<Rational> power(Rational base, int64_t exponent) {
  if (exponent < 0) {
    if (base.num == 0)
      return std::nullopt; // A pole: GiNaC reports it.
    // In lowest terms already: a positive base only swaps.
    base = base.num > 0 ? Rational{base.den, base.num}
                        : *makeRational(base.den, base.num);
    exponent = -exponent;
  }
  if (exponent == 1) // A division, mostly: no product to reduce.
    return base;
  std::optional<Rational> result = Rational{1, 1};
  for (; exponent; exponent >>= 1) {
    if (exponent & 1)
      if (!(result = multiply(*result, base)))
        return std::nullopt;
    if (exponent > 1) {
      std::optional<Rational> squared = multiply(base, base);
      if (!squared)
        return std::nullopt;
      base = *squared;
    }
  }
  return result;
}

/// As Expr.cpp's floorOf: the quotient truncates toward zero.
Rational floorOf(const Rational &value) {
  if (value.isInteger())
    return value;
  Int quotient = value.num / value.den;
  return {value.num < 0 ? quotient - 1 : quotient, 1};
}

Rational ceilOf(const Rational &value) {
  if (value.isInteger())
    return value;
  Int quotient = value.num / value.den;
  return {value.num > 0 ? quotient + 1 : quotient, 1};
}

/// Whether a < b, or nothing on overflow.
std::optional<bool> isLess(const Rational &a, const Rational &b) {
  Int left, right;
  if (__builtin_mul_overflow(a.num, b.den, &left) ||
      __builtin_mul_overflow(b.num, a.den, &right))
    return std::nullopt;
  return left < right;
}

} // namespace

std::optional<Rational> Rational::fromNumeric(const Expr &value) {
  if (!GiNaC::is_exactly_a<GiNaC::numeric>(value))
    return std::nullopt;
  const auto &number = GiNaC::ex_to<GiNaC::numeric>(value);
  if (!number.is_rational())
    return std::nullopt;
  std::optional<long long> num = getIntegerValue(number.numer());
  std::optional<long long> den = getIntegerValue(number.denom());
  if (!num || !den)
    return std::nullopt;
  return Rational{*num, *den}; // GiNaC keeps it in lowest terms, den > 0.
}

unsigned SymbolSlots::getSlot(const GiNaC::symbol &symbol) {
  auto [it, inserted] = slots.try_emplace(symbol, symbols.size());
  if (inserted)
    symbols.push_back(symbol);
  return it->second;
}

CompiledExpr CompiledExpr::compile(const Expr &e, SymbolSlots &slots) {
  CompiledExpr compiled;
  compiled.valid = compiled.compileNode(e, slots);
  if (!compiled.valid) {
    compiled.program.clear();
    compiled.constants.clear();
    return compiled;
  }
  // The stack's depth, for evaluate's buffer.
  int64_t depth = 0;
  for (const Instruction &instruction : compiled.program) {
    switch (instruction.code) {
    case OpCode::Constant:
    case OpCode::Symbol:
      ++depth;
      break;
    case OpCode::Add:
    case OpCode::Mul:
      depth -= instruction.operand - 1;
      break;
    case OpCode::Min:
    case OpCode::Max:
      --depth;
      break;
    default:
      break;
    }
    compiled.maxDepth = std::max<int64_t>(compiled.maxDepth, depth);
  }
  return compiled;
}

bool CompiledExpr::compileNode(const Expr &e, SymbolSlots &slots) {
  if (GiNaC::is_exactly_a<GiNaC::numeric>(e)) {
    std::optional<Rational> value = Rational::fromNumeric(e);
    if (!value)
      return false;
    program.push_back({OpCode::Constant, int64_t(constants.size())});
    constants.push_back(*value);
    return true;
  }
  if (GiNaC::is_a<GiNaC::symbol>(e)) {
    program.push_back(
        {OpCode::Symbol, slots.getSlot(GiNaC::ex_to<GiNaC::symbol>(e))});
    return true;
  }
  bool sum = GiNaC::is_exactly_a<GiNaC::add>(e);
  if (sum || GiNaC::is_exactly_a<GiNaC::mul>(e)) {
    size_t count = e.nops();
    if (count == 0)
      return false;
    for (size_t i = 0; i < count; ++i)
      if (!compileNode(e.op(i), slots))
        return false;
    program.push_back({sum ? OpCode::Add : OpCode::Mul, int64_t(count)});
    return true;
  }
  if (GiNaC::is_exactly_a<GiNaC::power>(e)) {
    std::optional<long long> exponent = getIntegerValue(e.op(1));
    if (!exponent || *exponent == 0 || *exponent > MaxExponent ||
        *exponent < -MaxExponent || !compileNode(e.op(0), slots))
      return false;
    program.push_back({OpCode::Pow, *exponent});
    return true;
  }
  std::optional<IntegerFunction> function = getIntegerFunction(e);
  if (!function)
    return false;
  for (size_t i = 0, count = e.nops(); i < count; ++i)
    if (!compileNode(e.op(i), slots))
      return false;
  switch (*function) {
  case IntegerFunction::Floor:
    program.push_back({OpCode::Floor});
    break;
  case IntegerFunction::Ceil:
    program.push_back({OpCode::Ceil});
    break;
  case IntegerFunction::Min:
    program.push_back({OpCode::Min});
    break;
  case IntegerFunction::Max:
    program.push_back({OpCode::Max});
    break;
  }
  return true;
}

std::optional<Rational>
CompiledExpr::evaluate(llvm::ArrayRef<std::optional<Rational>> values) const {
  if (!valid)
    return std::nullopt;
  llvm::SmallVector<Rational, 16> stack;
  stack.reserve(maxDepth);
  for (const Instruction &instruction : program) {
    switch (instruction.code) {
    case OpCode::Constant:
      stack.push_back(constants[instruction.operand]);
      break;
    case OpCode::Symbol: {
      if (size_t(instruction.operand) >= values.size() ||
          !values[instruction.operand])
        return std::nullopt;
      stack.push_back(*values[instruction.operand]);
      break;
    }
    case OpCode::Add:
    case OpCode::Mul: {
      bool sum = instruction.code == OpCode::Add;
      size_t first = stack.size() - instruction.operand;
      std::optional<Rational> result;
      if (!sum) {
        // The numerators' and the denominators' products, reduced once:
        // a cost formula is a product of dims and inverse degrees, and
        // reducing at every factor divides several times a factor.
        Int num = 1, den = 1;
        bool fits = true;
        for (size_t i = first; i < stack.size() && fits; ++i)
          fits =
              multiplyChecked(num, stack[i].num, num) &&
              (stack[i].isInteger() || multiplyChecked(den, stack[i].den, den));
        if (fits)
          result = makeRational(num, den);
      }
      if (!result) { // A sum, or a product too large unreduced.
        result = stack[first];
        for (size_t i = first + 1; i < stack.size(); ++i)
          if (!(result =
                    sum ? add(*result, stack[i]) : multiply(*result, stack[i])))
            return std::nullopt;
      }
      stack.resize(first);
      stack.push_back(*result);
      break;
    }
    case OpCode::Pow: {
      std::optional<Rational> result = power(stack.back(), instruction.operand);
      if (!result)
        return std::nullopt;
      stack.back() = *result;
      break;
    }
    case OpCode::Floor:
      stack.back() = floorOf(stack.back());
      break;
    case OpCode::Ceil:
      stack.back() = ceilOf(stack.back());
      break;
    case OpCode::Min:
    case OpCode::Max: {
      Rational right = stack.pop_back_val();
      std::optional<bool> less = isLess(stack.back(), right);
      if (!less)
        return std::nullopt;
      // As Expr.cpp's evalMin and evalMax: equal values are one rational.
      bool takeRight = instruction.code == OpCode::Min ? !*less : *less;
      if (takeRight)
        stack.back() = right;
      break;
    }
    }
  }
  if (stack.size() != 1)
    return std::nullopt;
  return stack.back();
}
