//===- TraceDiff.cpp - Differences between two Chakra traces --------------===//
//
// Both traces are read whole (a diff needs random access by id). Fields are
// compared through protobuf reflection, so a field added to the schema is
// compared without a change here; attributes are compared by name, value
// and the member holding it, since a value moving from int64_val to
// uint64_val changes what readers see.
//
//===----------------------------------------------------------------------===//

#include "stg/Trace/TraceDiff.h"

#include "stg/Chakra/ChakraTrace.h"
#include "stg/Trace/TraceFiles.h"
#include "stg/Trace/TraceFormat.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

#include <map>
#include <set>
#include <unordered_map>

using namespace stg;
using ChakraProtoMsg::AttributeProto;
using ChakraProtoMsg::Node;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;

/// Appends `field: old -> new` for every field but `id` and `attr` whose
/// value differs.
static void diffFields(const Message &before, const Message &after,
                       std::vector<std::string> &changes) {
  const google::protobuf::Descriptor *descriptor = before.GetDescriptor();
  for (int i = 0; i < descriptor->field_count(); ++i) {
    const FieldDescriptor *field = descriptor->field(i);
    if (field->name() == "id" || field->name() == "attr")
      continue;
    std::string old = formatField(before, field);
    std::string now = formatField(after, field);
    if (old != now)
      changes.push_back(field->name() + ": " + old + " -> " + now);
  }
}

/// Appends a line for every attribute added, removed or changed.
static void
diffAttrs(const google::protobuf::RepeatedPtrField<AttributeProto> &before,
          const google::protobuf::RepeatedPtrField<AttributeProto> &after,
          std::vector<std::string> &changes) {
  auto byName = [](const auto &attrs) {
    std::map<std::string, std::string> values;
    for (const AttributeProto &attr : attrs) {
      std::string &value = values[attr.name()];
      value += (value.empty() ? "" : ", ") + formatAttrValue(attr);
    }
    return values;
  };
  std::map<std::string, std::string> old = byName(before), now = byName(after);
  for (const auto &[name, value] : old) {
    auto it = now.find(name);
    if (it == now.end())
      changes.push_back("attr " + name + " removed (" + value + ")");
    else if (it->second != value)
      changes.push_back("attr " + name + ": " + value + " -> " + it->second);
  }
  for (const auto &[name, value] : now)
    if (!old.count(name))
      changes.push_back("attr " + name + " added (" + value + ")");
}

static DiffNode describe(const Node &node) {
  return {node.id(), node.name(), getNodeTypeName(node.type())};
}

llvm::Expected<TraceDiff> stg::diffTraceFiles(llvm::StringRef before,
                                              llvm::StringRef after) {
  auto old = readChakraTrace(before);
  if (!old)
    return old.takeError();
  auto now = readChakraTrace(after);
  if (!now)
    return now.takeError();
  TraceDiff diff;
  diffFields(old->metadata, now->metadata, diff.metadataChanges);
  diffAttrs(old->metadata.attr(), now->metadata.attr(), diff.metadataChanges);

  auto indexById = [](const std::vector<Node> &nodes) {
    // Not a DenseMap, which reserves two uint64 values as keys.
    std::unordered_map<uint64_t, const Node *> index;
    for (const Node &node : nodes)
      index.try_emplace(node.id(), &node);
    return index;
  };
  auto oldById = indexById(old->nodes), newById = indexById(now->nodes);
  std::vector<uint64_t> oldOrder, newOrder;
  for (const Node &node : old->nodes) {
    auto it = newById.find(node.id());
    if (it == newById.end()) {
      diff.removed.push_back(describe(node));
      continue;
    }
    if (oldById[node.id()] != &node)
      continue; // A repeated id: only its first node is compared.
    oldOrder.push_back(node.id());
    NodeChange change{describe(node), {}};
    diffFields(node, *it->second, change.changes);
    diffAttrs(node.attr(), it->second->attr(), change.changes);
    if (!change.changes.empty())
      diff.changed.push_back(std::move(change));
  }
  for (const Node &node : now->nodes) {
    if (!oldById.count(node.id()))
      diff.added.push_back(describe(node));
    else if (newById[node.id()] == &node)
      newOrder.push_back(node.id());
  }
  for (size_t i = 0; i < oldOrder.size() && i < newOrder.size(); ++i)
    if (oldOrder[i] != newOrder[i]) {
      diff.orderChange = "the nodes of both files come in another order: "
                         "from position " +
                         std::to_string(i) + " of the common nodes, node " +
                         std::to_string(oldOrder[i]) + " before, node " +
                         std::to_string(newOrder[i]) + " after";
      break;
    }
  return diff;
}

