//===- SideFiles.h - stagec's files beside -o -------------------*- C++ -*-===//
//
// `--report-json FILE` and `--timeline FILE`: checked before the work, so a
// bad path fails in milliseconds, and written beside the run's outputs to
// be renamed into place with them, so an error leaves nothing. And
// `--ranks`, checked against the mesh of what is written.
//
//===----------------------------------------------------------------------===//

#ifndef STG_TOOLS_STAGEC_SIDEFILES_H
#define STG_TOOLS_STAGEC_SIDEFILES_H

#include "StagecOptions.h"

#include "stg/Emit/OutputDirectory.h"
#include "stg/Instantiate/Mesh.h"
#include "stg/Support/Diagnostics.h"
#include "stg/Support/LogicalResult.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <memory>
#include <vector>

namespace stg {

/// True if `file` lies inside `directory` (both as given on the command
/// line, made absolute).
inline bool isInside(llvm::StringRef file, llvm::StringRef directory) {
  llvm::SmallString<256> filePath(file), directoryPath(directory);
  if (llvm::sys::fs::make_absolute(filePath) ||
      llvm::sys::fs::make_absolute(directoryPath))
    return false;
  llvm::sys::path::remove_dots(filePath, true);
  llvm::sys::path::remove_dots(directoryPath, true);
  return llvm::StringRef(filePath).startswith(
      (directoryPath + llvm::sys::path::get_separator()).str());
}

/// Checks a file flag's FILE (`--report-json`, `--timeline`) before the
/// work: not inside `-o DIR`, which is replaced whole after the file is
/// written, and replaceable (absent, empty, or marked by `marker`).
inline LogicalResult checkSideFile(const StagecOptions &options,
                                   llvm::StringRef flag, llvm::StringRef file,
                                   llvm::StringRef marker,
                                   DiagnosticEngine &diags) {
  if (file.empty())
    return success();
  if (!options.outputDir.empty() && isInside(file, options.outputDir)) {
    diags.error({}, flag + " " + file + " is inside -o " + options.outputDir +
                        ", which is replaced whole; give a file outside it");
    return failure();
  }
  if (llvm::Error err = OutputFile::checkTarget(file, marker)) {
    diags.error({}, flag + ": " + llvm::toString(std::move(err)));
    return failure();
  }
  return success();
}

/// Writes a file flag's FILE beside the run's outputs, to be renamed into
/// place with them; nothing if the flag was not given.
inline LogicalResult
createSideFile(llvm::StringRef flag, llvm::StringRef file,
               llvm::StringRef marker,
               llvm::function_ref<void(llvm::raw_ostream &)> write,
               std::vector<std::unique_ptr<OutputFile>> &files,
               DiagnosticEngine &diags) {
  if (file.empty())
    return success();
  auto created = OutputFile::create(file, marker, write);
  if (!created) {
    diags.error({}, flag + ": " + llvm::toString(created.takeError()));
    return failure();
  }
  files.push_back(std::move(*created));
  return success();
}

/// Fails, naming the first, if a rank of `--ranks` is not in `mesh` (the
/// traces' mesh, `meshName` in the message: "mesh", "window's mesh").
inline LogicalResult checkSelectedRanks(const StagecOptions &options,
                                        const Mesh &mesh,
                                        llvm::StringRef meshName,
                                        DiagnosticEngine &diags) {
  for (unsigned rank : options.ranks)
    if (rank >= mesh.getNumRanks()) {
      diags.error({}, "--ranks: rank " + llvm::Twine(rank) + " is not in the " +
                          meshName + " of " + llvm::Twine(mesh.getNumRanks()) +
                          " ranks (" + mesh.describe() + ")");
      return failure();
    }
  return success();
}

} // namespace stg

#endif // STG_TOOLS_STAGEC_SIDEFILES_H
