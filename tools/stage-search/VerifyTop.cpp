//===- VerifyTop.cpp - The best plans, simulated by ASTRA-sim -------------===//
//
// Each trace set runs through the simulator binary with the configs beside
// it (what the manifest's astra_sim.command says), in the set's directory:
// the simulator writes its own log/ into the working directory, which then
// stays with the traces. Its per-rank "sys[R] finished, T cycles" lines
// (cycles are nanoseconds) give the step: the last rank to finish.
//
//===----------------------------------------------------------------------===//

#include "VerifyTop.h"

#include "CommandLine.h"

#include "stg/Emit/AstraConfig.h"
#include "stg/Emit/OutputDirectory.h"
#include "stg/Support/Version.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"

#include <algorithm>
#include <numeric>
#include <set>

using namespace stg;

void stg::addTopFlags(CLI::App &app, TopFlags &flags, llvm::StringRef what,
                      const char *group) {
  std::string which = what == "window" ? "runs' windows" : "plans' traces";
  app.add_option("--emit-top", flags.emitTop,
                 "write the " + what.str() +
                     " and ASTRA-sim configs of each "
                     "of the best K into -o/rank-K/, as stagec -o writes it")
      ->check(wholeNumber(0, 100))
      ->group(group);
  app.add_option("--verify-top", flags.verifyTop,
                 "also run the best K " + which +
                     " through ASTRA-sim "
                     "(--astra-sim) and print its time beside stagec's; "
                     "-o/verify.json")
      ->check(wholeNumber(0, 100))
      ->group(group);
  app.add_option("--astra-sim", flags.astraSim,
                 "the ASTRA-sim analytical binary, or a directory with "
                 "bin/AstraSim_Analytical_Congestion_Unaware")
      ->group(group);
  app.add_option("--astra-sim-timeout", flags.astraSimTimeout,
                 "seconds ASTRA-sim may take on one of them (default 1800)")
      ->check(wholeNumber(1, 86400))
      ->group(group);
}

std::optional<std::string> stg::checkTopFlags(TopFlags &flags, bool hasOutput) {
  if (flags.verifyTop) {
    if (flags.astraSim.empty())
      return std::string("--verify-top needs --astra-sim PATH (the ASTRA-sim "
                         "binary, or a directory with its bin/)");
    llvm::Expected<std::string> binary = findAstraSim(flags.astraSim);
    if (!binary)
      return llvm::toString(binary.takeError());
    flags.astraSim = *binary;
    if (!hasOutput)
      return std::string("--verify-top needs -o DIR (the traces it simulates "
                         "go there)");
    flags.emitTop = std::max(flags.emitTop, flags.verifyTop);
  } else if (!flags.astraSim.empty()) {
    return std::string("--astra-sim is for --verify-top K");
  }
  if (flags.emitTop && !hasOutput)
    return std::string("--emit-top needs -o DIR (the traces go there)");
  return std::nullopt;
}

/// Creates DIR/rank-K for the K-th best: where to write it (absolute) and
/// where to say it is (under the output directory's target).
static llvm::Error createRankDirectory(llvm::StringRef directory,
                                       llvm::StringRef target, unsigned rank,
                                       std::string &path, std::string &shown) {
  std::string name = "rank-" + std::to_string(rank);
  llvm::SmallString<256> written(directory), named(target);
  llvm::sys::path::append(written, name);
  llvm::sys::path::append(named, name);
  if (std::error_code ec = llvm::sys::fs::make_absolute(written))
    return llvm::createStringError(ec, "cannot resolve %s", written.c_str());
  if (std::error_code ec = llvm::sys::fs::create_directory(written))
    return llvm::createStringError(ec, "cannot create %s", written.c_str());
  path = std::string(written);
  shown = std::string(named);
  return llvm::Error::success();
}

ManifestInputs stg::getEmittedInputs(
    llvm::StringRef input, llvm::StringRef prefix,
    std::vector<std::pair<std::string, std::string>> options) {
  ManifestInputs inputs;
  inputs.input = input.str();
  inputs.prefix = prefix.str();
  inputs.toolVersion = getToolVersion().str();
  inputs.commGroupsFile = prefix.str() + ".json";
  inputs.options = std::move(options);
  return inputs;
}

