//===- TraceDump.cpp - Printing a Chakra trace ----------------------------===//
//
// Text lines come from TraceFormat.cpp; JSON from protobuf's own JSON
// mapping (util/json_util.h), the one Chakra's Python jsonizer uses through
// `MessageToJson`, so the two agree on field names and number encoding.
//
//===----------------------------------------------------------------------===//

#include "stg/Trace/TraceDump.h"

#include "stg/Chakra/ChakraTrace.h"
#include "stg/Trace/TraceFormat.h"

#include <google/protobuf/util/json_util.h>

using namespace stg;

static llvm::Expected<std::string>
toJSONText(const google::protobuf::Message &message) {
  std::string text;
  google::protobuf::util::Status status =
      google::protobuf::util::MessageToJsonString(message, &text);
  if (!status.ok())
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "cannot convert to JSON: " +
                                       status.ToString());
  return text;
}

llvm::Error stg::dumpTrace(llvm::StringRef path, llvm::raw_ostream &os,
                           TraceDumpFormat format) {
  auto reader = ChakraTraceReader::open(path);
  if (!reader)
    return reader.takeError();
  bool json = format == TraceDumpFormat::JSON;
  if (json) {
    auto metadata = toJSONText((*reader)->getMetadata());
    if (!metadata)
      return metadata.takeError();
    os << "{\"globalMetadata\": " << *metadata << ",\n\"nodes\": [";
  } else {
    printMetadataLine(os, (*reader)->getMetadata());
  }
  ChakraProtoMsg::Node node;
  for (bool first = true;; first = false) {
    llvm::Expected<bool> more = (*reader)->readNode(node);
    if (!more)
      return more.takeError();
    if (!*more)
      break;
    if (!json) {
      printNodeLine(os, node);
      continue;
    }
    auto text = toJSONText(node);
    if (!text)
      return text.takeError();
    os << (first ? "\n" : ",\n") << *text;
  }
  if (json)
    os << "\n]}\n";
  return llvm::Error::success();
}
