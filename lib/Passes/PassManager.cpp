//===- PassManager.cpp - The pass registry and manager --------------------===//

#include "stg/Passes/Pass.h"
#include "stg/Passes/Passes.h"

#include "stg/IR/Printer.h"
#include "stg/IR/Verifier.h"

#include "llvm/ADT/STLExtras.h"

using namespace stg;

PassRegistry &PassRegistry::global() {
  static PassRegistry *registry = [] {
    auto *r = new PassRegistry();
#define STAGE_PASS(NAME, FACTORY, DESCRIPTION)                                 \
  r->registerPass(NAME, DESCRIPTION, [] { return FACTORY(); });
#include "stg/Passes/Passes.def"
    return r;
  }();
  return *registry;
}

bool PassRegistry::registerPass(llvm::StringRef name,
                                llvm::StringRef description, Factory factory) {
  if (lookup(name))
    return false;
  entries.push_back({name.str(), description.str(), std::move(factory)});
  return true;
}

const PassRegistry::Entry *PassRegistry::lookup(llvm::StringRef name) const {
  for (const Entry &entry : entries)
    if (entry.name == name)
      return &entry;
  return nullptr;
}

std::vector<const PassRegistry::Entry *> PassRegistry::getEntries() const {
  std::vector<const Entry *> sorted;
  for (const Entry &entry : entries)
    sorted.push_back(&entry);
  llvm::sort(sorted, [](const Entry *a, const Entry *b) {
    return a->name < b->name;
  });
  return sorted;
}

LogicalResult PassManager::addPipeline(llvm::StringRef pipeline,
                                       DiagnosticEngine &diags,
                                       const PassRegistry &registry) {
  llvm::SmallVector<llvm::StringRef, 8> names;
  pipeline.split(names, ',', -1, /*KeepEmpty=*/false);
  bool ok = true;
  for (llvm::StringRef name : names) {
    name = name.trim();
    const PassRegistry::Entry *entry = registry.lookup(name);
    if (!entry) {
      std::string known;
      for (const PassRegistry::Entry *e : registry.getEntries())
        known += (known.empty() ? "" : ", ") + e->name;
      diags.error({}, "unknown pass '" + name + "' (known: " + known + ")");
      ok = false;
      continue;
    }
    addPass(entry->factory());
  }
  return success(ok);
}

LogicalResult PassManager::run(Module &module, DiagnosticEngine &diags) {
  llvm::raw_ostream &os = options.printStream ? *options.printStream
                                              : llvm::outs();
  for (const auto &pass : passes) {
    if (failed(pass->run(module, diags)) || diags.hasErrors())
      return failure();
    if (options.verifyEach && failed(verifyModule(module, diags))) {
      diags.error({}, "the IR is invalid after pass '" + pass->getName() + "'");
      return failure();
    }
    if (options.printAfterAll) {
      os << "// ----- IR after " << pass->getName() << " ----- //\n";
      printModule(os, module);
    }
  }
  return success();
}

llvm::StringRef stg::getDefaultPipeline() {
  return "shape-infer,distribute,match-collectives";
}

llvm::StringRef stg::getTrainingPipeline() {
  return "shape-infer,autodiff,distribute,match-collectives,optimizer";
}
