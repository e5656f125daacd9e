//===- ChakraTraceReader.cpp - Reading Chakra .et files -------------------===//
//
// The reader undoes the writer's stack: a FileInputStream (or an
// ArrayInputStream over memory), a zlib inflater when the data starts with
// the gzip magic bytes 1f 8b, and a fresh CodedInputStream per message for
// the varint32 length prefix. Each message is read whole into a reused
// buffer and parsed from there, so that "the file ends early" and "the bytes
// are not a message" are told apart in the diagnostics.
//
// Every way a file can be wrong is checked before it can do harm: a length
// prefix is bounded by MaxMessageBytes and, for a plain file, by the bytes
// left in it, before anything is allocated; a gzip stream must end with its
// trailer; the first message must be a GlobalMetadata with a version; no
// node message is empty (zeros, which a small gzip can inflate to
// gigabytes of, stop the reader at the first).
// Protobuf reports failures by return value, so nothing here throws.
//
//===----------------------------------------------------------------------===//

#include "stg/Chakra/ChakraTrace.h"

#include "llvm/Support/FileSystem.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/unknown_field_set.h>
#include <zlib.h>

#include <climits>
#include <cstring>

using namespace stg;
namespace pbio = google::protobuf::io;

static constexpr int BufferBytes = 64 << 10;

//===----------------------------------------------------------------------===//
// GzipSource
//===----------------------------------------------------------------------===//

/// Inflates a gzip stream read from a ZeroCopyInputStream. Protobuf's own
/// GzipInputStream treats the end of its input as the end of the data, so a
/// gzip file cut short at a message boundary would read as a valid, shorter
/// trace; this one reports any input that ends before a member's trailer.
/// Concatenated members (`cat a.gz b.gz`) read as one stream, as with gzip.
class stg::detail::GzipSource : public pbio::CopyingInputStream {
public:
  explicit GzipSource(pbio::ZeroCopyInputStream *input) : input(input) {
    std::memset(&zs, 0, sizeof(zs));
    // 15 + 16: the largest window, and a gzip (not zlib) header.
    if (inflateInit2(&zs, 15 + 16) != Z_OK)
      error = "cannot initialize zlib: out of memory";
    else
      initialized = true;
  }
  ~GzipSource() override {
    if (initialized)
      inflateEnd(&zs);
  }

  bool failed() const { return !error.empty(); }
  /// Why Read() failed.
  const std::string &getError() const { return error; }

  int Read(void *buffer, int size) override {
    if (failed())
      return -1;
    zs.next_out = static_cast<Bytef *>(buffer);
    zs.avail_out = static_cast<uInt>(size);
    while (zs.avail_out == static_cast<uInt>(size)) {
      if (zs.avail_in == 0) {
        const void *data;
        int n;
        if (!input->Next(&data, &n)) {
          if (memberEnded)
            return 0; // The end of the data, after a complete member.
          error = "truncated gzip stream (it ends before its trailer)";
          return -1;
        }
        zs.next_in = static_cast<Bytef *>(const_cast<void *>(data));
        zs.avail_in = static_cast<uInt>(n);
        continue;
      }
      if (memberEnded) {
        // More bytes after a member's trailer: the next member.
        inflateReset(&zs);
        memberEnded = false;
      }
      int rc = inflate(&zs, Z_NO_FLUSH);
      if (rc == Z_STREAM_END) {
        memberEnded = true;
        continue;
      }
      // Z_BUF_ERROR means "no progress possible", which with input and
      // output space both available cannot happen; do not loop on it.
      if (rc != Z_OK && !(rc == Z_BUF_ERROR && zs.avail_in == 0)) {
        error = std::string("corrupt gzip stream: ") +
                (zs.msg ? zs.msg : "undecodable data");
        return -1;
      }
    }
    return size - static_cast<int>(zs.avail_out);
  }

private:
  pbio::ZeroCopyInputStream *input;
  z_stream zs;
  bool initialized = false;
  bool memberEnded = false;
  std::string error;
};

//===----------------------------------------------------------------------===//
// ChakraTraceReader
//===----------------------------------------------------------------------===//

ChakraTraceReader::ChakraTraceReader(llvm::StringRef name) : name(name.str()) {}

ChakraTraceReader::~ChakraTraceReader() = default;

llvm::Error ChakraTraceReader::formatError(const llvm::Twine &message) {
  failed = true;
  return llvm::createStringError(std::errc::illegal_byte_sequence, "%s: %s",
                                 name.c_str(), message.str().c_str());
}

