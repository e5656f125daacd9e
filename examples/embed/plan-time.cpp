//===- plan-time.cpp - Step time of a plan through stagec's libraries -----===//
//
// The other half of embedding: not a pass, but the compiler as a function.
// STG::Driver compiles a model for a plan into per-stage programs
// (STG::Instantiate), STG::Perf prices them on a device and replays one
// training step. No trace file is written.
//
//   plan-time FILE.stg DEVICE AXIS=DEGREE... [NAME=VALUE...]
//
// Arguments whose name is a mesh axis (dp, tp, pp, cp, ep) set its degree;
// any other NAME=VALUE overrides a dim.
//
//===----------------------------------------------------------------------===//

#include "stg/Driver/Compile.h"
#include "stg/Perf/DeviceModel.h"
#include "stg/Perf/StepEstimate.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"

int main(int argc, char **argv) {
  if (argc < 3) {
    llvm::errs() << "usage: plan-time FILE.stg DEVICE [AXIS=N|DIM=V ...]\n";
    return 1;
  }
  stg::CompileOptions options;
  options.input = argv[1];
  for (int i = 3; i < argc; ++i) {
    auto [name, value] = llvm::StringRef(argv[i]).split('=');
    unsigned degree = 0;
    bool isAxis = llvm::is_contained(
        llvm::ArrayRef<llvm::StringRef>{"dp", "tp", "pp", "cp", "ep"}, name);
    if (isAxis && llvm::to_integer(value, degree) && degree > 0)
      options.degrees.push_back({name.str(), degree});
    else
      options.overrides.push_back({name.str(), value.str()});
  }
  llvm::Expected<stg::DeviceSpec> device = stg::loadDevice(argv[2]);
  if (!device) {
    llvm::errs() << "plan-time: " << llvm::toString(device.takeError()) << "\n";
    return 1;
  }

  stg::DiagnosticEngine diags;
  std::optional<stg::CompiledModel> compiled =
      stg::compileModel(options, diags);
  if (!compiled)
    return 1;
  stg::applyDeviceModel(compiled->programs, *device, /*measured=*/nullptr);
  stg::SystemSpec system = stg::makeSingleDomainSystem(
      *device, compiled->programs.mesh.getNumRanks());
  llvm::Expected<stg::StepEstimate> step =
      stg::estimateStep(compiled->programs, system);
  if (!step) {
    llvm::errs() << "plan-time: " << llvm::toString(step.takeError()) << "\n";
    return 1;
  }
  llvm::outs() << "ranks: " << compiled->programs.mesh.getNumRanks() << "\n";
  for (size_t s = 0; s < step->stages.size(); ++s)
    llvm::outs() << "stage " << s << ": compute "
                 << llvm::format("%.3f", step->stages[s].computeMicros / 1e3)
                 << " ms, communication "
                 << llvm::format("%.3f",
                                 step->stages[s].communicationMicros / 1e3)
                 << " ms\n";
  llvm::outs() << "step: " << llvm::format("%.3f", step->stepMicros / 1e3)
               << " ms on " << device->name << "\n";
  return 0;
}
