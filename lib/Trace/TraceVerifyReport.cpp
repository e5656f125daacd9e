//===- TraceVerifyReport.cpp - Problems found by stage-et verify ----------===//
//
// Counting and printing the problems of a trace set: every problem counts,
// the first few of each kind are kept, and the report prints them grouped
// by kind with the file, node id and name, then one summary line.
//
//===----------------------------------------------------------------------===//

#include "stg/Trace/TraceVerifier.h"

#include "llvm/ADT/Twine.h"

using namespace stg;

llvm::StringRef stg::getTraceProblemKindName(TraceProblemKind kind) {
  switch (kind) {
  case TraceProblemKind::CorruptFile:
    return "corrupt-file";
  case TraceProblemKind::FileSet:
    return "file-set";
  case TraceProblemKind::Metadata:
    return "metadata";
  case TraceProblemKind::DuplicateId:
    return "duplicate-id";
  case TraceProblemKind::DanglingDep:
    return "dangling-dep";
  case TraceProblemKind::TopologicalOrder:
    return "topological-order";
  case TraceProblemKind::Attribute:
    return "attribute";
  case TraceProblemKind::CommGroups:
    return "comm-groups";
  case TraceProblemKind::CollectiveOrder:
    return "collective-order";
  case TraceProblemKind::CollectiveMismatch:
    return "collective-mismatch";
  case TraceProblemKind::SendRecv:
    return "send-recv";
  }
  llvm_unreachable("unknown trace problem kind");
}

void TraceVerifyReport::add(TraceProblem problem) {
  ++numProblems;
  uint64_t &count = countByKind[static_cast<unsigned>(problem.kind)];
  if (count++ < maxKeptPerKind)
    kept.push_back(std::move(problem));
}

void TraceVerifyReport::add(TraceProblemKind kind, llvm::StringRef file,
                            const llvm::Twine &message) {
  add(TraceProblem{kind, file.str(), std::nullopt, "", message.str()});
}

static void printProblem(llvm::raw_ostream &os, const TraceProblem &problem) {
  os << "error: [" << getTraceProblemKindName(problem.kind) << "] ";
  if (!problem.file.empty())
    os << problem.file << ": ";
  if (problem.nodeId) {
    os << "node " << *problem.nodeId;
    if (!problem.nodeName.empty())
      os << " '" << problem.nodeName << "'";
    os << ": ";
  }
  os << problem.message << '\n';
}

void TraceVerifyReport::print(llvm::raw_ostream &os) const {
  std::string counts;
  for (unsigned k = 0; k < NumTraceProblemKinds; ++k) {
    auto kind = static_cast<TraceProblemKind>(k);
    if (countByKind[k] == 0)
      continue;
    for (const TraceProblem &problem : kept)
      if (problem.kind == kind)
        printProblem(os, problem);
    if (countByKind[k] > maxKeptPerKind)
      os << "note: " << countByKind[k] - maxKeptPerKind << " more ["
         << getTraceProblemKindName(kind) << "] problems not shown\n";
    counts += (counts.empty() ? "" : ", ") +
              getTraceProblemKindName(kind).str() + " " +
              std::to_string(countByKind[k]);
  }
  std::string checked = std::to_string(numFiles) + " files, " +
                        std::to_string(numNodes) + " nodes, " +
                        std::to_string(numGroups) + " groups";
  if (succeeded())
    os << "verified " << checked << '\n';
  else
    os << "FAILED: " << numProblems << " problems (" << counts << ") in "
       << checked << '\n';
}
