//===- Diagnostics.h - Located diagnostics for STG sources ------*- C++ -*-===//
//
// Every user-facing error in stagec goes through a DiagnosticEngine. Errors
// carry a SourceLoc (file, line, column) and are printed by llvm::SourceMgr in
// the familiar compiler form
//
//   file.stg:12:7: error: message
//     x = foo(y);
//         ^
//
// The engine owns the source buffers so that any later stage (a pass, the
// instantiator) can report on an op's location long after parsing finished.
//
//===----------------------------------------------------------------------===//

#ifndef STG_SUPPORT_DIAGNOSTICS_H
#define STG_SUPPORT_DIAGNOSTICS_H

#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/Allocator.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/StringSaver.h"
#include "llvm/Support/raw_ostream.h"

namespace stg {

/// A position in an STG source file. `file` is interned by the
/// DiagnosticEngine that loaded the file and outlives every IR object.
struct SourceLoc {
  llvm::StringRef file;
  unsigned line = 0; ///< 1-based; 0 means unknown.
  unsigned col = 0;  ///< 1-based.

  bool isValid() const { return line != 0; }
};

class DiagnosticEngine {
public:
  explicit DiagnosticEngine(llvm::raw_ostream &os = llvm::errs());

  /// Registers a source buffer under `path` and returns the interned path
  /// that SourceLocs into it must use.
  llvm::StringRef addSource(std::unique_ptr<llvm::MemoryBuffer> buffer,
                            llvm::StringRef path);
  /// Returns the buffer registered under `path`, or null.
  const llvm::MemoryBuffer *getSource(llvm::StringRef path) const;

  void error(SourceLoc loc, const llvm::Twine &message);
  void warning(SourceLoc loc, const llvm::Twine &message);
  void note(SourceLoc loc, const llvm::Twine &message);

  unsigned getNumErrors() const { return numErrors; }
  bool hasErrors() const { return numErrors != 0; }
  /// Stops printing errors after this many (a final line says so).
  void setErrorLimit(unsigned limit) { errorLimit = limit; }
  /// True once the error limit is reached; builders may stop early.
  bool reachedErrorLimit() const { return numErrors >= errorLimit; }

  llvm::StringRef intern(llvm::StringRef s) { return saver.save(s); }
  /// Prefix of messages without a location (`stagec: error: ...`).
  void setProgramName(llvm::StringRef name) { programName = name.str(); }

private:
  void report(SourceLoc loc, llvm::SourceMgr::DiagKind kind,
              const llvm::Twine &message);

  llvm::raw_ostream &os;
  llvm::SourceMgr srcMgr;
  llvm::BumpPtrAllocator alloc;
  llvm::StringSaver saver{alloc};
  std::string programName = "stagec";
  unsigned numErrors = 0;
  unsigned errorLimit = 20;
  bool suppressed = false; ///< Past the limit: further notes are dropped too.
  /// Errors already printed: a block instantiated twice reports once.
  llvm::StringSet<> reported;
  bool lastErrorWasDuplicate = false;
};

} // namespace stg

#endif // STG_SUPPORT_DIAGNOSTICS_H
