//===- InputFile.h - Reading an input file, bounded -------------*- C++ -*-===//
//
// Every file stagec's libraries read whole (model sources, YAML specs, CSV
// tables, group files) is read through here: a directory, a FIFO or a
// device is refused before it is opened, and a file larger than the limit
// its kind sets is refused before it is read, so no input can make a tool
// hang or run out of memory. `-` reads standard input, with the same limit.
//
//===----------------------------------------------------------------------===//

#ifndef STG_SUPPORT_INPUTFILE_H
#define STG_SUPPORT_INPUTFILE_H

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cstdint>
#include <memory>

namespace stg {

/// Limits by kind of input, in bytes.
constexpr uint64_t MaxSourceBytes = 16u << 20; ///< A .stg file.
constexpr uint64_t MaxSpecBytes = 16u << 20;   ///< A YAML device or spec.
constexpr uint64_t MaxTableBytes = 256u << 20; ///< A CSV or group JSON file.

/// The contents of `path` (or of standard input for `-`), or an error that
/// starts with the path and says why: missing, not a regular file, or larger
/// than `maxBytes` (`what` names the kind of input in that message).
llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>>
readInputFile(llvm::StringRef path, uint64_t maxBytes, llvm::StringRef what);

/// The deepest nesting of `[` and `{` in JSON text, outside strings; for
/// refusing input that would overflow a recursive parser's stack.
unsigned getJSONNestingDepth(llvm::StringRef text);
/// The offset of the first `[` or `{` that opens a level deeper than
/// `limit` (outside strings), or StringRef::npos: where to point an error.
size_t findJSONNestingPast(llvm::StringRef text, unsigned limit);

} // namespace stg

#endif // STG_SUPPORT_INPUTFILE_H
