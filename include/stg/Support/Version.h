//===- Version.h - This build's version -------------------------*- C++ -*-===//
//
// The version every output records: the manifest, the Chakra GlobalMetadata
// and `--version`. One definition, from the CMake project version.
//
//===----------------------------------------------------------------------===//

#ifndef STG_SUPPORT_VERSION_H
#define STG_SUPPORT_VERSION_H

#include "llvm/ADT/StringRef.h"

namespace stg {

/// This build's version (`project(stagec VERSION ...)`).
llvm::StringRef getToolVersion();

} // namespace stg

#endif // STG_SUPPORT_VERSION_H
