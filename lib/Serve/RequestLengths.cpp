//===- RequestLengths.cpp - A serving workload's request lengths ----------===//
//
// Two formats, told apart by the first line: CSV (a line a request, a
// header optional) and JSON lines (Mooncake's traces). Both give lengths
// and, where the file has them, arrival times; JSON lines also the
// prompts' blocks.
//
//===----------------------------------------------------------------------===//

#include "stg/Serve/RequestLengths.h"

#include "stg/Support/InputFile.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Regex.h"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <numeric>

using namespace stg;

namespace {

/// What a column of a `--lengths` file holds: nothing stagec reads (a
/// trace's other columns), a length, or an arrival (those after Output).
enum class Column {
  Ignored,
  Input,
  Output,
  ArrivalSeconds,
  ArrivalMillis,
  Timestamp
};

std::optional<Column> getColumn(llvm::StringRef name) {
  return llvm::StringSwitch<std::optional<Column>>(name.lower())
      .Cases("input", "input_length", "contexttokens", "request tokens",
             Column::Input)
      .Cases("output", "output_length", "generatedtokens", "response tokens",
             Column::Output)
      // BurstGPT's other columns.
      .Cases("model", "total tokens", "log type", Column::Ignored)
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

/// A file's arrivals in order: each after the first line's, none before
/// the line before's, none past the span a run may have.
class ArrivalTimes {
public:
  explicit ArrivalTimes(std::vector<double> &arrivals) : arrivals(arrivals) {}

  /// Records `instant`, the file's `spelled`; the error, if any.
  std::optional<std::string> add(const Instant &instant,
                                 llvm::StringRef spelled) {
    auto secondsAfter = [&](const Instant &earlier) {
      return double(instant.seconds - earlier.seconds) +
             (instant.fraction - earlier.fraction);
    };
    if (arrivals.empty())
      first = instant;
    else if (secondsAfter(previous) < 0)
      return "arrival '" + spelled.str() +
             "' is before the line before's: the requests are sent in the "
             "file's order";
    previous = instant;
    double since = secondsAfter(first);
    if (since > MaxArrivalSpanSeconds)
      return llvm::formatv("arrival '{0}' is {1:e} s after the first, past "
                           "the {2:e} s a run may span",
                           spelled, since, MaxArrivalSpanSeconds)
          .str();
    arrivals.push_back(since * 1e6);
    return std::nullopt;
  }

private:
  std::vector<double> &arrivals;
  Instant first, previous; ///< The first line's arrival and the last's.
};

/// Reads a `--lengths` file a line at a time: its header, if any, then
/// its rows.
class TraceParser {
public:
  TraceParser(llvm::StringRef file, DiagnosticEngine &diags)
      : file(file), diags(diags), arrivals(trace.arrivals) {}

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
  ArrivalTimes arrivals;
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
    if (*column != Column::Ignored &&
        llvm::any_of(columns, [&](Column earlier) {
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
  if (std::optional<std::string> error = arrivals.add(*instant, cell))
    return fail(cell, *error);
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
    if (column == Column::Ignored)
      continue;
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
                            llvm::Twine(MaxRequestTokens) +
                            (!input && cell == "0"
                                 ? " (a failed request: BurstGPT's "
                                   "without_fails files leave them out)"
                                 : ""));
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

/// The deepest nesting of a trace line's arrays and objects.
constexpr unsigned MaxTraceLineNesting = 8;

/// Reads a trace of JSON lines, one request's object a line (Mooncake's
/// format). llvm::json parses each line; it keeps no locations, so an
/// error about a member points at its key in the line.
class JsonLinesParser {
public:
  JsonLinesParser(llvm::StringRef file, uint64_t blockTokens,
                  DiagnosticEngine &diags)
      : file(file), blockTokens(blockTokens), diags(diags),
        arrivals(trace.arrivals) {}

  std::optional<RequestTrace> parse();

private:
  bool parseLine();
  bool parseLength(const llvm::json::Object &object, llvm::StringRef key,
                   uint64_t &value);
  bool parseBlocks(const llvm::json::Array &ids, uint64_t input);
  bool fail(size_t column, const llvm::Twine &message) {
    diags.error({file, lineNumber, unsigned(column) + 1}, message);
    return false;
  }
  /// An error about `key`'s member, at the key.
  bool failAt(llvm::StringRef key, const llvm::Twine &message) {
    size_t at = line.find(("\"" + key + "\"").str());
    return fail(at == llvm::StringRef::npos ? 0 : at, message);
  }

  llvm::StringRef file;
  uint64_t blockTokens;
  DiagnosticEngine &diags;
  RequestTrace trace;
  ArrivalTimes arrivals;
  std::vector<uint64_t> blockIds, blockBegin{0};
  bool anyBlocks = false;
  llvm::StringRef line;
  unsigned lineNumber = 0;
};

/// Where llvm::json says a parse failed, and why: its ParseError keeps both
/// private and prints them as `[line:column, byte=offset]: message`, the
/// offset past the character it could not take.
std::pair<size_t, std::string> locateParseError(llvm::Error error) {
  std::string text = llvm::toString(std::move(error));
  llvm::SmallVector<llvm::StringRef, 3> parts;
  static const llvm::Regex printed(
      "^\\[[0-9]+:[0-9]+, byte=([0-9]+)\\]: (.*)$");
  size_t offset = 0;
  if (!printed.match(text, &parts) || parts[1].getAsInteger(10, offset))
    return {0, text};
  return {offset ? offset - 1 : 0, parts[2].str()};
}

bool JsonLinesParser::parseLength(const llvm::json::Object &object,
                                  llvm::StringRef key, uint64_t &value) {
  const llvm::json::Value *member = object.get(key);
  if (!member)
    return fail(0, "expected \"" + key +
                       "\": every line gives its "
                       "input_length and output_length");
  llvm::Optional<int64_t> number = member->getAsInteger();
  if (!number || *number < 1 || uint64_t(*number) > MaxRequestTokens)
    return failAt(key, key + " is not a whole number from 1 to " +
                           llvm::Twine(MaxRequestTokens));
  value = uint64_t(*number);
  return true;
}

bool JsonLinesParser::parseBlocks(const llvm::json::Array &ids,
                                  uint64_t input) {
  uint64_t fill = (input + blockTokens - 1) / blockTokens;
  if (ids.size() > fill)
    return failAt("hash_ids",
                  llvm::formatv("hash_ids names {0} blocks of {1} tokens, "
                                "more than the prompt's {2} tokens fill "
                                "({3}); give the trace's block size with "
                                "--trace-block-tokens",
                                ids.size(), blockTokens, input, fill));
  llvm::SmallDenseSet<uint64_t, 64> seen;
  for (size_t index = 0; index < ids.size(); ++index) {
    llvm::Optional<int64_t> id = ids[index].getAsInteger();
    if (!id || *id < 0 || uint64_t(*id) > MaxBlockId)
      return failAt("hash_ids",
                    llvm::formatv("hash_ids[{0}] is not a block id: a whole "
                                  "number from 0 to {1}",
                                  index, MaxBlockId));
    // A block stands for its content and all before it: a prompt cannot
    // hold it twice.
    if (!seen.insert(uint64_t(*id)).second)
      return failAt("hash_ids",
                    llvm::formatv("hash_ids[{0}] repeats block {1} of the "
                                  "same prompt",
                                  index, *id));
    blockIds.push_back(uint64_t(*id));
  }
  anyBlocks |= !ids.empty();
  return true;
}

bool JsonLinesParser::parseLine() {
  // llvm::json recurses into nested values: bound the depth first.
  size_t tooDeep = findJSONNestingPast(line, MaxTraceLineNesting);
  if (tooDeep != llvm::StringRef::npos)
    return fail(tooDeep, "arrays and objects nested deeper than " +
                             llvm::Twine(MaxTraceLineNesting) +
                             " levels: a trace line is an object of numbers "
                             "and one array");
  llvm::Expected<llvm::json::Value> value = llvm::json::parse(line);
  if (!value) {
    auto [offset, message] = locateParseError(value.takeError());
    return fail(offset, "not a JSON line: " + message);
  }
  const llvm::json::Object *object = value->getAsObject();
  if (!object)
    return fail(0, "expected a JSON object a line, as {\"timestamp\": 0, "
                   "\"input_length\": 6955, \"output_length\": 52, "
                   "\"hash_ids\": [0, 1]}");
  // Keys in the line's order, for a deterministic first error.
  llvm::SmallVector<llvm::StringRef, 4> keys;
  for (const auto &member : *object)
    keys.push_back(member.first);
  llvm::sort(keys, [&](llvm::StringRef a, llvm::StringRef b) {
    return line.find(("\"" + a + "\"").str()) <
           line.find(("\"" + b + "\"").str());
  });
  static const llvm::StringRef known[] = {"timestamp", "input_length",
                                          "output_length", "hash_ids"};
  for (llvm::StringRef key : keys)
    if (!llvm::is_contained(known, key))
      return failAt(key, "unknown key '" + key +
                             "': expected timestamp (ms), input_length, "
                             "output_length and hash_ids");
  RequestLengths lengths;
  if (!parseLength(*object, "input_length", lengths.input) ||
      !parseLength(*object, "output_length", lengths.output))
    return false;

  const llvm::json::Value *timestamp = object->get("timestamp");
  if (!trace.lengths.empty() && bool(timestamp) != !trace.arrivals.empty())
    return fail(0, timestamp ? "a timestamp where the lines before have none"
                             : "no timestamp where the lines before have "
                               "one: give every line's or none");
  if (timestamp) {
    llvm::Optional<double> millis = timestamp->getAsNumber();
    if (!millis || !std::isfinite(*millis) || *millis < 0 ||
        *millis * 1e-3 > MaxInstantSeconds)
      return failAt("timestamp", "timestamp is not a time: milliseconds "
                                 "from 0 to 1e15");
    double seconds = *millis * 1e-3, whole = std::floor(seconds);
    std::string spelled = llvm::formatv("{0}", *timestamp).str();
    if (std::optional<std::string> error =
            arrivals.add({int64_t(whole), seconds - whole}, spelled))
      return failAt("timestamp", *error);
  }

  if (const llvm::json::Value *hashes = object->get("hash_ids")) {
    const llvm::json::Array *ids = hashes->getAsArray();
    if (!ids)
      return failAt("hash_ids", "hash_ids is not an array of block ids");
    if (!parseBlocks(*ids, lengths.input))
      return false;
  }
  blockBegin.push_back(blockIds.size());
  trace.lengths.push_back(lengths);
  return true;
}

std::optional<RequestTrace> JsonLinesParser::parse() {
  if (!blockTokens) {
    diags.error({file, 1, 1}, "a trace's blocks need a token at least");
    return std::nullopt;
  }
  llvm::StringRef text = diags.getSource(file)->getBuffer();
  while (!text.empty()) {
    std::tie(line, text) = text.split('\n');
    ++lineNumber;
    line = line.rtrim("\r");
    if (!line.trim().empty() && !parseLine())
      return std::nullopt;
  }
  if (anyBlocks) {
    trace.blocks.tokens = blockTokens;
    trace.blocks.ids = std::move(blockIds);
    trace.blocks.begin = std::move(blockBegin);
  }
  return std::move(trace);
}

/// Whether `text` is JSON lines: its first line that is not blank opens an
/// object (or an array, to say that a line must be an object).
bool isJsonLines(llvm::StringRef text) {
  text = text.ltrim();
  return text.startswith("{") || text.startswith("[");
}

std::optional<RequestTrace> parseTrace(llvm::StringRef file,
                                       uint64_t blockTokens,
                                       DiagnosticEngine &diags) {
  if (isJsonLines(diags.getSource(file)->getBuffer()))
    return JsonLinesParser(file, blockTokens, diags).parse();
  return TraceParser(file, diags).parse();
}

} // namespace

std::optional<RequestTrace> stg::loadRequestTrace(llvm::StringRef path,
                                                  DiagnosticEngine &diags,
                                                  uint64_t blockTokens) {
  auto buffer = readInputFile(path, MaxTableBytes, "request-lengths file");
  if (!buffer) {
    diags.error({}, "--lengths: " + llvm::toString(buffer.takeError()));
    return std::nullopt;
  }
  return parseTrace(diags.addSource(std::move(*buffer), path), blockTokens,
                    diags);
}

std::optional<RequestTrace> stg::parseRequestTrace(llvm::StringRef text,
                                                   llvm::StringRef name,
                                                   DiagnosticEngine &diags,
                                                   uint64_t blockTokens) {
  return parseTrace(
      diags.addSource(llvm::MemoryBuffer::getMemBufferCopy(text, name), name),
      blockTokens, diags);
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
