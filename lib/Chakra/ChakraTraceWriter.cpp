//===- ChakraTraceWriter.cpp - Writing Chakra .et files -------------------===//
//
// The writer stacks protobuf's streams: a CodedOutputStream that writes each
// message's varint32 length and its serialized bytes, over a
// GzipOutputStream when the trace is compressed, over a FileOutputStream on
// the file descriptor. Each layer buffers, so a node costs no system call
// and memory stays constant however many nodes are written. Errors surface
// as flags on the streams (protobuf does not throw); they are turned into
// llvm::Errors naming the file and the reason.
//
//===----------------------------------------------------------------------===//

#include "stg/Chakra/ChakraTrace.h"
#include "stg/Support/Version.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Process.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/gzip_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>

#include <climits>
#include <cstring>

using namespace stg;
namespace pbio = google::protobuf::io;

/// Size of the file and gzip buffers: large enough that a trace of small
/// nodes is written in few system calls.
static constexpr int BufferBytes = 64 << 10;

ChakraTraceWriter::ChakraTraceWriter(llvm::StringRef path, bool gzipped)
    : path(path.str()), gzipped(gzipped) {}

ChakraTraceWriter::~ChakraTraceWriter() {
  if (!closed)
    llvm::consumeError(close());
}

llvm::Expected<std::unique_ptr<ChakraTraceWriter>>
ChakraTraceWriter::create(llvm::StringRef path,
                          const ChakraTraceWriterOptions &options) {
  if (options.schemaVersion.empty())
    return llvm::createStringError(
        std::errc::invalid_argument,
        "%s: the Chakra schema version must not be empty", path.str().c_str());
  bool gzipped =
      options.compression == TraceCompression::Gzip ||
      (options.compression == TraceCompression::Auto && path.endswith(".gz"));

  int fd = -1;
  if (std::error_code ec = llvm::sys::fs::openFileForWrite(
          path, fd, llvm::sys::fs::CD_CreateAlways, llvm::sys::fs::OF_None))
    return llvm::createStringError(ec, "%s: cannot open for writing: %s",
                                   path.str().c_str(), ec.message().c_str());

  std::unique_ptr<ChakraTraceWriter> writer(
      new ChakraTraceWriter(path, gzipped));
  // The writer closes the descriptor itself, in close(): protobuf's own
  // close-on-delete would only log a failure.
  writer->fd = fd;
  writer->file = std::make_unique<pbio::FileOutputStream>(fd, BufferBytes);
  pbio::ZeroCopyOutputStream *sink = writer->file.get();
  if (gzipped) {
    pbio::GzipOutputStream::Options gzipOptions;
    gzipOptions.format = pbio::GzipOutputStream::GZIP;
    gzipOptions.compression_level = options.gzipLevel;
    gzipOptions.buffer_size = BufferBytes;
    writer->gzip = std::make_unique<pbio::GzipOutputStream>(sink, gzipOptions);
    sink = writer->gzip.get();
  }
  writer->coded = std::make_unique<pbio::CodedOutputStream>(sink);
  // Only maps serialize differently without this, and the schema has none;
  // it states the requirement (byte-identical output) where it matters.
  writer->coded->SetSerializationDeterministic(true);

  ChakraProtoMsg::GlobalMetadata metadata;
  metadata.set_version(options.schemaVersion);
  *metadata.add_attr() =
      chakra::makeStringAttr(chakra::attr::Generator, options.generatorName);
  *metadata.add_attr() = chakra::makeStringAttr(chakra::attr::GeneratorVersion,
                                                options.generatorVersion.empty()
                                                    ? getToolVersion().str()
                                                    : options.generatorVersion);
  for (const ChakraProtoMsg::AttributeProto &attribute : options.extraMetadata)
    *metadata.add_attr() = attribute;
  if (llvm::Error err = writer->writeMessage(metadata, "the GlobalMetadata"))
    return err;
  return writer;
}

