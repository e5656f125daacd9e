//===- DeviceModel.h - Kernel durations from a device's numbers -*- C++ -*-===//
//
// With a device model, stagec fills each compute node's `duration_micros`,
// so ASTRA-sim's replay mode works as well as its roofline mode. The
// duration is a roofline: the larger of the time at the device's achievable
// FLOP rate and the time at its achievable memory bandwidth,
//
//   micros = max(num_ops / (peak_flops * compute_efficiency),
//                tensor_size / (memory_bandwidth * memory_efficiency)) * 1e6
//
// rounded up to a whole microsecond (the schema's unit). A measured table
// (CSV, as collected with a profiler on a real GPU) overrides the roofline
// wherever it has an entry for the kernel (the STAGE paper's section IV-E:
// real values plugged into the symbolic graph).
//
// A device also has a dense peak per precision (tf32 to nvfp4; 0 where it
// has no unit for the format); a kernel runs at its own precision's
// (KernelTimes.cpp), MFU reads the bf16 one, peakFlops.
//
// Devices come built in (A100, H100, H200, B200, GB200, B300, GB300, MI300X,
// MI355X) or from a YAML file with the same fields; see docs/instantiation.md
// ("Device model"), which names the source of every built-in figure.
//
//===----------------------------------------------------------------------===//

#ifndef STG_PERF_DEVICEMODEL_H
#define STG_PERF_DEVICEMODEL_H

#include "stg/IR/Precision.h"
#include "stg/Instantiate/Program.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <array>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>

namespace stg {

struct ProgramSources;

struct DeviceSpec {
  std::string name;
  double peakFlops = 0;          ///< Dense bf16 FLOP/s.
  double memoryBandwidth = 0;    ///< HBM bytes/s.
  double linkBandwidth = 0;      ///< Scale-up bytes/s per direction.
  double computeEfficiency = 0.7; ///< Fraction of peak large kernels reach.
  double memoryEfficiency = 0.8;
  /// Streaming multiprocessors (compute units); 0 leaves GEMMs unquantised.
  unsigned computeUnits = 0;
  /// Added to every kernel: the gap between dependent kernels that a
  /// launch leaves (without CUDA graphs).
  double launchMicros = 0;
  /// Device memory (HBM) in bytes; 0 when not known.
  uint64_t memoryBytes = 0;
  /// Bytes/s per direction between the device and its host's memory
  /// (PCIe, or NVLink-C2C on Grace superchips); 0 when not known. Serving
  /// offloads KV cache blocks over it.
  double hostBandwidth = 0;
  /// Fraction of a narrower-than-16-bit peak (FP8, FP4) large GEMMs reach:
  /// lower than computeEfficiency, as the scaling in the GEMM's epilogue
  /// and the narrower operands' tiles leave more of the machine idle.
  /// Fitted on NVIDIA's H100 FP8 runs (docs/validation.md): the kernel
  /// alone reaches 0.66 (measured, docs/data/gpu); the rest is the
  /// recipe's scaling work around it.
  double lowPrecisionEfficiency = 0.49;
  /// Fraction of the peak a fused attention kernel's products reach: its
  /// softmax runs on the slower units between them. Besides its FLOPs, a
  /// kernel does fixed work per query row (batch x heads x queries):
  /// loading and storing the row's tiles and softmax statistics, in the
  /// backward also the row's dO.O sums and fp32 dQ accumulation, which
  /// makes short sequences slower. The three constants are fitted on
  /// cuDNN's fused attention measured on an H100 (docs/data/gpu,
  /// docs/validation.md), as FLOPs at the kernel's rate.
  double attentionEfficiency = 0.58;
  double attentionRowFlops = 1.4e5;
  double attentionBackwardRowFlops = 1.0e6;
  /// Exponentials/s of the special function units (SMs x their exp2
  /// results a clock x the clock the bf16 peak implies), which a fused
  /// attention's softmax needs one of a kept score: its products cannot
  /// outrun them, at exponentialEfficiency of the rate. 0 when not known
  /// (no bound). The efficiency is set from cuDNN 9.13's attention on a
  /// B200 (docs/validation.md).
  double exponentialRate = 0;
  double exponentialEfficiency = 0.55;

  /// What a compute kernel is, for the efficiency that applies to it.
  enum class KernelKind { Gemm, Attention, Other };

