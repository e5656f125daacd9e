//===- InputFile.cpp - Reading an input file, bounded ---------------------===//

#include "stg/Support/InputFile.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"

#include <cerrno>
#include <unistd.h>

using namespace stg;

static llvm::Error
inputError(llvm::StringRef path, const llvm::Twine &why,
           std::error_code code = llvm::inconvertibleErrorCode()) {
  return llvm::createStringError(code, (path + ": " + why).str());
}

static std::string describeSize(uint64_t bytes) {
  return bytes >= (1u << 20) ? std::to_string(bytes >> 20) + " MiB"
                             : std::to_string(bytes) + " bytes";
}

/// Standard input, read in chunks; refused as soon as it passes the limit.
static llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>>
readStandardInput(uint64_t maxBytes, llvm::StringRef what) {
  llvm::SmallString<4096> text;
  char chunk[65536];
  while (true) {
    ssize_t got = ::read(STDIN_FILENO, chunk, sizeof chunk);
    if (got < 0) {
      if (errno == EINTR)
        continue;
      return inputError(
          "<stdin>",
          "cannot read: " +
              std::error_code(errno, std::generic_category()).message());
    }
    if (got == 0)
      break;
    text.append(chunk, chunk + got);
    if (text.size() > maxBytes)
      return inputError("<stdin>", "more than the " + describeSize(maxBytes) +
                                       " a " + what + " may have");
  }
  return llvm::MemoryBuffer::getMemBufferCopy(text, "<stdin>");
}

llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>>
stg::readInputFile(llvm::StringRef path, uint64_t maxBytes,
                   llvm::StringRef what) {
  if (path == "-")
    return readStandardInput(maxBytes, what);
  llvm::sys::fs::file_status status;
  if (std::error_code ec = llvm::sys::fs::status(path, status))
    return inputError(path, "cannot read: " + ec.message(), ec);
  if (status.type() == llvm::sys::fs::file_type::directory_file)
    return inputError(path, "is a directory, not a " + what,
                      std::make_error_code(std::errc::is_a_directory));
  if (status.type() != llvm::sys::fs::file_type::regular_file)
    return inputError(path, "is not a regular file (a " + what +
                                " is read whole, so pipes and devices are "
                                "refused)");
  if (status.getSize() > maxBytes)
    return inputError(path, describeSize(status.getSize()) +
                                ", more than the " + describeSize(maxBytes) +
                                " a " + what + " may have");
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!buffer)
    return inputError(path, "cannot read: " + buffer.getError().message(),
                      buffer.getError());
  // The file may have grown between the two looks.
  if ((*buffer)->getBufferSize() > maxBytes)
    return inputError(path, "more than the " + describeSize(maxBytes) + " a " +
                                what + " may have");
  return std::move(*buffer);
}

/// Calls `open(offset, depth)` for every `[` and `{` outside strings, with
/// the depth it opens; stops when `open` returns true.
template <typename OpenFn>
static void scanJSONNesting(llvm::StringRef text, OpenFn open) {
  unsigned depth = 0;
  bool inString = false, escaped = false;
  for (size_t offset = 0; offset < text.size(); ++offset) {
    char c = text[offset];
    if (inString) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        inString = false;
      continue;
    }
    if (c == '"')
      inString = true;
    else if (c == '[' || c == '{') {
      if (open(offset, ++depth))
        return;
    } else if ((c == ']' || c == '}') && depth > 0)
      --depth;
  }
}

unsigned stg::getJSONNestingDepth(llvm::StringRef text) {
  unsigned deepest = 0;
  scanJSONNesting(text, [&](size_t, unsigned depth) {
    deepest = std::max(deepest, depth);
    return false;
  });
  return deepest;
}

size_t stg::findJSONNestingPast(llvm::StringRef text, unsigned limit) {
  size_t found = llvm::StringRef::npos;
  scanJSONNesting(text, [&](size_t offset, unsigned depth) {
    if (depth > limit)
      found = offset;
    return depth > limit;
  });
  return found;
}
