//===- OutputDirectory.cpp - All files or none ----------------------------===//

#include "stg/Emit/OutputDirectory.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/Signals.h"

using namespace stg;
namespace fs = llvm::sys::fs;

static llvm::Error makeError(std::error_code ec, const llvm::Twine &message) {
  return llvm::createStringError(ec, "%s: %s", message.str().c_str(),
                                 ec.message().c_str());
}

llvm::Expected<std::unique_ptr<OutputDirectory>>
OutputDirectory::create(llvm::StringRef target) {
  llvm::SmallString<256> absolute(target);
  if (std::error_code ec = fs::make_absolute(absolute))
    return makeError(ec, "cannot resolve " + target);
  llvm::sys::path::remove_dots(absolute, true);
  if (llvm::Error err = checkTarget(absolute))
    return err;
  // The parents that do not exist yet, deepest first: created now, removed
  // again if the run fails.
  std::vector<std::string> createdParents;
  for (llvm::StringRef parent = llvm::sys::path::parent_path(absolute);
       !parent.empty() && !fs::exists(parent);
       parent = llvm::sys::path::parent_path(parent))
    createdParents.push_back(parent.str());
  llvm::StringRef parent = llvm::sys::path::parent_path(absolute);
  if (!parent.empty())
    if (std::error_code ec = fs::create_directories(parent))
      return makeError(ec, "cannot create " + parent);
  // A sibling, so the final rename stays on one file system.
  llvm::SmallString<256> model(absolute);
  model += ".stagec-tmp-%%%%%%";
  llvm::SmallString<256> temporary;
  for (int attempt = 0;; ++attempt) {
    fs::createUniquePath(model, temporary, false);
    std::error_code ec = fs::create_directory(temporary, false);
    if (!ec)
      break;
    if (ec != std::errc::file_exists || attempt == 100)
      return makeError(ec, "cannot create " + temporary);
  }
  return std::unique_ptr<OutputDirectory>(new OutputDirectory(
      absolute.str().str(), temporary.str().str(), std::move(createdParents)));
}

OutputDirectory::~OutputDirectory() { discard(); }

void OutputDirectory::discard() {
  if (done)
    return;
  done = true;
  fs::remove_directories(temporary);
  for (const std::string &parent : createdParents)
    fs::remove(parent); // Only if still empty: another process may use it.
}

/// True if `path` may be replaced: an empty directory or an earlier output
/// (a stagec manifest, or a stage-search table of plans or deployments).
static bool isReplaceable(llvm::StringRef path) {
  std::error_code ec;
  bool empty = true;
  for (fs::directory_iterator it(path, ec), end; it != end && !ec;
       it.increment(ec)) {
    empty = false;
    llvm::StringRef name = llvm::sys::path::filename(it->path());
    if (name.endswith(".manifest.json") || name == "plans.json" ||
        name == "deployments.json")
      return true;
  }
  return !ec && empty;
}

llvm::Error OutputDirectory::checkTarget(llvm::StringRef target) {
  fs::file_status status;
  if (fs::status(target, status, /*Follow=*/false))
    return llvm::Error::success(); // Nothing there yet.
  if (status.type() == fs::file_type::symlink_file)
    return llvm::createStringError(
        std::errc::file_exists,
        "%s is a symbolic link; give -o the directory itself, so that "
        "replacing it cannot empty another",
        target.str().c_str());
  if (status.type() != fs::file_type::directory_file || !isReplaceable(target))
    return llvm::createStringError(
        std::errc::file_exists,
        "%s exists and is not an earlier stagec or stage-search output; "
        "remove it or choose another -o",
        target.str().c_str());
  return llvm::Error::success();
}

llvm::Error OutputDirectory::commit() {
  std::string old;
  if (llvm::Error err = checkTarget(target))
    return err;
  if (fs::exists(target)) {
    old = target + ".stagec-old-" +
          std::to_string(llvm::sys::Process::getProcessId());
    if (std::error_code ec = fs::rename(target, old))
      return makeError(ec, "cannot move the earlier " + target + " aside");
  }
  if (std::error_code ec = fs::rename(temporary, target)) {
    if (!old.empty())
      fs::rename(old, target);
    return makeError(ec, "cannot rename " + temporary + " to " + target);
  }
  done = true;
  if (!old.empty())
    fs::remove_directories(old);
  return llvm::Error::success();
}

llvm::Error
stg::writeTextFile(llvm::StringRef directory, llvm::StringRef name,
                   llvm::function_ref<void(llvm::raw_ostream &)> write) {
  llvm::SmallString<256> path(directory);
  llvm::sys::path::append(path, name);
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec, fs::OF_Text);
  if (ec)
    return makeError(ec, "cannot write " + path);
  write(os);
  os.close();
  if (os.has_error()) {
    // Cleared, or the stream's destructor reports it as a fatal error.
    std::error_code ec = os.error();
    os.clear_error();
    return makeError(ec, "cannot write " + path);
  }
  return llvm::Error::success();
}

