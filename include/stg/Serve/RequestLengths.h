//===- RequestLengths.h - A serving workload's request lengths ---*- C++ -*-===//
//
// `--lengths FILE.csv`: one request a line, `input,output` tokens, in the
// order the requests are sent (and again from the top when there are more
// requests than lines). A first line `input,output` is a header; `#` starts
// a comment. Errors are located: `file.csv:3:7: error: ...` with the line
// and a caret.
//
//===----------------------------------------------------------------------===//

#ifndef STG_SERVE_REQUESTLENGTHS_H
#define STG_SERVE_REQUESTLENGTHS_H

#include "stg/Serve/ServingSimulation.h"

#include <optional>
#include <vector>

namespace stg {

/// The most tokens of a request's input or output: far past any model's
/// context, small enough that sums over a million requests stay exact.
constexpr uint64_t MaxRequestTokens = 1u << 24;

std::optional<std::vector<RequestLengths>>
loadRequestLengths(llvm::StringRef path, DiagnosticEngine &diags);

} // namespace stg

#endif // STG_SERVE_REQUESTLENGTHS_H
