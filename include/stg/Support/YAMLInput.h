//===- YAMLInput.h - Checks yaml-cpp leaves to its users --------*- C++ -*-===//
//
// yaml-cpp keeps one of two equal keys of a map and says nothing, so a
// spec that sets `slowdown` twice would silently lose one. Every YAML input
// (device, system and perturbation files) is checked for that once loaded,
// and reads its numbers through getNumberInRange, so that no NaN, infinity
// or out-of-range figure gets in; errors name the file, line and column the
// way compilers do. Header-only, so that Support itself does not link
// yaml-cpp.
//
//===----------------------------------------------------------------------===//

#ifndef STG_SUPPORT_YAMLINPUT_H
#define STG_SUPPORT_YAMLINPUT_H

#include "llvm/Support/Error.h"

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <cstdio>
#include <optional>
#include <set>
#include <string>

namespace stg {

/// The second occurrence of the first key that a map anywhere in `node`
/// has twice, if any. Keys compare by their scalar text.
inline std::optional<YAML::Node> findDuplicateKey(const YAML::Node &node) {
  if (node.IsSequence()) {
    for (const YAML::Node &element : node)
      if (std::optional<YAML::Node> found = findDuplicateKey(element))
        return found;
  } else if (node.IsMap()) {
    std::set<std::string> keys;
    for (const auto &entry : node) {
      if (entry.first.IsScalar() && !keys.insert(entry.first.Scalar()).second)
        return entry.first;
      if (std::optional<YAML::Node> found = findDuplicateKey(entry.second))
        return found;
    }
  }
  return std::nullopt;
}

/// The number `node` holds if it is finite and in [low, high].
inline std::optional<double> getNumberInRange(const YAML::Node &node,
                                              double low, double high) {
  try {
    double value = node.as<double>();
    if (std::isfinite(value) && value >= low && value <= high)
      return value;
  } catch (const YAML::Exception &) {
  }
  return std::nullopt;
}

/// "'key' must be a number from LOW to HIGH, found TEXT".
inline std::string describeNumberError(const std::string &key,
                                       const YAML::Node &node, double low,
                                       double high) {
  char range[64];
  std::snprintf(range, sizeof range, "%g to %g", low, high);
  return "'" + key + "' must be a number from " + range + ", found " +
         (node.IsScalar() ? node.Scalar() : std::string("a non-number"));
}

/// What a reader throws at the node it rejects, to leave a nested read in
/// one step; the entry point turns it into a located error.
struct YAMLNodeError {
  YAML::Mark mark;
  std::string message;
};

/// `file.yaml:LINE:COLUMN: message`.
inline llvm::Error makeYAMLError(llvm::StringRef file, const YAML::Mark &mark,
                                 const llvm::Twine &message) {
  return llvm::createStringError(std::errc::invalid_argument, "%s:%d:%d: %s",
                                 file.str().c_str(), mark.line + 1,
                                 mark.column + 1, message.str().c_str());
}

} // namespace stg

#endif // STG_SUPPORT_YAMLINPUT_H