  /// The FLOP rate a kernel of `kind` reaches in `precision`: the peak
  /// times the kind's efficiency. A precision without a unit runs at the
  /// bf16 rate (its operands upcast); the tools refuse such a recipe first.
  double getAchievableFlops(Precision precision, KernelKind kind) const;
  /// Dense FLOP/s in each precision, indexed by Precision; 0 where the
  /// device has no unit for the format. The BF16 entry is unused:
  /// peakFlops holds that peak, which MFU and the roofline read. Read and
  /// write through getPeakFlops and setPeakFlops.
  std::array<double, NumPrecisions> precisionPeaks{};

  /// The dense peak in `precision`, FLOP/s; 0 if the device cannot compute
  /// in it.
  double getPeakFlops(Precision precision) const {
    return precision == Precision::BF16 ? peakFlops
                                        : precisionPeaks[unsigned(precision)];
  }
  void setPeakFlops(Precision precision, double flops);
  /// Whether the device has tensor cores for `precision` (A100 has none for
  /// fp8, Hopper none for the MX formats, MI355X none for tf32 or nvfp4).
  bool supports(Precision precision) const {
    return getPeakFlops(precision) > 0;
  }

  /// The fraction of the machine a GEMM keeps busy: its output tiles
  /// (128 x 256), each split along K into pieces of 256 or more, spread
  /// over the units (cuBLAS's stream-K); all of it once the pieces
  /// outnumber the units. 1 without compute units.
  double getWaveEfficiency(const GemmShape &gemm) const;

  /// The roofline duration of a kernel, in whole microseconds (at least 1
  /// for any work).
  uint64_t getKernelMicros(int64_t flops, uint64_t bytes,
                           Precision precision = Precision::BF16,
                           KernelKind kind = KernelKind::Other) const;
  /// The duration of kernels that run one after another, some bound by
  /// compute and some by memory (an unfused attention: the two products,
  /// then softmax and dropout over the scores): the times add where one
  /// kernel's would overlap.
  uint64_t getSequentialKernelsMicros(int64_t flops, uint64_t bytes) const;
  /// A GEMM's roofline duration at the share of the units it keeps busy
  /// (getWaveEfficiency). A low-precision GEMM's casts (`castBytes` of
  /// `bytes`) are kernels of their own, bound by memory, and add to it.
  uint64_t getGemmMicros(int64_t flops, uint64_t bytes, const GemmShape &gemm,
                         Precision precision = Precision::BF16,
                         uint64_t castBytes = 0) const;
  /// A fused attention kernel's duration: its FLOPs and fixed work per
  /// query row (`queryRows`, over all its passes; the backward's heavier)
  /// at the attention rate, or its softmax's `exponentials` at theirs, or
  /// its bytes at the memory's, whichever is longest.
  uint64_t getAttentionMicros(int64_t flops, uint64_t bytes, double queryRows,
                              bool backward, Precision precision,
                              double exponentials) const;
  /// A compute node's roofline duration, by its kind and precision; a
  /// fused attention runs `attentionPasses` kernels over its queries (a
  /// context-parallel ring's steps).
  uint64_t getNodeMicros(const ProgramNode &node,
                         unsigned attentionPasses = 1) const {
    return getNodeTime(node, attentionPasses).first;
  }
  /// How a compute node's kernel uses the device's compute units (zero
  /// without them): all of them over all of its time when its FLOPs bound
  /// it; a GEMM too small to fill the machine keeps its share busy; a
  /// kernel bound by memory keeps busy those its FLOPs need over the time
  /// its bytes take, as fewer units still draw the whole bandwidth
  /// (measured: docs/data/gpu/h200-held-sms.csv); a low-precision GEMM's
  /// casts and unfused attention's memory-bound kernels add time no unit
  /// bounds.
  UnitUse getUnitUse(const ProgramNode &node,
                     unsigned attentionPasses = 1) const {
    return getNodeTime(node, attentionPasses).second;
  }
  /// getNodeMicros and getUnitUse together.
  std::pair<uint64_t, UnitUse> getNodeTime(const ProgramNode &node,
                                           unsigned attentionPasses = 1) const;

