//===- RankTraceChecker.cpp - Checks of one rank's trace ------------------===//
//
// Reads one .et file node by node and checks, in one pass:
//
// 1. the file decodes to its end (ChakraTraceReader's errors) and its
//    GlobalMetadata has a version;
// 2. ids are unique;
// 3. every dependency names a node written earlier. A dependency on a node
//    written later breaks the topological order; one on an id that never
//    appears dangles. Both are only known at the end of the file, so such
//    dependencies are kept until then. If any broke the order, the file is
//    read a second time to look for a cycle and report it;
// 4. the attributes (NodeAttributeChecks.cpp);
// 5. consecutive collectives of each group are chained by dependencies.
//    Since nodes come in topological order, every node's ancestors are
//    already known: for each group, each node records the index of the
//    latest collective of that group among its ancestors (itself included),
//    the maximum over its dependencies. Collective k of a group is chained
//    to collective k-1 exactly when that maximum over its dependencies is
//    k-1. This costs one int32 per node and group, from the group's first
//    collective on, instead of a search per pair.
//
//===----------------------------------------------------------------------===//

#include "RankTraceChecker.h"

#include "stg/Chakra/ChakraTrace.h"

#include <unordered_map>

using namespace stg;
using ChakraProtoMsg::Node;

namespace {

/// Per group: for every node from the group's first collective on, the
/// index of the latest collective of the group it depends on (or is).
struct GroupReach {
  uint32_t firstNode = 0;
  std::vector<int32_t> latest;
  int32_t numCollectives = 0;
  uint64_t lastCollectiveId = 0;
  std::string lastCollectiveName;

  int32_t get(uint32_t nodeIndex) const {
    return nodeIndex < firstNode ? -1 : latest[nodeIndex - firstNode];
  }
};

/// A dependency on an id not seen yet when its node was read.
struct PendingDependency {
  uint32_t nodeIndex;
  uint64_t nodeId;
  std::string nodeName;
  uint64_t dependency;
};

class RankTraceChecker {
public:
  RankTraceChecker(const TraceFileName &file, const CommGroups *groups,
                   TraceVerifyReport &report)
      : file(file), groups(groups), report(report) {}

  RankTraceSummary run();

private:
  void problem(TraceProblemKind kind, uint64_t id, llvm::StringRef name,
               const llvm::Twine &message) {
    report.add({kind, file.fileName, id, name.str(), message.str()});
  }
  /// A reader error, without the path the reader puts first.
  void corruptFile(llvm::Error error) {
    std::string text = llvm::toString(std::move(error));
    llvm::StringRef rest = text;
    if (rest.consume_front(file.path) && rest.consume_front(": "))
      text = rest.str();
    report.add(TraceProblemKind::CorruptFile, file.fileName, text);
  }
  void checkNode(const Node &node, uint32_t index);
  /// Indices of the dependencies already seen; the others become pending.
  llvm::SmallVector<uint32_t, 8> resolveDependencies(const Node &node,
                                                     uint32_t index);
  void trackCollectiveOrder(const Node &node, uint32_t index,
                            llvm::ArrayRef<uint32_t> dependencies,
                            const NodeCommunication &communication);
  /// Reports the pending dependencies; false if there were any.
  bool reportPendingDependencies();
  void reportCycle();

  const TraceFileName &file;
  const CommGroups *groups;
  TraceVerifyReport &report;
  RankTraceSummary summary;
  /// Node index of each id (the first node with it). Not a DenseMap: ids
  /// come from the file, and DenseMap reserves two uint64 values as keys.
  std::unordered_map<uint64_t, uint32_t> indexOfId;
  std::vector<PendingDependency> pending;
  /// Whether a dependency named a node written later (maybe a cycle).
  bool hasForwardDependency = false;
  std::map<std::string, GroupReach> reachByGroup;
  /// Found while reading, reported only if the dependencies are sound
  /// (otherwise the reach above is incomplete).
  std::vector<TraceProblem> orderProblems;
};

} // namespace

RankTraceSummary RankTraceChecker::run() {
  auto reader = ChakraTraceReader::open(file.path);
  if (!reader) {
    corruptFile(reader.takeError());
    return std::move(summary);
  }
  if ((*reader)->getMetadata().version().empty())
    report.add(TraceProblemKind::Metadata, file.fileName,
               "GlobalMetadata has no version");
  Node node;
  bool complete = true;
  while (true) {
    llvm::Expected<bool> more = (*reader)->readNode(node);
    if (!more) {
      corruptFile(more.takeError());
      complete = false;
      break;
    }
    if (!*more)
      break;
    checkNode(node, static_cast<uint32_t>(summary.numNodes++));
  }
  bool inOrder = reportPendingDependencies();
  if (inOrder)
    for (TraceProblem &problem : orderProblems)
      report.add(std::move(problem));
  else if (complete && hasForwardDependency)
    reportCycle();
  summary.complete = complete;
  return std::move(summary);
}

void RankTraceChecker::checkNode(const Node &node, uint32_t index) {
  llvm::SmallVector<uint32_t, 8> dependencies =
      resolveDependencies(node, index);
  auto [it, inserted] = indexOfId.try_emplace(node.id(), index);
  if (!inserted)
    problem(TraceProblemKind::DuplicateId, node.id(), node.name(),
            "id " + llvm::Twine(node.id()) +
                " is already used by the node at position " +
                llvm::Twine(it->second));
  NodeCommunication communication = checkNodeAttributes(
      node, file.rank, groups,
      [&](TraceProblemKind kind, const llvm::Twine &message) {
        problem(kind, node.id(), node.name(), message);
      });
  trackCollectiveOrder(node, index, dependencies, communication);
  if (communication.collective)
    summary.collectives[*communication.group].push_back(
        *communication.collective);
  if (communication.pointToPoint)
    summary.pointToPoint.push_back(*communication.pointToPoint);
}

