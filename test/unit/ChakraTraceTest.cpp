//===- ChakraTraceTest.cpp - Writing and reading Chakra .et files ---------===//
//
// Round trips through ChakraTraceWriter and ChakraTraceReader (plain and
// gzip), the framing and determinism the output contract promises, the
// attribute helpers' names and oneof members, and the reader's diagnostics
// on files that are not well-formed traces.
//
//===----------------------------------------------------------------------===//

#include "stg/Chakra/ChakraTrace.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include "ScratchDirectoryTest.h"
#include "gtest/gtest.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/gzip_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/util/message_differencer.h>

#include <fstream>
#include <random>

using namespace stg;
using namespace stg::chakra;
using ChakraProtoMsg::GlobalMetadata;
using google::protobuf::util::MessageDifferencer;

namespace {

/// Each test gets a scratch directory of its own.
class ChakraTraceTest : public ScratchDirectoryTest {};

std::string readBytes(const std::string &path) {
  auto buffer = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                            /*RequiresNullTerminator=*/false);
  if (!buffer) {
    ADD_FAILURE() << "cannot read " << path;
    return {};
  }
  return (*buffer)->getBuffer().str();
}

void writeBytes(const std::string &path, llvm::StringRef bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

/// The framing, encoded with protobuf's coded stream into memory.
std::string frame(llvm::ArrayRef<const google::protobuf::MessageLite *> msgs) {
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream stream(&bytes);
    google::protobuf::io::CodedOutputStream coded(&stream);
    for (const auto *msg : msgs) {
      coded.WriteVarint32(static_cast<uint32_t>(msg->ByteSizeLong()));
      msg->SerializeWithCachedSizes(&coded);
    }
  }
  return bytes;
}

/// `bytes` as one gzip member, compressed by protobuf's stream.
std::string gzip(const std::string &bytes) {
  std::string compressed;
  {
    google::protobuf::io::StringOutputStream stream(&compressed);
    google::protobuf::io::GzipOutputStream gzipStream(&stream);
    google::protobuf::io::CodedOutputStream coded(&gzipStream);
    coded.WriteRaw(bytes.data(), static_cast<int>(bytes.size()));
  }
  return compressed;
}

std::string errorText(llvm::Error err) {
  return llvm::toString(std::move(err));
}

/// A small graph with a node of every type stagec emits, every optional
/// attribute and both kinds of dependency.
std::vector<Node> sampleNodes() {
  std::vector<Node> nodes;
  nodes.push_back(makeCompNode(0, "layer.0.attn.q_proj.fwd.mb0",
                               int64_t(1) << 40, uint64_t(3) << 33, "einsum"));
  nodes.back().set_duration_micros(1234);
  *nodes.back().add_attr() = inputsAttr({{"x", 4096}, {"w_q", 8192}});
  *nodes.back().add_attr() = outputsAttr({{"q", 4096}});

  Node allReduce = makeCollectiveNode(1, "layer.0.attn.out.allreduce",
                                      ChakraProtoMsg::ALL_REDUCE, 1 << 20, "1");
  allReduce.add_data_deps(0);
  *allReduce.add_attr() = commPriorityAttr(0);
  *allReduce.add_attr() = involvedDimAttr({true, false, true});
  nodes.push_back(allReduce);

  Node allGather = makeCollectiveNode(2, "ag", ChakraProtoMsg::ALL_GATHER,
                                      int64_t(5) << 32, "2");
  allGather.add_ctrl_deps(1);
  nodes.push_back(allGather);

  Node reduceScatter =
      makeCollectiveNode(3, "rs", ChakraProtoMsg::REDUCE_SCATTER, 65536, "2");
  reduceScatter.add_data_deps(2);
  reduceScatter.add_ctrl_deps(1);
  nodes.push_back(reduceScatter);

  Node allToAll =
      makeCollectiveNode(4, "a2a", ChakraProtoMsg::ALL_TO_ALL, 12345, "3");
  allToAll.add_data_deps(3);
  nodes.push_back(allToAll);

  Node send = makeSendNode(5, "pp.send.mb0", 0, 4, 77, 2048);
  send.add_data_deps(4);
  nodes.push_back(send);

  Node recv = makeRecvNode(6, "pp.recv.mb0", 4, 0, 78, 2048);
  recv.add_ctrl_deps(5);
  nodes.push_back(recv);

  Node elementwise = makeCompNode(7, "gelu", 1000, 8000, "elementwise");
  elementwise.add_data_deps(0);
  elementwise.add_data_deps(6);
  nodes.push_back(elementwise);
  return nodes;
}