/// Where a message starts, for diagnostics. In a gzipped trace that is an
/// offset into the uncompressed data, and says so.
std::string ChakraTraceReader::at(uint64_t position) const {
  std::string result = "at byte " + std::to_string(position);
  if (gzipped)
    result += " of the uncompressed data";
  return result;
}

/// The error of the underlying streams after a read fell short, if any: an
/// I/O error of the file or a corrupt or truncated gzip stream.
llvm::Error ChakraTraceReader::streamError() {
  if (fileSource && fileSource->GetErrno()) {
    failed = true;
    int errnum = fileSource->GetErrno();
    return llvm::createStringError(
        std::error_code(errnum, std::generic_category()), "%s: read error: %s",
        name.c_str(), std::strerror(errnum));
  }
  if (gzipSource && gzipSource->failed())
    return formatError(gzipSource->getError());
  return llvm::Error::success();
}

llvm::Expected<std::unique_ptr<ChakraTraceReader>>
ChakraTraceReader::open(llvm::StringRef path) {
  llvm::sys::fs::file_status status;
  if (std::error_code ec = llvm::sys::fs::status(path, status))
    return llvm::createStringError(ec, "%s: cannot open: %s",
                                   path.str().c_str(), ec.message().c_str());
  if (status.type() == llvm::sys::fs::file_type::directory_file)
    return llvm::createStringError(std::errc::is_a_directory,
                                   "%s: is a directory", path.str().c_str());
  // A pipe or a device may never end, and has no size to check prefixes by.
  if (status.type() != llvm::sys::fs::file_type::regular_file)
    return llvm::createStringError(std::errc::invalid_argument,
                                   "%s: is not a regular file",
                                   path.str().c_str());
  int fd = -1;
  if (std::error_code ec = llvm::sys::fs::openFileForRead(path, fd))
    return llvm::createStringError(ec, "%s: cannot open: %s",
                                   path.str().c_str(), ec.message().c_str());
  auto file = std::make_unique<pbio::FileInputStream>(fd, BufferBytes);
  // Reading never fails in a way the reader must see at close time.
  file->SetCloseOnDelete(true);
  std::unique_ptr<ChakraTraceReader> reader(new ChakraTraceReader(path));
  reader->fileSource = file.get();
  if (llvm::Error err = reader->start(std::move(file), status.getSize()))
    return err;
  return reader;
}

llvm::Expected<std::unique_ptr<ChakraTraceReader>>
ChakraTraceReader::openBuffer(llvm::StringRef bytes, llvm::StringRef name) {
  std::unique_ptr<ChakraTraceReader> reader(new ChakraTraceReader(name));
  // ArrayInputStream takes an int size; a larger buffer is not a trace we
  // could parse anyway.
  if (bytes.size() > static_cast<size_t>(INT_MAX))
    return reader->formatError("buffer too large");
  auto array = std::make_unique<pbio::ArrayInputStream>(
      bytes.data(), static_cast<int>(bytes.size()));
  if (llvm::Error err = reader->start(std::move(array), bytes.size()))
    return err;
  return reader;
}

llvm::Error
ChakraTraceReader::start(std::unique_ptr<pbio::ZeroCopyInputStream> input,
                         std::optional<uint64_t> inputSize) {
  source = std::move(input);
  in = source.get();

  // Peek at the first two bytes for the gzip magic, then give them back.
  const void *data;
  int n = 0;
  bool any;
  while ((any = source->Next(&data, &n)) && n == 0) {
  }
  if (any) {
    const auto *bytes = static_cast<const unsigned char *>(data);
    gzipped = n >= 2 && bytes[0] == 0x1f && bytes[1] == 0x8b;
    source->BackUp(n);
  } else if (llvm::Error err = streamError()) {
    return err;
  }

  if (gzipped) {
    gzipSource = std::make_unique<detail::GzipSource>(source.get());
    inflated = std::make_unique<pbio::CopyingInputStreamAdaptor>(
        gzipSource.get(), BufferBytes);
    in = inflated.get();
  } else {
    streamSize = inputSize;
  }

  llvm::Expected<bool> gotFrame = readFrame("the GlobalMetadata");
  if (!gotFrame)
    return gotFrame.takeError();
  if (!*gotFrame)
    return formatError("empty file: no GlobalMetadata (not a Chakra trace)");
  // A Node's bytes often parse as a GlobalMetadata too, with its fields as
  // unknown ones; a version and no unknown fields tell the two apart.
  if (!metadata.ParseFromString(payload))
    return formatError("missing GlobalMetadata: the first message (" +
                       llvm::Twine(payload.size()) +
                       " bytes) does not parse as one; not a Chakra trace?");
  if (metadata.version().empty() ||
      !metadata.GetReflection()->GetUnknownFields(metadata).empty())
    return formatError("missing GlobalMetadata: the first message has " +
                       llvm::Twine(metadata.version().empty()
                                       ? "no version"
                                       : "fields a GlobalMetadata lacks") +
                       "; a trace written without one, or not a Chakra "
                       "trace?");
  return llvm::Error::success();
}

