//===- Declarations.h - What a model lets its user set ----------*- C++ -*-===//
//
// `stagec --print-dims FILE` lists every dim, option and axis a model
// declares (its own and its imports'), each with its value as the command
// line leaves it, the expression it was declared with, the comment written
// beside it in the source, and where: what a user can `--set`, without
// reading the templates.
//
//===----------------------------------------------------------------------===//

#ifndef STG_DRIVER_DECLARATIONS_H
#define STG_DRIVER_DECLARATIONS_H

#include "stg/IR/Module.h"
#include "stg/Support/Diagnostics.h"

#include "llvm/Support/raw_ostream.h"

namespace stg {

/// The comment on the source line of `loc`, after `//`, with the comment
/// lines right below it that continue it (indented, comment only); empty
/// if there is none. `sources` holds the buffers the module was parsed
/// from.
std::string getDeclarationComment(const DiagnosticEngine &sources,
                                  SourceLoc loc);

/// Prints the dims, options and axes of `module` (bound as the command line
/// left them) with their comments and locations.
void printDeclarations(llvm::raw_ostream &os, const Module &module,
                       const DiagnosticEngine &sources);

} // namespace stg

#endif // STG_DRIVER_DECLARATIONS_H