void writeTrace(const std::string &path, llvm::ArrayRef<Node> nodes,
                const ChakraTraceWriterOptions &options = {}) {
  auto writer = ChakraTraceWriter::create(path, options);
  ASSERT_TRUE(bool(writer)) << errorText(writer.takeError());
  for (const Node &node : nodes)
    ASSERT_FALSE(bool((*writer)->writeNode(node)));
  EXPECT_EQ((*writer)->getNumNodes(), nodes.size());
  ASSERT_FALSE(bool((*writer)->close()));
}

/// The reader's error on `path`, or "" when the file reads fine.
std::string readError(const std::string &path) {
  auto trace = readChakraTrace(path);
  if (trace)
    return "";
  return errorText(trace.takeError());
}

const AttributeProto &getAttr(const Node &node, llvm::StringRef name) {
  const AttributeProto *attribute = findAttr(node, name);
  EXPECT_NE(attribute, nullptr) << name.str() << " missing on " << node.name();
  static const AttributeProto empty;
  return attribute ? *attribute : empty;
}

//===----------------------------------------------------------------------===//
// Round trips
//===----------------------------------------------------------------------===//

TEST_F(ChakraTraceTest, RoundTripKeepsMetadataNodesAndOrder) {
  std::vector<Node> nodes = sampleNodes();
  writeTrace(path("t.0.et"), nodes);

  auto trace = readChakraTrace(path("t.0.et"));
  ASSERT_TRUE(bool(trace)) << errorText(trace.takeError());
  EXPECT_FALSE(trace->gzipped);
  EXPECT_EQ(trace->metadata.version(), "0.0.4");
  ASSERT_EQ(trace->metadata.attr_size(), 2);
  EXPECT_EQ(trace->metadata.attr(0).name(), "generator");
  EXPECT_EQ(trace->metadata.attr(0).string_val(), "stagec");
  EXPECT_EQ(trace->metadata.attr(1).name(), "generator_version");
  EXPECT_FALSE(trace->metadata.attr(1).string_val().empty());

  ASSERT_EQ(trace->nodes.size(), nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i)
    EXPECT_TRUE(MessageDifferencer::Equals(trace->nodes[i], nodes[i]))
        << "node " << i << " differs:\n"
        << trace->nodes[i].DebugString();
}

TEST_F(ChakraTraceTest, FramingIsVarintLengthThenMessage) {
  // Independently of the reader: the file is exactly GlobalMetadata then
  // the nodes, each behind its varint32 length.
  std::vector<Node> nodes = sampleNodes();
  writeTrace(path("t.et"), nodes);
  GlobalMetadata metadata;
  metadata.set_version("0.0.4");
  *metadata.add_attr() = makeStringAttr("generator", "stagec");
  auto trace = readChakraTrace(path("t.et"));
  ASSERT_TRUE(bool(trace)) << errorText(trace.takeError());
  *metadata.add_attr() = trace->metadata.attr(1); // The version, whatever.
  std::vector<const google::protobuf::MessageLite *> messages = {&metadata};
  for (const Node &node : nodes)
    messages.push_back(&node);
  EXPECT_EQ(readBytes(path("t.et")), frame(messages));
}

