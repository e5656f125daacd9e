//===- TraceFormat.h - Readable text for Chakra nodes -----------*- C++ -*-===//
//
// One-line renderings of Chakra messages and attribute values, shared by
// `stage-et dump` (a line per node) and `stage-et diff` (old -> new values),
// so that both spell a value the same way: the AttributeProto member it is
// stored in, then the value (`int64 4096`, `string "1"`, `bool false`),
// because readers take a value from one member only and a value in the
// wrong member is the commonest mistake to look for.
//
//===----------------------------------------------------------------------===//

#ifndef STG_TRACE_TRACEFORMAT_H
#define STG_TRACE_TRACEFORMAT_H

#include "stg/Chakra/et_def.pb.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace stg {

/// `COMP_NODE`, ...; the number for a value outside the enum.
std::string getNodeTypeName(int type);
/// `ALL_REDUCE`, ...; the number for a value outside the enum.
std::string getCollectiveName(int64_t commType);

/// The member an attribute's value is stored in, without `_val`
/// (`int64`, `bool_list`), or `none` when no member is set.
std::string getAttrMemberName(const ChakraProtoMsg::AttributeProto &attr);
/// The member and the value: `int64 4096`, `string "1"`,
/// `bool_list [true, false]`, `none`.
std::string formatAttrValue(const ChakraProtoMsg::AttributeProto &attr);

/// `[1, 2, 3]`.
std::string formatIdList(
    const google::protobuf::RepeatedField<google::protobuf::uint64> &ids);

/// The value of one field of `message` as text (lists as `[a, b]`).
std::string formatField(const google::protobuf::Message &message,
                        const google::protobuf::FieldDescriptor *field);

/// `version="0.0.4" generator=string "stagec" ...`
void printMetadataLine(llvm::raw_ostream &os,
                       const ChakraProtoMsg::GlobalMetadata &metadata);
/// `7 COMP_NODE 'name' data_deps=[..] ctrl_deps=[..] attr=member value ...`
/// plus any other field that is set (durations, IOInfo).
void printNodeLine(llvm::raw_ostream &os, const ChakraProtoMsg::Node &node);

} // namespace stg

#endif // STG_TRACE_TRACEFORMAT_H
