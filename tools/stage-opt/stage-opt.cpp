//===- stage-opt.cpp - Parse an STG program, run passes, print the IR -----===//
//
// The workhorse of the lit tests: reads a `.stg` file (or `-` for stdin),
// builds the IR, runs the passes named by --passes and prints the result.
// Exit status 0 on success, 1 on any error in the input (with located
// diagnostics on stderr).
//
//===----------------------------------------------------------------------===//

#include "CommandLine.h"

#include "stg/IR/ParamCount.h"
#include "stg/IR/Printer.h"
#include "stg/Parse/Parser.h"
#include "stg/Passes/Pass.h"

#include "CLI/CLI.hpp"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

using namespace stg;

static std::string describePasses() {
  std::string text = "Passes:\n";
  for (const PassRegistry::Entry *entry : PassRegistry::global().getEntries())
    text += "  " + entry->name + std::string(22 - std::min<size_t>(entry->name.size(), 20), ' ') +
            entry->description + "\n";
  return text;
}

int main(int argc, char **argv) {
  CLI::App app{"stage-opt: parse an STG program, run passes, print the IR"};
  std::string input, pipeline;
  std::vector<std::string> includeDirs, sets;
  bool printLocations = false, printIR = true, printParamCount = false;
  PassManagerOptions passOptions;
  app.add_option("file", input, "the .stg file to read ('-' for stdin)")
      ->required();
  app.add_option("-I", includeDirs, "add a directory to the import search path");
  app.add_option("--set", sets, "override a dim or option: NAME=VALUE");
  app.add_option("--passes", pipeline,
                 "comma-separated passes to run, e.g. shape-infer");
  app.add_flag("--print-ir", printIR, "print the IR at the end (default)");
  app.add_flag("--print-after-all", passOptions.printAfterAll,
               "print the IR after every pass");
  app.add_flag("--verify-each", passOptions.verifyEach,
               "verify the IR after every pass");
  app.add_flag("--print-locs", printLocations,
               "append each op's source location");
  app.add_flag("--print-param-count", printParamCount,
               "print the model's trainable parameter count (dims bound)");
  app.footer(describePasses());
  addVersionFlag(app, "stage-opt");
  if (std::optional<int> status = parseCommandLine(app, "stage-opt", argc, argv))
    return *status;

  DiagnosticEngine diags(llvm::errs());
  diags.setProgramName("stage-opt");
  ParseOptions options;
  options.includeDirs = includeDirs;
  options.templateDirs = getDefaultTemplateDirs();
  for (const std::string &set : sets) {
    if (auto assignment = parseAssignment(set))
      options.overrides.push_back(std::move(*assignment));
    else
      diags.error({}, "--set expects NAME=VALUE, found '" + set + "'");
  }
  PassManager passes(passOptions);
  if (failed(passes.addPipeline(pipeline, diags)) || diags.hasErrors())
    return 1;

  std::unique_ptr<Module> module = parseFile(input, options, diags);
  if (!module || failed(passes.run(*module, diags)))
    return 1;

  if (printIR && !passOptions.printAfterAll) {
    PrintOptions printOptions;
    printOptions.printLocations = printLocations;
    printModule(llvm::outs(), *module, printOptions);
  }
  if (printParamCount) {
    Expr count = countParameters(*module);
    std::optional<Expr> bound = module->bindDims(count);
    llvm::outs() << "// parameters: "
                 << (bound ? module->getPrinter().str(*bound)
                           : module->getPrinter().str(count) +
                                 " (divides by zero with " +
                                 module->describeBindings(count) + ")")
                 << "\n";
  }
  return 0;
}
