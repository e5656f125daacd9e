//===- Expr.cpp - Symbolic expressions over dims and axes -----------------===//
//
// The symbol table and a readable, deterministic printer for GiNaC
// expressions. Products are written as numerator/denominator with factors in
// declaration order; sums put constants last.
//
//===----------------------------------------------------------------------===//

#include "stg/IR/Expr.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

#include <algorithm>

using namespace stg;

//===----------------------------------------------------------------------===//
// SymbolTable
//===----------------------------------------------------------------------===//

GiNaC::symbol SymbolTable::getOrCreate(llvm::StringRef name) {
  auto it = symbols.find(name);
  if (it != symbols.end())
    return it->second.symbol;
  unsigned ordinal = symbols.size();
  Entry entry{GiNaC::symbol(name.str()), ordinal};
  symbols.try_emplace(name, entry);
  return entry.symbol;
}

std::optional<GiNaC::symbol> SymbolTable::lookup(llvm::StringRef name) const {
  auto it = symbols.find(name);
  if (it == symbols.end())
    return std::nullopt;
  return it->second.symbol;
}

unsigned SymbolTable::ordinal(const GiNaC::symbol &sym) const {
  auto it = symbols.find(sym.get_name());
  if (it == symbols.end() || !it->second.symbol.is_equal(sym))
    return ~0u;
  return it->second.ordinal;
}

//===----------------------------------------------------------------------===//
// Integer functions
//===----------------------------------------------------------------------===//

namespace {

/// A real rational number, or nothing (a symbol, a float, a complex).
std::optional<GiNaC::numeric> getRational(const Expr &e) {
  if (!GiNaC::is_exactly_a<GiNaC::numeric>(e))
    return std::nullopt;
  const auto &n = GiNaC::ex_to<GiNaC::numeric>(e);
  return n.is_rational() ? std::optional(n) : std::nullopt;
}

GiNaC::numeric floorOf(const GiNaC::numeric &n) {
  GiNaC::numeric p = n.numer(), q = n.denom(); // q > 0
  GiNaC::numeric quotient = GiNaC::iquo(p, q); // Truncated toward zero.
  return p.is_negative() && !GiNaC::irem(p, q).is_zero() ? quotient - 1
                                                          : quotient;
}

} // namespace

// GiNaC functions, registered once: `eval` folds them once the arguments
// are numbers, and keeps them whole (`hold`) while they are not.
DECLARE_FUNCTION_1P(stg_floor)
DECLARE_FUNCTION_1P(stg_ceil)
DECLARE_FUNCTION_2P(stg_min)
DECLARE_FUNCTION_2P(stg_max)

static Expr evalFloor(const Expr &x) {
  if (std::optional<GiNaC::numeric> n = getRational(x))
    return floorOf(*n);
  return stg_floor(x).hold();
}

static Expr evalCeil(const Expr &x) {
  if (std::optional<GiNaC::numeric> n = getRational(x))
    return -floorOf(-*n);
  return stg_ceil(x).hold();
}

static Expr evalMin(const Expr &x, const Expr &y) {
  std::optional<GiNaC::numeric> a = getRational(x), b = getRational(y);
  if (a && b)
    return *a < *b ? *a : *b;
  if (x.is_equal(y))
    return x;
  return stg_min(x, y).hold();
}

static Expr evalMax(const Expr &x, const Expr &y) {
  std::optional<GiNaC::numeric> a = getRational(x), b = getRational(y);
  if (a && b)
    return *a < *b ? *b : *a;
  if (x.is_equal(y))
    return x;
  return stg_max(x, y).hold();
}

REGISTER_FUNCTION(stg_floor, eval_func(evalFloor))
REGISTER_FUNCTION(stg_ceil, eval_func(evalCeil))
REGISTER_FUNCTION(stg_min, eval_func(evalMin))
REGISTER_FUNCTION(stg_max, eval_func(evalMax))

