//===- KernelTimes.cpp - A compute node's duration on a device ------------===//
//
// The roofline of DeviceModel.h, per kind of kernel and precision. A GEMM
// runs at its precision's dense peak times an efficiency: 16 bits and wider
// at computeEfficiency (calibrated on the A100 runs of Megatron-LM 2021),
// FP8 and FP4 at lowPrecisionEfficiency in training and at computeEfficiency
// in inference (static scales); a GEMM too small to fill the machine,
// even with its reduction split along K, leaves the rest of it idle
// (getWaveEfficiency). A low-precision GEMM's casts of its operands are
// memory-bound kernels of their own and add their time. A
// fused attention kernel reaches attentionEfficiency of its precision's
// peak (the softmax between its two products runs on slower units) and
// does fixed work per query row besides, which short sequences feel; its
// products cannot outrun the exponentials its softmax needs, one a kept
// score, at the special function units' rate (exponentialRate). Each
// kernel pays the device's launch gap, and says how it uses the device's
// SMs (getUnitUse: how many of them, over which part of its time), which
// decides how it slows beside kernels that hold some (HeldUnits.cpp).
// Linear GEMMs that share a kernel
// (--linear-kernels fused: q, k and v, gate and up, as engines load their
// weights) each take their share, by FLOPs, of that kernel's time. A
// table of measured kernels
// overrides all of this where it has an entry. The GEMM and attention
// terms are checked against kernels measured on an H100 and an H200
// (docs/data/gpu; KernelModelTest).
//
//===----------------------------------------------------------------------===//

#include "stg/Instantiate/Instantiate.h"
#include "stg/Perf/DeviceModel.h"
#include "stg/Support/CheckedMath.h"

#include "llvm/ADT/StringRef.h"

#include <algorithm>
#include <cmath>
#include <tuple>
#include <utility>

using namespace stg;

double DeviceSpec::getAchievableFlops(Precision precision,
                                      KernelKind kind) const {
  double peak = getPeakFlops(precision);
  if (!(peak > 0)) {
    // No unit for it: the operands are upcast to bf16.
    precision = Precision::BF16;
    peak = peakFlops;
  }
  switch (kind) {
  case KernelKind::Attention:
    return peak * attentionEfficiency;
  case KernelKind::Gemm:
    return peak * (isLowPrecision(precision) ? lowPrecisionEfficiency
                                             : computeEfficiency);
  case KernelKind::Other:
    return peak * computeEfficiency;
  }
  return peak * computeEfficiency;
}

uint64_t DeviceSpec::toKernelMicros(double micros) const {
  if (!(micros > 0))
    return 0; // No work: no kernel to launch.
  return std::max<uint64_t>(1, toCount(micros + launchMicros));
}

double DeviceSpec::getWaveEfficiency(const GemmShape &gemm) const {
  if (!computeUnits || !gemm.isGemm())
    return 1;
  auto ceilDiv = [](int64_t a, int64_t b) { return (a + b - 1) / b; };
  // Tiles past 2^53 would lose precision as doubles; such a GEMM fills any
  // machine anyway.
  double tiles = double(gemm.batch) * double(ceilDiv(gemm.m, 128)) *
                 double(ceilDiv(gemm.n, 256));
  // Stream-K (cuBLAS's kernels for such shapes) spreads the tiles' K
  // iterations over all units, so a GEMM leaves none idle once its tiles,
  // each split into pieces of 256 of K at least, outnumber the units
  // (measured on H100 and H200: 1024 x 2560 x 8192, 80 tiles, runs at a
  // large product's rate). Fewer pieces than units (a short K) leave the
  // rest idle.
  double pieces = tiles * std::max<double>(1, std::floor(double(gemm.k) / 256));
  return std::min<double>(1, pieces / computeUnits);
}

/// Work of `seconds`, `boundSeconds` of them bound by the compute units
/// with `unitShare` of them busy.
static DeviceSpec::KernelWork makeWork(double seconds, double boundSeconds,
                                       double unitShare) {
  DeviceSpec::KernelWork work;
  work.micros = seconds * 1e6;
  if (seconds > 0)
    work.boundShare = std::min(1.0, boundSeconds / seconds);
  work.unitShare = std::min(1.0, unitShare);
  return work;
}

/// The share of its units a kernel of `computeSeconds` keeps busy over
/// `seconds`: a memory-bound kernel's FLOPs need only part of them.
static double getUnitShare(double computeSeconds, double seconds) {
  return seconds > 0 ? computeSeconds / seconds : 1;
}

DeviceSpec::KernelWork DeviceSpec::getRooflineWork(double flops, uint64_t bytes,
                                                   Precision precision,
                                                   KernelKind kind) const {
  double computeSeconds = flops / getAchievableFlops(precision, kind);
  double memorySeconds = bytes / (memoryBandwidth * memoryEfficiency);
  double seconds = std::max(computeSeconds, memorySeconds);
  return makeWork(seconds, seconds, getUnitShare(computeSeconds, seconds));
}