TEST_F(ChakraTraceTest, MetadataOptions) {
  ChakraTraceWriterOptions options;
  options.schemaVersion = "1.0.0";
  options.generatorName = "my-compiler";
  options.generatorVersion = "9.9";
  options.extraMetadata.push_back(makeStringAttr("model", "llama"));
  writeTrace(path("m.et"), {}, options);
  auto trace = readChakraTrace(path("m.et"));
  ASSERT_TRUE(bool(trace)) << errorText(trace.takeError());
  EXPECT_EQ(trace->metadata.version(), "1.0.0");
  ASSERT_EQ(trace->metadata.attr_size(), 3);
  EXPECT_EQ(trace->metadata.attr(0).string_val(), "my-compiler");
  EXPECT_EQ(trace->metadata.attr(1).string_val(), "9.9");
  EXPECT_EQ(trace->metadata.attr(2).name(), "model");
  EXPECT_TRUE(trace->nodes.empty());

  options.schemaVersion = "";
  auto writer = ChakraTraceWriter::create(path("bad.et"), options);
  ASSERT_FALSE(bool(writer));
  EXPECT_NE(errorText(writer.takeError()).find("version must not be empty"),
            std::string::npos);
}

TEST_F(ChakraTraceTest, ReaderIteratesNodeByNode) {
  std::vector<Node> nodes = sampleNodes();
  writeTrace(path("t.et"), nodes);
  auto reader = ChakraTraceReader::open(path("t.et"));
  ASSERT_TRUE(bool(reader)) << errorText(reader.takeError());
  Node node;
  for (size_t i = 0; i < nodes.size(); ++i) {
    auto got = (*reader)->readNode(node);
    ASSERT_TRUE(bool(got)) << errorText(got.takeError());
    ASSERT_TRUE(*got);
    EXPECT_EQ(node.id(), nodes[i].id());
  }
  for (int i = 0; i < 2; ++i) { // The end stays the end.
    auto got = (*reader)->readNode(node);
    ASSERT_TRUE(bool(got)) << errorText(got.takeError());
    EXPECT_FALSE(*got);
  }
  EXPECT_EQ((*reader)->getNumNodesRead(), nodes.size());
}

TEST_F(ChakraTraceTest, ManyNodesStreamAcrossBuffers) {
  // Well past the 64 KiB buffers, plain and gzipped.
  for (const char *name : {"big.et", "big.et.gz"}) {
    auto writer = ChakraTraceWriter::create(path(name));
    ASSERT_TRUE(bool(writer)) << errorText(writer.takeError());
    const uint64_t count = 20000;
    for (uint64_t id = 0; id < count; ++id) {
      Node node = makeCompNode(id, "op." + std::to_string(id), id * 7, id + 1,
                               "elementwise");
      if (id)
        node.add_data_deps(id - 1);
      ASSERT_FALSE(bool((*writer)->writeNode(node)));
    }
    ASSERT_FALSE(bool((*writer)->close()));
    auto trace = readChakraTrace(path(name));
    ASSERT_TRUE(bool(trace)) << errorText(trace.takeError());
    ASSERT_EQ(trace->nodes.size(), count);
    EXPECT_EQ(trace->nodes.back().name(), "op.19999");
    EXPECT_EQ(getAttr(trace->nodes.back(), "num_ops").int64_val(),
              int64_t(19999 * 7));
  }
}

TEST_F(ChakraTraceTest, ReadsFromMemory) {
  writeTrace(path("t.et"), sampleNodes());
  std::string bytes = readBytes(path("t.et"));
  auto reader = ChakraTraceReader::openBuffer(bytes, "<memory>");
  ASSERT_TRUE(bool(reader)) << errorText(reader.takeError());
  Node node;
  size_t count = 0;
  while (true) {
    auto got = (*reader)->readNode(node);
    ASSERT_TRUE(bool(got)) << errorText(got.takeError());
    if (!*got)
      break;
    ++count;
  }
  EXPECT_EQ(count, sampleNodes().size());

  auto cut = ChakraTraceReader::openBuffer(
      llvm::StringRef(bytes).drop_back(bytes.size() - 3), "<memory>");
  ASSERT_FALSE(bool(cut));
  EXPECT_NE(errorText(cut.takeError()).find("<memory>: truncated file"),
            std::string::npos);
}

