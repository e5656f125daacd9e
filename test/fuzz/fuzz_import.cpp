//===- fuzz_import.cpp - libFuzzer target for the config importer ---------===//
//
// Each input is the text of one Hugging Face `config.json`. It goes through
// the JSON reader, the model type's key reader and the STG writer; when a
// program comes out, the front end parses it against the shipped templates,
// since an error there is a defect of the importer (docs/models.md). The
// fuzzer looks for crashes, sanitizer reports and hangs, and aborts on a
// written program the front end refuses.
//
//===----------------------------------------------------------------------===//

#include "FuzzSupport.h"

#include "stg/Import/HFImport.h"
#include "stg/Parse/Parser.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef text(reinterpret_cast<const char *>(data), size);
  stg::DiagnosticEngine diags(llvm::nulls());
  std::optional<stg::ImportedModel> imported = stg::importModelConfigText(
      text, "/nonexistent-stg-fuzz/config.json", diags);
  if (!imported)
    return 0;
  stg::ParseOptions options;
  options.templateDirs = stg::getDefaultTemplateDirs();
  stg::DiagnosticEngine parseDiags(llvm::errs());
  if (!stg::parseSource(imported->source,
                        "/nonexistent-stg-fuzz/config.json.stg", options,
                        parseDiags)) {
    llvm::errs() << imported->source;
    std::abort();
  }
  return 0;
}
