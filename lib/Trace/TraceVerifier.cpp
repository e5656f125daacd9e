//===- TraceVerifier.cpp - Checking a trace set against the contract ------===//
//
// The cross-rank half of `stage-et verify`. It names the files of the set
// (ranks from `P.{rank}.et`, one prefix, no rank missing or repeated), reads
// the communicator groups, runs the per-file checks (RankTraceChecker.cpp)
// on each file in turn and keeps only:
//
// - per group, the collective sequence of the first member read; every
//   later member's sequence is compared with it as soon as that member's
//   file is done, then dropped;
// - per (src, dst, tag, size) tuple, how many SENDs and RECVs carry it and
//   where the first of each is, to match them one-to-one at the end.
//
// When the directory has stagec's `P.manifest.json`, each file's node count
// and size must be what the manifest recorded: a file cut exactly at a node
// boundary decodes cleanly and would otherwise pass.
//
//===----------------------------------------------------------------------===//

#include "stg/Trace/TraceVerifier.h"

#include "RankTraceChecker.h"

#include "stg/Support/InputFile.h"
#include "stg/Trace/TraceFormat.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/Path.h"

#include <set>

using namespace stg;

namespace {

/// The collectives the first member of a group issued on it.
struct GroupReference {
  int64_t rank = -1;
  std::vector<CollectiveRecord> sequence;
};

/// The SENDs and RECVs of one (src, dst, tag, size) tuple.
struct PointToPointTally {
  uint32_t numSends = 0, numRecvs = 0;
  uint32_t sendFile = 0, recvFile = 0;
  uint64_t sendNode = 0, recvNode = 0;
};

class TraceSetVerifier {
public:
  TraceSetVerifier(llvm::StringRef dir, const TraceVerifyOptions &options)
      : dir(dir), options(options), report(options.maxProblemsPerKind) {}

  TraceVerifyReport run();

private:
  /// Reports names without a rank, other prefixes, repeated and missing
  /// ranks; returns the prefix P of the set.
  std::string checkFileNames();
  void loadCommGroups(llvm::StringRef prefix);
  /// Reads the files' node counts and sizes from P.manifest.json, if any.
  void loadManifest(llvm::StringRef prefix);
  void checkAgainstManifest(const TraceFileName &file, uint64_t numNodes);
  void checkGroupMembers();
  void compareCollectives(int64_t rank, uint32_t fileIndex,
                          RankTraceSummary &summary);
  void tallyPointToPoint(uint32_t fileIndex, const RankTraceSummary &summary);
  void matchPointToPoint();

  llvm::StringRef dir;
  const TraceVerifyOptions &options;
  TraceVerifyReport report;
  std::vector<TraceFileName> files;
  /// Files whose data enters the cross-rank checks: ranked, of the set's
  /// prefix, the first file of their rank.
  std::vector<bool> crossRank;
  std::optional<CommGroups> groups;
  // std::set, not DenseSet: ranks come from the input, and DenseSet
  // reserves two int64 values.
  std::set<int64_t> ranksWithFiles;
  /// Ranks whose file did not decode to its end; their partners' problems
  /// would only repeat that.
  std::set<int64_t> incompleteRanks;
  std::map<std::string, GroupReference> references;
  std::map<std::array<int64_t, 4>, PointToPointTally> pointToPoint;
  /// File name -> (nodes, bytes) from the manifest.
  std::map<std::string, std::pair<uint64_t, uint64_t>> recorded;
};

} // namespace

TraceVerifyReport TraceSetVerifier::run() {
  auto listed = listTraceFiles(dir);
  if (!listed) {
    report.add(TraceProblemKind::FileSet, "",
               llvm::toString(listed.takeError()));
    return std::move(report);
  }
  files = std::move(*listed);
  if (files.empty()) {
    report.add(TraceProblemKind::FileSet, "",
               "no .et or .et.gz files in " + dir);
    return std::move(report);
  }
  std::string prefix = checkFileNames();
  loadCommGroups(prefix);
  loadManifest(prefix);
  for (uint32_t i = 0; i < files.size(); ++i) {
    RankTraceSummary summary =
        checkRankTrace(files[i], groups ? &*groups : nullptr, report);
    ++report.numFiles;
    report.numNodes += summary.numNodes;
    checkAgainstManifest(files[i], summary.numNodes);
    if (!crossRank[i])
      continue;
    if (!summary.complete) {
      incompleteRanks.insert(*files[i].rank);
      continue;
    }
    compareCollectives(*files[i].rank, i, summary);
    tallyPointToPoint(i, summary);
  }
  checkGroupMembers();
  matchPointToPoint();
  for (const auto &[name, counts] : recorded)
    report.add(TraceProblemKind::FileSet, name,
               "listed in the manifest, but there is no such file");
  return std::move(report);
}

