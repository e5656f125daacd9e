//===- RequestLengths.cpp - A serving workload's request lengths ----------===//

#include "stg/Serve/RequestLengths.h"

#include "stg/Support/InputFile.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <numeric>

using namespace stg;

std::optional<std::vector<RequestLengths>>
stg::loadRequestLengths(llvm::StringRef path, DiagnosticEngine &diags) {
  auto buffer = readInputFile(path, MaxTableBytes, "request-lengths file");
  if (!buffer) {
    diags.error({}, "--lengths: " + llvm::toString(buffer.takeError()));
    return std::nullopt;
  }
  llvm::StringRef file = diags.addSource(std::move(*buffer), path);
  llvm::StringRef text = diags.getSource(file)->getBuffer();
  std::vector<RequestLengths> lengths;
  unsigned lineNumber = 0;
  while (!text.empty()) {
    auto [line, rest] = text.split('\n');
    text = rest;
    ++lineNumber;
    llvm::StringRef content = line.split('#').first.rtrim(" \t\r");
    if (content.trim().empty() ||
        (lengths.empty() && content.trim() == "input,output"))
      continue;
    auto fail = [&](llvm::StringRef at, const llvm::Twine &message) {
      unsigned col = unsigned(at.data() - line.data()) + 1;
      diags.error({file, lineNumber, col}, message);
      return std::nullopt;
    };
    llvm::SmallVector<llvm::StringRef, 2> cells;
    content.split(cells, ',');
    if (cells.size() != 2)
      return fail(content, "expected `input,output`: two token counts");
    uint64_t values[2];
    for (unsigned index = 0; index < 2; ++index) {
      llvm::StringRef cell = cells[index].trim();
      if (cell.empty())
        cell = cells[index];
      if (cell.getAsInteger(10, values[index]) || values[index] < 1 ||
          values[index] > MaxRequestTokens)
        return fail(cell, llvm::Twine(index ? "output" : "input") +
                              " tokens '" + cell +
                              "' is not a whole number from 1 to " +
                              llvm::Twine(MaxRequestTokens));
    }
    lengths.push_back({values[0], values[1]});
  }
  if (lengths.empty()) {
    diags.error({file, 1, 1}, "no request lengths: expected `input,output` "
                              "lines");
    return std::nullopt;
  }
  return lengths;
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
