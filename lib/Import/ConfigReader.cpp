//===- ConfigReader.cpp - Reading a config's keys, each checked -----------===//

#include "ConfigReader.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>

using namespace stg;

SourceLoc ConfigReader::locate(llvm::StringRef key) const {
  if (const JSONMember *member = object.find(key))
    return member->value.loc;
  return object.loc;
}

void ConfigReader::error(llvm::StringRef key, const llvm::Twine &message) {
  ++numErrors;
  diags.error(locate(key), message);
}

bool ConfigReader::has(llvm::StringRef key) const {
  const JSONMember *member = object.find(key);
  return member && member->value.kind != JSONNode::Kind::Null;
}

const JSONNode *ConfigReader::get(llvm::StringRef key) {
  used.insert(key);
  const JSONMember *member = object.find(key);
  if (!member || member->value.kind == JSONNode::Kind::Null)
    return nullptr;
  return &member->value;
}

/// The whole number `node` spells, if it is one (`4096`; not `4096.5`,
/// `1e3` or a number past int64).
static std::optional<int64_t> getWholeNumber(const JSONNode &node) {
  int64_t value = 0;
  if (node.kind != JSONNode::Kind::Number ||
      llvm::StringRef(node.text).getAsInteger(10, value))
    return std::nullopt;
  return value;
}

std::optional<int64_t> ConfigReader::optionalSize(llvm::StringRef key,
                                                  int64_t low, int64_t high) {
  const JSONNode *node = get(key);
  if (!node)
    return std::nullopt;
  std::optional<int64_t> value = getWholeNumber(*node);
  if (!value || *value < low || *value > high) {
    error(key, "'" + key + "' must be a whole number from " +
                   llvm::Twine(low) + " to " + llvm::Twine(high) + ", found " +
                   (node->kind == JSONNode::Kind::Number
                        ? llvm::Twine(node->text)
                        : llvm::Twine(node->describeKind())));
    return std::nullopt;
  }
  return value;
}

int64_t ConfigReader::size(llvm::StringRef key, int64_t low, int64_t high) {
  if (!has(key)) {
    used.insert(key);
    error(key, "missing key '" + key + "' (a whole number from " +
                   llvm::Twine(low) + " to " + llvm::Twine(high) +
                   "), which a " + modelType + " config must give");
    return low;
  }
  return optionalSize(key, low, high).value_or(low);
}

int64_t ConfigReader::size(llvm::StringRef key, int64_t low, int64_t high,
                           int64_t fallback) {
  if (!has(key)) {
    used.insert(key);
    return fallback;
  }
  return optionalSize(key, low, high).value_or(fallback);
}

double ConfigReader::number(llvm::StringRef key, double low, double high,
                            double fallback, std::optional<double> nullValue) {
  used.insert(key);
  const JSONMember *member = object.find(key);
  if (!member)
    return fallback;
  const JSONNode &node = member->value;
  if (node.kind == JSONNode::Kind::Null && nullValue)
    return *nullValue;
  if (node.kind != JSONNode::Kind::Number || !std::isfinite(node.number) ||
      node.number < low || node.number > high) {
    error(key, "'" + key + "' must be a finite number from " +
                   llvm::formatv("{0}", low) + " to " +
                   llvm::formatv("{0}", high) + ", found " +
                   (node.kind == JSONNode::Kind::Number
                        ? llvm::Twine(node.text)
                        : llvm::Twine(node.describeKind())));
    return fallback;
  }
  return node.number;
}

bool ConfigReader::flag(llvm::StringRef key, bool fallback) {
  const JSONNode *node = get(key);
  if (!node)
    return fallback;
  if (node->kind != JSONNode::Kind::Bool) {
    error(key, "'" + key + "' must be true or false, found " +
                   node->describeKind());
    return fallback;
  }
  return node->boolean;
}

std::string ConfigReader::text(llvm::StringRef key) {
  const JSONNode *node = get(key);
  if (!node)
    return "";
  if (node->kind != JSONNode::Kind::String) {
    error(key, "'" + key + "' must be a string, found " + node->describeKind());
    return "";
  }
  return node->text;
}

