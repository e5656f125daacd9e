//===- ChakraTrace.h - Reading and writing Chakra .et files -----*- C++ -*-===//
//
// A Chakra execution trace (.et) is a stream of protobuf messages of the
// schema in proto/et_def.proto, each preceded by its length as a base-128
// varint32: first one GlobalMetadata, then one Node per operation. This is
// the framing of Chakra's own writers (Python `protolib.encodeMessage`, C++
// `protoio`), and the whole stream may be gzipped, which Chakra's C++ reader
// detects by the magic bytes 1f 8b.
//
// ChakraTraceWriter streams such a file through fixed-size buffers, so
// memory does not grow with the trace. ChakraTraceReader reads one back
// node by node and reports a malformed file (truncated, not a trace,
// impossible lengths) as an llvm::Error naming the file, the message and the
// byte offset, rather than crashing or silently returning fewer nodes.
//
//===----------------------------------------------------------------------===//

#ifndef STG_CHAKRA_CHAKRATRACE_H
#define STG_CHAKRA_CHAKRATRACE_H

#include "stg/Chakra/ChakraAttributes.h"
#include "stg/Chakra/et_def.pb.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace google {
namespace protobuf {
namespace io {
class CodedOutputStream;
class CopyingInputStreamAdaptor;
class FileInputStream;
class FileOutputStream;
class GzipOutputStream;
class ZeroCopyInputStream;
} // namespace io
} // namespace protobuf
} // namespace google

namespace stg {

/// The Chakra schema version written unless the caller asks for another:
/// the one ASTRA-sim and Chakra's tools accept.
inline constexpr llvm::StringLiteral DefaultChakraVersion = "0.0.4";

/// Whether a trace is gzipped. `Auto` gzips exactly when the path ends in
/// `.gz`, as Chakra's C++ writer does.
enum class TraceCompression { Auto, None, Gzip };

struct ChakraTraceWriterOptions {
  /// GlobalMetadata.version; must not be empty (the reader relies on it to
  /// tell a GlobalMetadata from a Node).
  std::string schemaVersion = DefaultChakraVersion.str();
  /// Recorded as the `generator` and `generator_version` attributes of the
  /// GlobalMetadata. An empty version means this library's version.
  std::string generatorName = "stagec";
  std::string generatorVersion;
  /// Further GlobalMetadata attributes, written after the generator's.
  std::vector<ChakraProtoMsg::AttributeProto> extraMetadata;
  TraceCompression compression = TraceCompression::Auto;
  /// zlib level, 1 (fast) to 9 (small); -1 is zlib's default (6).
  int gzipLevel = -1;
};

/// Writes one .et file. The file is created (truncated) and its
/// GlobalMetadata written by create(); writeNode() appends nodes in the
/// order given; close() flushes and reports any error of the whole stream.
///
/// Output is buffered, so a failing disk may show only at close(): always
/// call close() and check it. Destroying an open writer closes it and drops
/// the error. The bytes depend only on the options and the nodes, never on
/// the time or the machine, gzip included.
class ChakraTraceWriter {
public:
  static llvm::Expected<std::unique_ptr<ChakraTraceWriter>>
  create(llvm::StringRef path, const ChakraTraceWriterOptions &options = {});

  ChakraTraceWriter(const ChakraTraceWriter &) = delete;
  ChakraTraceWriter &operator=(const ChakraTraceWriter &) = delete;
  ~ChakraTraceWriter();

  /// Appends `node`. After an error the writer is unusable: later calls
  /// return an error too.
  llvm::Error writeNode(const ChakraProtoMsg::Node &node);
  /// Appends a node given as serialized pieces of one Node message, whose
  /// concatenation is the message (protobuf merges concatenated messages,
  /// repeated fields appending). The emitter serializes each node of a
  /// stage once and appends only the rank-specific attributes per rank.
  llvm::Error writeSerializedNode(llvm::ArrayRef<llvm::StringRef> parts);
  /// Flushes everything and closes the file. Call once.
  llvm::Error close();

  llvm::StringRef getPath() const { return path; }
  bool isGzip() const { return gzipped; }
  uint64_t getNumNodes() const { return numNodes; }

private:
  ChakraTraceWriter(llvm::StringRef path, bool gzipped);
  llvm::Error writeMessage(const google::protobuf::MessageLite &message,
                           const llvm::Twine &what);
  llvm::Error makeStreamError(const llvm::Twine &what);