/// The language's name of a function makeFunction made, or nothing.
static std::optional<llvm::StringRef> getFunctionName(const Expr &e) {
  if (!GiNaC::is_a<GiNaC::function>(e))
    return std::nullopt;
  unsigned serial = GiNaC::ex_to<GiNaC::function>(e).get_serial();
  if (serial == stg_floor_SERIAL::serial)
    return llvm::StringRef("floor");
  if (serial == stg_ceil_SERIAL::serial)
    return llvm::StringRef("ceil");
  if (serial == stg_min_SERIAL::serial)
    return llvm::StringRef("min");
  if (serial == stg_max_SERIAL::serial)
    return llvm::StringRef("max");
  return std::nullopt;
}

std::optional<IntegerFunction> stg::getIntegerFunction(const Expr &e) {
  if (!GiNaC::is_a<GiNaC::function>(e))
    return std::nullopt;
  unsigned serial = GiNaC::ex_to<GiNaC::function>(e).get_serial();
  if (serial == stg_floor_SERIAL::serial)
    return IntegerFunction::Floor;
  if (serial == stg_ceil_SERIAL::serial)
    return IntegerFunction::Ceil;
  if (serial == stg_min_SERIAL::serial)
    return IntegerFunction::Min;
  if (serial == stg_max_SERIAL::serial)
    return IntegerFunction::Max;
  return std::nullopt;
}

std::optional<Expr> stg::makeFunction(llvm::StringRef name,
                                      llvm::ArrayRef<Expr> arguments) {
  if (arguments.size() == 1 && name == "floor")
    return stg_floor(arguments[0]);
  if (arguments.size() == 1 && name == "ceil")
    return stg_ceil(arguments[0]);
  if (arguments.size() == 2 && name == "min")
    return stg_min(arguments[0], arguments[1]);
  if (arguments.size() == 2 && name == "max")
    return stg_max(arguments[0], arguments[1]);
  return std::nullopt;
}

llvm::StringRef stg::getFunctionSignatures() {
  return "ceil(x), floor(x), min(x, y), max(x, y)";
}

//===----------------------------------------------------------------------===//
// ExprPrinter
//===----------------------------------------------------------------------===//

std::string ExprPrinter::str(const Expr &e) const {
  std::string text;
  llvm::raw_string_ostream os(text);
  print(os, e);
  return os.str();
}

void ExprPrinter::print(llvm::raw_ostream &os, const Expr &e) const {
  print(os, e, Prec::Sum);
}

unsigned ExprPrinter::orderKey(const Expr &e) const {
  if (GiNaC::is_a<GiNaC::symbol>(e))
    return symbols ? symbols->ordinal(GiNaC::ex_to<GiNaC::symbol>(e)) : 0;
  if (GiNaC::is_a<GiNaC::numeric>(e))
    return ~0u; // Constants go last in sums.
  unsigned key = ~0u - 1;
  for (size_t i = 0, n = e.nops(); i < n; ++i)
    key = std::min(key, orderKey(e.op(i)));
  return key;
}

void ExprPrinter::sortOperands(std::vector<Expr> &operands) const {
  if (operands.size() < 2)
    return; // Also ends the recursion: printing a lone factor sorts nothing.
  // Ties (same leading symbol) are broken by the printed text: GiNaC's own
  // order depends on symbol serial numbers, which differ between programs.
  std::vector<std::pair<unsigned, std::string>> keys;
  for (const Expr &e : operands)
    keys.push_back({orderKey(e), str(e)});
  std::vector<size_t> order(operands.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return keys[a] < keys[b]; });
  std::vector<Expr> sorted;
  for (size_t i : order)
    sorted.push_back(operands[i]);
  operands = std::move(sorted);
}

static void printNumeric(llvm::raw_ostream &os, const GiNaC::numeric &n) {
  std::ostringstream text;
  text << n;
  os << text.str();
}

void ExprPrinter::print(llvm::raw_ostream &os, const Expr &e,
                        Prec context) const {
  if (GiNaC::is_a<GiNaC::symbol>(e)) {
    os << GiNaC::ex_to<GiNaC::symbol>(e).get_name();
    return;
  }
  if (GiNaC::is_a<GiNaC::numeric>(e)) {
    const auto &n = GiNaC::ex_to<GiNaC::numeric>(e);
    bool needsParens =
        (n.is_negative() && context != Prec::Sum) ||
        (!n.is_integer() && context >= Prec::Product);
    if (needsParens)
      os << '(';
    printNumeric(os, n);
    if (needsParens)
      os << ')';
    return;
  }
  if (GiNaC::is_a<GiNaC::add>(e))
    return printSum(os, e, context);
  if (GiNaC::is_a<GiNaC::mul>(e) || GiNaC::is_a<GiNaC::power>(e))
    return printProduct(os, e, context);
  if (std::optional<llvm::StringRef> name = getFunctionName(e)) {
    os << *name << '(';
    for (size_t i = 0, n = e.nops(); i < n; ++i) {
      if (i)
        os << ", ";
      print(os, e.op(i), Prec::Sum);
    }
    os << ')';
    return;
  }
  // Anything else (functions GiNaC introduced) keeps GiNaC's spelling.
  std::ostringstream text;
  text << e;
  os << '(' << text.str() << ')';
}

