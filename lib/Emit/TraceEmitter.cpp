//===- TraceEmitter.cpp - Per-rank files from stage programs --------------===//

#include "stg/Emit/TraceEmitter.h"

#include "RankFormats.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Threading.h"

#include <mutex>
#include <numeric>
#include <thread>

using namespace stg;
using namespace stg::chakra;

std::optional<TraceFormat> stg::parseTraceFormat(llvm::StringRef name) {
  if (name == "chakra")
    return TraceFormat::Chakra;
  if (name == "json")
    return TraceFormat::Json;
  if (name == "dot")
    return TraceFormat::Dot;
  return std::nullopt;
}

std::vector<unsigned> stg::getSelectedRanks(const EmitOptions &options,
                                            unsigned numRanks) {
  if (!options.ranks.empty())
    return options.ranks;
  std::vector<unsigned> ranks(numRanks);
  std::iota(ranks.begin(), ranks.end(), 0u);
  return ranks;
}

std::string stg::getTraceFileName(const EmitOptions &options, unsigned rank) {
  const char *extension = ".et";
  if (options.format == TraceFormat::Json)
    extension = ".json";
  else if (options.format == TraceFormat::Dot)
    extension = ".dot";
  else if (options.gzip)
    extension = ".et.gz";
  return options.prefix + "." + std::to_string(rank) + extension;
}

static ChakraProtoMsg::CollectiveCommType
getChakraCommType(CollectiveKind kind) {
  switch (kind) {
  case CollectiveKind::AllReduce:
    return ChakraProtoMsg::ALL_REDUCE;
  case CollectiveKind::AllGather:
    return ChakraProtoMsg::ALL_GATHER;
  case CollectiveKind::ReduceScatter:
    return ChakraProtoMsg::REDUCE_SCATTER;
  case CollectiveKind::AllToAll:
    return ChakraProtoMsg::ALL_TO_ALL;
  }
  llvm_unreachable("unknown collective kind");
}

ChakraProtoMsg::NodeType stg::getChakraNodeType(ProgramNodeKind kind) {
  switch (kind) {
  case ProgramNodeKind::Compute:
    return ChakraProtoMsg::COMP_NODE;
  case ProgramNodeKind::Collective:
    return ChakraProtoMsg::COMM_COLL_NODE;
  case ProgramNodeKind::Send:
    return ChakraProtoMsg::COMM_SEND_NODE;
  case ProgramNodeKind::Recv:
    return ChakraProtoMsg::COMM_RECV_NODE;
  }
  return ChakraProtoMsg::INVALID_NODE;
}

void stg::fillSharedPart(const ProgramNode &node, uint64_t id,
                         bool orderingAsDataDeps, ChakraProtoMsg::Node &out) {
  out.set_id(id);
  out.set_name(node.name);
  out.set_type(getChakraNodeType(node.kind));
  if (orderingAsDataDeps) {
    llvm::SmallVector<uint32_t, 8> deps(node.dataDeps.begin(),
                                        node.dataDeps.end());
    deps.append(node.ctrlDeps.begin(), node.ctrlDeps.end());
    llvm::sort(deps);
    deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
    for (uint32_t dep : deps)
      out.add_data_deps(dep);
  } else {
    for (uint32_t dep : node.ctrlDeps)
      out.add_ctrl_deps(dep);
    for (uint32_t dep : node.dataDeps)
      out.add_data_deps(dep);
  }
  if (node.durationMicros)
    out.set_duration_micros(node.durationMicros);
  *out.add_attr() = isCpuOpAttr(false);
  switch (node.kind) {
  case ProgramNodeKind::Compute:
    *out.add_attr() = numOpsAttr(node.numOps);
    *out.add_attr() = tensorSizeAttr(node.tensorBytes);
    *out.add_attr() = opTypeAttr(node.opType);
    break;
  case ProgramNodeKind::Collective:
    *out.add_attr() = commTypeAttr(getChakraCommType(node.commType));
    *out.add_attr() = commSizeAttr(node.commBytes);
    break;
  case ProgramNodeKind::Send:
  case ProgramNodeKind::Recv:
    *out.add_attr() = commTagAttr(node.tag);
    *out.add_attr() = commSizeAttr(node.commBytes);
    break;
  }
}

