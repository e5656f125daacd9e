//===- Parser.h - STG source files to STG IR --------------------*- C++ -*-===//
//
// The front end's one entry point: read a `.stg` file and everything it
// imports, check it, and build the Module with every block call inlined.
// All problems are reported through the DiagnosticEngine with their source
// location; on any error the result is null.
//
//===----------------------------------------------------------------------===//

#ifndef STG_PARSE_PARSER_H
#define STG_PARSE_PARSER_H

#include "stg/IR/Module.h"
#include "stg/Support/Diagnostics.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace stg {

struct ParseOptions {
  /// `-I` directories, searched for imports after the importing file's own
  /// directory and before the template directories.
  std::vector<std::string> includeDirs;
  /// Directories of shipped templates, searched last.
  std::vector<std::string> templateDirs;
  /// `--set NAME=VALUE` overrides of dims and options, applied after the
  /// files' own `set` statements.
  std::vector<std::pair<std::string, std::string>> overrides;
  /// Bool options a driver sets when the model declares them (stagec's
  /// --fsdp sets `weight_sharded`), after `overrides`; a model without such
  /// an option is left as it is, for the driver to report or accept.
  std::vector<std::pair<std::string, bool>> switches;
  /// The element type of every tensor whose type does not name one
  /// (`stagec --dtype`), over the files' `option dtype`. Unlike an
  /// override, it applies while the types are built.
  std::optional<ElementType> elementType;
};

/// The template directories built into this installation: the installed
/// `share/stagec/templates`, then the source tree's `templates/`.
std::vector<std::string> getDefaultTemplateDirs();

std::unique_ptr<Module> parseFile(llvm::StringRef path,
                                  const ParseOptions &options,
                                  DiagnosticEngine &diags);

/// Parses `source` as if it were the file `name` (for tests and fuzzing).
std::unique_ptr<Module> parseSource(llvm::StringRef source,
                                    llvm::StringRef name,
                                    const ParseOptions &options,
                                    DiagnosticEngine &diags);

} // namespace stg

#endif // STG_PARSE_PARSER_H