llvm::Error
stg::writeEmittedSet(llvm::StringRef directory, llvm::StringRef target,
                     EmittedPlan plan, const ProgramSet &programs,
                     const SystemSpec &system, const EmitOptions &emitOptions,
                     llvm::json::Value manifest, llvm::StringRef diskHint,
                     std::vector<EmittedPlan> &emitted) {
  std::string path, shown;
  if (llvm::Error err =
          createRankDirectory(directory, target, plan.rank, path, shown))
    return err;
  if (llvm::Error err = checkDiskSpace(
          directory, estimateTraceBytes(programs, emitOptions), diskHint))
    return err;
  if (llvm::Error err =
          writeAstraSetup(path, shown, system, programs.mesh.getNumRanks(),
                          emitOptions.prefix, *manifest.getAsObject()))
    return err;
  CommGroups groups(programs.mesh, programs.getUsedMasks());
  if (llvm::Error err = writeTraceSet(path, programs, groups, emitOptions,
                                      std::move(manifest)))
    return err;
  plan.directory = path;
  plan.prefix = emitOptions.prefix;
  plan.ranks = programs.mesh.getNumRanks();
  emitted.push_back(std::move(plan));
  return llvm::Error::success();
}

llvm::Expected<std::string> stg::findAstraSim(llvm::StringRef path) {
  llvm::SmallString<256> binary(path);
  if (llvm::sys::fs::is_directory(binary))
    llvm::sys::path::append(binary, "bin", AstraSimBinary);
  if (!llvm::sys::fs::can_execute(binary) ||
      llvm::sys::fs::is_directory(binary))
    return llvm::createStringError(
        std::errc::no_such_file_or_directory,
        "--astra-sim %s: no ASTRA-sim there (give the %s binary, or a "
        "directory with bin/%s)",
        path.str().c_str(), AstraSimBinary, AstraSimBinary);
  if (std::error_code ec = llvm::sys::fs::make_absolute(binary))
    return llvm::createStringError(ec, "--astra-sim %s", binary.c_str());
  return std::string(binary);
}

namespace {

/// What the simulator said of one trace set.
struct Simulated {
  uint64_t stepNanos = 0;
  unsigned finished = 0;
};

/// Changes the working directory for the simulator, and back.
class WorkingDirectory {
public:
  explicit WorkingDirectory(llvm::StringRef directory) {
    if (!llvm::sys::fs::current_path(previous))
      changed = !llvm::sys::fs::set_current_path(directory);
  }
  ~WorkingDirectory() {
    if (changed)
      (void)llvm::sys::fs::set_current_path(previous);
  }
  bool isChanged() const { return changed; }

private:
  llvm::SmallString<256> previous;
  bool changed = false;
};

} // namespace

/// The finished ranks and the last finish in `log`'s lines
/// "... sys[R] finished, T cycles ...".
static Simulated readLog(llvm::StringRef log) {
  Simulated result;
  std::set<unsigned> finished;
  llvm::SmallVector<llvm::StringRef, 0> lines;
  log.split(lines, '\n');
  for (llvm::StringRef line : lines) {
    size_t at = line.find("sys[");
    if (at == llvm::StringRef::npos)
      continue;
    llvm::StringRef rest = line.drop_front(at + 4);
    unsigned rank = 0;
    uint64_t cycles = 0;
    if (rest.consumeInteger(10, rank) || !rest.consume_front("] finished, ") ||
        rest.consumeInteger(10, cycles) || !rest.startswith(" cycles"))
      continue;
    finished.insert(rank);
    result.stepNanos = std::max(result.stepNanos, cycles);
  }
  result.finished = finished.size();
  return result;
}

