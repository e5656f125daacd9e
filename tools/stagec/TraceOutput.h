//===- TraceOutput.h - What stagec's trace sets share -----------*- C++ -*-===//
//
// A training step's trace set and a serving window's are written alike:
// the manifest's inputs, the emitter's options from the same flags, one
// interrupt flag that stops the writers, and the report's closing line
// with the ASTRA-sim command.
//
//===----------------------------------------------------------------------===//

#ifndef STG_TOOLS_STAGEC_TRACEOUTPUT_H
#define STG_TOOLS_STAGEC_TRACEOUTPUT_H

#include "StagecOptions.h"

#include "stg/Emit/Manifest.h"
#include "stg/Emit/TraceEmitter.h"
#include "stg/IR/Module.h"
#include "stg/Support/Version.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <atomic>

namespace stg {

/// Set by an interrupt once writing has started: the writers stop and what
/// they wrote is removed.
inline std::atomic<bool> traceWritingInterrupted{false};

/// The manifest's inputs for `module` compiled with `options`.
inline ManifestInputs getManifestInputs(const StagecOptions &options,
                                        const Module &module) {
  ManifestInputs inputs;
  inputs.input = options.compile.input;
  inputs.prefix = options.prefix.empty() ? module.getModel()->getName().str()
                                         : options.prefix;
  inputs.toolVersion = getToolVersion().str();
  inputs.options = options.describe();
  inputs.commGroupsFile = inputs.prefix + ".json";
  return inputs;
}

/// The emitter's options from the output flags, files named `prefix`.
inline EmitOptions getEmitOptions(const StagecOptions &options,
                                  llvm::StringRef prefix) {
  EmitOptions emit;
  emit.prefix = prefix.str();
  emit.format = *parseTraceFormat(options.format);
  emit.gzip = options.gzip;
  emit.orderingAsDataDeps = options.orderingDeps == "data";
  emit.jobs = options.jobs;
  emit.ranks = options.ranks;
  emit.cancel = &traceWritingInterrupted;
  return emit;
}

/// With --report and --system, the command that runs ASTRA-sim on the set
/// (the manifest's `astra_sim.command`).
inline void printAstraCommand(const StagecOptions &options,
                              const llvm::json::Object &manifest) {
  if (!options.report || options.system.empty())
    return;
  if (const llvm::json::Object *astra = manifest.getObject("astra_sim"))
    if (auto command = astra->getString("command"))
      llvm::outs() << "\nASTRA-sim on these traces and this cluster:\n  "
                   << *command << "\n";
}

} // namespace stg

#endif // STG_TOOLS_STAGEC_TRACEOUTPUT_H
