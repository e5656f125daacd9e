//===- SourceFile.h - One parsed .stg file ----------------------*- C++ -*-===//
//
// Runs the generated ANTLR lexer and parser over one file and keeps the parse
// tree alive while the module is built from it (block bodies are walked again
// at every instantiation). Syntax errors are reported through the
// DiagnosticEngine in our own words ("expected ';'"), not ANTLR's.
//
//===----------------------------------------------------------------------===//

#ifndef STG_LIB_PARSE_SOURCEFILE_H
#define STG_LIB_PARSE_SOURCEFILE_H

#include "stg/Support/Diagnostics.h"

#include "STGLexer.h"
#include "STGParser.h"

#include <memory>
#include <string>

namespace stg {

class SourceFile {
public:
  /// Lexes and parses `text`, registered as `path`. Returns null (after
  /// reporting) if the file has syntax errors.
  static std::unique_ptr<SourceFile> parse(llvm::StringRef text,
                                           llvm::StringRef path,
                                           DiagnosticEngine &diags);

  llvm::StringRef getPath() const { return path; }
  STGParser::FileContext *getTree() const { return tree; }

  /// The location of a token or of the first token of a rule.
  SourceLoc loc(antlr4::Token *token) const;
  SourceLoc loc(antlr4::ParserRuleContext *ctx) const {
    return loc(ctx->getStart());
  }
  SourceLoc loc(antlr4::tree::TerminalNode *node) const {
    return loc(node->getSymbol());
  }

private:
  SourceFile() = default;

  llvm::StringRef path;
  std::string text; ///< The source with LF line endings.
  std::unique_ptr<antlr4::ANTLRInputStream> input;
  std::unique_ptr<STGLexer> lexer;
  std::unique_ptr<antlr4::CommonTokenStream> tokens;
  std::unique_ptr<STGParser> parser;
  STGParser::FileContext *tree = nullptr;
};

/// The text of a STRING token (`"a\"b"`): the quotes dropped, each escape
/// its character.
std::string unquoteString(llvm::StringRef quoted);

} // namespace stg

#endif // STG_LIB_PARSE_SOURCEFILE_H