/// ASTRA-sim on one trace set: every rank must finish.
static llvm::Expected<Simulated> simulate(const EmittedPlan &plan,
                                          llvm::StringRef simulator,
                                          unsigned timeoutSeconds) {
  llvm::SmallString<256> logPath(plan.directory);
  llvm::sys::path::append(logPath, "astra-sim.log");
  std::vector<std::string> args = {simulator.str()};
  for (std::string &argument : getAstraArguments(plan.directory, plan.prefix))
    args.push_back(std::move(argument));
  llvm::SmallVector<llvm::StringRef, 8> argRefs(args.begin(), args.end());
  llvm::Optional<llvm::StringRef> redirects[] = {
      llvm::StringRef(""), llvm::StringRef(logPath), llvm::StringRef(logPath)};
  std::string error;
  bool failed = false;
  int status = 0;
  {
    WorkingDirectory in(plan.directory);
    if (!in.isChanged())
      return llvm::createStringError(std::errc::io_error,
                                     "cannot run ASTRA-sim in %s",
                                     plan.directory.c_str());
    status = llvm::sys::ExecuteAndWait(simulator, argRefs, llvm::None,
                                       redirects, timeoutSeconds, 0, &error,
                                       &failed);
  }
  if (failed || status < 0)
    return llvm::createStringError(
        std::errc::io_error, "ASTRA-sim on rank-%u's traces: %s", plan.rank,
        status == -2 ? "did not finish in time" : error.c_str());
  auto log = llvm::MemoryBuffer::getFile(logPath);
  if (!log)
    return llvm::createStringError(log.getError(), "cannot read %s",
                                   logPath.c_str());
  Simulated result = readLog((*log)->getBuffer());
  if (result.finished != plan.ranks)
    return llvm::createStringError(
        std::errc::protocol_error,
        "ASTRA-sim finished %u of the %u ranks of rank-%u's traces (exit "
        "status %d; its output: %s)",
        result.finished, plan.ranks, plan.rank, status, logPath.c_str());
  return result;
}

llvm::Expected<uint64_t> stg::simulateTraceSet(const EmittedPlan &plan,
                                               llvm::StringRef simulator,
                                               unsigned timeoutSeconds) {
  llvm::Expected<Simulated> result = simulate(plan, simulator, timeoutSeconds);
  if (!result)
    return result.takeError();
  return result->stepNanos;
}

llvm::Error stg::verifyTopPlans(llvm::ArrayRef<EmittedPlan> plans,
                                llvm::StringRef simulator,
                                llvm::StringRef directory,
                                unsigned timeoutSeconds,
                                llvm::raw_ostream &os) {
  std::vector<uint64_t> simulated;
  for (const EmittedPlan &plan : plans) {
    llvm::Expected<uint64_t> nanos =
        simulateTraceSet(plan, simulator, timeoutSeconds);
    if (!nanos)
      return nanos.takeError();
    simulated.push_back(*nanos);
  }
  // ASTRA-sim's order: by its step, ties by the search's rank.
  std::vector<size_t> order(plans.size());
  std::iota(order.begin(), order.end(), 0);
  llvm::stable_sort(order, [&](size_t a, size_t b) {
    return simulated[a] < simulated[b];
  });
  std::vector<unsigned> astraRank(plans.size());
  for (size_t i = 0; i < order.size(); ++i)
    astraRank[order[i]] = unsigned(i + 1);

  os << "\nthe best " << plans.size() << " plans on ASTRA-sim (" << simulator
     << "):\n rank  stagec step  ASTRA-sim step  stagec/ASTRA-sim  "
        "ASTRA-sim rank  plan\n";
  llvm::json::Array rows;
  for (size_t i = 0; i < plans.size(); ++i) {
    const EmittedPlan &plan = plans[i];
    double stagec = plan.stepMicros, astra = simulated[i] / 1000.0;
    double ratio = astra > 0 ? stagec / astra : 0;
    os << llvm::formatv(" {0,4}  {1,9:f3} s  {2,12:f3} s  {3,16:f3}  {4,14}  "
                        "{5}\n",
                        plan.rank, stagec / 1e6, astra / 1e6, ratio,
                        astraRank[i], plan.label);
    rows.push_back(llvm::json::Object{
        {"rank", int64_t(plan.rank)},
        {"plan", plan.label},
        {"stagec_step_micros", plan.stepMicros},
        {"astra_sim_step_micros", astra},
        {"stagec_over_astra_sim", ratio},
        {"astra_sim_rank", int64_t(astraRank[i])},
        {"ranks", int64_t(plan.ranks)}});
  }
  bool sameOrder = llvm::is_sorted(order);
  os << (sameOrder ? "ASTRA-sim ranks them in the same order.\n"
                   : "ASTRA-sim ranks them in another order: see "
                     "docs/search.md (\"Checking the best plans on "
                     "ASTRA-sim\") for why the two can differ.\n");
  llvm::json::Object document{{"simulator", simulator.str()},
                              {"same_order", sameOrder},
                              {"plans", std::move(rows)}};
  return writeTextFile(directory, "verify.json", [&](llvm::raw_ostream &out) {
    out << llvm::formatv("{0:2}", llvm::json::Value(std::move(document)))
        << "\n";
  });
}