/// True for a term GiNaC stores with a negative coefficient (`-B`, `-3`).
static bool isNegativeTerm(const Expr &term) {
  if (GiNaC::is_a<GiNaC::numeric>(term))
    return GiNaC::ex_to<GiNaC::numeric>(term).is_negative();
  if (!GiNaC::is_a<GiNaC::mul>(term))
    return false;
  Expr coeff = term.op(term.nops() - 1);
  return GiNaC::is_a<GiNaC::numeric>(coeff) &&
         GiNaC::ex_to<GiNaC::numeric>(coeff).is_negative();
}

void ExprPrinter::printSum(llvm::raw_ostream &os, const Expr &e,
                           Prec context) const {
  std::vector<Expr> terms(e.begin(), e.end());
  sortOperands(terms);
  // Lead with a positive term: `S - B`, not `-B + S`.
  auto firstPositive = llvm::find_if(terms, [](const Expr &term) {
    return !isNegativeTerm(term);
  });
  if (firstPositive != terms.end())
    std::rotate(terms.begin(), firstPositive, firstPositive + 1);
  if (context != Prec::Sum)
    os << '(';
  for (size_t i = 0; i < terms.size(); ++i) {
    Expr term = terms[i];
    // Write `a - b` rather than `a + -b`.
    bool negative = isNegativeTerm(term);
    if (i != 0)
      os << (negative ? " - " : " + ");
    else if (negative)
      os << '-';
    print(os, negative ? Expr(-term) : term, Prec::Product);
  }
  if (context != Prec::Sum)
    os << ')';
}

bool ExprPrinter::leadsNegative(const Expr &sum) const {
  // The leading term by symbol order, then by its text without the sign,
  // so that a sum and its negation agree on which term leads.
  std::optional<std::pair<unsigned, std::string>> best;
  bool negative = false;
  for (const Expr &term : sum) {
    bool minus = isNegativeTerm(term);
    std::pair<unsigned, std::string> key{orderKey(term),
                                         str(minus ? Expr(-term) : term)};
    if (!best || key < *best) {
      best = key;
      negative = minus;
    }
  }
  return negative;
}

