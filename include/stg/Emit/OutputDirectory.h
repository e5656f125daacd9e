//===- OutputDirectory.h - All files or none --------------------*- C++ -*-===//
//
// stagec writes into a fresh temporary directory beside the requested one
// and renames it into place only when every file is complete, so an error
// or an interrupt never leaves a half-written trace set where a simulator
// could pick it up. An existing directory is replaced only if it is empty
// or holds an earlier output (a stagec `*.manifest.json` or a stage-search
// `plans.json`); anything else is left alone and reported, before the run
// spends minutes on what it could not write. A symbolic link is never followed
// (replacing through it would empty the link's target), and the parent
// directories
// `-o` made are removed again if the run fails, so a failed run leaves the
// file system as it found it.
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
#include <vector>

namespace stg {

class OutputDirectory {
public:
  /// Creates the temporary directory for `target`.
  static llvm::Expected<std::unique_ptr<OutputDirectory>>
  create(llvm::StringRef target);

  /// Fails if `target` could not be replaced: a symbolic link, a file, or
  /// a directory that is neither empty nor an earlier output. Tools call it
  /// before the work, `create` and `commit` again.
  static llvm::Error checkTarget(llvm::StringRef target);

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
  OutputDirectory(std::string target, std::string temporary,
                  std::vector<std::string> createdParents)
      : target(std::move(target)), temporary(std::move(temporary)),
        createdParents(std::move(createdParents)) {}

  std::string target;
  std::string temporary;
  /// Parents of the target this run created, deepest first.
  std::vector<std::string> createdParents;
  bool done = false;
};

/// One file written whole or not at all (`stagec --report-json FILE`), by
/// the same rules: written as a temporary sibling and renamed into place
/// on commit; an existing FILE is replaced only if it is empty or holds
/// `marker` (an earlier output of the same kind), never through a symbolic
/// link, never a directory. The temporary file is removed on error, on
/// destruction and on a fatal signal.
class OutputFile {
public:
  /// Fails if `target` could not be replaced, or its directory does not
  /// exist or cannot be written. Tools call it before the work.
  static llvm::Error checkTarget(llvm::StringRef target,
                                 llvm::StringRef marker);
  /// Writes the temporary file with what `write` prints.
  static llvm::Expected<std::unique_ptr<OutputFile>>
  create(llvm::StringRef target, llvm::StringRef marker,
         llvm::function_ref<void(llvm::raw_ostream &)> write);

  OutputFile(const OutputFile &) = delete;
  OutputFile &operator=(const OutputFile &) = delete;
  ~OutputFile();

  llvm::StringRef getTarget() const { return target; }
  /// Renames the file into place.
  llvm::Error commit();
  void discard();

private:
  OutputFile(std::string target, std::string temporary, std::string marker)
      : target(std::move(target)), temporary(std::move(temporary)),
        marker(std::move(marker)) {}

  std::string target;
  std::string temporary;
  std::string marker;
  bool done = false;
};

/// Refuses to write `needed` bytes into `directory` when its file system
/// has less free: better at once than "No space left" after minutes of
/// writing. `advice` says what the user can change.
llvm::Error checkDiskSpace(llvm::StringRef directory, uint64_t needed,
                           llvm::StringRef advice);

/// Writes `directory/name` with what `write` prints; reports any error.
llvm::Error writeTextFile(llvm::StringRef directory, llvm::StringRef name,
                          llvm::function_ref<void(llvm::raw_ostream &)> write);

} // namespace stg

#endif // STG_EMIT_OUTPUTDIRECTORY_H
