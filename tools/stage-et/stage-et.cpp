//===- stage-et.cpp - Inspect and verify Chakra execution traces ----------===//
//
// The command-line face of lib/Trace: `dump` prints a trace, `stats` sums
// traces up, `diff` compares two traces or trace directories, and `verify`
// checks a directory of per-rank traces against the output contract
// (docs/chakra-output.md, docs/stage-et.md). Exit status: 0 on success
// (identical traces for `diff`), 1 on problems found (differences for
// `diff`), 2 on a usage or read error.
//
//===----------------------------------------------------------------------===//

#include "CommandLine.h"

#include "stg/Trace/TraceDiff.h"
#include "stg/Trace/TraceDump.h"
#include "stg/Trace/TraceFiles.h"
#include "stg/Trace/TraceStats.h"
#include "stg/Trace/TraceVerifier.h"

#include "CLI/CLI.hpp"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

using namespace stg;

namespace {

constexpr int ExitProblems = 1;
constexpr int ExitError = 2;

int reportError(llvm::Error error) {
  llvm::errs() << "stage-et: error: " << llvm::toString(std::move(error))
               << '\n';
  return ExitError;
}

int runDump(const std::string &path, bool json) {
  llvm::Error error = dumpTrace(
      path, llvm::outs(), json ? TraceDumpFormat::JSON : TraceDumpFormat::Text);
  llvm::outs().flush();
  return error ? reportError(std::move(error)) : 0;
}

int runStats(const std::string &path, bool json) {
  std::vector<std::string> paths;
  if (llvm::sys::fs::is_directory(path)) {
    auto files = listTraceFiles(path);
    if (!files)
      return reportError(files.takeError());
    for (const TraceFileName &file : *files)
      paths.push_back(file.path);
    if (paths.empty())
      return reportError(llvm::createStringError(
          llvm::inconvertibleErrorCode(), "no .et or .et.gz files in " + path));
  } else {
    paths.push_back(path);
  }
  TraceStats total;
  total.name = "total (" + std::to_string(paths.size()) + " files)";
  llvm::json::Array perFile;
  for (const std::string &file : paths) {
    auto stats = computeTraceStats(file);
    if (!stats)
      return reportError(stats.takeError());
    if (json)
      perFile.push_back(toJSON(*stats));
    else
      printTraceStats(llvm::outs(), *stats);
    total.merge(*stats);
  }
  if (json)
    llvm::outs() << llvm::formatv(
        "{0:2}\n",
        llvm::json::Value(llvm::json::Object{{"files", std::move(perFile)},
                                             {"total", toJSON(total)}}));
  else if (paths.size() > 1)
    printTraceStats(llvm::outs(), total);
  return 0;
}

int runDiff(const std::string &before, const std::string &after) {
  auto differ = diffTracePaths(before, after, llvm::outs());
  llvm::outs().flush();
  if (!differ)
    return reportError(differ.takeError());
  return *differ ? ExitProblems : 0;
}

int runVerify(const std::string &dir, const TraceVerifyOptions &options) {
  if (!llvm::sys::fs::is_directory(dir))
    return reportError(llvm::createStringError(llvm::inconvertibleErrorCode(),
                                               dir + ": not a directory"));
  TraceVerifyReport report = verifyTraceDirectory(dir, options);
  report.print(llvm::outs());
  return report.succeeded() ? 0 : ExitProblems;
}

} // namespace

int main(int argc, char **argv) {
  CLI::App app{"stage-et: inspect, compare and verify Chakra execution traces "
               "(.et, .et.gz)"};
  app.require_subcommand(1);
  app.footer("Examples:\n"
             "  stage-et dump out/llama.0.et\n"
             "  stage-et dump --json out/llama.0.et.gz\n"
             "  stage-et stats out/\n"
             "  stage-et diff old/ new/\n"
             "  stage-et verify out/ --comm-groups out/llama.json\n"
             "Exit status: 0 success, 1 problems or differences found, "
             "2 usage or read error.");

  std::string dumpPath;
  bool dumpJSON = false;
  CLI::App *dump = app.add_subcommand(
      "dump", "print the GlobalMetadata and one line per node (id, type, "
              "name, deps, attributes)");
  dump->add_option("file", dumpPath, "the .et or .et.gz file")->required();
  dump->add_flag("--json", dumpJSON,
                 "print JSON as Chakra's jsonizer does (protobuf JSON)");

  std::string statsPath;
  bool statsJSON = false;
  CLI::App *stats = app.add_subcommand(
      "stats", "node counts by type, num_ops, tensor bytes, collective bytes "
               "by type and group, sends and recvs; per file and in total");
  stats->add_option("path", statsPath, "a trace file or a directory of them")
      ->required();
  stats->add_flag("--json", statsJSON, "print JSON");

  std::string before, after;
  CLI::App *diff = app.add_subcommand(
      "diff", "compare two traces (or two directories, file by file) by "
              "node id; exit 1 when they differ");
  diff->add_option("before", before, "the first file or directory")->required();
  diff->add_option("after", after, "the second file or directory")->required();

  std::string verifyDir;
  TraceVerifyOptions verifyOptions;
  CLI::App *verify = app.add_subcommand(
      "verify", "check every P.{rank}.et[.gz] in a directory and P.json "
                "against the output contract; exit 1 on any problem");
  verify->add_option("dir", verifyDir, "the directory of traces")->required();
  verify->add_option("--comm-groups", verifyOptions.commGroupsPath,
                     "the communicator-group file (default: DIR/P.json)");
  verify->add_option("--max-problems", verifyOptions.maxProblemsPerKind,
                     "problems printed per kind (default: 10)")
      ->check(wholeNumber(0, 1000000));

  addVersionFlag(app, "stage-et");
  useToolErrorFormat(app, "stage-et");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError &e) {
    return app.exit(e) == 0 ? 0 : ExitError;
  }
  if (*dump)
    return runDump(dumpPath, dumpJSON);
  if (*stats)
    return runStats(statsPath, statsJSON);
  if (*diff)
    return runDiff(before, after);
  return runVerify(verifyDir, verifyOptions);
}