void stg::fillRankPart(const ProgramSet &programs, const CommGroups &groups,
                       const ProgramNode &node, unsigned rank,
                       ChakraProtoMsg::Node &out) {
  switch (node.kind) {
  case ProgramNodeKind::Compute:
    break;
  case ProgramNodeKind::Collective:
    *out.add_attr() =
        pgNameAttr(std::to_string(groups.getGroupId(rank, node.group)));
    break;
  case ProgramNodeKind::Send:
    *out.add_attr() = commSrcAttr(rank);
    *out.add_attr() = commDstAttr(programs.getPeerRank(rank, node));
    break;
  case ProgramNodeKind::Recv:
    *out.add_attr() = commSrcAttr(programs.getPeerRank(rank, node));
    *out.add_attr() = commDstAttr(rank);
    break;
  }
}

namespace {

/// One stage's nodes, serialized without their rank-specific attributes.
struct StageTemplate {
  std::string bytes;
  std::vector<size_t> offsets; ///< Node i is bytes[offsets[i], offsets[i+1]).

  StageTemplate(const StageProgram &program, bool orderingAsDataDeps) {
    ChakraProtoMsg::Node node;
    for (size_t id = 0; id < program.nodes.size(); ++id) {
      offsets.push_back(bytes.size());
      node.Clear();
      fillSharedPart(program.nodes[id], id, orderingAsDataDeps, node);
      node.AppendToString(&bytes);
    }
    offsets.push_back(bytes.size());
  }
};

/// Stamps the Chakra files of ranks: caches the rank-specific attributes of
/// the rank being written, keyed by group mask or by peer stage.
class ChakraStamper {
public:
  ChakraStamper(const ProgramSet &programs, const CommGroups &groups,
                const std::vector<StageTemplate> &templates)
      : programs(programs), groups(groups), templates(templates) {}

  /// Writes `rank`'s file from its stage's program and template, or from
  /// `own` (with a template made for it) if given.
  llvm::Error write(unsigned rank, llvm::StringRef path,
                    const EmitOptions &options,
                    const StageProgram *own = nullptr);

private:
  llvm::StringRef getRankPart(const ProgramNode &node, unsigned rank);

  const ProgramSet &programs;
  const CommGroups &groups;
  const std::vector<StageTemplate> &templates;
  llvm::DenseMap<uint64_t, std::string> rankParts;
  ChakraProtoMsg::Node scratch;
};

} // namespace

llvm::StringRef ChakraStamper::getRankPart(const ProgramNode &node,
                                           unsigned rank) {
  uint64_t key =
      uint64_t(node.kind) << 33 | uint64_t(node.acrossHalves) << 32 |
      (node.kind == ProgramNodeKind::Collective ? node.group : node.peerStage);
  auto [it, inserted] = rankParts.try_emplace(key);
  if (inserted) {
    scratch.Clear();
    fillRankPart(programs, groups, node, rank, scratch);
    scratch.SerializeToString(&it->second);
  }
  return it->second;
}

llvm::Error ChakraStamper::write(unsigned rank, llvm::StringRef path,
                                 const EmitOptions &options,
                                 const StageProgram *own) {
  rankParts.clear();
  auto writer = ChakraTraceWriter::create(path, options.writer);
  if (!writer)
    return writer.takeError();
  unsigned stage = programs.getStageOfRank(rank);
  const StageProgram &program = own ? *own : programs.stages[stage];
  std::optional<StageTemplate> ownTemplate;
  if (own)
    ownTemplate.emplace(*own, options.orderingAsDataDeps);
  const StageTemplate &shared = own ? *ownTemplate : templates[stage];
  for (size_t id = 0; id < program.nodes.size(); ++id) {
    llvm::StringRef common(shared.bytes.data() + shared.offsets[id],
                           shared.offsets[id + 1] - shared.offsets[id]);
    llvm::StringRef rankPart;
    if (program.nodes[id].kind != ProgramNodeKind::Compute)
      rankPart = getRankPart(program.nodes[id], rank);
    if (llvm::Error err = (*writer)->writeSerializedNode({common, rankPart}))
      return err;
  }
  return (*writer)->close();
}

