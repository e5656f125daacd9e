//===- Limits.h - The largest models the front end builds -------*- C++ -*-===//
//
// Counts past which building a model's IR would run for minutes or exhaust
// memory. A block that calls another twice doubles its ops, so a chain of
// thirty such blocks is a billion ops from a page of text; the front end
// counts what an inlining would build before building it and refuses the
// call that crosses the limit, with an error there. docs/cli.md lists the
// limits, with include/stg/Instantiate/Limits.h's.
//
//===----------------------------------------------------------------------===//

#ifndef STG_PARSE_LIMITS_H
#define STG_PARSE_LIMITS_H

#include <cstdint>

namespace stg {

/// Ops that block calls and layer patterns may add to a model once inlined
/// (an upper bound counted from the text, before building): 2^17, 131,072.
/// The largest shipped template builds under 800 ops and a 128-layer model
/// written out layer by layer some 10^4; parsing 2^17 ops takes about a
/// second and 400 MB, and the passes after it take minutes.
constexpr uint64_t MaxInlinedOps = uint64_t(1) << 17;

} // namespace stg

#endif // STG_PARSE_LIMITS_H
