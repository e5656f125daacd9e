//===- fuzz_parse.cpp - libFuzzer target for the STG front end ------------===//
//
// Each input is the text of one `.stg` file. It goes through the whole front
// end (ANTLR lexer and parser, declarations, block inlining, the verifier)
// and, when a module comes out, through the IR printer. Diagnostics and the
// printed IR are discarded: the fuzzer looks for crashes, sanitizer reports,
// leaks and hangs, not for particular output.
//
// The input is named as a file in a directory that does not exist, and no
// include or template directories are given, so a relative `import` never
// finds a file: only an absolute path written in the input can be read.
//
//===----------------------------------------------------------------------===//

#include "FuzzSupport.h"

#include "stg/IR/Printer.h"
#include "stg/Parse/Parser.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef source(reinterpret_cast<const char *>(data), size);

  stg::ParseOptions options; // No -I, no templates, no --set.
  stg::DiagnosticEngine diags(llvm::nulls());
  std::unique_ptr<stg::Module> module = stg::parseSource(
      source, "/nonexistent-stg-fuzz/input.stg", options, diags);
  if (module) {
    stg::printModule(llvm::nulls(), *module);
    stg::PrintOptions withLocations;
    withLocations.printLocations = true;
    stg::printModule(llvm::nulls(), *module, withLocations);
  }
  return 0;
}
