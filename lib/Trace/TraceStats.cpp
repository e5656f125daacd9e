//===- TraceStats.cpp - Totals of a Chakra trace --------------------------===//
//
// Sums a trace up node by node, reading attributes from the members the
// contract puts them in (an attribute in another member is not counted:
// `stage-et verify` reports it).
//
//===----------------------------------------------------------------------===//

#include "stg/Trace/TraceStats.h"

#include "stg/Chakra/ChakraTrace.h"
#include "stg/Trace/TraceFormat.h"

#include "llvm/Support/Path.h"

using namespace stg;
using ChakraProtoMsg::AttributeProto;
using ChakraProtoMsg::Node;

static const AttributeProto *findAttrIn(const Node &node, llvm::StringRef name,
                                        AttributeProto::ValueCase member) {
  const AttributeProto *attr = chakra::findAttr(node, name);
  return attr && attr->value_case() == member ? attr : nullptr;
}

static uint64_t getCommSize(const Node &node) {
  const AttributeProto *size =
      findAttrIn(node, chakra::attr::CommSize, AttributeProto::kInt64Val);
  return size && size->int64_val() > 0 ? size->int64_val() : 0;
}

void TraceStats::addNode(const Node &node) {
  ++numNodes;
  ++nodesByType[getNodeTypeName(node.type())];
  switch (node.type()) {
  case ChakraProtoMsg::COMP_NODE:
    if (auto *ops =
            findAttrIn(node, chakra::attr::NumOps, AttributeProto::kInt64Val);
        ops && ops->int64_val() > 0)
      numOps += ops->int64_val();
    if (auto *bytes = findAttrIn(node, chakra::attr::TensorSize,
                                 AttributeProto::kUint64Val))
      tensorBytes += bytes->uint64_val();
    break;
  case ChakraProtoMsg::COMM_COLL_NODE: {
    uint64_t bytes = getCommSize(node);
    std::string type = "(no comm_type)";
    if (auto *attr =
            findAttrIn(node, chakra::attr::CommType, AttributeProto::kInt64Val))
      type = getCollectiveName(attr->int64_val());
    std::string group = "(no pg_name)";
    if (auto *attr =
            findAttrIn(node, chakra::attr::PgName, AttributeProto::kStringVal))
      group = attr->string_val();
    for (CountAndBytes *entry :
         {&collectivesByType[type], &collectivesByGroup[group]}) {
      ++entry->count;
      entry->bytes += bytes;
    }
    break;
  }
  case ChakraProtoMsg::COMM_SEND_NODE:
  case ChakraProtoMsg::COMM_RECV_NODE: {
    CountAndBytes &entry =
        node.type() == ChakraProtoMsg::COMM_SEND_NODE ? sends : recvs;
    ++entry.count;
    entry.bytes += getCommSize(node);
    break;
  }
  default:
    break;
  }
}

static void mergeInto(std::map<std::string, CountAndBytes> &into,
                      const std::map<std::string, CountAndBytes> &from) {
  for (const auto &[key, value] : from) {
    into[key].count += value.count;
    into[key].bytes += value.bytes;
  }
}

void TraceStats::merge(const TraceStats &other) {
  numFiles += other.numFiles;
  numNodes += other.numNodes;
  for (const auto &[type, count] : other.nodesByType)
    nodesByType[type] += count;
  numOps += other.numOps;
  tensorBytes += other.tensorBytes;
  mergeInto(collectivesByType, other.collectivesByType);
  mergeInto(collectivesByGroup, other.collectivesByGroup);
  sends.count += other.sends.count;
  sends.bytes += other.sends.bytes;
  recvs.count += other.recvs.count;
  recvs.bytes += other.recvs.bytes;
}

llvm::Expected<TraceStats> stg::computeTraceStats(llvm::StringRef path) {
  auto reader = ChakraTraceReader::open(path);
  if (!reader)
    return reader.takeError();
  TraceStats stats;
  stats.name = llvm::sys::path::filename(path).str();
  stats.numFiles = 1;
  Node node;
  while (true) {
    llvm::Expected<bool> more = (*reader)->readNode(node);
    if (!more)
      return more.takeError();
    if (!*more)
      return stats;
    stats.addNode(node);
  }
}

static void printCounts(llvm::raw_ostream &os, llvm::StringRef title,
                        const std::map<std::string, CountAndBytes> &entries) {
  os << title << ':';
  if (entries.empty())
    os << " none";
  for (const auto &[key, value] : entries)
    os << ' ' << key << " " << value.count << " (" << value.bytes << " bytes)";
  os << '\n';
}

void stg::printTraceStats(llvm::raw_ostream &os, const TraceStats &stats) {
  os << "== " << stats.name << " ==\n";
  os << "nodes: " << stats.numNodes;
  for (const auto &[type, count] : stats.nodesByType)
    os << ' ' << type << ' ' << count;
  os << '\n';
  os << "compute: num_ops " << stats.numOps << ", tensor_size "
     << stats.tensorBytes << " bytes\n";
  printCounts(os, "collectives by type", stats.collectivesByType);
  printCounts(os, "collectives by group", stats.collectivesByGroup);
  os << "send: " << stats.sends.count << " (" << stats.sends.bytes
     << " bytes), recv: " << stats.recvs.count << " (" << stats.recvs.bytes
     << " bytes)\n";
}

static llvm::json::Value toJSON(const CountAndBytes &entry) {
  return llvm::json::Object{{"count", int64_t(entry.count)},
                            {"bytes", int64_t(entry.bytes)}};
}

static llvm::json::Value
toJSON(const std::map<std::string, CountAndBytes> &entries) {
  llvm::json::Object object;
  for (const auto &[key, value] : entries)
    object[key] = toJSON(value);
  return object;
}

llvm::json::Value stg::toJSON(const TraceStats &stats) {
  llvm::json::Object byType;
  for (const auto &[type, count] : stats.nodesByType)
    byType[type] = int64_t(count);
  return llvm::json::Object{
      {"name", stats.name},
      {"files", int64_t(stats.numFiles)},
      {"nodes", int64_t(stats.numNodes)},
      {"nodes_by_type", std::move(byType)},
      {"num_ops", int64_t(stats.numOps)},
      {"tensor_bytes", int64_t(stats.tensorBytes)},
      {"collectives_by_type", ::toJSON(stats.collectivesByType)},
      {"collectives_by_group", ::toJSON(stats.collectivesByGroup)},
      {"send", ::toJSON(stats.sends)},
      {"recv", ::toJSON(stats.recvs)}};
}
