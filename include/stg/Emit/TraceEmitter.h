//===- TraceEmitter.h - Per-rank files from stage programs ------*- C++ -*-===//
//
// Writes one file per rank from the programs of a ProgramSet. A Chakra
// trace is stamped, not rebuilt: each stage's nodes are serialized once,
// without their rank-specific attributes (`pg_name` of collectives,
// `comm_src`/`comm_dst` of sends and receives); each rank's file is then the
// shared bytes of every node followed by that rank's few attributes, which
// are serialized once per rank and group or peer. Memory stays at one
// serialized program per stage plus a write buffer per thread, whatever the
// number of ranks, and ranks are written by `jobs` threads.
//
// `json` and `dot` formats write the same nodes readably, per rank.
//
//===----------------------------------------------------------------------===//

#ifndef STG_EMIT_TRACEEMITTER_H
#define STG_EMIT_TRACEEMITTER_H

#include "stg/Chakra/ChakraTrace.h"
#include "stg/Instantiate/Program.h"

#include "llvm/Support/Error.h"

#include <atomic>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace stg {

enum class TraceFormat { Chakra, Json, Dot };

struct EmitOptions {
  std::string prefix = "trace";
  TraceFormat format = TraceFormat::Chakra;
  /// Write `P.{rank}.et.gz` instead of `P.{rank}.et`.
  bool gzip = false;
  /// Threads writing ranks; 0 means one per hardware thread.
  unsigned jobs = 1;
  /// Where the ordering edges (the schedule, each group's collective chain,
  /// perturbation delays) go. ASTRA-sim's Chakra feeder resolves only
  /// data_deps, so by default they are written there; false writes them as
  /// ctrl_deps, for readers that tell order from data flow.
  bool orderingAsDataDeps = true;
  /// Ranks to write; empty means all.
  std::vector<unsigned> ranks;
  ChakraTraceWriterOptions writer;
  /// Set from elsewhere (a signal handler) to stop early with an error.
  const std::atomic<bool> *cancel = nullptr;
  /// A rank's own program, when it differs from its stage's (a perturbed
  /// rank); called from the writer threads, once per rank written.
  std::function<std::optional<StageProgram>(unsigned rank)> rankProgram;
  /// Called now and then from the calling thread with the ranks written.
  std::function<void(unsigned done, unsigned total)> progress;
};

std::optional<TraceFormat> parseTraceFormat(llvm::StringRef name);

/// The ranks `options` selects among `numRanks`: its list, or all of them.
std::vector<unsigned> getSelectedRanks(const EmitOptions &options,
                                       unsigned numRanks);

/// The file name of `rank`'s trace: `P.{rank}.et`, `.et.gz`, `.json`, `.dot`.
std::string getTraceFileName(const EmitOptions &options, unsigned rank);

/// What was written for one rank: the manifest records it, and `stage-et
/// verify` checks each file against it (a file cut at a node boundary
/// still decodes).
struct WrittenFile {
  std::string name;
  uint64_t nodes = 0;
  uint64_t bytes = 0;
};

/// About how many bytes emitTraces will write for `options` (Chakra files
/// exactly but for the length prefixes and rank attributes; gzip assumed to
/// shrink at most tenfold), so a run that cannot fit on the disk is refused
/// before it starts.
uint64_t estimateTraceBytes(const ProgramSet &programs,
                            const EmitOptions &options);

/// Writes the files of the selected ranks into `directory`, which exists,
/// and, if `written` is given, fills it in the order of the selected ranks.
/// On error, files already written stay (the caller writes into a
/// temporary directory).
llvm::Error emitTraces(const ProgramSet &programs, const CommGroups &groups,
                       llvm::StringRef directory, const EmitOptions &options,
                       std::vector<WrittenFile> *written = nullptr);

} // namespace stg

#endif // STG_EMIT_TRACEEMITTER_H