//===----------------------------------------------------------------------===//
// Determinism and gzip
//===----------------------------------------------------------------------===//

TEST_F(ChakraTraceTest, IdenticalInputGivesIdenticalBytes) {
  for (const char *suffix : {".et", ".et.gz"}) {
    std::string a = path(std::string("a") + suffix);
    std::string b = path(std::string("b") + suffix);
    writeTrace(a, sampleNodes());
    writeTrace(b, sampleNodes());
    std::string bytesA = readBytes(a), bytesB = readBytes(b);
    EXPECT_FALSE(bytesA.empty());
    EXPECT_EQ(bytesA, bytesB) << suffix;
  }
}

TEST_F(ChakraTraceTest, GzipRoundTripAndDetection) {
  std::vector<Node> nodes = sampleNodes();
  // By name, forced on a name without .gz, and forced off on a .gz name.
  ChakraTraceWriterOptions gzip, plain;
  gzip.compression = TraceCompression::Gzip;
  plain.compression = TraceCompression::None;
  writeTrace(path("t.0.et.gz"), nodes);
  writeTrace(path("forced.et"), nodes, gzip);
  writeTrace(path("plain.et.gz"), nodes, plain);
  writeTrace(path("reference.et"), nodes);

  std::string reference = readBytes(path("reference.et"));
  for (const char *name : {"t.0.et.gz", "forced.et"}) {
    std::string bytes = readBytes(path(name));
    ASSERT_GE(bytes.size(), 2u);
    EXPECT_EQ(static_cast<unsigned char>(bytes[0]), 0x1fu) << name;
    EXPECT_EQ(static_cast<unsigned char>(bytes[1]), 0x8bu) << name;
    EXPECT_NE(bytes, reference);
  }
  EXPECT_EQ(readBytes(path("plain.et.gz")), reference);

  for (const char *name : {"t.0.et.gz", "forced.et", "plain.et.gz"}) {
    auto trace = readChakraTrace(path(name));
    ASSERT_TRUE(bool(trace)) << errorText(trace.takeError());
    EXPECT_EQ(trace->gzipped, std::string(name) != "plain.et.gz") << name;
    ASSERT_EQ(trace->nodes.size(), nodes.size()) << name;
    for (size_t i = 0; i < nodes.size(); ++i)
      EXPECT_TRUE(MessageDifferencer::Equals(trace->nodes[i], nodes[i]));
  }
}

TEST_F(ChakraTraceTest, ConcatenatedGzipMembersReadAsOneStream) {
  // `cat a.gz b.gz` is a valid gzip file of the concatenated data.
  GlobalMetadata metadata;
  metadata.set_version("0.0.4");
  Node first = makeCompNode(1, "a", 1, 1, "einsum");
  Node second = makeCompNode(2, "b", 1, 1, "einsum");
  writeBytes(path("cat.et.gz"),
             gzip(frame({&metadata, &first})) + gzip(frame({&second})));
  auto trace = readChakraTrace(path("cat.et.gz"));
  ASSERT_TRUE(bool(trace)) << errorText(trace.takeError());
  ASSERT_EQ(trace->nodes.size(), 2u);
  EXPECT_EQ(trace->nodes[1].name(), "b");
}

//===----------------------------------------------------------------------===//
// Attributes
//===----------------------------------------------------------------------===//

