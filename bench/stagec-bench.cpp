//===- stagec-bench.cpp - How fast stagec writes big trace sets -----------===//
//
// Runs the stagec pipeline on a shipped model at a named scale and prints
// where the time goes (parse and passes, instantiation, stamping and
// writing, a perturbed variant with one straggler), the throughput (nodes/s,
// MB/s), the peak resident memory, and,
// for comparison, how fast this machine's disk takes the same number of
// bytes written plainly (into the page cache, and with fsync). Figures are
// recorded in docs/performance.md.
//
//   stagec-bench --scale 1k     Llama-3-70B, dp16 tp8 pp8, 8 micro-batches
//   stagec-bench --scale 32k    Llama-3-70B, dp256 tp8 pp16, 8 micro-batches
//
//===----------------------------------------------------------------------===//

#include "stg/Driver/Compile.h"
#include "stg/Emit/Manifest.h"
#include "stg/Emit/TraceEmitter.h"
#include "stg/Perturb/Perturbation.h"

#include "CLI/CLI.hpp"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

using namespace stg;
using Clock = std::chrono::steady_clock;

static double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

static double peakRssMegabytes() {
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss / 1024.0;
}

static uint64_t directoryBytes(llvm::StringRef directory) {
  uint64_t total = 0;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(directory, ec), end;
       it != end && !ec; it.increment(ec)) {
    uint64_t size = 0;
    if (!llvm::sys::fs::file_size(it->path(), size))
      total += size;
  }
  return total;
}

/// Seconds to write `bytes` in 1 MiB blocks to one new file in `directory`,
/// with or without an fsync at the end.
static double timeRawWrite(llvm::StringRef directory, uint64_t bytes,
                           bool sync) {
  llvm::SmallString<256> path(directory);
  llvm::sys::path::append(path, "raw-write-test");
  std::string block(1 << 20, 'x');
  Clock::time_point start = Clock::now();
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0)
    return -1;
  for (uint64_t written = 0; written < bytes; written += block.size())
    if (::write(fd, block.data(), block.size()) < 0)
      break;
  if (sync)
    ::fsync(fd);
  ::close(fd);
  double seconds = secondsSince(start);
  llvm::sys::fs::remove(path);
  return seconds;
}

int main(int argc, char **argv) {
  CLI::App app{"stagec-bench: time stagec on Llama-3-70B at scale"};
  std::string scale = "1k", workDir = "/tmp", templates;
  unsigned jobs = 0;
  bool keep = false;
  app.add_option("--scale", scale, "1k (1024 ranks) or 32k (32768 ranks)")
      ->check(CLI::IsMember({"1k", "32k"}));
  app.add_option("--dir", workDir, "where to write (removed afterwards)");
  app.add_option("--templates", templates, "the templates directory")
      ->required();
  app.add_option("-j", jobs, "writer threads (default: one per core)");
  app.add_flag("--keep", keep, "keep the traces");
  CLI11_PARSE(app, argc, argv);

  CompileOptions options;
  options.input = templates + "/llama70b.stg";
  options.microbatches = 8;
  if (scale == "1k")
    options.degrees = {{"tp", 8}, {"dp", 16}, {"pp", 8}};
  else
    options.degrees = {{"tp", 8}, {"dp", 256}, {"pp", 16}};

  DiagnosticEngine diags(llvm::errs());
  Clock::time_point start = Clock::now();
  std::optional<CompiledModel> compiled = compileModel(options, diags);
  if (!compiled)
    return 1;
  double compileSeconds = secondsSince(start);
  const ProgramSet &programs = compiled->programs;
  uint64_t nodesPerStep = 0;
  for (const StageProgram &program : programs.stages)
    nodesPerStep += program.nodes.size() *
                    (programs.mesh.getNumRanks() / programs.stages.size());

  llvm::SmallString<256> directory(workDir);
  llvm::sys::path::append(directory, "stagec-bench-" + scale);
  llvm::sys::fs::remove_directories(directory);
  llvm::sys::fs::create_directories(directory);
  Clock::time_point emitStart = Clock::now();
  CommGroups groups(programs.mesh, programs.getUsedMasks());
  EmitOptions emit;
  emit.prefix = "llama";
  emit.jobs = jobs;
  if (llvm::Error err = emitTraces(programs, groups, directory, emit)) {
    llvm::errs() << llvm::toString(std::move(err)) << "\n";
    return 1;
  }
  double emitSeconds = secondsSince(emitStart);
  double totalSeconds = secondsSince(start);
  uint64_t bytes = directoryBytes(directory);

  // A perturbed variant: one straggler (rank 3, 10 % slower everywhere).
  // Only that rank gets its own program; the others are stamped as before.
  PerturbationSpec spec;
  spec.path = "bench";
  PerturbationRule straggler;
  straggler.ranks = std::set<unsigned>{3};
  straggler.slowdown.value = 0.1;
  spec.rules.push_back(straggler);
  Perturber perturber(spec, programs, 0, nullptr);
  std::vector<std::vector<PerturbationRecord>> records(
      programs.mesh.getNumRanks());
  EmitOptions variant = emit;
  variant.rankProgram = [&](unsigned rank) {
    return perturber.perturb(rank, records[rank]);
  };
  llvm::sys::fs::remove_directories(directory);
  llvm::sys::fs::create_directories(directory);
  Clock::time_point variantStart = Clock::now();
  if (llvm::Error err = emitTraces(programs, groups, directory, variant)) {
    llvm::errs() << llvm::toString(std::move(err)) << "\n";
    return 1;
  }
  double variantSeconds = secondsSince(variantStart);
  double rss = peakRssMegabytes();  // Clean set and variant.
  double cachedWrite = timeRawWrite(directory, bytes, false);
  double syncedWrite = timeRawWrite(directory, bytes, true);
  if (!keep)
    llvm::sys::fs::remove_directories(directory);

  llvm::outs() << "stagec-bench --scale " << scale << ": "
               << programs.mesh.describe() << ", "
               << programs.mesh.getNumRanks() << " ranks, "
               << programs.numMicrobatches << " micro-batches\n"
               << llvm::format("  parse+passes+instantiate %8.3f s\n",
                               compileSeconds)
               << llvm::format("  stamp+write              %8.3f s\n",
                               emitSeconds)
               << llvm::format("  total                    %8.3f s\n",
                               totalSeconds)
               << llvm::format("  nodes written            %8llu (%.1f M/s)\n",
                               (unsigned long long)nodesPerStep,
                               nodesPerStep / emitSeconds / 1e6)
               << llvm::format("  bytes written            %8.1f MB (%.0f MB/s)\n",
                               bytes / 1e6, bytes / 1e6 / emitSeconds)
               << llvm::format("  perturbed variant        %8.3f s (one straggler, "
                               "%zu nodes changed)\n",
                               variantSeconds, records[3].size())
               << llvm::format("  peak RSS                 %8.1f MB\n", rss)
               << llvm::format("  raw write, same bytes    %8.3f s (%.0f MB/s) "
                               "page cache; %.3f s (%.0f MB/s) with fsync\n",
                               cachedWrite, bytes / 1e6 / cachedWrite,
                               syncedWrite, bytes / 1e6 / syncedWrite);
  return 0;
}
