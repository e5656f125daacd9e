//===- ChakraAttributes.cpp - Building Chakra node attributes -------------===//
//
// One function per attribute of the output contract, so that the name and
// the AttributeProto member a reader expects are written down exactly once;
// and the node builders that attach the attributes each node type must
// carry (ASTRA-sim aborts on a COMP_NODE without num_ops or tensor_size).
//
//===----------------------------------------------------------------------===//

#include "stg/Chakra/ChakraAttributes.h"

using namespace stg;
using namespace stg::chakra;

static AttributeProto named(llvm::StringRef name) {
  AttributeProto attribute;
  attribute.set_name(name.str());
  return attribute;
}

AttributeProto chakra::makeBoolAttr(llvm::StringRef name, bool value) {
  AttributeProto attribute = named(name);
  attribute.set_bool_val(value);
  return attribute;
}

AttributeProto chakra::makeInt32Attr(llvm::StringRef name, int32_t value) {
  AttributeProto attribute = named(name);
  attribute.set_int32_val(value);
  return attribute;
}

AttributeProto chakra::makeInt64Attr(llvm::StringRef name, int64_t value) {
  AttributeProto attribute = named(name);
  attribute.set_int64_val(value);
  return attribute;
}

AttributeProto chakra::makeUint64Attr(llvm::StringRef name, uint64_t value) {
  AttributeProto attribute = named(name);
  attribute.set_uint64_val(value);
  return attribute;
}

AttributeProto chakra::makeStringAttr(llvm::StringRef name,
                                      llvm::StringRef value) {
  AttributeProto attribute = named(name);
  attribute.set_string_val(value.str());
  return attribute;
}

AttributeProto chakra::makeBoolListAttr(llvm::StringRef name,
                                        llvm::ArrayRef<bool> values) {
  AttributeProto attribute = named(name);
  // Set the oneof member even for an empty list, so that a reader sees a
  // bool_list and not an attribute without a value.
  auto *list = attribute.mutable_bool_list();
  for (bool value : values)
    list->add_values(value);
  return attribute;
}

AttributeProto chakra::makeStringListAttr(llvm::StringRef name,
                                          llvm::ArrayRef<std::string> values) {
  AttributeProto attribute = named(name);
  auto *list = attribute.mutable_string_list();
  for (const std::string &value : values)
    list->add_values(value);
  return attribute;
}

AttributeProto chakra::isCpuOpAttr(bool isCpuOp) {
  return makeBoolAttr(attr::IsCpuOp, isCpuOp);
}

AttributeProto chakra::numOpsAttr(int64_t numOps) {
  return makeInt64Attr(attr::NumOps, numOps);
}

AttributeProto chakra::tensorSizeAttr(uint64_t bytes) {
  return makeUint64Attr(attr::TensorSize, bytes);
}

AttributeProto chakra::opTypeAttr(llvm::StringRef opType) {
  return makeStringAttr(attr::OpType, opType);
}

AttributeProto chakra::commTypeAttr(CollectiveCommType type) {
  // Chakra has no enum-valued attribute member; readers cast int64_val.
  return makeInt64Attr(attr::CommType, static_cast<int64_t>(type));
}

AttributeProto chakra::commSizeAttr(int64_t bytes) {
  return makeInt64Attr(attr::CommSize, bytes);
}

AttributeProto chakra::pgNameAttr(llvm::StringRef groupId) {
  return makeStringAttr(attr::PgName, groupId);
}

AttributeProto chakra::commPriorityAttr(int32_t priority) {
  return makeInt32Attr(attr::CommPriority, priority);
}

AttributeProto chakra::involvedDimAttr(llvm::ArrayRef<bool> dims) {
  return makeBoolListAttr(attr::InvolvedDim, dims);
}

AttributeProto chakra::commSrcAttr(int32_t rank) {
  return makeInt32Attr(attr::CommSrc, rank);
}

AttributeProto chakra::commDstAttr(int32_t rank) {
  return makeInt32Attr(attr::CommDst, rank);
}

AttributeProto chakra::commTagAttr(int32_t tag) {
  return makeInt32Attr(attr::CommTag, tag);
}

static AttributeProto tensorListAttr(llvm::StringRef name,
                                     llvm::ArrayRef<TensorBytes> tensors) {
  AttributeProto attribute = named(name);
  auto *list = attribute.mutable_string_list();
  for (const TensorBytes &tensor : tensors) {
    list->add_values(tensor.name);
    list->add_values(std::to_string(tensor.bytes));
  }
  return attribute;
}

AttributeProto chakra::inputsAttr(llvm::ArrayRef<TensorBytes> tensors) {
  return tensorListAttr(attr::Inputs, tensors);
}

AttributeProto chakra::outputsAttr(llvm::ArrayRef<TensorBytes> tensors) {
  return tensorListAttr(attr::Outputs, tensors);
}

static Node makeDeviceNode(uint64_t id, llvm::StringRef name,
                           ChakraProtoMsg::NodeType type) {
  Node node;
  node.set_id(id);
  node.set_name(name.str());
  node.set_type(type);
  *node.add_attr() = isCpuOpAttr(false);
  return node;
}

Node chakra::makeCompNode(uint64_t id, llvm::StringRef name, int64_t numOps,
                          uint64_t tensorSize, llvm::StringRef opType) {
  Node node = makeDeviceNode(id, name, ChakraProtoMsg::COMP_NODE);
  *node.add_attr() = numOpsAttr(numOps);
  *node.add_attr() = tensorSizeAttr(tensorSize);
  *node.add_attr() = opTypeAttr(opType);
  return node;
}

Node chakra::makeCollectiveNode(uint64_t id, llvm::StringRef name,
                                CollectiveCommType type, int64_t commSize,
                                llvm::StringRef groupId) {
  Node node = makeDeviceNode(id, name, ChakraProtoMsg::COMM_COLL_NODE);
  *node.add_attr() = commTypeAttr(type);
  *node.add_attr() = commSizeAttr(commSize);
  *node.add_attr() = pgNameAttr(groupId);
  return node;
}

static Node makePointToPointNode(uint64_t id, llvm::StringRef name,
                                 ChakraProtoMsg::NodeType type, int32_t src,
                                 int32_t dst, int32_t tag, int64_t commSize) {
  Node node = makeDeviceNode(id, name, type);
  *node.add_attr() = commSrcAttr(src);
  *node.add_attr() = commDstAttr(dst);
  *node.add_attr() = commTagAttr(tag);
  *node.add_attr() = commSizeAttr(commSize);
  return node;
}

Node chakra::makeSendNode(uint64_t id, llvm::StringRef name, int32_t src,
                          int32_t dst, int32_t tag, int64_t commSize) {
  return makePointToPointNode(id, name, ChakraProtoMsg::COMM_SEND_NODE, src,
                              dst, tag, commSize);
}

Node chakra::makeRecvNode(uint64_t id, llvm::StringRef name, int32_t src,
                          int32_t dst, int32_t tag, int64_t commSize) {
  return makePointToPointNode(id, name, ChakraProtoMsg::COMM_RECV_NODE, src,
                              dst, tag, commSize);
}

const AttributeProto *chakra::findAttr(const Node &node, llvm::StringRef name) {
  for (const AttributeProto &attribute : node.attr())
    if (attribute.name() == name)
      return &attribute;
  return nullptr;
}
