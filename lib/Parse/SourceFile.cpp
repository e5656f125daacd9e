//===- SourceFile.cpp - One parsed .stg file ------------------------------===//
//
// ANTLR's default error strategy recovers well (it resynchronises on the
// follow set), so several syntax errors are found per run; only the wording
// is replaced. Messages name what was found and what could come instead.
//
//===----------------------------------------------------------------------===//

#include "SourceFile.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/ConvertUTF.h"

using namespace stg;

namespace {

/// Spells a token for a message: `';'`, `identifier 'foo'`, `end of file`.
std::string describeToken(antlr4::Token *token) {
  if (!token || token->getType() == antlr4::Token::EOF)
    return "end of file";
  std::string text = token->getText();
  switch (token->getType()) {
  case STGLexer::ID:
    return "identifier '" + text + "'";
  case STGLexer::INT:
  case STGLexer::FLOAT:
    return "number " + text;
  case STGLexer::STRING:
    return "string " + text;
  case STGLexer::ERROR_CHAR:
    return "character '" + text + "'";
  default:
    // Say why `dim` cannot be a name (`softmax[dim=1]`), which a bare 'dim'
    // does not.
    if (llvm::isAlpha(text.front()))
      return "keyword '" + text + "'";
    return "'" + text + "'";
  }
}

/// Spells a set of token types: `';' or ','`, `identifier`.
std::string describeExpected(const antlr4::misc::IntervalSet &set,
                             const antlr4::dfa::Vocabulary &vocabulary) {
  std::vector<std::string> names;
  for (auto type : set.toList()) {
    if (type == STGLexer::ID)
      names.push_back("identifier");
    else if (type == STGLexer::INT || type == STGLexer::FLOAT)
      names.push_back("number");
    else if (type == STGLexer::STRING)
      names.push_back("string");
    else if (type == static_cast<decltype(type)>(antlr4::Token::EOF))
      names.push_back("end of file");
    else
      names.push_back(vocabulary.getLiteralName(type));
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  // A statement may start 7 ways; longer lists say little.
  if (names.size() > 7)
    return "";
  std::string text;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i)
      text += i + 1 == names.size() ? " or " : ", ";
    text += names[i];
  }
  return text;
}

bool expectsSemicolon(const antlr4::misc::IntervalSet &set,
                      const antlr4::dfa::Vocabulary &vocabulary) {
  for (auto type : set.toList())
    if (vocabulary.getLiteralName(type) == "';'")
      return true;
  return false;
}

class ErrorStrategy : public antlr4::DefaultErrorStrategy {
public:
  ErrorStrategy(DiagnosticEngine &diags, llvm::StringRef path)
      : diags(diags), path(path) {}

  void reportError(antlr4::Parser *recognizer,
                   const antlr4::RecognitionException &e) override {
    if (inErrorRecoveryMode(recognizer))
      return; // Avoid cascades, as the default strategy does.
    beginErrorCondition(recognizer);
    antlr4::Token *found = e.getOffendingToken();
    std::string expected = describeExpected(
        e.getExpectedTokens(), recognizer->getVocabulary());
    std::string message;
    antlr4::Token *previous = recognizer->getTokenStream()->LT(-1);
    if (found && found->getType() == STGLexer::ERROR_CHAR)
      message = "unexpected " + describeToken(found);
    else if (!expected.empty() && previous && found &&
             (found->getType() == antlr4::Token::EOF ||
              found->getLine() > previous->getLine()) &&
             expectsSemicolon(e.getExpectedTokens(),
                              recognizer->getVocabulary())) {
      // A missing ';' is noticed on the next line; point at where it belongs.
      // Anything else is wrong where it is (`set: [B] = ...` in a body).
      reportAfter(previous, "expected " + expected + " after " +
                                describeToken(previous));
      return;
    }
    else if (expected.empty() || dynamic_cast<const antlr4::NoViableAltException *>(&e))
      message = "unexpected " + describeToken(found);
    else
      message = "expected " + expected + ", found " + describeToken(found);
    report(found, message);
  }

