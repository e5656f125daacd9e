//===- main.cpp - collective-census: stagec's passes plus our own ---------===//
//
// Registers the example pass in stagec's registry, so that it can be named
// in a pipeline next to the built-in passes, then parses a .stg file and
// runs `shape-infer,distribute,match-collectives,collective-census`.
//
//===----------------------------------------------------------------------===//

#include "CollectiveCensus.h"

#include "stg/Parse/Parser.h"

int main(int argc, char **argv) {
  if (argc < 2) {
    llvm::errs() << "usage: collective-census FILE.stg [NAME=VALUE ...]\n";
    return 1;
  }
  stg::PassRegistry::global().registerPass(
      "collective-census", "count collectives by kind and group",
      [] { return createCollectiveCensusPass(llvm::outs()); });

  stg::DiagnosticEngine diags;
  stg::ParseOptions options;
  options.templateDirs = stg::getDefaultTemplateDirs();
  for (int i = 2; i < argc; ++i) {
    auto [name, value] = llvm::StringRef(argv[i]).split('=');
    options.overrides.push_back({name.str(), value.str()});
  }
  std::unique_ptr<stg::Module> module = stg::parseFile(argv[1], options, diags);
  if (!module)
    return 1;

  stg::PassManager passes;
  std::string pipeline = stg::getDefaultPipeline().str() + ",collective-census";
  if (stg::failed(passes.addPipeline(pipeline, diags)) ||
      stg::failed(passes.run(*module, diags)))
    return 1;
  return 0;
}