/// Reads the next length-prefixed message into `payload`. Returns false at
/// a clean end of the stream, that is, when it ends before a length prefix.
llvm::Expected<bool> ChakraTraceReader::readFrame(const llvm::Twine &what) {
  // Probe for the end of the stream: only here may it end without error.
  const void *data;
  int n = 0;
  bool more;
  while ((more = in->Next(&data, &n)) && n == 0) {
  }
  if (!more) {
    if (llvm::Error err = streamError())
      return err;
    return false;
  }
  in->BackUp(n);

  uint64_t start = offset;
  pbio::CodedInputStream coded(in);
  uint32_t length;
  if (!coded.ReadVarint32(&length)) {
    if (llvm::Error err = streamError())
      return err;
    return formatError("truncated file: the length prefix of " + what + " " +
                       at(start) + " is cut off or malformed");
  }
  uint64_t prefixBytes = static_cast<uint64_t>(coded.CurrentPosition());
  if (start + prefixBytes + length > MaxTraceBytes)
    return formatError(what + " " + at(start) + " ends past " +
                       llvm::Twine(MaxTraceBytes >> 30) +
                       " GiB of uncompressed data, the most a trace may "
                       "have");
  if (length > MaxMessageBytes)
    return formatError("implausible length prefix: " + what + " " + at(start) +
                       " claims " + llvm::Twine(length) + " bytes, over the " +
                       llvm::Twine(MaxMessageBytes >> 20) +
                       " MiB limit; corrupt, or not a Chakra trace");
  if (streamSize) {
    uint64_t left = *streamSize - start - prefixBytes;
    if (length > left)
      return formatError("truncated file: " + what + " " + at(start) +
                         " claims " + llvm::Twine(length) +
                         " bytes but the file has " + llvm::Twine(left) +
                         " left");
  }
  if (!coded.ReadString(&payload, static_cast<int>(length))) {
    if (llvm::Error err = streamError())
      return err;
    return formatError("truncated file: " + what + " " + at(start) +
                       " claims " + llvm::Twine(length) +
                       " bytes but the data ends before");
  }
  offset = start + prefixBytes + length;
  return true;
}

llvm::Expected<bool> ChakraTraceReader::readNode(ChakraProtoMsg::Node &node) {
  if (failed)
    return llvm::createStringError(std::errc::operation_not_permitted,
                                   "%s: reading past an error", name.c_str());
  uint64_t start = offset;
  std::string what = "node " + std::to_string(numNodes);
  if (numNodes >= MaxNodes) {
    llvm::Expected<bool> more = readFrame(what);
    if (!more || !*more)
      return more;
    return formatError("more than " + llvm::Twine(MaxNodes) +
                       " nodes, the most a trace may have");
  }
  llvm::Expected<bool> gotFrame = readFrame(what);
  if (!gotFrame || !*gotFrame)
    return gotFrame;
  // Every node has a type, so its message is never empty; a run of zero
  // bytes (what a small gzip inflates to gigabytes of) is not nodes.
  if (payload.empty())
    return formatError("empty message: " + what + " " + at(start) +
                       " has 0 bytes, which no node has; corrupt, or not a "
                       "Chakra trace");
  if (!node.ParseFromString(payload))
    return formatError("malformed message: " + what + " " + at(start) + " (" +
                       llvm::Twine(payload.size()) +
                       " bytes) does not parse as a Node");
  ++numNodes;
  return true;
}

llvm::Expected<ChakraTrace> stg::readChakraTrace(llvm::StringRef path) {
  auto reader = ChakraTraceReader::open(path);
  if (!reader)
    return reader.takeError();
  ChakraTrace trace;
  trace.metadata = (*reader)->getMetadata();
  trace.gzipped = (*reader)->isGzip();
  while (true) {
    ChakraProtoMsg::Node node;
    llvm::Expected<bool> gotNode = (*reader)->readNode(node);
    if (!gotNode)
      return gotNode.takeError();
    if (!*gotNode)
      break;
    trace.nodes.push_back(std::move(node));
  }
  return trace;
}
