//===- TraceDiff.h - Differences between two Chakra traces ------*- C++ -*-===//
//
// `stage-et diff`: compares two traces node by node, matching nodes by id,
// and lists nodes added, removed and changed (each changed field and
// attribute, old -> new), metadata changes and a change of node order.
// Two directories are compared file by file, by file name.
//
//===----------------------------------------------------------------------===//

#ifndef STG_TRACE_TRACEDIFF_H
#define STG_TRACE_TRACEDIFF_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace stg {

/// A node as a diff names it.
struct DiffNode {
  uint64_t id;
  std::string name;
  std::string type;
};

struct NodeChange {
  DiffNode node;
  /// `name: "a" -> "b"`, `attr num_ops: int64 10 -> int64 20`, ...
  std::vector<std::string> changes;
};

struct TraceDiff {
  std::vector<std::string> metadataChanges;
  std::vector<DiffNode> removed;
  std::vector<DiffNode> added;
  std::vector<NodeChange> changed;
  /// Set when the nodes both files have come in a different order.
  std::optional<std::string> orderChange;

  bool isEmpty() const {
    return metadataChanges.empty() && removed.empty() && added.empty() &&
           changed.empty() && !orderChange;
  }
};

/// Compares the traces at `before` and `after` (plain or gzipped).
llvm::Expected<TraceDiff> diffTraceFiles(llvm::StringRef before,
                                         llvm::StringRef after);

/// One line per difference, under a `--- before` / `+++ after` header, and
/// a count line; nothing when `diff` is empty.
void printTraceDiff(llvm::raw_ostream &os, const TraceDiff &diff,
                    llvm::StringRef before, llvm::StringRef after);

/// Compares two files, or two directories file by file (files present on
/// one side only count as differences). Prints the differences and returns
/// whether there were any.
llvm::Expected<bool> diffTracePaths(llvm::StringRef before,
                                    llvm::StringRef after,
                                    llvm::raw_ostream &os);

} // namespace stg

#endif // STG_TRACE_TRACEDIFF_H
