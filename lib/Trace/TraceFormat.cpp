//===- TraceFormat.cpp - Readable text for Chakra nodes -------------------===//
//
// Renders attribute values through protobuf reflection, so every member of
// AttributeProto's oneof (scalars and their list messages) prints without a
// case per member, and strings are escaped by protobuf's text format.
//
//===----------------------------------------------------------------------===//

#include "stg/Trace/TraceFormat.h"

#include <google/protobuf/text_format.h>

using namespace stg;
using ChakraProtoMsg::AttributeProto;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;

std::string stg::getNodeTypeName(int type) {
  if (ChakraProtoMsg::NodeType_IsValid(type))
    return ChakraProtoMsg::NodeType_Name(
        static_cast<ChakraProtoMsg::NodeType>(type));
  return std::to_string(type);
}

std::string stg::getCollectiveName(int64_t commType) {
  if (commType >= 0 && commType <= INT32_MAX &&
      ChakraProtoMsg::CollectiveCommType_IsValid(static_cast<int>(commType)))
    return ChakraProtoMsg::CollectiveCommType_Name(
        static_cast<ChakraProtoMsg::CollectiveCommType>(commType));
  return std::to_string(commType);
}

static const FieldDescriptor *getValueField(const AttributeProto &attr) {
  return attr.GetReflection()->GetOneofFieldDescriptor(
      attr, AttributeProto::descriptor()->FindOneofByName("value"));
}

std::string stg::getAttrMemberName(const AttributeProto &attr) {
  const FieldDescriptor *field = getValueField(attr);
  if (!field)
    return "none";
  llvm::StringRef name = field->name();
  name.consume_back("_val");
  return name.str();
}

/// One element of a field: the whole value of a singular field, or element
/// `index` of a repeated one.
static std::string formatElement(const Message &message,
                                 const FieldDescriptor *field, int index) {
  google::protobuf::TextFormat::Printer printer;
  printer.SetSingleLineMode(true);
  std::string text;
  printer.PrintFieldValueToString(message, field, index, &text);
  text = llvm::StringRef(text).trim().str();
  if (field->type() == FieldDescriptor::TYPE_MESSAGE)
    return "{" + text + "}";
  return text;
}

std::string stg::formatField(const Message &message,
                             const FieldDescriptor *field) {
  if (!field->is_repeated())
    return formatElement(message, field, -1);
  std::string text = "[";
  int size = message.GetReflection()->FieldSize(message, field);
  for (int i = 0; i < size; ++i)
    text += (i ? ", " : "") + formatElement(message, field, i);
  return text + "]";
}

std::string stg::formatAttrValue(const AttributeProto &attr) {
  const FieldDescriptor *field = getValueField(attr);
  if (!field)
    return "none";
  std::string member = getAttrMemberName(attr);
  if (field->type() != FieldDescriptor::TYPE_MESSAGE)
    return member + " " + formatElement(attr, field, -1);
  // The list members are messages with one repeated `values` field.
  const Message &list = attr.GetReflection()->GetMessage(attr, field);
  const FieldDescriptor *values =
      list.GetDescriptor()->FindFieldByName("values");
  if (!values)
    return member + " {" + formatElement(attr, field, -1) + "}";
  return member + " " + formatField(list, values);
}

std::string stg::formatIdList(
    const google::protobuf::RepeatedField<google::protobuf::uint64> &ids) {
  std::string text = "[";
  for (int i = 0; i < ids.size(); ++i)
    text += (i ? ", " : "") + std::to_string(ids[i]);
  return text + "]";
}

static void
printAttrs(llvm::raw_ostream &os,
           const google::protobuf::RepeatedPtrField<AttributeProto> &attrs) {
  for (const AttributeProto &attr : attrs)
    os << ' ' << attr.name() << '=' << formatAttrValue(attr);
}

void stg::printMetadataLine(llvm::raw_ostream &os,
                            const ChakraProtoMsg::GlobalMetadata &metadata) {
  os << "metadata version=\"" << metadata.version() << '"';
  printAttrs(os, metadata.attr());
  os << '\n';
}

void stg::printNodeLine(llvm::raw_ostream &os,
                        const ChakraProtoMsg::Node &node) {
  os << node.id() << ' ' << getNodeTypeName(node.type()) << " '" << node.name()
     << "' data_deps=" << formatIdList(node.data_deps())
     << " ctrl_deps=" << formatIdList(node.ctrl_deps());
  // Fields stagec rarely sets, shown only when they are.
  const auto *reflection = node.GetReflection();
  std::vector<const FieldDescriptor *> fields;
  reflection->ListFields(node, &fields);
  for (const FieldDescriptor *field : fields) {
    llvm::StringRef name = field->name();
    if (name == "id" || name == "name" || name == "type" ||
        name == "data_deps" || name == "ctrl_deps" || name == "attr")
      continue;
    os << ' ' << name << '=' << formatField(node, field);
  }
  printAttrs(os, node.attr());
  os << '\n';
}
