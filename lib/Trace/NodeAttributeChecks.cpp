//===- NodeAttributeChecks.cpp - The attributes each node type carries ----===//
//
// The attribute half of the output contract, node by node: which attributes
// each node type must carry, the AttributeProto member each is read from
// (a value in another member reads as zero in ASTRA-sim, silently), and the
// values allowed: is_cpu_op false on device work, only the four collectives
// ASTRA-sim simulates, non-negative sizes, a SEND sent by this rank and a
// RECV received by it, a pg_name naming a group of P.json that this rank is
// a member of, and no floating-point values anywhere.
//
//===----------------------------------------------------------------------===//

#include "RankTraceChecker.h"

#include "stg/Chakra/ChakraAttributes.h"
#include "stg/Trace/TraceFormat.h"

#include "llvm/ADT/STLExtras.h"

using namespace stg;
using ChakraProtoMsg::AttributeProto;
using ChakraProtoMsg::Node;

namespace {

/// Looks the contract's attributes of one node up and reports each missing
/// one or one in the wrong member.
class AttributeChecker {
public:
  AttributeChecker(const Node &node, NodeProblemSink report)
      : node(node), report(report) {}

  /// The attribute `name` if it is stored in `member`; reports it missing
  /// (when `required`) or in another member, and returns null.
  const AttributeProto *get(llvm::StringRef name,
                            AttributeProto::ValueCase member,
                            llvm::StringRef memberName, bool required = true) {
    const AttributeProto *attr = chakra::findAttr(node, name);
    if (!attr) {
      if (required)
        report(TraceProblemKind::Attribute,
               "missing attribute '" + name + "' (" + memberName + ")");
      return nullptr;
    }
    if (attr->value_case() != member) {
      report(TraceProblemKind::Attribute, "attribute '" + name + "' is " +
                                              formatAttrValue(*attr) +
                                              ", expected " + memberName);
      return nullptr;
    }
    return attr;
  }

