//===- ChakraAttributes.h - Building Chakra node attributes -----*- C++ -*-===//
//
// Readers of Chakra traces look node attributes up by name and then read one
// particular member of AttributeProto's `value` oneof: ASTRA-sim takes
// `num_ops` from int64_val but `tensor_size` from uint64_val, `comm_src` from
// int32_val, `is_cpu_op` from bool_val. A value stored in any other member
// reads as zero without any error. So every attribute of the output contract
// (docs/chakra-output.md) is built by one function here that fixes both its
// name and its member, and the emitter never spells either out.
//
//===----------------------------------------------------------------------===//

#ifndef STG_CHAKRA_CHAKRAATTRIBUTES_H
#define STG_CHAKRA_CHAKRAATTRIBUTES_H

#include "stg/Chakra/et_def.pb.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <string>

namespace stg {
namespace chakra {

using ChakraProtoMsg::AttributeProto;
using ChakraProtoMsg::CollectiveCommType;
using ChakraProtoMsg::Node;

/// The attribute names of the output contract, for readers and checkers.
namespace attr {
inline constexpr llvm::StringLiteral IsCpuOp = "is_cpu_op";
inline constexpr llvm::StringLiteral NumOps = "num_ops";
inline constexpr llvm::StringLiteral TensorSize = "tensor_size";
inline constexpr llvm::StringLiteral OpType = "op_type";
inline constexpr llvm::StringLiteral CommType = "comm_type";
inline constexpr llvm::StringLiteral CommSize = "comm_size";
inline constexpr llvm::StringLiteral PgName = "pg_name";
inline constexpr llvm::StringLiteral CommPriority = "comm_priority";
inline constexpr llvm::StringLiteral InvolvedDim = "involved_dim";
inline constexpr llvm::StringLiteral CommSrc = "comm_src";
inline constexpr llvm::StringLiteral CommDst = "comm_dst";
inline constexpr llvm::StringLiteral CommTag = "comm_tag";
inline constexpr llvm::StringLiteral Inputs = "inputs";
inline constexpr llvm::StringLiteral Outputs = "outputs";
/// GlobalMetadata attributes naming the program that wrote the file.
inline constexpr llvm::StringLiteral Generator = "generator";
inline constexpr llvm::StringLiteral GeneratorVersion = "generator_version";
} // namespace attr

//===----------------------------------------------------------------------===//
// Attributes by oneof member
//===----------------------------------------------------------------------===//

AttributeProto makeBoolAttr(llvm::StringRef name, bool value);
AttributeProto makeInt32Attr(llvm::StringRef name, int32_t value);
AttributeProto makeInt64Attr(llvm::StringRef name, int64_t value);
AttributeProto makeUint64Attr(llvm::StringRef name, uint64_t value);
AttributeProto makeStringAttr(llvm::StringRef name, llvm::StringRef value);
AttributeProto makeBoolListAttr(llvm::StringRef name,
                                llvm::ArrayRef<bool> values);
AttributeProto makeStringListAttr(llvm::StringRef name,
                                  llvm::ArrayRef<std::string> values);

//===----------------------------------------------------------------------===//
// The contract's attributes
//===----------------------------------------------------------------------===//

/// `is_cpu_op` (bool_val): false for everything stagec emits; ASTRA-sim
/// treats a communication node marked as a CPU op as an error.
AttributeProto isCpuOpAttr(bool isCpuOp);
/// `num_ops` (int64_val): floating-point operations of a COMP_NODE's kernel
/// on this rank.
AttributeProto numOpsAttr(int64_t numOps);
/// `tensor_size` (uint64_val): bytes a COMP_NODE's kernel reads and writes.
/// ASTRA-sim's roofline divides num_ops by it and skips a node with 0.
AttributeProto tensorSizeAttr(uint64_t bytes);
/// `op_type` (string_val): `einsum`, `attention`, `elementwise`, ...
AttributeProto opTypeAttr(llvm::StringRef opType);
/// `comm_type` (int64_val): the CollectiveCommType enum value.
AttributeProto commTypeAttr(CollectiveCommType type);
/// `comm_size` (int64_val): bytes of this rank's input buffer for a
/// collective (the nccl-tests convention, see docs/chakra-output.md), or of
/// the message for a SEND/RECV.
AttributeProto commSizeAttr(int64_t bytes);
/// `pg_name` (string_val): the communicator group id, a key of P.json.
AttributeProto pgNameAttr(llvm::StringRef groupId);
/// `comm_priority` (int32_val), optional.
AttributeProto commPriorityAttr(int32_t priority);
/// `involved_dim` (bool_list): which network dimensions a collective spans;
/// only written when the user maps groups to dimensions.
AttributeProto involvedDimAttr(llvm::ArrayRef<bool> dims);
/// `comm_src`, `comm_dst`, `comm_tag` (int32_val) of a SEND or RECV.
AttributeProto commSrcAttr(int32_t rank);
AttributeProto commDstAttr(int32_t rank);
AttributeProto commTagAttr(int32_t tag);

/// A tensor named in the optional memory-tracking attributes.
struct TensorBytes {
  std::string name;
  uint64_t bytes = 0;
};
/// `inputs` / `outputs` (string_list): [name, bytes, name, bytes, ...], the
/// sizes in decimal.
AttributeProto inputsAttr(llvm::ArrayRef<TensorBytes> tensors);
AttributeProto outputsAttr(llvm::ArrayRef<TensorBytes> tensors);

//===----------------------------------------------------------------------===//
// Nodes
//===----------------------------------------------------------------------===//

/// A COMP_NODE with is_cpu_op=false, num_ops, tensor_size and op_type.
Node makeCompNode(uint64_t id, llvm::StringRef name, int64_t numOps,
                  uint64_t tensorSize, llvm::StringRef opType);
/// A COMM_COLL_NODE with is_cpu_op=false, comm_type, comm_size and pg_name.
Node makeCollectiveNode(uint64_t id, llvm::StringRef name,
                        CollectiveCommType type, int64_t commSize,
                        llvm::StringRef groupId);
/// A COMM_SEND_NODE or COMM_RECV_NODE with is_cpu_op=false, comm_src,
/// comm_dst, comm_tag and comm_size.
Node makeSendNode(uint64_t id, llvm::StringRef name, int32_t src, int32_t dst,
                  int32_t tag, int64_t commSize);
Node makeRecvNode(uint64_t id, llvm::StringRef name, int32_t src, int32_t dst,
                  int32_t tag, int64_t commSize);

/// The first attribute of `node` called `name`, or null.
const AttributeProto *findAttr(const Node &node, llvm::StringRef name);

} // namespace chakra
} // namespace stg

#endif // STG_CHAKRA_CHAKRAATTRIBUTES_H
