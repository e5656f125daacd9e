//===- ServeCommand.h - `stagec --mode serve` --------------------*- C++ -*-===//
//
// The serving estimate: the flags that describe the requests, the engine
// and the deployment, their checks, and the run (lib/Serve) that prints
// the report and writes `--report-json` and `--timeline`.
//
//===----------------------------------------------------------------------===//

#ifndef STG_TOOLS_STAGEC_SERVECOMMAND_H
#define STG_TOOLS_STAGEC_SERVECOMMAND_H

#include "StagecOptions.h"

#include "stg/Support/Diagnostics.h"

#include <optional>
#include <string>

namespace CLI {
class App;
} // namespace CLI

namespace stg {

void addServeFlags(CLI::App &app, ServeFlags &flags);

/// What is wrong with the serving flags given (or given without --mode
/// serve), or nothing.
std::optional<std::string> checkServeFlags(const CLI::App &app,
                                           const StagecOptions &options);

/// Runs `--mode serve`; the exit status.
int runServe(const StagecOptions &options, DiagnosticEngine &diags);

} // namespace stg

#endif // STG_TOOLS_STAGEC_SERVECOMMAND_H
