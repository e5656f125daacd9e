//===- RankTraceChecker.h - Checks of one rank's trace ----------*- C++ -*-===//
//
// The per-file half of `stage-et verify`: reads one .et file node by node,
// reports what is wrong with the file on its own, and returns the little the
// cross-rank checks need (the collective sequence per group, the SEND/RECV
// tuples). Private to lib/Trace.
//
//===----------------------------------------------------------------------===//

#ifndef STG_LIB_TRACE_RANKTRACECHECKER_H
#define STG_LIB_TRACE_RANKTRACECHECKER_H

#include "stg/Trace/TraceFiles.h"
#include "stg/Trace/TraceVerifier.h"

#include "stg/Chakra/et_def.pb.h"

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/Twine.h"

#include <map>

namespace stg {

/// A collective as the members of its group must agree on it.
struct CollectiveRecord {
  int64_t commType;
  int64_t commSize;
  uint64_t nodeId;
};

/// A SEND or RECV with all four attributes well-formed.
struct PointToPointRecord {
  bool isSend;
  int64_t src, dst, tag, size;
  uint64_t nodeId;
};

struct RankTraceSummary {
  /// False when the file did not decode to its end: its cross-rank data is
  /// incomplete and must not be compared.
  bool complete = false;
  uint64_t numNodes = 0;
  /// Collectives with a well-formed comm_type, comm_size and pg_name, by
  /// pg_name, in file order.
  std::map<std::string, std::vector<CollectiveRecord>> collectives;
  std::vector<PointToPointRecord> pointToPoint;
};

/// What a node communicates, when its attributes say so well enough for the
/// cross-rank checks.
struct NodeCommunication {
  /// The pg_name of a collective with a string pg_name.
  std::optional<std::string> group;
  /// Set when comm_type, comm_size and pg_name are all well-formed.
  std::optional<CollectiveRecord> collective;
  std::optional<PointToPointRecord> pointToPoint;
};

using NodeProblemSink =
    llvm::function_ref<void(TraceProblemKind, const llvm::Twine &)>;

/// Checks the attributes `node` must carry for its type, in the members
/// readers take them from (see docs/chakra-output.md), and a collective's
/// group against `groups` (when known) and `rank` (when known).
NodeCommunication checkNodeAttributes(const ChakraProtoMsg::Node &node,
                                      std::optional<int64_t> rank,
                                      const CommGroups *groups,
                                      NodeProblemSink report);

/// Checks `file` (the rank from its name, if any) against the contract;
/// `groups` is null when P.json could not be read, and then pg_names are not
/// checked against it.
RankTraceSummary checkRankTrace(const TraceFileName &file,
                                const CommGroups *groups,
                                TraceVerifyReport &report);

} // namespace stg

#endif // STG_LIB_TRACE_RANKTRACECHECKER_H
