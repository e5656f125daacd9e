//===- CheckedMath.h - Counts and times that never wrap ---------*- C++ -*-===//
//
// Sizes, FLOPs and durations are integers in the traces, and scaling them
// by a factor (a slowdown, a scale, a bandwidth) happens in doubles. These
// turn the double back into an integer without undefined behaviour: a NaN
// or negative result becomes 0, one past INT64_MAX saturates there, so no
// output carries a wrapped value even when the inputs were extreme. The
// inputs themselves are range-checked where they are read; this is the
// second line.
//
//===----------------------------------------------------------------------===//

#ifndef STG_SUPPORT_CHECKEDMATH_H
#define STG_SUPPORT_CHECKEDMATH_H

#include <cmath>
#include <cstdint>
#include <limits>

namespace stg {

/// `x` rounded up to an integer in [0, INT64_MAX].
inline int64_t toCount(double x) {
  constexpr double Max = 9.2233720368547748e18; // Below 2^63, exact.
  if (!(x > 0))                                 // Also NaN.
    return 0;
  if (x >= Max)
    return std::numeric_limits<int64_t>::max();
  return int64_t(std::ceil(x));
}

/// `value * factor`, rounded to nearest, in [0, INT64_MAX].
inline int64_t scaleCount(int64_t value, double factor) {
  double x = double(value) * factor;
  return x < 0.5 ? 0 : toCount(std::floor(x + 0.5));
}

} // namespace stg

#endif // STG_SUPPORT_CHECKEDMATH_H
