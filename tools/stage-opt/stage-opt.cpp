//===- stage-opt.cpp - Parse an STG program, run passes, print the IR -----===//
//
// The workhorse of the lit tests: reads a `.stg` file (or `-` for stdin),
// builds the IR and prints it. Exit status 0 on success, 1 on any error in
// the input (with located diagnostics on stderr).
//
//===----------------------------------------------------------------------===//

#include "stg/IR/Printer.h"
#include "stg/Parse/Parser.h"

#include "CLI/CLI.hpp"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

using namespace stg;

int main(int argc, char **argv) {
  CLI::App app{"stage-opt: parse an STG program and print its IR"};
  std::string input;
  std::vector<std::string> includeDirs, sets;
  bool printLocations = false, printIR = true;
  app.add_option("file", input, "the .stg file to read ('-' for stdin)")
      ->required();
  app.add_flag("--print-ir", printIR, "print the IR (the default action)");
  app.add_option("-I", includeDirs, "add a directory to the import search path");
  app.add_option("--set", sets, "override a dim or option: NAME=VALUE");
  app.add_flag("--print-locs", printLocations,
               "append each op's source location");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError &e) {
    return app.exit(e) == 0 ? 0 : 1;
  }

  DiagnosticEngine diags(llvm::errs());
  diags.setProgramName("stage-opt");
  ParseOptions options;
  options.includeDirs = includeDirs;
  options.templateDirs = getDefaultTemplateDirs();
  for (const std::string &set : sets) {
    auto [name, value] = llvm::StringRef(set).split('=');
    if (name.empty() || value.empty() || set.find('=') == std::string::npos) {
      diags.error({}, "--set expects NAME=VALUE, found '" + set + "'");
      continue;
    }
    options.overrides.push_back({name.str(), value.str()});
  }
  if (diags.hasErrors())
    return 1;

  std::unique_ptr<Module> module;
  if (input == "-") {
    auto buffer = llvm::MemoryBuffer::getSTDIN();
    if (!buffer) {
      diags.error({}, "cannot read stdin: " + buffer.getError().message());
      return 1;
    }
    module = parseSource((*buffer)->getBuffer(), "<stdin>", options, diags);
  } else {
    module = parseFile(input, options, diags);
  }
  if (!module)
    return 1;

  PrintOptions printOptions;
  printOptions.printLocations = printLocations;
  printModule(llvm::outs(), *module, printOptions);
  return 0;
}
