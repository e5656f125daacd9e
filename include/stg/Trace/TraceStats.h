//===- TraceStats.h - Totals of a Chakra trace ------------------*- C++ -*-===//
//
// `stage-et stats`: what a trace holds, summed while it streams by: nodes by
// type, the floating-point operations and tensor bytes of its compute, the
// bytes of its collectives by type and by group, and its SENDs and RECVs.
// Totals over several files merge the per-file figures.
//
//===----------------------------------------------------------------------===//

#ifndef STG_TRACE_TRACESTATS_H
#define STG_TRACE_TRACESTATS_H

#include "stg/Chakra/et_def.pb.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <map>
#include <string>

namespace stg {

/// A number of operations and the bytes they move.
struct CountAndBytes {
  uint64_t count = 0;
  uint64_t bytes = 0;
};

struct TraceStats {
  /// The file name, or `total (N files)`.
  std::string name;
  uint64_t numFiles = 0;
  uint64_t numNodes = 0;
  std::map<std::string, uint64_t> nodesByType;
  /// Sum of the COMP_NODEs' num_ops and tensor_size.
  uint64_t numOps = 0;
  uint64_t tensorBytes = 0;
  /// Sum of the collectives' comm_size by comm_type name and by pg_name.
  std::map<std::string, CountAndBytes> collectivesByType;
  std::map<std::string, CountAndBytes> collectivesByGroup;
  CountAndBytes sends;
  CountAndBytes recvs;

  void addNode(const ChakraProtoMsg::Node &node);
  void merge(const TraceStats &other);
};

/// Reads the trace at `path` node by node and sums it up.
llvm::Expected<TraceStats> computeTraceStats(llvm::StringRef path);

/// A block of `key: value` lines headed by `== name ==`.
void printTraceStats(llvm::raw_ostream &os, const TraceStats &stats);
llvm::json::Value toJSON(const TraceStats &stats);

} // namespace stg

#endif // STG_TRACE_TRACESTATS_H
