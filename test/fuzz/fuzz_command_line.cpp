//===- fuzz_command_line.cpp - libFuzzer target for stagec's flags --------===//
//
// The input is a command line, one argument per line, after
// `stagec MODEL`: MODEL is two small layers, each an MLP and experts (so
// that --ep, --deepep-mode and --two-batch-overlap reach their exchanges),
// written once to a temporary file. The flags are parsed as stagec parses
// them; when they parse, the model is compiled with them (no file is ever
// written: -o is dropped) and, with --device or --system, priced. Errors are expected; the
// fuzzer looks for crashes, sanitizer reports, leaks and hangs.
//
//===----------------------------------------------------------------------===//

#include "FuzzSupport.h"
#include "StagecOptions.h"

#include "stg/Driver/Compile.h"
#include "stg/Perf/DeviceModel.h"
#include "stg/Perf/StepEstimate.h"
#include "stg/Perf/System.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <string>
#include <vector>

using namespace stg;

static const char *const Model = R"(
dim B = 8, S = 16, D = 32, F = 64, E = 4, K = 2, FE = 16, L = 2;
axis dp, tp, ep, pp;
dim C = ceil(B * S * K / (E * dp * ep)) * dp * ep;
block layer(x: [B/(dp*ep), S, D]) -> [B/(dp*ep), S, D] {
  param w1: [D, F/tp];
  param w2: [F/tp, D];
  y: [B/(dp*ep), S, D] =
      einsum[bsf,fd->bsd](gelu(einsum[bsd,df->bsf](x, w1)), w2);
  param w_router: [D, E];
  logits: [B/(dp*ep), S, E] = einsum[bsd,de->bse](x, w_router);
  r = route[topk=K, experts=E](logits);
  d: [E/ep, C/dp, D] = dispatch[capacity = 100](x, r);
  param w_in: [E/ep, D, FE/tp];
  param w_out: [E/ep, FE/tp, D];
  o: [E/ep, C/dp, D] =
      einsum[ecf,efd->ecd](gelu(einsum[ecd,edf->ecf](d, w_in)), w_out);
  z: [B/(dp*ep), S, D] = combine(o, r);
  return add(add(x, y), z);
}
model stack {
  x: [B/(dp*ep), S, D] = input();
  repeat L { x = layer(x); }
  loss = cross_entropy(x);
}
)";

static std::string writeModel() {
  llvm::SmallString<128> path;
  int fd = -1;
  if (llvm::sys::fs::createTemporaryFile("stg-fuzz-cli", "stg", fd, path))
    abort();
  llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
  os << Model;
  return path.str().str();
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static const std::string model = writeModel();
  llvm::SmallVector<llvm::StringRef, 16> lines;
  fuzz::asText(data, size).split(lines, '\n', /*MaxSplit=*/31);
  std::vector<std::string> arguments = {"stagec", model};
  for (llvm::StringRef line : lines)
    arguments.push_back(line.str());
  std::vector<char *> argv;
  for (std::string &argument : arguments)
    argv.push_back(argument.data());
  argv.push_back(nullptr);

  StagecOptions options;
  if (parseStagecOptions(int(argv.size()) - 1, argv.data(), options))
    return 0;                    // --help, or an error it reported.
  options.compile.input = model; // A second positional argument is ignored.
  DiagnosticEngine diags(llvm::nulls());
  std::optional<CompiledModel> compiled = compileModel(options.compile, diags);
  if (!compiled || (options.device.empty() && options.system.empty()))
    return 0;
  std::optional<SystemSpec> system;
  if (!options.system.empty()) {
    llvm::Expected<SystemSpec> loaded = loadSystem(options.system);
    if (!loaded) {
      llvm::consumeError(loaded.takeError());
      return 0;
    }
    system = std::move(*loaded);
  } else {
    llvm::Expected<DeviceSpec> device = loadDevice(options.device);
    if (!device) {
      llvm::consumeError(device.takeError());
      return 0;
    }
    system =
        makeSingleDomainSystem(*device, compiled->programs.mesh.getNumRanks());
  }
  applyDeviceModel(compiled->programs, system->device, nullptr);
  llvm::Expected<StepEstimate> step = estimateStep(compiled->programs, *system);
  if (!step)
    llvm::consumeError(step.takeError());
  return 0;
}
