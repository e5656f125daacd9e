//===- TraceVerifier.h - Checking a trace set -------------------*- C++ -*-===//
//
// `stage-et verify` checks a directory of per-rank Chakra traces against the
// output contract (docs/chakra-output.md): each file on its own (framing,
// GlobalMetadata, unique ids, resolvable dependencies in topological order,
// the attributes each node type must carry, in the member readers take them
// from) and the set as a whole (communicator groups of P.json, the same
// sequence of collectives on every member of a group, chained by
// dependencies, and SENDs matched one-to-one with RECVs).
//
// Files are read one at a time and only what the cross-rank checks need is
// kept: per group the collective sequence of its first member, and a tuple
// per SEND/RECV. Problems are counted by kind; the first few of each kind
// are kept for the report.
//
//===----------------------------------------------------------------------===//

#ifndef STG_TRACE_TRACEVERIFIER_H
#define STG_TRACE_TRACEVERIFIER_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace stg {

/// What a problem breaks; the report groups problems by it.
enum class TraceProblemKind {
  /// A file that does not decode: empty, truncated, not a trace.
  CorruptFile,
  /// The set of files: names without a rank, mixed prefixes, ranks missing
  /// or given twice.
  FileSet,
  Metadata,
  DuplicateId,
  /// A dependency on an id that is not in the file.
  DanglingDep,
  /// A dependency on a later node, or a cycle.
  TopologicalOrder,
  /// A missing attribute, one in the wrong member, or a bad value.
  Attribute,
  /// P.json itself, or a collective's pg_name against it.
  CommGroups,
  /// Consecutive collectives of one group not chained by dependencies.
  CollectiveOrder,
  /// Members of a group issuing different collective sequences.
  CollectiveMismatch,
  /// A SEND or RECV without exactly one partner.
  SendRecv,
};
inline constexpr unsigned NumTraceProblemKinds = 11;

/// `corrupt-file`, `duplicate-id`, ...: the name reports use.
llvm::StringRef getTraceProblemKindName(TraceProblemKind kind);

struct TraceProblem {
  TraceProblemKind kind;
  /// The file's name within the directory; empty for the set as a whole.
  std::string file;
  std::optional<uint64_t> nodeId;
  std::string nodeName;
  std::string message;
};

/// Counts every problem and keeps the first few of each kind.
class TraceVerifyReport {
public:
  explicit TraceVerifyReport(unsigned maxKeptPerKind = 10)
      : maxKeptPerKind(maxKeptPerKind) {}

  void add(TraceProblem problem);
  void add(TraceProblemKind kind, llvm::StringRef file,
           const llvm::Twine &message);

  bool succeeded() const { return numProblems == 0; }
  uint64_t getNumProblems() const { return numProblems; }
  uint64_t getNumProblems(TraceProblemKind kind) const {
    return countByKind[static_cast<unsigned>(kind)];
  }
  /// The kept problems, in the order found.
  llvm::ArrayRef<TraceProblem> getKeptProblems() const { return kept; }

  /// The kept problems by kind, a note per kind for those not shown, and
  /// the summary line (`verified N files, M nodes, G groups` on success).
  void print(llvm::raw_ostream &os) const;

  uint64_t numFiles = 0;
  uint64_t numNodes = 0;
  uint64_t numGroups = 0;

private:
  unsigned maxKeptPerKind;
  uint64_t numProblems = 0;
  std::array<uint64_t, NumTraceProblemKinds> countByKind{};
  std::vector<TraceProblem> kept;
};

struct TraceVerifyOptions {
  /// The communicator-group file; empty means DIR/P.json, P being the
  /// prefix of the trace files.
  std::string commGroupsPath;
  /// Problems kept (and printed) per kind.
  unsigned maxProblemsPerKind = 10;
};

/// Verifies every `*.et` and `*.et.gz` file directly in `dir` and the
/// communicator groups. Never fails: an unreadable directory or file is a
/// problem in the report.
TraceVerifyReport verifyTraceDirectory(llvm::StringRef dir,
                                       const TraceVerifyOptions &options = {});

} // namespace stg

#endif // STG_TRACE_TRACEVERIFIER_H