uint64_t DeviceSpec::getKernelMicros(int64_t flops, uint64_t bytes,
                                     Precision precision,
                                     KernelKind kind) const {
  return toKernelMicros(
      getRooflineWork(double(flops), bytes, precision, kind).micros);
}

DeviceSpec::KernelWork
DeviceSpec::getAttentionWork(int64_t flops, uint64_t bytes, double queryRows,
                             bool backward, Precision precision,
                             double exponentials) const {
  double rowFlops = backward ? attentionBackwardRowFlops : attentionRowFlops;
  KernelWork roofline =
      getRooflineWork(double(flops) + queryRows * rowFlops, bytes, precision,
                      KernelKind::Attention);
  if (!(exponentialRate > 0))
    return roofline;
  // The special function units are the SMs' too.
  double exponentialSeconds =
      exponentials / (exponentialRate * exponentialEfficiency);
  if (exponentialSeconds * 1e6 > roofline.micros)
    return makeWork(exponentialSeconds, exponentialSeconds, 1);
  return roofline;
}

uint64_t DeviceSpec::getAttentionMicros(int64_t flops, uint64_t bytes,
                                        double queryRows, bool backward,
                                        Precision precision,
                                        double exponentials) const {
  return toKernelMicros(getAttentionWork(flops, bytes, queryRows, backward,
                                         precision, exponentials)
                            .micros);
}

DeviceSpec::KernelWork DeviceSpec::getGemmWork(int64_t flops, uint64_t bytes,
                                               const GemmShape &gemm,
                                               Precision precision,
                                               uint64_t castBytes) const {
  double wave = getWaveEfficiency(gemm);
  double rate = getAchievableFlops(precision, KernelKind::Gemm) * wave;
  double bandwidth = memoryBandwidth * memoryEfficiency;
  uint64_t gemmBytes = bytes - std::min(bytes, castBytes);
  double computeSeconds = flops / rate;
  double kernelSeconds = std::max(computeSeconds, gemmBytes / bandwidth);
  return makeWork(kernelSeconds + castBytes / bandwidth, kernelSeconds,
                  wave * getUnitShare(computeSeconds, kernelSeconds));
}

uint64_t DeviceSpec::getGemmMicros(int64_t flops, uint64_t bytes,
                                   const GemmShape &gemm, Precision precision,
                                   uint64_t castBytes) const {
  return toKernelMicros(
      getGemmWork(flops, bytes, gemm, precision, castBytes).micros);
}

DeviceSpec::KernelWork DeviceSpec::getSequentialWork(int64_t flops,
                                                     uint64_t bytes) const {
  double computeSeconds = flops / (peakFlops * computeEfficiency);
  return makeWork(computeSeconds + bytes / (memoryBandwidth * memoryEfficiency),
                  computeSeconds, 1);
}

uint64_t DeviceSpec::getSequentialKernelsMicros(int64_t flops,
                                                uint64_t bytes) const {
  return toKernelMicros(getSequentialWork(flops, bytes).micros);
}

NodeKernel stg::getNodeKernel(const ProgramNode &node) {
  llvm::StringRef opType = node.opType;
  // Unfused attention is several kernels, one after another.
  if (opType.startswith("attention_unfused"))
    return NodeKernel::Sequential;
  if (node.gemm.isGemm())
    return NodeKernel::Gemm;
  if (opType.startswith("attention"))
    return opType.endswith("_backward") ? NodeKernel::AttentionBackward
                                        : NodeKernel::Attention;
  return NodeKernel::Other;
}

DeviceSpec::KernelWork DeviceSpec::getNodeWork(const ProgramNode &node,
                                               unsigned attentionPasses) const {
  NodeKernel kernel = getNodeKernel(node);
  switch (kernel) {
  case NodeKernel::Sequential:
    return getSequentialWork(node.numOps, node.tensorBytes);
  case NodeKernel::Gemm:
    if (node.kernel.isShared()) {
      const SharedKernel &kernel = node.kernel;
      return getGemmWork(kernel.flops, kernel.bytes, kernel.gemm,
                         node.precision, kernel.castBytes);
    }
    return getGemmWork(node.numOps, node.tensorBytes, node.gemm, node.precision,
                       node.castBytes);
  case NodeKernel::Attention:
  case NodeKernel::AttentionBackward:
    return getAttentionWork(node.numOps, node.tensorBytes,
                            double(node.attentionRows) * attentionPasses,
                            kernel == NodeKernel::AttentionBackward,
                            node.precision, double(node.attentionExps));
  case NodeKernel::Other:
    break;
  }
  return getRooflineWork(double(node.numOps), node.tensorBytes, node.precision,
                         KernelKind::Other);
}

