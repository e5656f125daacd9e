//===- ConfigJSON.h - A JSON document with every value located --*- C++ -*-===//
//
// Hugging Face configs are JSON, and every error about one must point into
// it (`config.json:12:5: error: ...`), which llvm::json cannot do: it keeps
// no locations. JSON is YAML's flow style, so the reader runs LLVM's YAML
// parser, which locates every node, and then holds the document to JSON:
// objects and arrays in braces and brackets, double-quoted strings and keys,
// numbers, true/false/null, no key twice. Like Python's json module, which
// writes these files, it also takes the bare words Infinity, -Infinity and
// NaN; whoever reads a number decides whether a non-finite one is allowed.
//
//===----------------------------------------------------------------------===//

#ifndef STG_IMPORT_CONFIGJSON_H
#define STG_IMPORT_CONFIGJSON_H

#include "stg/Support/Diagnostics.h"

#include "llvm/ADT/StringRef.h"

#include <memory>
#include <string>
#include <vector>

namespace stg {

struct JSONMember;

/// One JSON value and where it starts in its file.
struct JSONNode {
  enum class Kind { Null, Bool, Number, String, Array, Object };
  Kind kind = Kind::Null;
  SourceLoc loc;
  /// A string's value, or a number's spelling as written (`4096`, `1e-06`,
  /// `Infinity`): integers are read from it exactly.
  std::string text;
  bool boolean = false;
  double number = 0; ///< A number's value; may be infinite or NaN.
  std::vector<JSONNode> elements; ///< An array's.
  std::vector<JSONMember> members; ///< An object's, in file order.

  bool isObject() const { return kind == Kind::Object; }
  /// The member named `key`, or null.
  const JSONMember *find(llvm::StringRef key) const;
  /// `an object`, `a string`, ...: for "expected X, found Y" messages.
  llvm::StringRef describeKind() const;
};

struct JSONMember {
  std::string key;
  SourceLoc keyLoc;
  JSONNode value;
};

/// The deepest nesting of arrays and objects a config may have.
constexpr unsigned MaxConfigNesting = 64;

/// Reads the JSON document `path` (through readInputFile, registered with
/// `diags` so errors show its lines); its top level must be an object.
/// Reports every problem with its location and returns null on any.
std::unique_ptr<JSONNode> readConfigJSON(llvm::StringRef path,
                                         DiagnosticEngine &diags);

/// The same for text already in memory, reported as the file `name`.
std::unique_ptr<JSONNode> parseConfigJSON(llvm::StringRef text,
                                          llvm::StringRef name,
                                          DiagnosticEngine &diags);

} // namespace stg

#endif // STG_IMPORT_CONFIGJSON_H