void ExprPrinter::printProduct(llvm::raw_ostream &os, const Expr &e,
                               Prec context) const {
  // Split into a numeric coefficient, numerator and denominator factors.
  GiNaC::numeric coeff = 1;
  std::vector<Expr> numer, denom;
  auto addFactor = [&](const Expr &f) {
    if (GiNaC::is_a<GiNaC::numeric>(f)) {
      coeff *= GiNaC::ex_to<GiNaC::numeric>(f);
    } else if (GiNaC::is_a<GiNaC::power>(f) &&
               GiNaC::is_a<GiNaC::numeric>(f.op(1)) &&
               GiNaC::ex_to<GiNaC::numeric>(f.op(1)).is_negative()) {
      denom.push_back(GiNaC::pow(f.op(0), -f.op(1)));
    } else {
      numer.push_back(f);
    }
  };
  if (GiNaC::is_a<GiNaC::mul>(e))
    for (const Expr &f : e)
      addFactor(f);
  else
    addFactor(e);
  // GiNaC may keep a sum factor as (x - y) or, with the coefficient
  // negated, (y - x), depending on symbol serials that vary from run to
  // run; print the one whose leading term, in printing order, is positive.
  for (std::vector<Expr> *factors : {&numer, &denom})
    for (Expr &f : *factors)
      if (GiNaC::is_a<GiNaC::add>(f) && leadsNegative(f)) {
        f = -f;
        coeff = -coeff;
      }
  sortOperands(numer);
  sortOperands(denom);

  bool negative = coeff.is_negative();
  if (negative)
    coeff = -coeff;
  GiNaC::numeric numCoeff = coeff.numer(), denCoeff = coeff.denom();

  bool parens = context >= Prec::Power || (negative && context != Prec::Sum);
  if (parens)
    os << '(';
  if (negative)
    os << '-';

  auto printFactor = [&](const Expr &f) {
    if (GiNaC::is_a<GiNaC::power>(f)) {
      print(os, f.op(0), Prec::Atom);
      os << '^';
      print(os, f.op(1), Prec::Atom);
    } else {
      print(os, f, Prec::Product);
    }
  };
  bool first = true;
  if (numCoeff != 1 || numer.empty()) {
    printNumeric(os, numCoeff);
    first = false;
  }
  for (const Expr &f : numer) {
    if (!first)
      os << '*';
    printFactor(f);
    first = false;
  }
  size_t denomCount = denom.size() + (denCoeff != 1 ? 1 : 0);
  if (denomCount) {
    os << '/';
    if (denomCount > 1)
      os << '(';
    bool firstDen = true;
    if (denCoeff != 1) {
      printNumeric(os, denCoeff);
      firstDen = false;
    }
    for (const Expr &f : denom) {
      if (!firstDen)
        os << '*';
      printFactor(f);
      firstDen = false;
    }
    if (denomCount > 1)
      os << ')';
  }
  if (parens)
    os << ')';
}

//===----------------------------------------------------------------------===//
// Literals
//===----------------------------------------------------------------------===//

std::optional<Expr> stg::parseDecimal(llvm::StringRef text) {
  llvm::StringRef mantissa = text, exponentText;
  size_t ePos = text.find_first_of("eE");
  if (ePos != llvm::StringRef::npos) {
    mantissa = text.substr(0, ePos);
    exponentText = text.substr(ePos + 1);
  }
  auto [intPart, fracPart] = mantissa.split('.');
  std::string digits = intPart.str() + fracPart.str();
  if (digits.empty() || digits.size() > 40)
    return std::nullopt;
  // `--set` values reach here unchecked, and GiNaC throws on anything but
  // digits ("abc", "1.2.3").
  if (!llvm::all_of(digits, llvm::isDigit))
    return std::nullopt;
  long exponent = 0;
  if (!exponentText.empty()) {
    exponentText.consume_front("+");
    if (exponentText.getAsInteger(10, exponent) || exponent > 400 ||
        exponent < -400)
      return std::nullopt;
  }
  exponent -= static_cast<long>(fracPart.size());
  GiNaC::numeric value(digits.c_str());
  GiNaC::numeric scale =
      GiNaC::numeric(10).power(GiNaC::numeric(std::labs(exponent)));
  if (exponent >= 0)
    value = value.mul(scale);
  else
    value = value.div(scale);
  return Expr(value);
}

std::optional<Expr> stg::trySubstitute(const Expr &e,
                                       const GiNaC::exmap &values) {
  try {
    // The keys are symbols: looked up, not matched as patterns against
    // every subexpression (GiNaC's default, many times slower).
    return e.subs(values, GiNaC::subs_options::no_pattern);
  } catch (const std::domain_error &) {
    return std::nullopt; // GiNaC::pole_error: a symbolic pole became real.
  } catch (const std::overflow_error &) {
    return std::nullopt; // numeric::div by an exact zero.
  }
}

std::optional<long long> stg::getIntegerValue(const Expr &e) {
  if (!GiNaC::is_a<GiNaC::numeric>(e))
    return std::nullopt;
  const auto &n = GiNaC::ex_to<GiNaC::numeric>(e);
  if (!n.is_integer() || GiNaC::abs(n) > GiNaC::numeric(1LL << 62))
    return std::nullopt;
  return n.to_long();
}

std::set<std::string> stg::getSymbolNames(const Expr &e) {
  std::set<std::string> names;
  for (auto it = e.preorder_begin(); it != e.preorder_end(); ++it)
    if (GiNaC::is_a<GiNaC::symbol>(*it))
      names.insert(GiNaC::ex_to<GiNaC::symbol>(*it).get_name());
  return names;
}
