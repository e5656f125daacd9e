//===- TraceFiles.h - Finding the files of a per-rank trace set -*- C++ -*-===//
//
// A trace set is a directory holding `P.{rank}.et` (or `.et.gz`) for every
// rank and the communicator-group file `P.json`. This header names the files
// of such a set: which `.et` files a directory holds, the rank and prefix
// each name encodes, and the groups `P.json` declares. The stage-et
// subcommands all start from here.
//
//===----------------------------------------------------------------------===//

#ifndef STG_TRACE_TRACEFILES_H
#define STG_TRACE_TRACEFILES_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace stg {

/// One `.et` or `.et.gz` file of a directory.
struct TraceFileName {
  std::string path;
  /// The name without the directory, as reports show it.
  std::string fileName;
  /// `P` of `P.{rank}.et`; the whole stem when the name has no rank.
  std::string prefix;
  std::optional<int64_t> rank;
};

/// Splits `P.{rank}.et` or `P.{rank}.et.gz` into prefix and rank. A name
/// without a decimal rank before the extension gets no rank.
TraceFileName parseTraceFileName(llvm::StringRef path);

/// Whether `path` names a Chakra trace by its extension (.et or .et.gz).
bool isTraceFileName(llvm::StringRef path);

/// The trace files directly in `dir`, ordered by rank (files without a rank
/// last, by name). Fails only if the directory cannot be read.
llvm::Expected<std::vector<TraceFileName>> listTraceFiles(llvm::StringRef dir);

/// The communicator groups of `P.json`: group id -> member ranks, ordered
/// by id as in the file's keys.
using CommGroups = std::map<std::string, std::vector<int64_t>>;

/// Reads a `P.json` file: one JSON object whose values are arrays of
/// integer ranks. Anything else is an error naming the file and the key.
llvm::Expected<CommGroups> readCommGroups(llvm::StringRef path);
/// The same from text already in memory; `name` stands for the file.
llvm::Expected<CommGroups> parseCommGroups(llvm::StringRef text,
                                           llvm::StringRef name);

} // namespace stg

#endif // STG_TRACE_TRACEFILES_H