llvm::SmallVector<uint32_t, 8>
RankTraceChecker::resolveDependencies(const Node &node, uint32_t index) {
  llvm::SmallVector<uint32_t, 8> dependencies;
  for (const auto *list : {&node.data_deps(), &node.ctrl_deps()})
    for (uint64_t dependency : *list) {
      auto it = indexOfId.find(dependency);
      if (it != indexOfId.end())
        dependencies.push_back(it->second);
      else
        pending.push_back({index, node.id(), node.name(), dependency});
    }
  return dependencies;
}

void RankTraceChecker::trackCollectiveOrder(
    const Node &node, uint32_t index, llvm::ArrayRef<uint32_t> dependencies,
    const NodeCommunication &communication) {
  if (communication.group && !reachByGroup.count(*communication.group))
    reachByGroup[*communication.group].firstNode = index;
  for (auto &[group, reach] : reachByGroup) {
    int32_t latest = -1;
    for (uint32_t dependency : dependencies)
      latest = std::max(latest, reach.get(dependency));
    if (communication.group && *communication.group == group) {
      int32_t position = reach.numCollectives++;
      if (position > 0 && latest != position - 1)
        orderProblems.push_back(
            {TraceProblemKind::CollectiveOrder, file.fileName, node.id(),
             node.name(),
             "collective #" + std::to_string(position) + " on group '" + group +
                 "' does not depend, directly or through other nodes, on "
                 "the previous one on that group (node " +
                 std::to_string(reach.lastCollectiveId) + " '" +
                 reach.lastCollectiveName +
                 "'): members may issue them in different orders"});
      latest = position;
      reach.lastCollectiveId = node.id();
      reach.lastCollectiveName = node.name();
    }
    reach.latest.push_back(latest);
  }
}

bool RankTraceChecker::reportPendingDependencies() {
  bool noneBroken = pending.empty();
  for (const PendingDependency &dependency : pending) {
    auto it = indexOfId.find(dependency.dependency);
    if (it == indexOfId.end()) {
      problem(TraceProblemKind::DanglingDep, dependency.nodeId,
              dependency.nodeName,
              "depends on id " + llvm::Twine(dependency.dependency) +
                  ", which no node of the file has");
      continue;
    }
    hasForwardDependency = true;
    if (it->second == dependency.nodeIndex) {
      problem(TraceProblemKind::TopologicalOrder, dependency.nodeId,
              dependency.nodeName, "depends on itself");
    } else {
      problem(TraceProblemKind::TopologicalOrder, dependency.nodeId,
              dependency.nodeName,
              "depends on node " + llvm::Twine(dependency.dependency) +
                  ", which is written later (at position " +
                  llvm::Twine(it->second) +
                  "): nodes are not in topological order");
    }
  }
  pending.clear();
  return noneBroken;
}

/// Reports one dependency cycle of the file, if it has one. Only called
/// when the order is already known to be broken, so reading the file again
/// costs nothing on good traces.
void RankTraceChecker::reportCycle() {
  auto trace = readChakraTrace(file.path);
  if (!trace) {
    llvm::consumeError(trace.takeError());
    return;
  }
  const std::vector<Node> &nodes = trace->nodes;
  std::unordered_map<uint64_t, uint32_t> index;
  for (uint32_t i = 0; i < nodes.size(); ++i)
    index.try_emplace(nodes[i].id(), i);
  auto forEachDependency = [&](uint32_t node, auto callback) {
    for (const auto *list :
         {&nodes[node].data_deps(), &nodes[node].ctrl_deps()})
      for (uint64_t dependency : *list)
        if (auto it = index.find(dependency); it != index.end())
          callback(it->second);
  };
  // Iterative depth-first search; a dependency on a node still on the
  // stack closes a cycle.
  enum : uint8_t { Unvisited, OnStack, Done };
  std::vector<uint8_t> state(nodes.size(), Unvisited);
  std::vector<uint32_t> stack;
  for (uint32_t root = 0; root < nodes.size(); ++root) {
    if (state[root] != Unvisited)
      continue;
    stack.push_back(root);
    state[root] = OnStack;
    while (!stack.empty()) {
      uint32_t node = stack.back();
      std::optional<uint32_t> next, closing;
      forEachDependency(node, [&](uint32_t dependency) {
        if (!next && !closing && state[dependency] == Unvisited)
          next = dependency;
        else if (!closing && state[dependency] == OnStack)
          closing = dependency;
      });
      if (closing) {
        auto start = llvm::find(stack, *closing);
        std::string cycle;
        for (auto it = start; it != stack.end(); ++it)
          cycle += std::to_string(nodes[*it].id()) + " -> ";
        cycle += std::to_string(nodes[*closing].id());
        problem(TraceProblemKind::TopologicalOrder, nodes[*closing].id(),
                nodes[*closing].name(), "dependency cycle: " + cycle);
        return;
      }
      if (next) {
        state[*next] = OnStack;
        stack.push_back(*next);
      } else {
        state[node] = Done;
        stack.pop_back();
      }
    }
  }
}

RankTraceSummary stg::checkRankTrace(const TraceFileName &file,
                                     const CommGroups *groups,
                                     TraceVerifyReport &report) {
  return RankTraceChecker(file, groups, report).run();
}
