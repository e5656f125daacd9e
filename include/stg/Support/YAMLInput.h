//===- YAMLInput.h - Checks yaml-cpp leaves to its users --------*- C++ -*-===//
//
// yaml-cpp keeps one of two equal keys of a map and says nothing, so a
// spec that sets `slowdown` twice would silently lose one. Every YAML input
// (device files, perturbation specs) is checked for that once loaded.
// Header-only, so that Support itself does not link yaml-cpp.
//
//===----------------------------------------------------------------------===//

#ifndef STG_SUPPORT_YAMLINPUT_H
#define STG_SUPPORT_YAMLINPUT_H

#include <yaml-cpp/yaml.h>

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

} // namespace stg

#endif // STG_SUPPORT_YAMLINPUT_H
