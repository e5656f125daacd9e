//===- ConfigJSON.cpp - A JSON document with every value located ----------===//
//
// LLVM's YAML parser reads the text (JSON is YAML's flow style) and locates
// each node; this file then refuses whatever YAML allows and JSON does not
// (block style, single quotes, bare words, anchors, tags, keys without a
// value, a key twice), so that what it accepts is what Python's json module
// reads.
//
//===----------------------------------------------------------------------===//

#include "stg/Import/ConfigJSON.h"

#include "stg/Support/InputFile.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Regex.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/YAMLParser.h"

#include <cmath>
#include <limits>

using namespace stg;
namespace yaml = llvm::yaml;

const JSONMember *JSONNode::find(llvm::StringRef key) const {
  for (const JSONMember &member : members)
    if (member.key == key)
      return &member;
  return nullptr;
}

llvm::StringRef JSONNode::describeKind() const {
  switch (kind) {
  case Kind::Null:
    return "null";
  case Kind::Bool:
    return "a boolean";
  case Kind::Number:
    return "a number";
  case Kind::String:
    return "a string";
  case Kind::Array:
    return "an array";
  case Kind::Object:
    return "an object";
  }
  return "a value";
}

namespace {

/// Turns the parser's nodes into JSONNodes, checking each is JSON.
class Converter {
public:
  Converter(llvm::StringRef text, llvm::StringRef file, DiagnosticEngine &diags)
      : text(text), file(file), diags(diags) {}

  SourceLoc locate(const char *pointer) const {
    size_t offset = pointer >= text.begin() && pointer <= text.end()
                        ? size_t(pointer - text.begin())
                        : 0;
    llvm::StringRef before = text.take_front(offset);
    size_t lineStart = before.rfind('\n');
    unsigned col = lineStart == llvm::StringRef::npos
                       ? unsigned(offset + 1)
                       : unsigned(offset - lineStart);
    return {file, unsigned(before.count('\n') + 1), col};
  }

  bool convert(yaml::Node *node, JSONNode &out);

private:
  bool fail(yaml::Node *node, const llvm::Twine &message) {
    diags.error(locate(node->getSourceRange().Start.getPointer()), message);
    return false;
  }
  bool convertScalar(yaml::ScalarNode *scalar, JSONNode &out);
  bool convertObject(yaml::MappingNode *mapping, JSONNode &out);

  llvm::StringRef text;
  llvm::StringRef file;
  DiagnosticEngine &diags;
};

} // namespace

/// Whether a collection is in flow style, opened by `open`. The parser
/// starts a collection's range at its first entry, so look back over the
/// white space before it.
static bool isOpenedBy(yaml::Node *node, llvm::StringRef text, char open) {
  const char *start = node->getSourceRange().Start.getPointer();
  if (!start || start < text.begin() || start > text.end())
    return false;
  if (start < text.end() && *start == open)
    return true;
  while (start > text.begin() && llvm::StringRef(" \t\r\n").contains(start[-1]))
    --start;
  return start > text.begin() && start[-1] == open;
}

bool Converter::convertScalar(yaml::ScalarNode *scalar, JSONNode &out) {
  // A plain scalar before a closing brace on the next line keeps the
  // line break.
  llvm::StringRef raw = scalar->getRawValue().rtrim(" \t\r\n");
  if (raw.startswith("\"")) {
    llvm::SmallString<64> storage;
    out.kind = JSONNode::Kind::String;
    out.text = scalar->getValue(storage).str();
    return true;
  }
  if (raw.startswith("'"))
    return fail(scalar, "JSON strings take double quotes, found " + raw);
  out.text = raw.str();
  if (raw == "true" || raw == "false") {
    out.kind = JSONNode::Kind::Bool;
    out.boolean = raw == "true";
    return true;
  }
  if (raw == "null") {
    out.kind = JSONNode::Kind::Null;
    return true;
  }
  out.kind = JSONNode::Kind::Number;
  if (raw == "Infinity" || raw == "-Infinity" || raw == "NaN") {
    out.number = raw == "NaN"        ? std::numeric_limits<double>::quiet_NaN()
                 : raw == "Infinity" ? std::numeric_limits<double>::infinity()
                                     : -std::numeric_limits<double>::infinity();
    return true;
  }
  static const llvm::Regex number(
      "^-?(0|[1-9][0-9]*)(\\.[0-9]+)?([eE][-+]?[0-9]+)?$");
  if (!number.match(raw))
    return fail(scalar, "expected a JSON value (an object, array, string, "
                        "number, true, false or null), found '" +
                            raw + "'");
  // Too many digits for a double's exponent gives infinity, which the
  // readers of numbers refuse where it matters.
  out.number = std::strtod(out.text.c_str(), nullptr);
  return true;
}

