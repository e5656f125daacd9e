//===- HFImport.h - Hugging Face config.json to STG text --------*- C++ -*-===//
//
// A user's model usually exists as a Hugging Face `config.json` first. The
// importer reads one and writes the equivalent STG program, built from the
// shipped `nn/` blocks with the config's numbers as `set` lines, so that
// the ordinary front end compiles it and every check and pass applies; the
// same text is what `stagec --emit-stg` writes for the user to edit. The
// importer knows the model types in docs/models.md, reads or refuses every
// key (an unknown key is an error at its place in the file, never a silent
// default) and takes the text model of a multimodal config.
//
//===----------------------------------------------------------------------===//

#ifndef STG_IMPORT_HFIMPORT_H
#define STG_IMPORT_HFIMPORT_H

#include "stg/Support/Diagnostics.h"

#include "llvm/ADT/StringRef.h"

#include <optional>
#include <string>
#include <vector>

namespace stg {

struct ImportedModel {
  std::string name;       ///< `Qwen3-8B`: `_name_or_path`'s last part, else the folder's.
  std::string identifier; ///< `Qwen3_8B`: the STG model's name.
  std::string modelType;  ///< The config's (the text model's) `model_type`.
  std::string hfRepo;     ///< `Qwen/Qwen3-8B` where the config says, else "".
  std::string source;     ///< The STG program.
};

/// True for a path the drivers hand to the importer (`*.json`).
bool isModelConfigPath(llvm::StringRef path);

/// The model types the importer reads, sorted.
std::vector<llvm::StringRef> getImportableModelTypes();

/// Reads `path` and writes its STG program. Reports every problem with its
/// location in the config; returns nothing on any.
std::optional<ImportedModel> importModelConfig(llvm::StringRef path,
                                               DiagnosticEngine &diags);

/// The same for a config already in memory, reported as the file `path`.
std::optional<ImportedModel> importModelConfigText(llvm::StringRef text,
                                                   llvm::StringRef path,
                                                   DiagnosticEngine &diags);

} // namespace stg

#endif // STG_IMPORT_HFIMPORT_H