TEST(ChakraAttributesTest, NamesAndOneofMembers) {
  using Case = AttributeProto::ValueCase;
  struct Expected {
    AttributeProto attribute;
    const char *name;
    Case member;
  } cases[] = {
      {isCpuOpAttr(false), "is_cpu_op", AttributeProto::kBoolVal},
      {numOpsAttr(7), "num_ops", AttributeProto::kInt64Val},
      {tensorSizeAttr(7), "tensor_size", AttributeProto::kUint64Val},
      {opTypeAttr("einsum"), "op_type", AttributeProto::kStringVal},
      {commTypeAttr(ChakraProtoMsg::ALL_GATHER), "comm_type",
       AttributeProto::kInt64Val},
      {commSizeAttr(7), "comm_size", AttributeProto::kInt64Val},
      {pgNameAttr("1"), "pg_name", AttributeProto::kStringVal},
      {commPriorityAttr(0), "comm_priority", AttributeProto::kInt32Val},
      {involvedDimAttr({}), "involved_dim", AttributeProto::kBoolList},
      {commSrcAttr(1), "comm_src", AttributeProto::kInt32Val},
      {commDstAttr(2), "comm_dst", AttributeProto::kInt32Val},
      {commTagAttr(3), "comm_tag", AttributeProto::kInt32Val},
      {inputsAttr({}), "inputs", AttributeProto::kStringList},
      {outputsAttr({}), "outputs", AttributeProto::kStringList},
  };
  for (const Expected &c : cases) {
    EXPECT_EQ(c.attribute.name(), c.name);
    EXPECT_EQ(c.attribute.value_case(), c.member) << c.name;
  }
  // Zero values and empty lists still set their member: a reader must not
  // mistake them for a missing value.
  EXPECT_TRUE(isCpuOpAttr(false).has_bool_val());
  EXPECT_TRUE(commPriorityAttr(0).has_int32_val());
  EXPECT_EQ(commTypeAttr(ChakraProtoMsg::ALL_GATHER).int64_val(), 2);
  EXPECT_EQ(commTypeAttr(ChakraProtoMsg::REDUCE_SCATTER).int64_val(), 7);
  AttributeProto inputs = inputsAttr({{"x", 4096}, {"w", 12}});
  ASSERT_EQ(inputs.string_list().values_size(), 4);
  EXPECT_EQ(inputs.string_list().values(1), "4096");
  EXPECT_EQ(inputs.string_list().values(2), "w");
}

TEST(ChakraAttributesTest, NodeBuildersAttachTheRequiredAttributes) {
  Node comp = makeCompNode(3, "mm", 10, 20, "einsum");
  EXPECT_EQ(comp.type(), ChakraProtoMsg::COMP_NODE);
  EXPECT_FALSE(getAttr(comp, "is_cpu_op").bool_val());
  EXPECT_EQ(getAttr(comp, "num_ops").int64_val(), 10);
  EXPECT_EQ(getAttr(comp, "tensor_size").uint64_val(), 20u);
  EXPECT_EQ(getAttr(comp, "op_type").string_val(), "einsum");

  Node coll = makeCollectiveNode(4, "ar", ChakraProtoMsg::ALL_TO_ALL, 99, "5");
  EXPECT_EQ(coll.type(), ChakraProtoMsg::COMM_COLL_NODE);
  EXPECT_FALSE(getAttr(coll, "is_cpu_op").bool_val());
  EXPECT_EQ(getAttr(coll, "comm_type").int64_val(), 6);
  EXPECT_EQ(getAttr(coll, "comm_size").int64_val(), 99);
  EXPECT_EQ(getAttr(coll, "pg_name").string_val(), "5");

  for (Node node :
       {makeSendNode(5, "s", 1, 2, 3, 4), makeRecvNode(5, "r", 1, 2, 3, 4)}) {
    EXPECT_FALSE(getAttr(node, "is_cpu_op").bool_val());
    EXPECT_EQ(getAttr(node, "comm_src").int32_val(), 1);
    EXPECT_EQ(getAttr(node, "comm_dst").int32_val(), 2);
    EXPECT_EQ(getAttr(node, "comm_tag").int32_val(), 3);
    EXPECT_EQ(getAttr(node, "comm_size").int64_val(), 4);
  }
  EXPECT_EQ(makeSendNode(0, "", 0, 0, 0, 0).type(),
            ChakraProtoMsg::COMM_SEND_NODE);
  EXPECT_EQ(makeRecvNode(0, "", 0, 0, 0, 0).type(),
            ChakraProtoMsg::COMM_RECV_NODE);
  EXPECT_EQ(findAttr(comp, "comm_size"), nullptr);
}