llvm::Error stg::checkDiskSpace(llvm::StringRef directory, uint64_t needed,
                                llvm::StringRef advice) {
  llvm::ErrorOr<llvm::sys::fs::space_info> space =
      llvm::sys::fs::disk_space(directory);
  if (!space || needed <= space->available)
    return llvm::Error::success();
  auto gigabytes = [](uint64_t bytes) {
    return llvm::formatv("{0:F1} GB", bytes / 1e9).str();
  };
  return llvm::createStringError(
      std::errc::no_space_on_device,
      "the traces need about %s, but the file system of -o has %s free; %s",
      gigabytes(needed).c_str(), gigabytes(space->available).c_str(),
      advice.str().c_str());
}

/// An earlier output of one kind names its kind near its start (a
/// timeline), or is at most this large and is read whole to find it.
static constexpr uint64_t MaxEarlierOutputBytes = 64u << 20;
static constexpr uint64_t MarkerHeadBytes = 4096;

/// True if the regular file `path` may be replaced: empty, or holding
/// `marker`.
static bool isReplaceableFile(llvm::StringRef path, llvm::StringRef marker) {
  uint64_t size = 0;
  if (fs::file_size(path, size))
    return false;
  if (size == 0)
    return true;
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> head =
      llvm::MemoryBuffer::getFileSlice(path, std::min(size, MarkerHeadBytes),
                                       0, /*IsVolatile=*/false);
  if (head && (*head)->getBuffer().contains(marker))
    return true;
  if (size > MaxEarlierOutputBytes)
    return false;
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> buffer =
      llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  return buffer && (*buffer)->getBuffer().contains(marker);
}

llvm::Error OutputFile::checkTarget(llvm::StringRef target,
                                    llvm::StringRef marker) {
  if (target.empty() || llvm::sys::path::filename(target).empty() ||
      target.endswith("/"))
    return llvm::createStringError(std::errc::invalid_argument,
                                   "'%s' is not a file name",
                                   target.str().c_str());
  fs::file_status status;
  if (!fs::status(target, status, /*Follow=*/false)) {
    if (status.type() == fs::file_type::symlink_file)
      return llvm::createStringError(
          std::errc::file_exists,
          "%s is a symbolic link; give the file itself, so that replacing "
          "it cannot overwrite another",
          target.str().c_str());
    if (status.type() == fs::file_type::directory_file)
      return llvm::createStringError(std::errc::is_a_directory,
                                     "%s is a directory, not a file",
                                     target.str().c_str());
    if (status.type() != fs::file_type::regular_file ||
        !isReplaceableFile(target, marker))
      return llvm::createStringError(
          std::errc::file_exists,
          "%s exists and is not an earlier output of this kind; remove it "
          "or choose another file",
          target.str().c_str());
  }
  llvm::SmallString<256> parent(llvm::sys::path::parent_path(target));
  if (parent.empty())
    parent = ".";
  if (!fs::is_directory(parent))
    return llvm::createStringError(
        std::errc::no_such_file_or_directory,
        "cannot write %s: the directory %s does not exist",
        target.str().c_str(), parent.c_str());
  if (fs::access(parent, fs::AccessMode::Write))
    return llvm::createStringError(std::errc::permission_denied,
                                   "cannot write %s: the directory %s is "
                                   "not writable",
                                   target.str().c_str(), parent.c_str());
  return llvm::Error::success();
}

llvm::Expected<std::unique_ptr<OutputFile>>
OutputFile::create(llvm::StringRef target, llvm::StringRef marker,
                   llvm::function_ref<void(llvm::raw_ostream &)> write) {
  if (llvm::Error err = checkTarget(target, marker))
    return err;
  llvm::SmallString<256> temporary;
  int fd = -1;
  if (std::error_code ec =
          fs::createUniqueFile(target + ".stagec-tmp-%%%%%%", fd, temporary))
    return makeError(ec, "cannot create a temporary file beside " + target);
  llvm::sys::RemoveFileOnSignal(temporary);
  std::unique_ptr<OutputFile> file(
      new OutputFile(target.str(), temporary.str().str(), marker.str()));
  llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
  write(os);
  os.close();
  if (os.has_error()) {
    std::error_code ec = os.error();
    os.clear_error();
    return makeError(ec, "cannot write " + temporary);
  }
  return file;
}

OutputFile::~OutputFile() { discard(); }

void OutputFile::discard() {
  if (done)
    return;
  done = true;
  fs::remove(temporary);
  llvm::sys::DontRemoveFileOnSignal(temporary);
}

llvm::Error OutputFile::commit() {
  if (llvm::Error err = checkTarget(target, marker))
    return err;
  if (std::error_code ec = fs::rename(temporary, target))
    return makeError(ec, "cannot rename " + temporary + " to " + target);
  done = true;
  llvm::sys::DontRemoveFileOnSignal(temporary);
  return llvm::Error::success();
}
