//===- OutputDirectory.h - All files or none --------------------*- C++ -*-===//
//
// stagec writes into a fresh temporary directory beside the requested one
// and renames it into place only when every file is complete, so an error
// or an interrupt never leaves a half-written trace set where a simulator
// could pick it up. An existing directory is replaced only if it is empty
// or holds an earlier stagec output (a `*.manifest.json`); anything else is
// left alone and reported.
//
//===----------------------------------------------------------------------===//

#ifndef STG_EMIT_OUTPUTDIRECTORY_H
#define STG_EMIT_OUTPUTDIRECTORY_H

#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/raw_ostream.h"

#include <memory>
#include <string>

namespace stg {

class OutputDirectory {
public:
  /// Creates the temporary directory for `target`.
  static llvm::Expected<std::unique_ptr<OutputDirectory>>
  create(llvm::StringRef target);

  OutputDirectory(const OutputDirectory &) = delete;
  OutputDirectory &operator=(const OutputDirectory &) = delete;
  /// Removes the temporary directory unless committed.
  ~OutputDirectory();

  /// Where to write the files.
  llvm::StringRef getPath() const { return temporary; }
  llvm::StringRef getTarget() const { return target; }
  /// Moves the files into place, replacing an earlier output.
  llvm::Error commit();
  /// Removes the temporary directory and what it holds now (for a signal
  /// handler's caller: not async-signal-safe).
  void discard();

private:
  OutputDirectory(std::string target, std::string temporary)
      : target(std::move(target)), temporary(std::move(temporary)) {}

  std::string target;
  std::string temporary;
  bool done = false;
};

/// Writes `directory/name` with what `write` prints; reports any error.
llvm::Error writeTextFile(llvm::StringRef directory, llvm::StringRef name,
                          llvm::function_ref<void(llvm::raw_ostream &)> write);

} // namespace stg

#endif // STG_EMIT_OUTPUTDIRECTORY_H