  std::string path;
  bool gzipped;
  bool closed = false;
  bool failed = false;
  uint64_t numNodes = 0;
  int fd = -1;
  // Destroyed bottom-up: the coded stream flushes into the gzip stream,
  // which flushes into the file.
  std::unique_ptr<google::protobuf::io::FileOutputStream> file;
  std::unique_ptr<google::protobuf::io::GzipOutputStream> gzip;
  std::unique_ptr<google::protobuf::io::CodedOutputStream> coded;
};

namespace detail {
class GzipSource;
} // namespace detail

/// Reads one .et file, plain or gzipped (recognized by its first two bytes,
/// not its name). open() reads and checks the GlobalMetadata; readNode()
/// then returns the nodes one at a time.
class ChakraTraceReader {
public:
  /// The longest message accepted. stagec's nodes are well under a kilobyte
  /// and the largest nodes of converted PyTorch traces a few megabytes; a
  /// larger length prefix means a corrupt file or one that is not a trace,
  /// and is rejected before any memory is allocated for it.
  static constexpr uint32_t MaxMessageBytes = 256u << 20;
  /// Nodes per file: 2^25, as many as stagec puts in one stage's program,
  /// so that no input makes a reader's bookkeeping outgrow memory.
  static constexpr uint64_t MaxNodes = uint64_t(1) << 25;
  /// Uncompressed bytes per file: 16 GiB, so that a small gzip cannot keep
  /// a reader inflating for long (a rank's trace is rarely over 1 GiB).
  static constexpr uint64_t MaxTraceBytes = uint64_t(16) << 30;

  static llvm::Expected<std::unique_ptr<ChakraTraceReader>>
  open(llvm::StringRef path);
  /// Reads a trace held in memory; `bytes` must outlive the reader. `name`
  /// stands for the file in error messages.
  static llvm::Expected<std::unique_ptr<ChakraTraceReader>>
  openBuffer(llvm::StringRef bytes, llvm::StringRef name);

  ChakraTraceReader(const ChakraTraceReader &) = delete;
  ChakraTraceReader &operator=(const ChakraTraceReader &) = delete;
  ~ChakraTraceReader();

  const ChakraProtoMsg::GlobalMetadata &getMetadata() const { return metadata; }
  bool isGzip() const { return gzipped; }

  /// Reads the next node into `node`: true if there was one, false at the
  /// end of a well-formed file. After an error, every later call fails.
  llvm::Expected<bool> readNode(ChakraProtoMsg::Node &node);
  uint64_t getNumNodesRead() const { return numNodes; }

private:
  ChakraTraceReader(llvm::StringRef name);
  llvm::Error
  start(std::unique_ptr<google::protobuf::io::ZeroCopyInputStream> source,
        std::optional<uint64_t> sourceSize);
  llvm::Expected<bool> readFrame(const llvm::Twine &what);
  llvm::Error streamError();
  llvm::Error formatError(const llvm::Twine &message);
  std::string at(uint64_t position) const;

  std::string name;
  bool gzipped = false;
  bool failed = false;
  uint64_t numNodes = 0;
  /// Offset of the next message in the (decompressed) stream.
  uint64_t offset = 0;
  /// Size of the (decompressed) stream, when known: of a plain file.
  std::optional<uint64_t> streamSize;
  std::string payload;
  ChakraProtoMsg::GlobalMetadata metadata;
  // Destroyed bottom-up: the decompressor reads from the source.
  std::unique_ptr<google::protobuf::io::ZeroCopyInputStream> source;
  google::protobuf::io::FileInputStream *fileSource = nullptr;
  std::unique_ptr<detail::GzipSource> gzipSource;
  std::unique_ptr<google::protobuf::io::CopyingInputStreamAdaptor> inflated;
  google::protobuf::io::ZeroCopyInputStream *in = nullptr;
};

/// A whole trace in memory, for tests and small tools.
struct ChakraTrace {
  ChakraProtoMsg::GlobalMetadata metadata;
  std::vector<ChakraProtoMsg::Node> nodes;
  bool gzipped = false;
};
llvm::Expected<ChakraTrace> readChakraTrace(llvm::StringRef path);

} // namespace stg

#endif // STG_CHAKRA_CHAKRATRACE_H
