//===- RankFormats.cpp - One rank's nodes as readable text ----------------===//

#include "RankFormats.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

using namespace stg;

static void writeAttrValue(llvm::json::OStream &json,
                           const ChakraProtoMsg::AttributeProto &attr) {
  using A = ChakraProtoMsg::AttributeProto;
  switch (attr.value_case()) {
  case A::kBoolVal:
    json.value(attr.bool_val());
    return;
  case A::kInt32Val:
    json.value(int64_t(attr.int32_val()));
    return;
  case A::kInt64Val:
    json.value(attr.int64_val());
    return;
  case A::kUint64Val:
    json.value(attr.uint64_val());
    return;
  case A::kStringVal:
    json.value(attr.string_val());
    return;
  default:
    json.value(nullptr);
  }
}

static void writeJsonNode(llvm::json::OStream &json,
                          const ChakraProtoMsg::Node &node) {
  json.object([&] {
    json.attribute("id", node.id());
    json.attribute("name", node.name());
    json.attribute("type", ChakraProtoMsg::NodeType_Name(node.type()));
    json.attributeArray("data_deps", [&] {
      for (uint64_t dep : node.data_deps())
        json.value(dep);
    });
    json.attributeArray("ctrl_deps", [&] {
      for (uint64_t dep : node.ctrl_deps())
        json.value(dep);
    });
    if (node.duration_micros())
      json.attribute("duration_micros", node.duration_micros());
    json.attributeObject("attr", [&] {
      for (const ChakraProtoMsg::AttributeProto &attr : node.attr()) {
        json.attributeBegin(attr.name());
        writeAttrValue(json, attr);
        json.attributeEnd();
      }
    });
  });
}

static void writeDotNode(llvm::raw_ostream &os,
                         const ChakraProtoMsg::Node &node) {
  os << "  n" << node.id() << " [label=\"" << node.id() << ": "
     << node.name();
  for (const ChakraProtoMsg::AttributeProto &attr : node.attr()) {
    if (attr.name() == "is_cpu_op")
      continue;
    os << "\\n" << attr.name() << '=';
    if (attr.has_string_val())
      os << attr.string_val();
    else if (attr.has_int64_val())
      os << attr.int64_val();
    else if (attr.has_int32_val())
      os << attr.int32_val();
    else if (attr.has_uint64_val())
      os << attr.uint64_val();
  }
  os << "\", shape="
     << (node.type() == ChakraProtoMsg::COMP_NODE ? "box" : "ellipse")
     << "];\n";
  for (uint64_t dep : node.data_deps())
    os << "  n" << dep << " -> n" << node.id() << ";\n";
  for (uint64_t dep : node.ctrl_deps())
    os << "  n" << dep << " -> n" << node.id() << " [style=dashed];\n";
}

llvm::Error stg::writeReadableRank(const ProgramSet &programs,
                                   const CommGroups &groups, unsigned rank,
                                   llvm::StringRef path,
                                   const EmitOptions &options,
                                   const StageProgram *own) {
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec, llvm::sys::fs::OF_None);
  if (ec)
    return llvm::createStringError(ec, "cannot write %s: %s",
                                   path.str().c_str(), ec.message().c_str());
  const StageProgram &program =
      own ? *own : programs.stages[programs.getStageOfRank(rank)];
  ChakraProtoMsg::Node node;
  auto fill = [&](size_t id) {
    node.Clear();
    fillSharedPart(program.nodes[id], id, options.orderingAsDataDeps, node);
    fillRankPart(programs, groups, program.nodes[id], rank, node);
  };
  if (options.format == TraceFormat::Json) {
    llvm::json::OStream json(os, 1);
    json.object([&] {
      json.attribute("rank", int64_t(rank));
      json.attribute("stage", int64_t(program.stage));
      json.attributeArray("nodes", [&] {
        for (size_t id = 0; id < program.nodes.size(); ++id) {
          fill(id);
          writeJsonNode(json, node);
        }
      });
    });
    os << '\n';
  } else {
    os << "digraph rank" << rank << " {\n";
    for (size_t id = 0; id < program.nodes.size(); ++id) {
      fill(id);
      writeDotNode(os, node);
    }
    os << "}\n";
  }
  os.close();
  if (os.has_error()) {
    // Cleared, or the stream's destructor reports it as a fatal error.
    std::error_code ec = os.error();
    os.clear_error();
    return llvm::createStringError(ec, "cannot write %s: %s",
                                   path.str().c_str(), ec.message().c_str());
  }
  return llvm::Error::success();
}