  void reportMatch(antlr4::Parser *recognizer) override {
    // Stay quiet until the statement with the error has ended: the tokens
    // after a syntax error in the same statement mostly report the
    // recovery, not the user's mistake.
    std::string text = recognizer->getCurrentToken()->getText();
    if (text == ";" || text == "}" || text == "{")
      DefaultErrorStrategy::reportMatch(recognizer);
  }

protected:
  antlr4::Token *singleTokenDeletion(antlr4::Parser *recognizer) override {
    // ';' and '}' end statements. Deleting one as "extra" makes the next
    // statement the continuation of the broken one (`f(x, ;` then `y = ...`
    // read as `f(x, y = ...`) and every following token an error.
    std::string text = recognizer->getCurrentToken()->getText();
    if (text == ";" || text == "}")
      return nullptr;
    return DefaultErrorStrategy::singleTokenDeletion(recognizer);
  }

  void reportUnwantedToken(antlr4::Parser *recognizer) override {
    if (inErrorRecoveryMode(recognizer))
      return;
    beginErrorCondition(recognizer);
    antlr4::Token *found = recognizer->getCurrentToken();
    std::string expected =
        describeExpected(getExpectedTokens(recognizer), recognizer->getVocabulary());
    report(found, "unexpected " + describeToken(found) +
                      (expected.empty() ? "" : ", expected " + expected));
  }

  void reportMissingToken(antlr4::Parser *recognizer) override {
    if (inErrorRecoveryMode(recognizer))
      return;
    beginErrorCondition(recognizer);
    antlr4::Token *found = recognizer->getCurrentToken();
    std::string expected =
        describeExpected(getExpectedTokens(recognizer), recognizer->getVocabulary());
    // Point just after the previous token: that is where the ';' is missing.
    antlr4::Token *previous = recognizer->getTokenStream()->LT(-1);
    if (previous) {
      reportAfter(previous, "expected " + expected + " before " +
                                describeToken(found));
      return;
    }
    report(found, "expected " + expected + " before " + describeToken(found));
  }

private:
  void reportAfter(antlr4::Token *token, const std::string &message) {
    SourceLoc at{path, static_cast<unsigned>(token->getLine()),
                 static_cast<unsigned>(token->getCharPositionInLine() +
                                       token->getText().size() + 1)};
    diags.error(at, message);
  }

  void report(antlr4::Token *token, const std::string &message) {
    SourceLoc at{path, 1, 1};
    if (token) {
      at.line = token->getLine();
      at.col = token->getCharPositionInLine() + 1;
    }
    // A '"' the lexer could not make a STRING of starts a string that does
    // not end on its line; what the parser expected there is beside the
    // point.
    if (token && token->getType() == STGLexer::ERROR_CHAR &&
        token->getText() == "\"") {
      diags.error(at, "unterminated string");
      return;
    }
    diags.error(at, message);
  }

  DiagnosticEngine &diags;
  llvm::StringRef path;
};

/// The parser and every later walk of the tree recurse once per level of
/// nesting (`((((x`, `- - - x`, repeats in repeats), so a deep enough file
/// would overflow the stack. Past this depth of the parse tree the file is
/// refused; real files stay far below it.
constexpr size_t kMaxNesting = 256;

struct NestingTooDeep {
  antlr4::Token *token;
};

class NestingLimit : public antlr4::tree::ParseTreeListener {
public:
  void enterEveryRule(antlr4::ParserRuleContext *ctx) override {
    if (++depth > kMaxNesting)
      throw NestingTooDeep{ctx->getStart()};
  }
  void exitEveryRule(antlr4::ParserRuleContext *) override { --depth; }
  void visitTerminal(antlr4::tree::TerminalNode *) override {}
  void visitErrorNode(antlr4::tree::ErrorNode *) override {}

private:
  size_t depth = 0;
};

/// A left-recursive chain (`a + b + ... + z`) is a loop to the parser, and
/// not nesting to NestingLimit, but the tree is as deep as the chain is long
/// and the builders walk it recursively.
constexpr size_t kMaxTreeDepth = 1024;

/// The first rule in `root` deeper than kMaxTreeDepth, or null.
antlr4::ParserRuleContext *findTooDeep(antlr4::tree::ParseTree *root) {
  std::vector<std::pair<antlr4::tree::ParseTree *, size_t>> stack{{root, 1}};
  while (!stack.empty()) {
    auto [node, depth] = stack.back();
    stack.pop_back();
    auto *ctx = dynamic_cast<antlr4::ParserRuleContext *>(node);
    if (!ctx)
      continue;
    if (depth > kMaxTreeDepth)
      return ctx;
    for (antlr4::tree::ParseTree *child : ctx->children)
      stack.push_back({child, depth + 1});
  }
  return nullptr;
}

} // namespace

