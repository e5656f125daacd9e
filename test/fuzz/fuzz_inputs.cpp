//===- fuzz_inputs.cpp - libFuzzer targets for the data inputs ------------===//
//
// One source, five targets, chosen by STG_FUZZ_INPUT at compile time: the
// bytes are the text of a perturbation spec (YAML), a device file (YAML),
// a measured-kernel table (CSV), a communicator-group file (JSON) or a
// system (cluster) file (YAML), parsed as stagec and stage-et parse them. A
// spec that parses is also applied to a small two-stage program set, so the
// draws and the arithmetic on what they change run too. Errors are expected;
// the fuzzer looks for crashes, sanitizer reports, leaks and hangs.
//
//===----------------------------------------------------------------------===//

#include "FuzzSupport.h"

#if STG_FUZZ_INPUT == 4
#include "stg/Trace/TraceFiles.h"
#elif STG_FUZZ_INPUT == 5
#include "stg/Perf/StepEstimate.h"
#include "stg/Perf/System.h"
#else
#include "stg/Perf/DeviceModel.h"
#include "stg/Perturb/Perturbation.h"
#endif

#include "llvm/Support/raw_ostream.h"

using namespace stg;

namespace {

#if STG_FUZZ_INPUT == 1
/// Two stages of a compute node and a collective each, with a send and a
/// receive between them, for perturbations to change.
ProgramSet makePrograms() {
  ProgramSet programs;
  programs.mesh = Mesh({{"tp", 2}, {"pp", 2}});
  programs.pipelineAxis = 1;
  programs.numLayers = 2;
  programs.numMicrobatches = 2;
  programs.stages.resize(2);
  for (unsigned stage = 0; stage < 2; ++stage) {
    StageProgram &program = programs.stages[stage];
    program.stage = stage;
    program.layers = {stage};
    ProgramNode compute;
    compute.name = "matmul";
    compute.numOps = int64_t(1) << 40;
    compute.tensorBytes = uint64_t(1) << 30;
    compute.durationMicros = 1000;
    compute.layer = stage;
    compute.microbatch = 0;
    ProgramNode reduce;
    reduce.kind = ProgramNodeKind::Collective;
    reduce.name = "reduce";
    reduce.commBytes = int64_t(1) << 28;
    reduce.group = 1;
    reduce.layer = stage;
    reduce.dataDeps = {0};
    ProgramNode message;
    message.kind = stage == 0 ? ProgramNodeKind::Send : ProgramNodeKind::Recv;
    message.name = "message";
    message.commBytes = 1 << 20;
    message.peerStage = 1 - stage;
    message.layer = 1 - stage; // The neighbour's layer on the receiver.
    message.dataDeps = {1};
    program.nodes = {compute, reduce, message};
  }
  return programs;
}
#endif

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  llvm::StringRef text = fuzz::asText(data, size);
#if STG_FUZZ_INPUT == 1
  static const ProgramSet programs = makePrograms();
  static const DeviceSpec device = *lookupBuiltinDevice("H100");
  llvm::Expected<PerturbationSpec> spec =
      parsePerturbationSpec(text, "spec.yaml", 4, 2, 2);
  if (!spec) {
    llvm::consumeError(spec.takeError());
    return 0;
  }
  ProgramSet scaled = scalePrograms(programs, spec->scale);
  for (unsigned variant = 0; variant < 2; ++variant) {
    Perturber perturber(*spec, scaled, variant, &device);
    std::vector<std::vector<PerturbationRecord>> records(4);
    for (unsigned rank = 0; rank < 4; ++rank)
      (void)perturber.perturb(rank, records[rank]);
    writePerturbationRecords(llvm::nulls(), *spec, variant, records);
  }
#elif STG_FUZZ_INPUT == 2
  llvm::Expected<DeviceSpec> device = parseDevice(text, "device.yaml");
  if (!device) {
    llvm::consumeError(device.takeError());
    return 0;
  }
  (void)device->getKernelMicros(int64_t(1) << 50, uint64_t(1) << 40);
#elif STG_FUZZ_INPUT == 3
  llvm::Expected<MeasuredKernels> table =
      MeasuredKernels::parse(text, "kernels.csv");
  if (!table) {
    llvm::consumeError(table.takeError());
    return 0;
  }
  (void)table->lookup("einsum", 1 << 20, 1 << 10);
#elif STG_FUZZ_INPUT == 4
  llvm::Expected<CommGroups> groups = parseCommGroups(text, "groups.json");
  if (!groups)
    llvm::consumeError(groups.takeError());
#elif STG_FUZZ_INPUT == 5
  llvm::Expected<SystemSpec> system = parseSystem(text, "/nonexistent/c.yaml");
  if (!system) {
    llvm::consumeError(system.takeError());
    return 0;
  }
  // Price a collective over a group that spans nodes, and one inside.
  for (CollectiveKind kind :
       {CollectiveKind::AllReduce, CollectiveKind::AllGather,
        CollectiveKind::ReduceScatter, CollectiveKind::AllToAll}) {
    (void)getCollectiveMicros(kind, 1e9, {16, 2, 8}, *system);
    (void)getCollectiveMicros(kind, 1e9, {8, 1, 8}, *system);
  }
  (void)getMessageMicros(1e6, true, *system);
#else
#error                                                                         \
    "STG_FUZZ_INPUT must be 1 (spec), 2 (device), 3 (CSV), 4 (groups) or 5 (system)"
#endif
  return 0;
}