std::pair<uint64_t, UnitUse>
DeviceSpec::getNodeTime(const ProgramNode &node,
                        unsigned attentionPasses) const {
  KernelWork work = getNodeWork(node, attentionPasses);
  uint64_t micros = toKernelMicros(work.micros);
  if (node.kernel.isShared() && getNodeKernel(node) == NodeKernel::Gemm) {
    // Its share of the kernel it runs in, launch gap included.
    double share = double(node.numOps) / double(node.kernel.flops);
    micros = std::max<int64_t>(1, scaleCount(int64_t(micros), share));
  }
  return {micros, getUnitUse(work)};
}

UnitUse DeviceSpec::getUnitUse(const KernelWork &work) const {
  UnitUse use;
  if (!computeUnits || !(work.micros > 0))
    return use;
  use.busy = uint32_t(std::clamp(std::ceil(work.unitShare * computeUnits), 1.0,
                                 double(computeUnits)));
  use.unbound =
      uint16_t(std::clamp(std::round((1 - work.boundShare) * UnitUse::Scale),
                          0.0, double(UnitUse::Scale)));
  return use;
}

std::optional<Precision>
stg::findUnsupportedPrecision(const ProgramSet &programs,
                              const DeviceSpec &device) {
  for (const StageProgram &program : programs.stages)
    for (const ProgramNode &node : program.nodes)
      if (node.kind == ProgramNodeKind::Compute && node.numOps > 0 &&
          isLowPrecision(node.precision) && !device.supports(node.precision))
        return node.precision;
  return std::nullopt;
}

/// A compute node's time on `mesh`, from `measured` where it has the
/// kernel, else from the device's roofline; and how it uses the compute
/// units, from the roofline.
static std::pair<uint64_t, UnitUse>
getComputeTime(const ProgramNode &node, const Mesh &mesh,
               const DeviceSpec &device, const MeasuredKernels *measured) {
  unsigned passes =
      node.attentionRing ? mesh.getGroupSize(node.attentionRing) : 1;
  std::pair<uint64_t, UnitUse> time = device.getNodeTime(node, passes);
  if (uint64_t micros = measured ? measured->lookup(node.opType, node.numOps,
                                                    node.tensorBytes)
                                 : 0)
    time.first = micros;
  return time;
}

/// The device as `programs` use it. A served FP8 checkpoint carries its
/// scales, computed once offline, so an inference step's low-precision
/// GEMMs run at the kernel's own rate, as 16-bit ones do; the training
/// recipe's lower lowPrecisionEfficiency absorbs the scaling it does every
/// step (amax histories or a pass over each input, transposed copies).
static DeviceSpec getDeviceFor(const ProgramSet &programs,
                               const DeviceSpec &device) {
  DeviceSpec used = device;
  if (!programs.training)
    used.lowPrecisionEfficiency = device.computeEfficiency;
  return used;
}

void stg::applyDeviceModel(ProgramSet &programs, const DeviceSpec &spec,
                           const MeasuredKernels *measured) {
  DeviceSpec device = getDeviceFor(programs, spec);
  for (StageProgram &program : programs.stages)
    for (ProgramNode &node : program.nodes)
      if (node.kind == ProgramNodeKind::Compute)
        std::tie(node.durationMicros, node.unitUse) =
            getComputeTime(node, programs.mesh, device, measured);
}

void stg::applyDeviceModel(ProgramSet &programs, const DeviceSpec &spec,
                           const MeasuredKernels *measured,
                           const ProgramSources &sources) {
  if (sources.stages.size() != programs.stages.size())
    return applyDeviceModel(programs, spec, measured);
  DeviceSpec device = getDeviceFor(programs, spec);
  constexpr uint64_t Unpriced = ~uint64_t(0);
  std::vector<std::pair<uint64_t, UnitUse>> byQuery(sources.queries.size(),
                                                    {Unpriced, UnitUse()});
  for (size_t stage = 0; stage < programs.stages.size(); ++stage) {
    std::vector<ProgramNode> &nodes = programs.stages[stage].nodes;
    llvm::ArrayRef<uint32_t> queries = sources.stages[stage].nodeQueries;
    for (size_t id = 0; id < nodes.size(); ++id) {
      ProgramNode &node = nodes[id];
      if (node.kind != ProgramNodeKind::Compute)
        continue;
      if (queries[id] == ProgramSources::NoQuery) {
        std::tie(node.durationMicros, node.unitUse) =
            getComputeTime(node, programs.mesh, device, measured);
        continue;
      }
      std::pair<uint64_t, UnitUse> &time = byQuery[queries[id]];
      if (time.first == Unpriced)
        time = getComputeTime(node, programs.mesh, device, measured);
      std::tie(node.durationMicros, node.unitUse) = time;
    }
  }
}
