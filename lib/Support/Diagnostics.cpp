//===- Diagnostics.cpp - Located diagnostics for STG sources --------------===//
//
// Maps SourceLocs back to the registered buffers and lets llvm::SourceMgr
// print the message with the source line and a caret.
//
//===----------------------------------------------------------------------===//

#include "stg/Support/Diagnostics.h"

using namespace stg;

DiagnosticEngine::DiagnosticEngine(llvm::raw_ostream &os) : os(os) {}

llvm::StringRef
DiagnosticEngine::addSource(std::unique_ptr<llvm::MemoryBuffer> buffer,
                            llvm::StringRef path) {
  llvm::StringRef interned = intern(path);
  // SourceMgr finds buffers by identifier; make it the path we report.
  if (buffer->getBufferIdentifier() != path)
    buffer = llvm::MemoryBuffer::getMemBufferCopy(buffer->getBuffer(), path);
  srcMgr.AddNewSourceBuffer(std::move(buffer), llvm::SMLoc());
  return interned;
}

const llvm::MemoryBuffer *
DiagnosticEngine::getSource(llvm::StringRef path) const {
  for (unsigned id = 1, e = srcMgr.getNumBuffers(); id <= e; ++id)
    if (srcMgr.getMemoryBuffer(id)->getBufferIdentifier() == path)
      return srcMgr.getMemoryBuffer(id);
  return nullptr;
}

void DiagnosticEngine::error(SourceLoc loc, const llvm::Twine &message) {
  if (suppressed)
    return;
  std::string key = (loc.file + ":" + llvm::Twine(loc.line) + ":" +
                     llvm::Twine(loc.col) + ":" + message)
                        .str();
  lastErrorWasDuplicate = !reported.insert(key).second;
  if (lastErrorWasDuplicate)
    return;
  if (numErrors >= errorLimit) {
    os << "error: too many errors emitted, stopping now\n";
    suppressed = true;
    return;
  }
  ++numErrors;
  report(loc, llvm::SourceMgr::DK_Error, message);
}

void DiagnosticEngine::warning(SourceLoc loc, const llvm::Twine &message) {
  if (!suppressed)
    report(loc, llvm::SourceMgr::DK_Warning, message);
}

void DiagnosticEngine::note(SourceLoc loc, const llvm::Twine &message) {
  // A note belongs to the error before it.
  if (!suppressed && !lastErrorWasDuplicate)
    report(loc, llvm::SourceMgr::DK_Note, message);
}

void DiagnosticEngine::report(SourceLoc loc, llvm::SourceMgr::DiagKind kind,
                              const llvm::Twine &message) {
  if (!loc.isValid()) {
    // No source position (command-line values, whole-module checks).
    srcMgr.PrintMessage(os, llvm::SMDiagnostic(programName, kind, message.str()));
    return;
  }
  for (unsigned id = 1, e = srcMgr.getNumBuffers(); id <= e; ++id) {
    if (srcMgr.getMemoryBuffer(id)->getBufferIdentifier() != loc.file)
      continue;
    llvm::SMLoc smLoc = srcMgr.FindLocForLineAndColumn(id, loc.line, loc.col);
    srcMgr.PrintMessage(os, smLoc, kind, message);
    return;
  }
  // A location in a file we never loaded: print the position without a caret.
  srcMgr.PrintMessage(
      os, llvm::SMDiagnostic(srcMgr, llvm::SMLoc(), loc.file, loc.line,
                             loc.col - 1, kind, message.str(), "", {}));
}
