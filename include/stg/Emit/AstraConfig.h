//===- AstraConfig.h - ASTRA-sim configs for a system -----------*- C++ -*-===//
//
// With `--system`, `-o DIR` also gets `DIR/astra/`: the analytical
// backend's network.yml (a dimension per tier: GPUs per node, then nodes),
// system.json (the collective algorithm per dimension) and memory.json,
// describing the same cluster and placement the estimate used, so that
// ASTRA-sim runs on the traces as they are. The manifest and --report give
// the exact command (docs/astra-sim.md).
//
//===----------------------------------------------------------------------===//

#ifndef STG_EMIT_ASTRACONFIG_H
#define STG_EMIT_ASTRACONFIG_H

#include "stg/Perf/System.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

#include <string>
#include <vector>

namespace stg {

/// Writes network.yml, system.json and memory.json into `directory` (which
/// exists) for `numRanks` ranks on `system`. Fails if the ranks do not fill
/// whole nodes, which ASTRA-sim's dimensions cannot express.
llvm::Error writeAstraConfigs(llvm::StringRef directory,
                              const SystemSpec &system, unsigned numRanks);

/// The binary of ASTRA-sim's analytical backend the configs are for.
inline constexpr const char *AstraSimBinary =
    "AstraSim_Analytical_Congestion_Unaware";

/// The ASTRA-sim flags for the trace set `prefix` in `outputDir`, with the
/// configs in `outputDir/astra`.
std::vector<std::string> getAstraArguments(llvm::StringRef outputDir,
                                           llvm::StringRef prefix);

/// The ASTRA-sim command line of getAstraArguments.
std::string getAstraCommand(llvm::StringRef outputDir, llvm::StringRef prefix);

/// Writes `directory/astra/` and records in `manifest` the ASTRA-sim
/// command for the trace set `prefix` that will be at `target`; ranks that
/// do not fill whole nodes get a note in the manifest instead.
llvm::Error writeAstraSetup(llvm::StringRef directory, llvm::StringRef target,
                            const SystemSpec &system, unsigned numRanks,
                            llvm::StringRef prefix,
                            llvm::json::Object &manifest);

} // namespace stg

#endif // STG_EMIT_ASTRACONFIG_H