bool Converter::convertObject(yaml::MappingNode *mapping, JSONNode &out) {
  out.kind = JSONNode::Kind::Object;
  llvm::StringMap<SourceLoc> seen;
  for (yaml::KeyValueNode &entry : *mapping) {
    auto *key = llvm::dyn_cast_or_null<yaml::ScalarNode>(entry.getKey());
    if (!key || !key->getRawValue().startswith("\""))
      return fail(entry.getKey() ? entry.getKey() : mapping,
                  "an object's keys must be double-quoted strings");
    JSONMember member;
    llvm::SmallString<64> storage;
    member.key = key->getValue(storage).str();
    member.keyLoc = locate(key->getSourceRange().Start.getPointer());
    auto [previous, inserted] = seen.insert({member.key, member.keyLoc});
    if (!inserted) {
      diags.error(member.keyLoc, "key '" + member.key + "' appears twice");
      diags.note(previous->second, "first here");
      return false;
    }
    yaml::Node *value = entry.getValue();
    if (!value || llvm::isa<yaml::NullNode>(value))
      return fail(key, "key '" + member.key + "' has no value");
    if (!convert(value, member.value))
      return false;
    out.members.push_back(std::move(member));
  }
  return true;
}

bool Converter::convert(yaml::Node *node, JSONNode &out) {
  out.loc = locate(node->getSourceRange().Start.getPointer());
  if (!node->getAnchor().empty() || !node->getRawTag().empty())
    return fail(node, "YAML anchors and tags are not JSON");
  if (auto *scalar = llvm::dyn_cast<yaml::ScalarNode>(node))
    return convertScalar(scalar, out);
  if (auto *mapping = llvm::dyn_cast<yaml::MappingNode>(node)) {
    if (!isOpenedBy(node, text, '{'))
      return fail(node, "expected a JSON object in braces");
    return convertObject(mapping, out);
  }
  if (auto *sequence = llvm::dyn_cast<yaml::SequenceNode>(node)) {
    if (!isOpenedBy(node, text, '['))
      return fail(node, "expected a JSON array in brackets");
    out.kind = JSONNode::Kind::Array;
    for (yaml::Node &element : *sequence) {
      out.elements.emplace_back();
      if (!convert(&element, out.elements.back()))
        return false;
    }
    return true;
  }
  return fail(node, "expected a JSON value (an object, array, string, "
                    "number, true, false or null)");
}

std::unique_ptr<JSONNode> stg::parseConfigJSON(llvm::StringRef text,
                                               llvm::StringRef name,
                                               DiagnosticEngine &diags) {
  llvm::StringRef file = diags.addSource(
      llvm::MemoryBuffer::getMemBufferCopy(text, name), name);
  // Locations are computed in the engine's copy, whose lines it prints.
  text = diags.getSource(file)->getBuffer();
  Converter converter(text, file, diags);
  size_t nul = text.find('\0');
  if (nul != llvm::StringRef::npos) {
    diags.error(converter.locate(text.data() + nul),
                "a NUL byte: this is not a JSON text file");
    return nullptr;
  }
  size_t tooDeep = text.empty() ? llvm::StringRef::npos
                                : findJSONNestingPast(text, MaxConfigNesting);
  if (tooDeep != llvm::StringRef::npos) {
    diags.error(converter.locate(text.data() + tooDeep),
                "arrays and objects nested deeper than " +
                    llvm::Twine(MaxConfigNesting) + " levels");
    return nullptr;
  }
  if (text.trim().empty()) {
    diags.error({file, 1, 1}, "empty file: expected a JSON object");
    return nullptr;
  }

  // The parser reports its own syntax errors through this SourceMgr; pass
  // the first on with our location and stop.
  llvm::SourceMgr parserSources;
  bool syntaxError = false;
  struct Context {
    Converter *converter;
    DiagnosticEngine *diags;
    bool *failed;
  } context{&converter, &diags, &syntaxError};
  parserSources.setDiagHandler(
      [](const llvm::SMDiagnostic &diagnostic, void *opaque) {
        auto *context = static_cast<Context *>(opaque);
        if (*context->failed)
          return;
        *context->failed = true;
        context->diags->error(
            context->converter->locate(diagnostic.getLoc().getPointer()),
            diagnostic.getMessage());
      },
      &context);
  yaml::Stream stream(text, parserSources, /*ShowColors=*/false);
  auto document = stream.begin();
  yaml::Node *root = document == stream.end() ? nullptr : document->getRoot();
  if (syntaxError)
    return nullptr;
  if (!root || llvm::isa<yaml::NullNode>(root)) {
    diags.error({file, 1, 1}, "expected a JSON object");
    return nullptr;
  }
  auto result = std::make_unique<JSONNode>();
  if (!converter.convert(root, *result) || syntaxError)
    return nullptr;
  if (!result->isObject()) {
    diags.error(result->loc, "expected a JSON object at the top level, found " +
                                 result->describeKind());
    return nullptr;
  }
  // Whatever follows the object (a second document, stray text) is an error.
  if (++document != stream.end() || syntaxError) {
    if (!syntaxError)
      diags.error(converter.locate(text.end()),
                  "text after the JSON object");
    return nullptr;
  }
  return result;
}

std::unique_ptr<JSONNode> stg::readConfigJSON(llvm::StringRef path,
                                              DiagnosticEngine &diags) {
  auto buffer = readInputFile(path, MaxSpecBytes, "model config");
  if (!buffer) {
    diags.error({}, llvm::toString(buffer.takeError()));
    return nullptr;
  }
  return parseConfigJSON((*buffer)->getBuffer(), path, diags);
}