/// "'a', 'b' or 'c'".
static std::string listWords(llvm::ArrayRef<llvm::StringRef> words) {
  std::string text;
  for (size_t i = 0; i < words.size(); ++i)
    text += (i == 0 ? "" : i + 1 == words.size() ? " or " : ", ") +
            ("'" + words[i] + "'").str();
  return text;
}

std::string ConfigReader::word(llvm::StringRef key,
                               llvm::ArrayRef<llvm::StringRef> allowed,
                               llvm::StringRef fallback) {
  if (!has(key)) {
    used.insert(key);
    return fallback.str();
  }
  std::string value = text(key);
  if (!failed() && !llvm::is_contained(allowed, value))
    error(key, "'" + key + "' is '" + value + "'; the importer knows " +
                   listWords(allowed) + " for " + modelType);
  return llvm::is_contained(allowed, value) ? value : fallback.str();
}

std::vector<std::string>
ConfigReader::words(llvm::StringRef key,
                    llvm::ArrayRef<llvm::StringRef> allowed) {
  std::vector<std::string> result;
  const JSONNode *node = get(key);
  if (!node)
    return result;
  if (node->kind != JSONNode::Kind::Array) {
    error(key, "'" + key + "' must be an array of strings, found " +
                   node->describeKind());
    return result;
  }
  for (const JSONNode &element : node->elements) {
    if (element.kind != JSONNode::Kind::String ||
        !llvm::is_contained(allowed, element.text)) {
      ++numErrors;
      diags.error(element.loc, "an element of '" + key + "' must be " +
                                   listWords(allowed));
      return {};
    }
    result.push_back(element.text);
  }
  return result;
}

std::vector<int64_t> ConfigReader::sizes(llvm::StringRef key, int64_t low,
                                         int64_t high) {
  std::vector<int64_t> result;
  const JSONNode *node = get(key);
  if (!node)
    return result;
  if (node->kind != JSONNode::Kind::Array) {
    error(key, "'" + key + "' must be an array of whole numbers, found " +
                   node->describeKind());
    return result;
  }
  for (const JSONNode &element : node->elements) {
    std::optional<int64_t> value = getWholeNumber(element);
    if (!value || *value < low || *value > high) {
      ++numErrors;
      diags.error(element.loc, "an element of '" + key +
                                   "' must be a whole number from " +
                                   llvm::Twine(low) + " to " +
                                   llvm::Twine(high));
      return {};
    }
    result.push_back(*value);
  }
  return result;
}

const JSONNode *ConfigReader::child(llvm::StringRef key) {
  const JSONNode *node = get(key);
  if (node && !node->isObject()) {
    error(key, "'" + key + "' must be an object, found " +
                   node->describeKind());
    return nullptr;
  }
  return node;
}

void ConfigReader::ignore(llvm::ArrayRef<llvm::StringRef> keys) {
  for (llvm::StringRef key : keys)
    used.insert(key);
}

void ConfigReader::require(llvm::StringRef key,
                           llvm::ArrayRef<llvm::StringRef> expected,
                           const llvm::Twine &why) {
  used.insert(key);
  const JSONMember *member = object.find(key);
  if (!member || member->value.kind == JSONNode::Kind::Null)
    return;
  const JSONNode &node = member->value;
  bool scalar = node.kind == JSONNode::Kind::Number ||
                node.kind == JSONNode::Kind::String ||
                node.kind == JSONNode::Kind::Bool;
  llvm::StringRef spelling = node.text;
  if (scalar && llvm::is_contained(expected, spelling))
    return;
  error(key, "'" + key + "' must be " + listWords(expected) + ": " + why);
}

bool ConfigReader::finish() {
  for (const JSONMember &member : object.members)
    if (!used.count(member.key)) {
      ++numErrors;
      diags.error(member.keyLoc,
                  "key '" + member.key + "' is not understood for " +
                      modelType +
                      " configs; it may change the computation, so the "
                      "importer refuses to guess (docs/models.md lists the "
                      "keys it reads and ignores)");
    }
  return numErrors == 0;
}