SourceLoc SourceFile::loc(antlr4::Token *token) const {
  if (!token)
    return {path, 1, 1};
  return {path, static_cast<unsigned>(token->getLine()),
          static_cast<unsigned>(token->getCharPositionInLine() + 1)};
}

/// `text` with CR LF and lone CR line endings made LF, as the lexer and
/// SourceMgr count lines by LF only (a CR-only file was one long line, and
/// lost every location).
static std::string normalizeLineEndings(llvm::StringRef text) {
  std::string result;
  result.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\r') {
      result += text[i];
      continue;
    }
    result += '\n';
    if (i + 1 < text.size() && text[i + 1] == '\n')
      ++i;
  }
  return result;
}

std::unique_ptr<SourceFile> SourceFile::parse(llvm::StringRef original,
                                              llvm::StringRef path,
                                              DiagnosticEngine &diags) {
  std::unique_ptr<SourceFile> file(new SourceFile());
  file->text = normalizeLineEndings(original);
  llvm::StringRef text = file->text;
  file->path = diags.addSource(
      llvm::MemoryBuffer::getMemBufferCopy(text, path), path);
  unsigned errorsBefore = diags.getNumErrors();
  try {
    file->input = std::make_unique<antlr4::ANTLRInputStream>(
        text.data(), text.size());
  } catch (const std::exception &) {
    // Point at the first byte that is not UTF-8.
    const auto *begin = reinterpret_cast<const llvm::UTF8 *>(text.data());
    const llvm::UTF8 *bad = begin;
    llvm::isLegalUTF8String(&bad, begin + text.size());
    llvm::StringRef before = text.take_front(bad - begin);
    size_t lineStart = before.rfind('\n') + 1; // 0 when there is none.
    diags.error({file->path, static_cast<unsigned>(before.count('\n') + 1),
                 static_cast<unsigned>(before.size() - lineStart + 1)},
                "file is not valid UTF-8 text");
    return nullptr;
  }
  file->lexer = std::make_unique<STGLexer>(file->input.get());
  file->lexer->removeErrorListeners(); // ERROR_CHAR tokens reach the parser.
  file->tokens = std::make_unique<antlr4::CommonTokenStream>(file->lexer.get());
  // A `/*` without its `*/` is no comment to the lexer but the tokens '/'
  // and '*', which the parser would report as a stray '/'.
  file->tokens->fill();
  const auto &all = file->tokens->getTokens();
  for (size_t i = 0; i + 1 < all.size(); ++i) {
    if (all[i]->getText() == "/" && all[i + 1]->getText() == "*" &&
        all[i + 1]->getStartIndex() == all[i]->getStopIndex() + 1) {
      diags.error(file->loc(all[i]), "unterminated block comment");
      return nullptr;
    }
  }
  file->parser = std::make_unique<STGParser>(file->tokens.get());
  file->parser->removeErrorListeners();
  file->parser->setErrorHandler(
      std::make_shared<ErrorStrategy>(diags, file->path));
  NestingLimit nestingLimit;
  file->parser->addParseListener(&nestingLimit);
  try {
    file->tree = file->parser->file();
  } catch (const NestingTooDeep &e) {
    diags.error(file->loc(e.token), "nesting is too deep (more than " +
                                        llvm::Twine(kMaxNesting) + " levels)");
    return nullptr;
  } catch (const std::exception &e) {
    diags.error({file->path, 1, 1},
                llvm::Twine("internal parser error: ") + e.what());
    return nullptr;
  }
  file->parser->removeParseListeners();
  if (diags.getNumErrors() != errorsBefore)
    return nullptr;
  if (antlr4::ParserRuleContext *deep = findTooDeep(file->tree)) {
    diags.error(file->loc(deep), "expression is too long (more than " +
                                     llvm::Twine(kMaxTreeDepth) +
                                     " levels of operators)");
    return nullptr;
  }
  return file;
}

std::string stg::unquoteString(llvm::StringRef quoted) {
  std::string text;
  for (size_t i = 1; i + 1 < quoted.size(); ++i) {
    if (quoted[i] == '\\' && i + 2 < quoted.size())
      ++i;
    text += quoted[i];
  }
  return text;
}