llvm::Error ChakraTraceWriter::makeStreamError(const llvm::Twine &what) {
  failed = true;
  if (int errnum = file->GetErrno())
    return llvm::createStringError(
        std::error_code(errnum, std::generic_category()), "%s: %s: %s",
        path.c_str(), what.str().c_str(), std::strerror(errnum));
  const char *reason = "write failed";
  if (gzip && gzip->ZlibErrorMessage())
    reason = gzip->ZlibErrorMessage();
  return llvm::createStringError(std::errc::io_error, "%s: %s: %s",
                                 path.c_str(), what.str().c_str(), reason);
}

llvm::Error
ChakraTraceWriter::writeMessage(const google::protobuf::MessageLite &message,
                                const llvm::Twine &what) {
  size_t size = message.ByteSizeLong();
  // Protobuf cannot parse a message of 2 GiB or more; neither could any
  // reader of the trace.
  if (size > static_cast<size_t>(INT_MAX))
    return llvm::createStringError(
        std::errc::value_too_large,
        "%s: %s is %zu bytes, over protobuf's 2 GiB limit", path.c_str(),
        what.str().c_str(), size);
  coded->WriteVarint32(static_cast<uint32_t>(size));
  message.SerializeWithCachedSizes(coded.get());
  if (coded->HadError())
    return makeStreamError("cannot write " + what);
  return llvm::Error::success();
}

llvm::Error
ChakraTraceWriter::writeSerializedNode(llvm::ArrayRef<llvm::StringRef> parts) {
  if (closed || failed)
    return llvm::createStringError(
        std::errc::operation_not_permitted, "%s: writing to a %s trace",
        path.c_str(), closed ? static_cast<const char *>("closed") : "failed");
  size_t size = 0;
  for (llvm::StringRef part : parts)
    size += part.size();
  if (size > static_cast<size_t>(INT_MAX))
    return llvm::createStringError(std::errc::value_too_large,
                                   "%s: node %llu is over 2 GiB", path.c_str(),
                                   static_cast<unsigned long long>(numNodes));
  coded->WriteVarint32(static_cast<uint32_t>(size));
  for (llvm::StringRef part : parts)
    coded->WriteRaw(part.data(), static_cast<int>(part.size()));
  if (coded->HadError()) {
    failed = true;
    return makeStreamError("cannot write node " + llvm::Twine(numNodes));
  }
  ++numNodes;
  return llvm::Error::success();
}

llvm::Error ChakraTraceWriter::writeNode(const ChakraProtoMsg::Node &node) {
  if (closed || failed)
    return llvm::createStringError(
        std::errc::operation_not_permitted, "%s: writing to a %s trace",
        path.c_str(), closed ? static_cast<const char *>("closed") : "failed");
  if (llvm::Error err = writeMessage(node, "node " + llvm::Twine(node.id())))
    return err;
  ++numNodes;
  return llvm::Error::success();
}

llvm::Error ChakraTraceWriter::close() {
  if (closed)
    return llvm::createStringError(std::errc::operation_not_permitted,
                                   "%s: trace closed twice", path.c_str());
  closed = true;
  // Each layer hands its buffer to the one below when it is destroyed or
  // closed, so a failing disk shows at any of the three steps; the first
  // failure is the one worth reporting.
  llvm::Error result = llvm::Error::success();
  auto fail = [&](const char *what) {
    llvm::Error err = makeStreamError(what);
    if (result)
      llvm::consumeError(std::move(err));
    else
      result = std::move(err);
  };
  bool codedFailed = coded->HadError();
  coded.reset();
  if (codedFailed)
    fail("cannot write");
  if (gzip) {
    if (!gzip->Close())
      fail("cannot finish the gzip stream");
    gzip.reset();
  }
  // Flush and close separately: FileOutputStream::Close() leaves the
  // descriptor open when the flush fails.
  if (!file->Flush())
    fail("cannot write");
  if (std::error_code ec = llvm::sys::Process::SafelyCloseFileDescriptor(fd)) {
    if (result)
      return result;
    return llvm::createStringError(ec, "%s: cannot close: %s", path.c_str(),
                                   ec.message().c_str());
  }
  return result;
}
