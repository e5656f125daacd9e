//===- RequestLengths.h - A serving workload's request lengths -*- C++ -*-===//
//
// `--lengths FILE.csv`: one request a line, `input,output` tokens, in the
// order the requests are sent (and again from the top when there are more
// requests than lines); with multi-turn conversations a line is a turn's
// new input and its output. `#` starts a comment. A first line of names is
// a header, which may also name an arrival column: `arrival_s` or
// `arrival_ms` (from any origin), or `timestamp` in seconds or as the
// Azure LLM inference traces write it (`TIMESTAMP,ContextTokens,
// GeneratedTokens`, `2023-11-16 18:15:46.6805900`; BurstGPT's `Timestamp,
// Model,Request tokens,Response tokens,Total tokens,Log Type`, its other
// columns ignored); the requests then arrive when the file says, each
// once. A file whose first line opens a JSON object is JSON lines as
// Mooncake's traces are written (and NVIDIA Dynamo's and AIPerf's replays
// read them): `{"timestamp": 27482, "input_length": 6955,
// "output_length": 52, "hash_ids": [46, 47, ...]}`, the timestamp in
// milliseconds and optional, each hash id a block of the prompt
// (PromptBlocks). Errors are located: `file.csv:3:7: error: ...` with the
// line and a caret.
//
//===----------------------------------------------------------------------===//

#ifndef STG_SERVE_REQUESTLENGTHS_H
#define STG_SERVE_REQUESTLENGTHS_H

#include "stg/Serve/ServingSimulation.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLFunctionalExtras.h"

#include <optional>
#include <string>
#include <vector>

namespace stg {

/// The most tokens of a request's input or output: far past any model's
/// context, small enough that sums over a million requests stay exact.
constexpr uint64_t MaxRequestTokens = 1u << 24;

/// The longest span of a file's arrival times: 10^7 s (115 days), which
/// keeps a microsecond within a double's precision.
constexpr double MaxArrivalSpanSeconds = 1e7;

/// The tokens a trace's block (a hash id) stands for unless told:
/// Mooncake's.
constexpr uint64_t DefaultTraceBlockTokens = 512;

/// A `--lengths` file's requests.
struct RequestTrace {
  std::vector<RequestLengths> lengths;
  /// Each line's arrival in microseconds after the first line's, in file
  /// order (never earlier than the line before); empty without an arrival
  /// column.
  std::vector<double> arrivals;
  /// Each line's prompt blocks, when some line names any (hash_ids).
  PromptBlocks blocks;
};

/// Reads a `--lengths` file; a hash id stands for `blockTokens` tokens, so
/// a prompt names no more than its tokens fill.
std::optional<RequestTrace>
loadRequestTrace(llvm::StringRef path, DiagnosticEngine &diags,
                 uint64_t blockTokens = DefaultTraceBlockTokens);
/// The same, of a file's text, its errors located in `name`.
std::optional<RequestTrace>
parseRequestTrace(llvm::StringRef text, llvm::StringRef name,
                  DiagnosticEngine &diags,
                  uint64_t blockTokens = DefaultTraceBlockTokens);

/// The most tokens a conversation may reach, its turns' prompts and
/// outputs together.
constexpr uint64_t MaxConversationTokens = uint64_t(1) << 28;

/// Calls `visit(prompt, output)` for every turn of every conversation that
/// `lengths` and `turns` make (ServingWorkload::turns; they repeat after as
/// many conversations as there are lengths), each prompt holding the turns
/// before it.
void forEachTurn(llvm::ArrayRef<RequestLengths> lengths, unsigned turns,
                 llvm::function_ref<void(uint64_t, uint64_t)> visit);

/// The longest context, prompt and output, of any request that `lengths`
/// and `turns` make: what an engine must hold for one sequence.
uint64_t getLongestContext(llvm::ArrayRef<RequestLengths> lengths,
                           unsigned turns);

/// Why the conversations `lengths` and `turns` make are too long, if they
/// are: over MaxConversationTokens.
std::optional<std::string>
checkConversationLength(llvm::ArrayRef<RequestLengths> lengths, unsigned turns);

} // namespace stg

#endif // STG_SERVE_REQUESTLENGTHS_H
