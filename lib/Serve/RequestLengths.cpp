//===- RequestLengths.cpp - A serving workload's request lengths ----------===//

#include "stg/Serve/RequestLengths.h"

#include "stg/Support/InputFile.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <numeric>

using namespace stg;

namespace {

/// What a column of a `--lengths` file holds.
enum class Column { Input, Output, ArrivalSeconds, ArrivalMillis, Timestamp };

std::optional<Column> getColumn(llvm::StringRef name) {
  return llvm::StringSwitch<std::optional<Column>>(name.lower())
      .Cases("input", "input_length", "contexttokens", Column::Input)
      .Cases("output", "output_length", "generatedtokens", Column::Output)
      .Case("arrival_s", Column::ArrivalSeconds)
      .Case("arrival_ms", Column::ArrivalMillis)
      .Case("timestamp", Column::Timestamp)
      .Default(std::nullopt);
}

/// A time as whole seconds and a fraction, kept apart so that differences
/// of Azure's timestamps (10^9 s, to 100 ns) stay exact enough.
struct Instant {
  int64_t seconds = 0;
  double fraction = 0;
};

/// The largest time a cell may give in seconds: past any date's, small
/// enough for a whole number of seconds.
constexpr double MaxInstantSeconds = 1e12;

std::optional<Instant> parseSeconds(llvm::StringRef cell, double unit) {
  double value = 0;
  if (cell.getAsDouble(value) || !std::isfinite(value) || value < 0 ||
      value * unit > MaxInstantSeconds)
    return std::nullopt;
  value *= unit;
  double whole = std::floor(value);
  return Instant{int64_t(whole), value - whole};
}

/// `2023-11-16 18:15:46.6805900` (UTC), as the Azure traces write it.
std::optional<Instant> parseDateTime(llvm::StringRef cell) {
  std::string text = cell.str();
  std::tm calendar{};
  const char *rest = strptime(text.c_str(), "%Y-%m-%d %H:%M:%S", &calendar);
  if (!rest)
    return std::nullopt;
  Instant instant{int64_t(timegm(&calendar)), 0};
  llvm::StringRef fraction(rest);
  if (fraction.empty())
    return instant;
  std::string decimal = "0" + fraction.str();
  if (!fraction.consume_front(".") || fraction.empty() ||
      !llvm::all_of(fraction, llvm::isDigit) ||
      llvm::StringRef(decimal).getAsDouble(instant.fraction))
    return std::nullopt;
  return instant;
}

/// Reads a `--lengths` file a line at a time: its header, if any, then
/// its rows.
class TraceParser {
public:
  TraceParser(llvm::StringRef file, DiagnosticEngine &diags)
      : file(file), diags(diags) {}

  std::optional<RequestTrace> parse();

private:
  /// Each reports a located error and returns false on bad input.
  bool parseHeader(llvm::ArrayRef<llvm::StringRef> cells);
  bool parseRow(llvm::ArrayRef<llvm::StringRef> cells);
  bool parseArrival(llvm::StringRef cell, Column column);
  bool fail(llvm::StringRef at, const llvm::Twine &message) {
    unsigned col = unsigned(at.data() - line.data()) + 1;
    diags.error({file, lineNumber, col}, message);
    return false;
  }