void TraceSetVerifier::loadManifest(llvm::StringRef prefix) {
  llvm::SmallString<128> path(dir);
  llvm::sys::path::append(path, prefix + ".manifest.json");
  if (prefix.empty() || !llvm::sys::fs::exists(path))
    return; // Another generator's set: nothing to compare with.
  auto fail = [&](const llvm::Twine &why) {
    report.add(TraceProblemKind::FileSet, (prefix + ".manifest.json").str(),
               why);
  };
  auto buffer = readInputFile(path, MaxTableBytes, "manifest");
  if (!buffer)
    return fail(llvm::toString(buffer.takeError()));
  if (getJSONNestingDepth((*buffer)->getBuffer()) > 64)
    return fail("nested too deeply to be a manifest");
  llvm::Expected<llvm::json::Value> manifest =
      llvm::json::parse((*buffer)->getBuffer());
  if (!manifest)
    return fail("not valid JSON: " + llvm::toString(manifest.takeError()));
  const llvm::json::Object *object = manifest->getAsObject();
  const llvm::json::Array *list = object ? object->getArray("files") : nullptr;
  if (!list)
    return fail("has no 'files' list");
  for (const llvm::json::Value &entry : *list) {
    const llvm::json::Object *file = entry.getAsObject();
    auto name = file ? file->getString("name") : llvm::None;
    auto nodes = file ? file->getInteger("nodes") : llvm::None;
    auto bytes = file ? file->getInteger("bytes") : llvm::None;
    if (!name || !nodes || !bytes || *nodes < 0 || *bytes < 0)
      return fail("a 'files' entry is not {\"name\", \"nodes\", \"bytes\"}");
    recorded[name->str()] = {uint64_t(*nodes), uint64_t(*bytes)};
  }
}

void TraceSetVerifier::checkAgainstManifest(const TraceFileName &file,
                                            uint64_t numNodes) {
  auto found = recorded.find(file.fileName);
  if (found == recorded.end())
    return;
  auto [nodes, bytes] = found->second;
  recorded.erase(found);
  uint64_t size = 0;
  llvm::sys::fs::file_size(file.path, size);
  if (numNodes != nodes || size != bytes)
    report.add(TraceProblemKind::CorruptFile, file.fileName,
               "has " + llvm::Twine(numNodes) + " nodes in " +
                   llvm::Twine(size) + " bytes, but the manifest records " +
                   llvm::Twine(nodes) + " nodes in " + llvm::Twine(bytes) +
                   " bytes (cut short, or changed since it was written)");
}

std::string TraceSetVerifier::checkFileNames() {
  crossRank.assign(files.size(), false);
  std::string prefix;
  std::map<int64_t, std::string> fileOfRank;
  for (uint32_t i = 0; i < files.size(); ++i) {
    const TraceFileName &file = files[i];
    if (!file.rank) {
      report.add(TraceProblemKind::FileSet, file.fileName,
                 "no rank in the name (expected PREFIX.RANK.et)");
      continue;
    }
    if (prefix.empty())
      prefix = file.prefix;
    if (file.prefix != prefix) {
      report.add(TraceProblemKind::FileSet, file.fileName,
                 "prefix '" + file.prefix + "' differs from '" + prefix +
                     "' of the other files");
      continue;
    }
    auto [it, inserted] = fileOfRank.try_emplace(*file.rank, file.fileName);
    if (!inserted) {
      report.add(TraceProblemKind::FileSet, file.fileName,
                 "rank " + llvm::Twine(*file.rank) + " also has " + it->second);
      continue;
    }
    crossRank[i] = true;
    ranksWithFiles.insert(*file.rank);
  }
  if (!fileOfRank.empty()) {
    int64_t lastRank = fileOfRank.rbegin()->first;
    for (int64_t rank = 0; rank < lastRank; ++rank)
      if (!fileOfRank.count(rank))
        report.add(TraceProblemKind::FileSet, "",
                   "rank " + llvm::Twine(rank) + " has no trace file " +
                       prefix + "." + llvm::Twine(rank) +
                       ".et (ranks go up to " + llvm::Twine(lastRank) + ")");
  }
  return prefix;
}

void TraceSetVerifier::loadCommGroups(llvm::StringRef prefix) {
  std::string path = options.commGroupsPath;
  if (path.empty()) {
    if (prefix.empty())
      return;
    llvm::SmallString<128> defaultPath(dir);
    llvm::sys::path::append(defaultPath, prefix + ".json");
    path = std::string(defaultPath.str());
  }
  auto read = readCommGroups(path);
  if (!read) {
    report.add(TraceProblemKind::CommGroups, "",
               llvm::toString(read.takeError()));
    return;
  }
  groups = std::move(*read);
  report.numGroups = groups->size();
  for (const auto &[id, members] : *groups) {
    if (members.size() < 2)
      report.add(TraceProblemKind::CommGroups, "",
                 "group '" + id + "' has " + llvm::Twine(members.size()) +
                     " member(s): a group needs at least 2 ranks");
    std::set<int64_t> seen;
    for (int64_t rank : members)
      if (!seen.insert(rank).second)
        report.add(TraceProblemKind::CommGroups, "",
                   "group '" + id + "' lists rank " + llvm::Twine(rank) +
                       " twice");
  }
}