//===----------------------------------------------------------------------===//
// Malformed files
//===----------------------------------------------------------------------===//

/// Expects reading `file` to fail with a message naming the file and
/// containing `problem`.
#define EXPECT_READ_ERROR(file, problem)                                       \
  do {                                                                         \
    std::string message = readError(file);                                     \
    EXPECT_NE(message.find(file), std::string::npos) << message;               \
    EXPECT_NE(message.find(problem), std::string::npos) << message;            \
  } while (false)

TEST_F(ChakraTraceTest, TruncatedFile) {
  writeTrace(path("t.et"), sampleNodes());
  std::string bytes = readBytes(path("t.et"));
  // Cut inside the last node, and inside the GlobalMetadata.
  writeBytes(path("cut.et"), llvm::StringRef(bytes).drop_back(5));
  EXPECT_READ_ERROR(path("cut.et"), "truncated file: node 7 at byte");
  EXPECT_READ_ERROR(path("cut.et"), "but the file has");
  writeBytes(path("cut2.et"), llvm::StringRef(bytes).take_front(10));
  EXPECT_READ_ERROR(path("cut2.et"),
                    "truncated file: the GlobalMetadata at byte 0 claims");
}

TEST_F(ChakraTraceTest, TruncatedGzipFile) {
  writeTrace(path("t.et.gz"), sampleNodes());
  std::string bytes = readBytes(path("t.et.gz"));
  // Without the 8-byte trailer all the data is there, but the file is cut
  // short all the same; then cut into the compressed data.
  writeBytes(path("notrailer.et.gz"), llvm::StringRef(bytes).drop_back(8));
  EXPECT_READ_ERROR(path("notrailer.et.gz"), "truncated gzip stream");
  writeBytes(path("cut.et.gz"), llvm::StringRef(bytes).drop_back(40));
  EXPECT_READ_ERROR(path("cut.et.gz"), "truncated gzip stream");
}

TEST_F(ChakraTraceTest, CorruptGzipFile) {
  writeTrace(path("t.et.gz"), sampleNodes());
  std::string bytes = readBytes(path("t.et.gz"));
  bytes[bytes.size() - 6] ^= 0x55; // The CRC/length trailer.
  writeBytes(path("crc.et.gz"), bytes);
  EXPECT_READ_ERROR(path("crc.et.gz"),
                    "corrupt gzip stream: incorrect data check");
  writeBytes(path("magic-only.et"), "\x1f\x8b garbage after the gzip magic");
  EXPECT_READ_ERROR(path("magic-only.et"), "corrupt gzip stream");
}

TEST_F(ChakraTraceTest, ZeroLengthFile) {
  writeBytes(path("empty.et"), "");
  EXPECT_READ_ERROR(path("empty.et"), "empty file: no GlobalMetadata");
}

TEST_F(ChakraTraceTest, RandomGarbage) {
  // The raw output of mt19937 is fixed by the standard, so the bytes (and
  // the diagnostic) are the same everywhere.
  std::mt19937 random(20240509);
  std::string bytes;
  for (int i = 0; i < 4096; ++i)
    bytes.push_back(static_cast<char>(random() & 0xff));
  writeBytes(path("garbage.et"), bytes);
  std::string message = readError(path("garbage.et"));
  EXPECT_NE(message.find(path("garbage.et")), std::string::npos) << message;
  EXPECT_NE(message.find("missing GlobalMetadata"), std::string::npos)
      << message;

  std::string text = "This is a text file, not a Chakra execution trace.\n";
  writeBytes(path("text.et"), text);
  EXPECT_READ_ERROR(path("text.et"), "GlobalMetadata");
}