  llvm::StringRef file;
  DiagnosticEngine &diags;
  RequestTrace trace;
  /// The columns: a header's, or `input,output`.
  llvm::SmallVector<Column, 4> columns{Column::Input, Column::Output};
  bool header = false;
  Instant first, previous; ///< The first line's arrival and the last's.
  llvm::StringRef line;
  unsigned lineNumber = 0;
};

bool TraceParser::parseHeader(llvm::ArrayRef<llvm::StringRef> cells) {
  header = true;
  columns.clear();
  for (llvm::StringRef cell : cells) {
    std::optional<Column> column = getColumn(cell);
    if (!column)
      return fail(cell, "unknown column '" + cell +
                            "': expected input, output and an arrival "
                            "(arrival_s, arrival_ms or timestamp)");
    bool arrival = *column > Column::Output;
    if (llvm::any_of(columns, [&](Column earlier) {
          return earlier == *column || (arrival && earlier > Column::Output);
        }))
      return fail(cell, "column '" + cell +
                            "' repeats what an earlier one "
                            "gives");
    columns.push_back(*column);
  }
  if (!llvm::is_contained(columns, Column::Input) ||
      !llvm::is_contained(columns, Column::Output))
    return fail(cells.front(), "the header needs an input and an output "
                               "column");
  return true;
}

bool TraceParser::parseArrival(llvm::StringRef cell, Column column) {
  std::optional<Instant> instant =
      parseSeconds(cell, column == Column::ArrivalMillis ? 1e-3 : 1);
  if (!instant && column == Column::Timestamp)
    instant = parseDateTime(cell);
  if (!instant)
    return fail(cell, "arrival '" + cell +
                          "' is not a time: seconds (milliseconds for "
                          "arrival_ms) from 0 to 1e12, or a date and time "
                          "as 2023-11-16 18:15:46.68");
  auto secondsAfter = [&](const Instant &earlier) {
    return double(instant->seconds - earlier.seconds) +
           (instant->fraction - earlier.fraction);
  };
  if (trace.lengths.empty())
    first = *instant;
  else if (secondsAfter(previous) < 0)
    return fail(cell, "arrival '" + cell +
                          "' is before the line before's: the requests are "
                          "sent in the file's order");
  previous = *instant;
  double since = secondsAfter(first);
  if (since > MaxArrivalSpanSeconds)
    return fail(cell, llvm::formatv("arrival '{0}' is {1:e} s after the "
                                    "first, past the {2:e} s a run may span",
                                    cell, since, MaxArrivalSpanSeconds)
                          .str());
  trace.arrivals.push_back(since * 1e6);
  return true;
}

bool TraceParser::parseRow(llvm::ArrayRef<llvm::StringRef> cells) {
  if (cells.size() != columns.size())
    return fail(line.ltrim(),
                header ? "expected " + std::to_string(columns.size()) +
                             " cells, as the header names"
                       : std::string("expected `input,output`: two token "
                                     "counts"));
  RequestLengths lengths;
  for (auto [cell, column] : llvm::zip(cells, columns)) {
    if (column > Column::Output) {
      if (!parseArrival(cell, column))
        return false;
      continue;
    }
    bool input = column == Column::Input;
    uint64_t &value = input ? lengths.input : lengths.output;
    if (cell.getAsInteger(10, value) || value < 1 || value > MaxRequestTokens)
      return fail(cell, llvm::Twine(input ? "input" : "output") + " tokens '" +
                            cell + "' is not a whole number from 1 to " +
                            llvm::Twine(MaxRequestTokens));
  }
  trace.lengths.push_back(lengths);
  return true;
}

std::optional<RequestTrace> TraceParser::parse() {
  llvm::StringRef text = diags.getSource(file)->getBuffer();
  while (!text.empty()) {
    std::tie(line, text) = text.split('\n');
    ++lineNumber;
    llvm::StringRef content = line.split('#').first.rtrim(" \t\r");
    if (content.trim().empty())
      continue;
    llvm::SmallVector<llvm::StringRef, 4> cells;
    content.split(cells, ',');
    // A blank cell stays itself, for its error's caret.
    for (llvm::StringRef &cell : cells)
      if (!cell.trim().empty())
        cell = cell.trim();
    bool names = !header && trace.lengths.empty() && !cells[0].empty() &&
                 llvm::isAlpha(cells[0].front());
    if (!(names ? parseHeader(cells) : parseRow(cells)))
      return std::nullopt;
  }
  if (trace.lengths.empty()) {
    diags.error({file, 1, 1}, "no request lengths: expected `input,output` "
                              "lines");
    return std::nullopt;
  }
  return std::move(trace);
}

} // namespace

std::optional<RequestTrace> stg::loadRequestTrace(llvm::StringRef path,
                                                  DiagnosticEngine &diags) {
  auto buffer = readInputFile(path, MaxTableBytes, "request-lengths file");
  if (!buffer) {
    diags.error({}, "--lengths: " + llvm::toString(buffer.takeError()));
    return std::nullopt;
  }
  return TraceParser(diags.addSource(std::move(*buffer), path), diags).parse();
}

std::optional<RequestTrace> stg::parseRequestTrace(llvm::StringRef text,
                                                   llvm::StringRef name,
                                                   DiagnosticEngine &diags) {
  return TraceParser(
             diags.addSource(llvm::MemoryBuffer::getMemBufferCopy(text, name),
                             name),
             diags)
      .parse();
}

void stg::forEachTurn(llvm::ArrayRef<RequestLengths> lengths, unsigned turns,
                      llvm::function_ref<void(uint64_t, uint64_t)> visit) {
  size_t count = lengths.size();
  // Conversation c's turns take lines c x turns onwards: the conversations
  // repeat after count / gcd(count, turns) of them.
  size_t period = count / std::gcd(count, size_t(std::max(1u, turns)));
  for (size_t conversation = 0; conversation < period; ++conversation) {
    uint64_t history = 0;
    for (unsigned turn = 0; turn < std::max(1u, turns); ++turn) {
      const RequestLengths &line =
          lengths[(conversation * turns + turn) % count];
      uint64_t prompt = history + line.input;
      visit(prompt, line.output);
      history = prompt + line.output;
    }
  }
}

uint64_t stg::getLongestContext(llvm::ArrayRef<RequestLengths> lengths,
                                unsigned turns) {
  uint64_t longest = 0;
  forEachTurn(lengths, turns, [&](uint64_t prompt, uint64_t output) {
    longest = std::max(longest, prompt + output);
  });
  return longest;
}

std::optional<std::string>
stg::checkConversationLength(llvm::ArrayRef<RequestLengths> lengths,
                             unsigned turns) {
  uint64_t longest = getLongestContext(lengths, turns);
  if (longest <= MaxConversationTokens)
    return std::nullopt;
  return llvm::formatv("a conversation of {0} turns reaches {1} tokens, over "
                       "the {2} a sequence may hold",
                       turns, longest, MaxConversationTokens)
      .str();
}
