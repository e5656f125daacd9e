//===- TraceFiles.cpp - Finding the files of a per-rank trace set ---------===//
//
// Names of trace files (`P.{rank}.et[.gz]`), the listing of a directory's
// traces in rank order, and the reading of the communicator-group file
// `P.json` with llvm::json.
//
//===----------------------------------------------------------------------===//

#include "stg/Trace/TraceFiles.h"

#include "stg/Support/InputFile.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <algorithm>

using namespace stg;

static std::optional<llvm::StringRef>
stripTraceExtension(llvm::StringRef name) {
  for (llvm::StringRef extension : {".et", ".et.gz"})
    if (name.endswith(extension) && name.size() > extension.size())
      return name.drop_back(extension.size());
  return std::nullopt;
}

bool stg::isTraceFileName(llvm::StringRef path) {
  return stripTraceExtension(llvm::sys::path::filename(path)).has_value();
}

TraceFileName stg::parseTraceFileName(llvm::StringRef path) {
  TraceFileName result;
  result.path = path.str();
  result.fileName = llvm::sys::path::filename(path).str();
  llvm::StringRef stem =
      stripTraceExtension(result.fileName).value_or(result.fileName);
  result.prefix = stem.str();
  auto [prefix, rankText] = stem.rsplit('.');
  int64_t rank;
  if (!rankText.empty() && rankText != stem &&
      llvm::all_of(rankText, llvm::isDigit) &&
      !rankText.getAsInteger(10, rank)) {
    result.prefix = prefix.str();
    result.rank = rank;
  }
  return result;
}

llvm::Expected<std::vector<TraceFileName>>
stg::listTraceFiles(llvm::StringRef dir) {
  std::vector<TraceFileName> files;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(dir, ec), end; it != end && !ec;
       it.increment(ec)) {
    if (it->type() == llvm::sys::fs::file_type::directory_file ||
        !isTraceFileName(it->path()))
      continue;
    files.push_back(parseTraceFileName(it->path()));
  }
  if (ec)
    return llvm::createStringError(ec, "%s: cannot list the directory: %s",
                                   dir.str().c_str(), ec.message().c_str());
  llvm::sort(files, [](const TraceFileName &a, const TraceFileName &b) {
    if (a.rank.has_value() != b.rank.has_value())
      return a.rank.has_value();
    if (a.rank && *a.rank != *b.rank)
      return *a.rank < *b.rank;
    return a.fileName < b.fileName;
  });
  return files;
}

llvm::Expected<CommGroups> stg::parseCommGroups(llvm::StringRef text,
                                                llvm::StringRef name) {
  auto fail = [&](const llvm::Twine &message) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   name + ": " + message);
  };
  // LLVM's JSON parser recurses once per level: refuse what would overflow
  // the stack. A group file is two levels deep.
  constexpr unsigned MaxDepth = 64;
  if (getJSONNestingDepth(text) > MaxDepth)
    return fail("nested more than " + llvm::Twine(MaxDepth) +
                " levels deep; expected {\"1\": [0, 1], ...}");
  llvm::Expected<llvm::json::Value> value = llvm::json::parse(text);
  if (!value)
    return fail("not valid JSON: " + llvm::toString(value.takeError()));
  const llvm::json::Object *object = value->getAsObject();
  if (!object)
    return fail("expected a JSON object {\"1\": [0, 1], ...}");
  CommGroups groups;
  for (const auto &[key, members] : *object) {
    const llvm::json::Array *array = members.getAsArray();
    if (!array)
      return fail("group \"" + key.str() + "\" is not an array of ranks");
    std::vector<int64_t> &ranks = groups[key.str()];
    for (const llvm::json::Value &member : *array) {
      llvm::Optional<int64_t> rank = member.getAsInteger();
      if (!rank)
        return fail("group \"" + key.str() +
                    "\" has a member that is not an "
                    "integer rank");
      ranks.push_back(*rank);
    }
  }
  return groups;
}

llvm::Expected<CommGroups> stg::readCommGroups(llvm::StringRef path) {
  auto buffer = readInputFile(path, MaxTableBytes, "group file");
  if (!buffer)
    return buffer.takeError();
  return parseCommGroups((*buffer)->getBuffer(), path);
}
