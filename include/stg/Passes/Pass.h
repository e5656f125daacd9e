//===- Pass.h - Passes, their registry and the pass manager -----*- C++ -*-===//
//
// A pass transforms a Module in place and reports user-facing problems
// through the DiagnosticEngine. Passes are registered by name so that tools
// (`stage-opt --passes=a,b`) and other compilers that link these libraries
// can build pipelines from text, and add passes of their own to the same
// registry.
//
//===----------------------------------------------------------------------===//

#ifndef STG_PASSES_PASS_H
#define STG_PASSES_PASS_H

#include "stg/IR/Module.h"
#include "stg/Support/Diagnostics.h"
#include "stg/Support/LogicalResult.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace stg {

class Pass {
public:
  virtual ~Pass() = default;
  /// The registry name, e.g. `shape-infer`.
  virtual llvm::StringRef getName() const = 0;
  virtual LogicalResult run(Module &module, DiagnosticEngine &diags) = 0;
};

class PassRegistry {
public:
  using Factory = std::function<std::unique_ptr<Pass>()>;
  struct Entry {
    std::string name;
    std::string description;
    Factory factory;
  };

  /// The process-wide registry, holding the built-in passes of Passes.def.
  static PassRegistry &global();

  /// Adds a pass; returns false if the name is taken.
  bool registerPass(llvm::StringRef name, llvm::StringRef description,
                    Factory factory);
  const Entry *lookup(llvm::StringRef name) const;
  /// All entries, sorted by name.
  std::vector<const Entry *> getEntries() const;

private:
  std::vector<Entry> entries;
};

struct PassManagerOptions {
  bool printAfterAll = false; ///< Print the IR after every pass.
  bool verifyEach = false;    ///< Run the verifier after every pass.
  llvm::raw_ostream *printStream = nullptr; ///< Defaults to llvm::outs().
};

class PassManager {
public:
  explicit PassManager(PassManagerOptions options = {})
      : options(options) {}

  void addPass(std::unique_ptr<Pass> pass) {
    passes.push_back(std::move(pass));
  }
  /// Adds the passes named in `pipeline` (`a,b,c`) from `registry`;
  /// reports unknown names.
  LogicalResult addPipeline(llvm::StringRef pipeline, DiagnosticEngine &diags,
                            const PassRegistry &registry =
                                PassRegistry::global());
  /// Runs the passes in order; stops at the first that fails.
  LogicalResult run(Module &module, DiagnosticEngine &diags);

private:
  PassManagerOptions options;
  std::vector<std::unique_ptr<Pass>> passes;
};

/// The forward (inference) pipeline, as a `--passes` string.
llvm::StringRef getDefaultPipeline();
/// The pipeline of a training step: forward, backward, optimizer.
llvm::StringRef getTrainingPipeline();

} // namespace stg

#endif // STG_PASSES_PASS_H