uint64_t stg::estimateTraceBytes(const ProgramSet &programs,
                                 const EmitOptions &options) {
  // Per node: the shared bytes, a length prefix, and for communication the
  // rank's own attributes (a group name, or source and destination).
  std::vector<uint64_t> stageBytes;
  for (const StageProgram &program : programs.stages) {
    StageTemplate shared(program, options.orderingAsDataDeps);
    uint64_t bytes = shared.bytes.size() + 3 * program.nodes.size();
    for (const ProgramNode &node : program.nodes)
      if (node.kind != ProgramNodeKind::Compute)
        bytes += 24;
    // Readable formats are several times larger than the binary.
    if (options.format != TraceFormat::Chakra)
      bytes *= 4;
    else if (options.gzip)
      bytes /= 10;
    stageBytes.push_back(bytes);
  }
  uint64_t total = 0;
  for (unsigned rank :
       getSelectedRanks(options, programs.mesh.getNumRanks()))
    total += stageBytes[programs.getStageOfRank(rank)];
  return total;
}

llvm::Error stg::emitTraces(const ProgramSet &programs,
                            const CommGroups &groups,
                            llvm::StringRef directory,
                            const EmitOptions &options,
                            std::vector<WrittenFile> *written) {
  if (programs.folded)
    return llvm::createStringError(
        std::errc::invalid_argument,
        "internal error: programs with folded micro-batches have no traces");
  std::vector<unsigned> ranks =
      getSelectedRanks(options, programs.mesh.getNumRanks());
  if (written)
    written->assign(ranks.size(), WrittenFile());

  std::vector<StageTemplate> templates;
  if (options.format == TraceFormat::Chakra)
    for (const StageProgram &program : programs.stages)
      templates.emplace_back(program, options.orderingAsDataDeps);

  unsigned jobs = options.jobs ? options.jobs
                               : llvm::hardware_concurrency().compute_thread_count();
  jobs = std::max(1u, std::min<unsigned>(jobs, ranks.size()));
  std::atomic<size_t> next{0}, done{0};
  std::atomic<bool> stop{false};
  std::mutex errorMutex;
  // The error of the lowest failing rank, so the message does not depend on
  // thread timing.
  std::optional<std::pair<unsigned, std::string>> firstError;

  auto work = [&] {
    ChakraStamper stamper(programs, groups, templates);
    while (!stop) {
      size_t index = next++;
      if (index >= ranks.size())
        break;
      if (options.cancel && *options.cancel) {
        stop = true;
        break;
      }
      unsigned rank = ranks[index];
      llvm::SmallString<256> path(directory);
      llvm::sys::path::append(path, getTraceFileName(options, rank));
      std::optional<StageProgram> own;
      if (options.rankProgram)
        own = options.rankProgram(rank);
      llvm::Error err = llvm::Error::success();
      if (options.format == TraceFormat::Chakra)
        err = stamper.write(rank, path, options, own ? &*own : nullptr);
      else
        err = writeReadableRank(programs, groups, rank, path, options,
                                own ? &*own : nullptr);
      if (!err && written) {
        WrittenFile &file = (*written)[index];
        file.name = getTraceFileName(options, rank);
        file.nodes = own ? own->nodes.size()
                         : programs.stages[programs.getStageOfRank(rank)]
                               .nodes.size();
        if (std::error_code ec = llvm::sys::fs::file_size(path, file.bytes))
          err = llvm::createStringError(ec, "cannot stat %s: %s",
                                        path.c_str(), ec.message().c_str());
      }
      if (err) {
        std::lock_guard<std::mutex> lock(errorMutex);
        std::string message = llvm::toString(std::move(err));
        if (!firstError || rank < firstError->first)
          firstError = {rank, message};
        stop = true;
      }
      ++done;
    }
  };

  // With progress to report, the calling thread reports while `jobs`
  // others write; otherwise it is one of the writers.
  bool reporting = options.progress && jobs > 1;
  std::vector<std::thread> threads;
  for (unsigned i = reporting ? 0 : 1; i < jobs; ++i)
    threads.emplace_back(work);
  if (reporting) {
    while (done < ranks.size() && !stop) {
      options.progress(done, ranks.size());
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  } else {
    work();
  }
  for (std::thread &thread : threads)
    thread.join();
  if (options.progress)
    options.progress(done, ranks.size());
  if (firstError)
    return llvm::createStringError(std::errc::io_error, "%s",
                                   firstError->second.c_str());
  if (options.cancel && *options.cancel)
    return llvm::createStringError(std::errc::interrupted, "interrupted");
  return llvm::Error::success();
}
