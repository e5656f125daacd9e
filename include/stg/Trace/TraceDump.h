//===- TraceDump.h - Printing a Chakra trace --------------------*- C++ -*-===//
//
// `stage-et dump`: a trace as text, the GlobalMetadata then one line per
// node (TraceFormat.h), or as JSON in the form of Chakra's jsonizer
// (protobuf's JSON mapping: camelCase field names, 64-bit integers as
// strings), one node per line inside {"globalMetadata": ..., "nodes": [...]}.
// Both stream: memory does not grow with the trace.
//
//===----------------------------------------------------------------------===//

#ifndef STG_TRACE_TRACEDUMP_H
#define STG_TRACE_TRACEDUMP_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

namespace stg {

enum class TraceDumpFormat { Text, JSON };

/// Prints the trace at `path`. On a malformed file, what was read before
/// the error has been printed and the error names the file and the offset.
llvm::Error dumpTrace(llvm::StringRef path, llvm::raw_ostream &os,
                      TraceDumpFormat format = TraceDumpFormat::Text);

} // namespace stg

#endif // STG_TRACE_TRACEDUMP_H