TEST_F(ChakraTraceTest, LengthPrefixLargerThanFile) {
  GlobalMetadata metadata;
  metadata.set_version("0.0.4");
  std::string bytes = frame({&metadata});
  bytes += "\xe8\x07"; // varint 1000
  bytes += "0123456789";
  writeBytes(path("long.et"), bytes);
  EXPECT_READ_ERROR(path("long.et"),
                    "node 0 at byte 8 claims 1000 bytes but the file has 10 "
                    "left");
}

TEST_F(ChakraTraceTest, ImplausibleLengthPrefix) {
  writeBytes(path("huge.et"), "\xff\xff\xff\xff\x0f and some bytes");
  EXPECT_READ_ERROR(path("huge.et"), "implausible length prefix: the "
                                     "GlobalMetadata at byte 0 claims "
                                     "4294967295 bytes");
  // The same in a gzip stream, where the file size bounds nothing.
  writeBytes(path("huge.et.gz"), gzip("\xff\xff\xff\xff\x0f and some bytes"));
  EXPECT_READ_ERROR(path("huge.et.gz"), "implausible length prefix");
}

TEST_F(ChakraTraceTest, MissingGlobalMetadata) {
  // A trace written without its GlobalMetadata: Node messages only.
  Node first = makeCompNode(1, "mm", 100, 200, "einsum");
  Node second = makeCompNode(2, "mm2", 100, 200, "einsum");
  writeBytes(path("nometa.et"), frame({&first, &second}));
  EXPECT_READ_ERROR(path("nometa.et"), "missing GlobalMetadata");
  // The same with a node whose id is 0 (omitted on the wire).
  Node zero = makeCollectiveNode(0, "ar", ChakraProtoMsg::ALL_REDUCE, 8, "1");
  writeBytes(path("nometa0.et"), frame({&zero}));
  EXPECT_READ_ERROR(path("nometa0.et"), "missing GlobalMetadata");
}

TEST_F(ChakraTraceTest, MalformedNode) {
  GlobalMetadata metadata;
  metadata.set_version("0.0.4");
  std::string bytes = frame({&metadata});
  bytes += "\x03\xff\xff\xff"; // Three bytes of an unterminated varint tag.
  writeBytes(path("bad.et"), bytes);
  EXPECT_READ_ERROR(path("bad.et"),
                    "malformed message: node 0 at byte 8 (3 bytes) does not "
                    "parse as a Node");
}

TEST_F(ChakraTraceTest, UnreadableAndUnwritablePaths) {
  EXPECT_READ_ERROR(path("missing.et"), "cannot open");
  EXPECT_READ_ERROR(std::string(dir.str()), "is a directory");

  auto writer = ChakraTraceWriter::create(path("no/such/dir/t.et"));
  ASSERT_FALSE(bool(writer));
  std::string message = errorText(writer.takeError());
  EXPECT_NE(message.find("no/such/dir/t.et: cannot open for writing"),
            std::string::npos)
      << message;
}

TEST_F(ChakraTraceTest, WriteErrorShowsAtClose) {
  if (!llvm::sys::fs::exists("/dev/full"))
    GTEST_SKIP() << "no /dev/full";
  auto writer = ChakraTraceWriter::create("/dev/full");
  ASSERT_TRUE(bool(writer)) << errorText(writer.takeError());
  for (const Node &node : sampleNodes())
    llvm::consumeError((*writer)->writeNode(node));
  std::string message = errorText((*writer)->close());
  EXPECT_NE(message.find("/dev/full: "), std::string::npos) << message;
  EXPECT_NE(message.find("No space left on device"), std::string::npos)
      << message;
}

} // namespace