  /// A kernel's work before its launch gap: its time, the share of that
  /// time its compute units bound, and the share of them it keeps busy
  /// then.
  struct KernelWork {
    double micros = 0;
    double boundShare = 0;
    double unitShare = 0;
  };

private:
  /// Whole microseconds of a kernel that works `micros`, launch included:
  /// 0 for no work, else at least 1.
  uint64_t toKernelMicros(double micros) const;
  /// A kernel of `flops` (fractional: attention's row work) and `bytes`
  /// at the roofline of its kind.
  KernelWork getRooflineWork(double flops, uint64_t bytes, Precision precision,
                             KernelKind kind) const;
  KernelWork getSequentialWork(int64_t flops, uint64_t bytes) const;
  KernelWork getGemmWork(int64_t flops, uint64_t bytes, const GemmShape &gemm,
                         Precision precision, uint64_t castBytes) const;
  KernelWork getAttentionWork(int64_t flops, uint64_t bytes, double queryRows,
                              bool backward, Precision precision,
                              double exponentials) const;
  /// The work of the kernel `node` runs in (a shared kernel's whole).
  KernelWork getNodeWork(const ProgramNode &node,
                         unsigned attentionPasses) const;
  UnitUse getUnitUse(const KernelWork &work) const;
};

/// How DeviceSpec::getNodeMicros prices a compute node: unfused attention
/// as kernels one after another (getSequentialKernelsMicros), a GEMM
/// (getGemmMicros), a fused attention's forward or backward
/// (getAttentionMicros) or another kernel (getKernelMicros).
enum class NodeKernel { Sequential, Gemm, Attention, AttentionBackward, Other };
NodeKernel getNodeKernel(const ProgramNode &node);

/// The built-in devices, by name.
llvm::ArrayRef<DeviceSpec> getBuiltinDevices();
const DeviceSpec *lookupBuiltinDevice(llvm::StringRef name);

/// A built-in device's name, or a YAML file of a DeviceSpec's fields:
///   name: my-gpu
///   peak_tflops: 989        # dense bf16 (fp16 the same), or a map of
///                           # precisions: {tf32: 494.5, bf16: 989, fp8: 1978}
///   memory_bandwidth_gbps: 3350
///   link_bandwidth_gbps: 450
///   compute_efficiency: 0.7 # optional
///   memory_efficiency: 0.8  # optional
///   compute_units: 132      # optional: SMs, for small GEMMs' split of K
///   launch_us: 2            # optional: added to every kernel
///   low_precision_efficiency, attention_efficiency, attention_row_flops,
///   attention_backward_row_flops  # optional: DeviceSpec's fitted fields
llvm::Expected<DeviceSpec> loadDevice(llvm::StringRef nameOrFile);
/// The device of a YAML text, as loadDevice reads a file; errors name
/// `name`, line and column.
llvm::Expected<DeviceSpec> parseDevice(llvm::StringRef text,
                                       llvm::StringRef name);

/// Measured kernel durations: `op_type,num_ops,tensor_size,micros` rows
/// (a header line is allowed; `*` in num_ops or tensor_size matches any).
class MeasuredKernels {
public:
  static llvm::Expected<MeasuredKernels> load(llvm::StringRef path);
  /// The table of a CSV text; errors name `name` and the line.
  static llvm::Expected<MeasuredKernels> parse(llvm::StringRef text,
                                               llvm::StringRef name);

  /// The measured duration of a kernel, or 0 if the table has none.
  uint64_t lookup(llvm::StringRef opType, int64_t flops, uint64_t bytes) const;
  size_t size() const {
    return exact.size() + byFlops.size() + byBytes.size() + byType.size();
  }

private:
  std::map<std::tuple<std::string, int64_t, uint64_t>, uint64_t> exact;
  std::map<std::string, uint64_t> byType; ///< Rows with both wildcards.
  std::map<std::pair<std::string, int64_t>, uint64_t> byFlops;
  std::map<std::pair<std::string, uint64_t>, uint64_t> byBytes;
};

/// The first low precision (a recipe's: FP8, FP4) a compute node of
/// `programs` runs in that `device` has no unit for (FP8 on an A100), if
/// any: the tools refuse it rather than price it. Wider formats without a
/// unit (tf32 on a device file that gives bf16 alone) run at bf16's rate.
std::optional<Precision> findUnsupportedPrecision(const ProgramSet &programs,
                                                  const DeviceSpec &device);

/// Fills `durationMicros` of every compute node: from `measured` where it
/// has the kernel, else from the device's roofline.
void applyDeviceModel(ProgramSet &programs, const DeviceSpec &device,
                      const MeasuredKernels *measured);
/// As above, pricing each query of `sources` (the set's, from
/// instantiate) once: the nodes built from one op have its numbers, so its
/// time. Plain applyDeviceModel if the sources do not cover the set.
void applyDeviceModel(ProgramSet &programs, const DeviceSpec &device,
                      const MeasuredKernels *measured,
                      const ProgramSources &sources);

} // namespace stg

#endif // STG_PERF_DEVICEMODEL_H