  /// Reports a negative `name` (a byte or operation count).
  void requireNonNegative(const AttributeProto *attr, int64_t value) {
    if (attr && value < 0)
      report(TraceProblemKind::Attribute,
             "attribute '" + attr->name() +
                 "' is negative: " + llvm::Twine(value));
  }

private:
  const Node &node;
  NodeProblemSink report;
};

bool isDeviceNode(int type) {
  return type == ChakraProtoMsg::COMP_NODE ||
         type == ChakraProtoMsg::COMM_COLL_NODE ||
         type == ChakraProtoMsg::COMM_SEND_NODE ||
         type == ChakraProtoMsg::COMM_RECV_NODE;
}

bool isSimulatedCollective(int64_t commType) {
  return commType == ChakraProtoMsg::ALL_REDUCE ||
         commType == ChakraProtoMsg::ALL_GATHER ||
         commType == ChakraProtoMsg::REDUCE_SCATTER ||
         commType == ChakraProtoMsg::ALL_TO_ALL;
}

bool isFloatingPoint(const AttributeProto &attr) {
  switch (attr.value_case()) {
  case AttributeProto::kDoubleVal:
  case AttributeProto::kDoubleList:
  case AttributeProto::kFloatVal:
  case AttributeProto::kFloatList:
    return true;
  default:
    return false;
  }
}

void checkCommonAttributes(const Node &node, AttributeChecker &attrs,
                           NodeProblemSink report) {
  if (node.type() == ChakraProtoMsg::INVALID_NODE ||
      !ChakraProtoMsg::NodeType_IsValid(node.type()))
    report(TraceProblemKind::Attribute,
           "node type " + getNodeTypeName(node.type()) + " is not valid");
  const AttributeProto *isCpuOp =
      attrs.get(chakra::attr::IsCpuOp, AttributeProto::kBoolVal, "bool",
                /*required=*/isDeviceNode(node.type()));
  if (isCpuOp && isCpuOp->bool_val() && isDeviceNode(node.type()))
    report(TraceProblemKind::Attribute, "is_cpu_op is true on a " +
                                            getNodeTypeName(node.type()) +
                                            " (device work must say false)");
  for (const AttributeProto &attr : node.attr())
    if (isFloatingPoint(attr))
      report(TraceProblemKind::Attribute,
             "attribute '" + attr.name() + "' is " + formatAttrValue(attr) +
                 ": numeric attributes must be integers");
  // Optional attributes: only their member is checked.
  attrs.get(chakra::attr::Inputs, AttributeProto::kStringList, "string_list",
            /*required=*/false);
  attrs.get(chakra::attr::Outputs, AttributeProto::kStringList, "string_list",
            /*required=*/false);
}

void checkCompute(AttributeChecker &attrs) {
  const AttributeProto *numOps =
      attrs.get(chakra::attr::NumOps, AttributeProto::kInt64Val, "int64");
  attrs.requireNonNegative(numOps, numOps ? numOps->int64_val() : 0);
  attrs.get(chakra::attr::TensorSize, AttributeProto::kUint64Val, "uint64");
  attrs.get(chakra::attr::OpType, AttributeProto::kStringVal, "string");
}

void checkCollective(const Node &node, std::optional<int64_t> rank,
                     const CommGroups *groups, AttributeChecker &attrs,
                     NodeProblemSink report, NodeCommunication &result) {
  const AttributeProto *type =
      attrs.get(chakra::attr::CommType, AttributeProto::kInt64Val, "int64");
  if (type && !isSimulatedCollective(type->int64_val())) {
    report(TraceProblemKind::Attribute,
           "comm_type " + getCollectiveName(type->int64_val()) +
               " is not one of ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER, "
               "ALL_TO_ALL");
    type = nullptr;
  }
  const AttributeProto *size =
      attrs.get(chakra::attr::CommSize, AttributeProto::kInt64Val, "int64");
  attrs.requireNonNegative(size, size ? size->int64_val() : 0);
  const AttributeProto *group =
      attrs.get(chakra::attr::PgName, AttributeProto::kStringVal, "string");
  attrs.get(chakra::attr::CommPriority, AttributeProto::kInt32Val, "int32",
            /*required=*/false);
  attrs.get(chakra::attr::InvolvedDim, AttributeProto::kBoolList, "bool_list",
            /*required=*/false);
  if (!group)
    return;
  result.group = group->string_val();
  if (groups) {
    auto members = groups->find(group->string_val());
    if (members == groups->end()) {
      report(TraceProblemKind::CommGroups,
             "pg_name '" + group->string_val() +
                 "' is not a group of the communicator-group file");
    } else if (rank && !llvm::is_contained(members->second, *rank)) {
      report(TraceProblemKind::CommGroups, "rank " + llvm::Twine(*rank) +
                                               " is not a member of group '" +
                                               group->string_val() + "'");
    }
  }
  if (type && size)
    result.collective =
        CollectiveRecord{type->int64_val(), size->int64_val(), node.id()};
}

void checkPointToPoint(const Node &node, std::optional<int64_t> rank,
                       AttributeChecker &attrs, NodeProblemSink report,
                       NodeCommunication &result) {
  bool isSend = node.type() == ChakraProtoMsg::COMM_SEND_NODE;
  const AttributeProto *src =
      attrs.get(chakra::attr::CommSrc, AttributeProto::kInt32Val, "int32");
  const AttributeProto *dst =
      attrs.get(chakra::attr::CommDst, AttributeProto::kInt32Val, "int32");
  const AttributeProto *tag =
      attrs.get(chakra::attr::CommTag, AttributeProto::kInt32Val, "int32");
  const AttributeProto *size =
      attrs.get(chakra::attr::CommSize, AttributeProto::kInt64Val, "int64");
  attrs.requireNonNegative(size, size ? size->int64_val() : 0);
  const AttributeProto *own = isSend ? src : dst;
  if (own && rank && own->int32_val() != *rank)
    report(TraceProblemKind::Attribute,
           (isSend ? "SEND has comm_src " : "RECV has comm_dst ") +
               llvm::Twine(own->int32_val()) + " but the file is rank " +
               llvm::Twine(*rank));
  if (src && dst && tag && size)
    result.pointToPoint = PointToPointRecord{
        isSend,           src->int32_val(),  dst->int32_val(),
        tag->int32_val(), size->int64_val(), node.id()};
}

} // namespace

NodeCommunication stg::checkNodeAttributes(const Node &node,
                                           std::optional<int64_t> rank,
                                           const CommGroups *groups,
                                           NodeProblemSink report) {
  NodeCommunication result;
  AttributeChecker attrs(node, report);
  checkCommonAttributes(node, attrs, report);
  switch (node.type()) {
  case ChakraProtoMsg::COMP_NODE:
    checkCompute(attrs);
    break;
  case ChakraProtoMsg::COMM_COLL_NODE:
    checkCollective(node, rank, groups, attrs, report, result);
    break;
  case ChakraProtoMsg::COMM_SEND_NODE:
  case ChakraProtoMsg::COMM_RECV_NODE:
    checkPointToPoint(node, rank, attrs, report, result);
    break;
  default:
    break;
  }
  return result;
}