static std::string formatNode(char mark, const DiffNode &node) {
  return std::string(1, mark) + " node " + std::to_string(node.id) + " '" +
         node.name + "' (" + node.type + ")";
}

void stg::printTraceDiff(llvm::raw_ostream &os, const TraceDiff &diff,
                         llvm::StringRef before, llvm::StringRef after) {
  if (diff.isEmpty())
    return;
  os << "--- " << before << "\n+++ " << after << '\n';
  for (const std::string &change : diff.metadataChanges)
    os << "~ metadata: " << change << '\n';
  for (const DiffNode &node : diff.removed)
    os << formatNode('-', node) << '\n';
  for (const DiffNode &node : diff.added)
    os << formatNode('+', node) << '\n';
  for (const NodeChange &change : diff.changed)
    for (const std::string &line : change.changes)
      os << formatNode('~', change.node) << ": " << line << '\n';
  if (diff.orderChange)
    os << "~ order: " << *diff.orderChange << '\n';
  os << diff.removed.size() << " removed, " << diff.added.size() << " added, "
     << diff.changed.size() << " changed\n";
}

static llvm::Expected<bool> diffFiles(llvm::StringRef before,
                                      llvm::StringRef after,
                                      llvm::raw_ostream &os) {
  auto diff = diffTraceFiles(before, after);
  if (!diff)
    return diff.takeError();
  printTraceDiff(os, *diff, before, after);
  return !diff->isEmpty();
}

static llvm::Expected<std::set<std::string>>
listFileNames(llvm::StringRef dir) {
  auto files = listTraceFiles(dir);
  if (!files)
    return files.takeError();
  std::set<std::string> names;
  for (const TraceFileName &file : *files)
    names.insert(file.fileName);
  return names;
}

llvm::Expected<bool> stg::diffTracePaths(llvm::StringRef before,
                                         llvm::StringRef after,
                                         llvm::raw_ostream &os) {
  bool beforeIsDir = llvm::sys::fs::is_directory(before);
  if (beforeIsDir != llvm::sys::fs::is_directory(after))
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "cannot compare a directory with a file: " + before + ", " + after);
  if (!beforeIsDir)
    return diffFiles(before, after, os);

  auto oldNames = listFileNames(before);
  if (!oldNames)
    return oldNames.takeError();
  auto newNames = listFileNames(after);
  if (!newNames)
    return newNames.takeError();
  bool differ = false;
  for (const std::string &name : *oldNames)
    if (!newNames->count(name)) {
      os << "only in " << before << ": " << name << '\n';
      differ = true;
    }
  for (const std::string &name : *newNames)
    if (!oldNames->count(name)) {
      os << "only in " << after << ": " << name << '\n';
      differ = true;
    }
  for (const std::string &name : *oldNames) {
    if (!newNames->count(name))
      continue;
    llvm::SmallString<128> oldPath(before), newPath(after);
    llvm::sys::path::append(oldPath, name);
    llvm::sys::path::append(newPath, name);
    auto fileDiffers = diffFiles(oldPath, newPath, os);
    if (!fileDiffers)
      return fileDiffers.takeError();
    differ |= *fileDiffers;
  }
  return differ;
}