void TraceSetVerifier::checkGroupMembers() {
  if (!groups)
    return;
  for (const auto &[id, members] : *groups)
    for (int64_t rank : members)
      if (!ranksWithFiles.count(rank))
        report.add(TraceProblemKind::CommGroups, "",
                   "group '" + id + "' lists rank " + llvm::Twine(rank) +
                       ", which has no trace file");
}

static std::string describe(const CollectiveRecord &collective) {
  return getCollectiveName(collective.commType) + " of " +
         std::to_string(collective.commSize) + " bytes";
}

void TraceSetVerifier::compareCollectives(int64_t rank, uint32_t fileIndex,
                                          RankTraceSummary &summary) {
  if (!groups)
    return;
  const std::string &file = files[fileIndex].fileName;
  for (const auto &group : *groups) {
    // Named, not a structured binding: the lambda below captures it.
    const std::string &id = group.first;
    if (!llvm::is_contained(group.second, rank))
      continue;
    std::vector<CollectiveRecord> sequence;
    if (auto it = summary.collectives.find(id); it != summary.collectives.end())
      sequence = std::move(it->second);
    GroupReference &reference = references[id];
    if (reference.rank < 0) {
      reference.rank = rank;
      reference.sequence = std::move(sequence);
      continue;
    }
    auto mismatch = [&](std::optional<uint64_t> node, const llvm::Twine &text) {
      report.add({TraceProblemKind::CollectiveMismatch, file, node, "",
                  "group '" + id + "': " + text.str()});
    };
    const std::vector<CollectiveRecord> &expected = reference.sequence;
    size_t common = std::min(sequence.size(), expected.size());
    size_t i = 0;
    while (i < common && sequence[i].commType == expected[i].commType &&
           sequence[i].commSize == expected[i].commSize)
      ++i;
    if (i < common)
      mismatch(sequence[i].nodeId, "collective #" + llvm::Twine(i) + " is " +
                                       describe(sequence[i]) + ", but rank " +
                                       llvm::Twine(reference.rank) +
                                       " issues " + describe(expected[i]) +
                                       " (node " +
                                       llvm::Twine(expected[i].nodeId) + ")");
    else if (sequence.size() != expected.size())
      mismatch(sequence.size() > common
                   ? std::optional<uint64_t>(sequence[common].nodeId)
                   : std::nullopt,
               "rank " + llvm::Twine(rank) + " issues " +
                   llvm::Twine(sequence.size()) + " collectives, but rank " +
                   llvm::Twine(reference.rank) + " issues " +
                   llvm::Twine(expected.size()));
  }
}

void TraceSetVerifier::tallyPointToPoint(uint32_t fileIndex,
                                         const RankTraceSummary &summary) {
  for (const PointToPointRecord &record : summary.pointToPoint) {
    PointToPointTally &tally =
        pointToPoint[{record.src, record.dst, record.tag, record.size}];
    uint32_t &count = record.isSend ? tally.numSends : tally.numRecvs;
    if (count++ == 0) {
      (record.isSend ? tally.sendFile : tally.recvFile) = fileIndex;
      (record.isSend ? tally.sendNode : tally.recvNode) = record.nodeId;
    }
  }
}

void TraceSetVerifier::matchPointToPoint() {
  for (const auto &[key, tally] : pointToPoint) {
    if (tally.numSends == 1 && tally.numRecvs == 1)
      continue;
    // A partner without a readable file is reported as such already.
    llvm::ArrayRef<int64_t> peers = llvm::ArrayRef<int64_t>(key).take_front(2);
    bool peersReadable = llvm::all_of(peers, [&](int64_t rank) {
      return ranksWithFiles.count(rank) && !incompleteRanks.count(rank);
    });
    if (!peersReadable)
      continue;
    std::string tuple = "(src " + std::to_string(key[0]) + ", dst " +
                        std::to_string(key[1]) + ", tag " +
                        std::to_string(key[2]) + ", " + std::to_string(key[3]) +
                        " bytes)";
    bool blameSend = tally.numSends > 0;
    TraceProblem problem{
        TraceProblemKind::SendRecv,
        files[blameSend ? tally.sendFile : tally.recvFile].fileName,
        blameSend ? tally.sendNode : tally.recvNode, "", ""};
    if (tally.numRecvs == 0)
      problem.message = "SEND " + tuple + " has no matching RECV on rank " +
                        std::to_string(key[1]);
    else if (tally.numSends == 0)
      problem.message = "RECV " + tuple + " has no matching SEND on rank " +
                        std::to_string(key[0]);
    else
      problem.message = std::to_string(tally.numSends) + " SENDs and " +
                        std::to_string(tally.numRecvs) + " RECVs share " +
                        tuple + ": each SEND must match exactly one RECV";
    report.add(std::move(problem));
  }
}

TraceVerifyReport stg::verifyTraceDirectory(llvm::StringRef dir,
                                            const TraceVerifyOptions &options) {
  return TraceSetVerifier(dir, options).run();
}
