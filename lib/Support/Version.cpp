//===- Version.cpp - This build's version ---------------------------------===//

#include "stg/Support/Version.h"

llvm::StringRef stg::getToolVersion() { return STG_VERSION_STRING; }
