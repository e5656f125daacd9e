//===- DeviceModel.cpp - Kernel durations from a device's numbers ---------===//
//
// Built-in figures are the vendors' dense (not sparse) peaks and HBM
// bandwidths of the SXM/OAM parts; link bandwidth is the scale-up fabric per
// direction (NVLink 3/4/5, Infinity Fabric). The efficiencies are typical of
// large GEMMs and streaming kernels, not of any one library.
// docs/instantiation.md ("Device model") names the source of each figure.
//
//===----------------------------------------------------------------------===//

#include "stg/Perf/DeviceModel.h"

#include "stg/Instantiate/Instantiate.h"
#include "stg/Support/CheckedMath.h"
#include "stg/Support/InputFile.h"
#include "stg/Support/YAMLInput.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/MemoryBuffer.h"

#include <yaml-cpp/yaml.h>

#include <cassert>
#include <cmath>
#include <set>

using namespace stg;

void DeviceSpec::setPeakFlops(Precision precision, double flops) {
  if (precision == Precision::BF16)
    peakFlops = flops;
  else
    precisionPeaks[unsigned(precision)] = flops;
}

/// Dense TFLOP/s in Precision's order: tf32, bf16, fp16, fp8, mxfp8, mxfp6,
/// mxfp4, nvfp4; 0 where the device has no unit for the format.
using PeakTFlops = std::array<double, NumPrecisions>;

/// `device` with its peaks in every precision and its special function
/// units' exponentials a second, in 1e12. Its bf16 peak (peakFlops) stays
/// as the row gives it, so that durations do not move.
static DeviceSpec withPeaks(DeviceSpec device, const PeakTFlops &tflops,
                            double teraExponentials = 0) {
  device.exponentialRate = teraExponentials * 1e12;
  assert(std::abs(tflops[unsigned(Precision::BF16)] * 1e12 -
                  device.peakFlops) <= 1e-9 * device.peakFlops &&
         "a built-in device's bf16 peak is given twice, differently");
  for (unsigned index = 0; index < NumPrecisions; ++index)
    if (Precision(index) != Precision::BF16)
      device.setPeakFlops(Precision(index), tflops[index] * 1e12);
  return device;
}

llvm::ArrayRef<DeviceSpec> stg::getBuiltinDevices() {
  // name, bf16 FLOP/s, HBM B/s, link B/s, efficiencies, SMs/CUs, launch gap
  // (us; a typical figure between dependent kernels), HBM bytes (what the
  // GPU reports, nvidia-smi's total and rocm-smi's, which frameworks size
  // their caches from: the "80 GB" of an H100 is 81,559 MiB, 85.5e9 bytes,
  // the A100's 81,920 MiB, the H200's 143,771, the B200's 183,359, the
  // GB200's 189,471, the MI300X's 205,822,885,888 bytes; the B300's and
  // GB300's 288 GB and the MI355X's as their datasheets give them), host link
  // B/s a direction (the datasheets' PCIe generation x16, half their
  // bidirectional figure; a Grace superchip's NVLink-C2C, 900 GB/s both
  // ways, shared by its two GPUs); then the dense peaks. Hopper's and MI300X's
  // keep the ratios of their datasheets to the bf16 peak the roofline has
  // always used (989, 1307): the tensor cores run every format at one clock.
  // Last, exponentials in 1e12/s: SMs x exp2 results a clock and SM (16; 32
  // on Blackwell Ultra, NVIDIA's "Making Softmax More Efficient with NVIDIA
  // Blackwell Ultra") x the clock the bf16 peak implies (2048 bf16 FLOPs a
  // clock and SM on Ampere, 4096 on Hopper, 8192 on Blackwell): 1.41, 1.83,
  // 1.86 and, for GB200 and GB300, 2.06 GHz. None for the AMD parts.
  static const DeviceSpec devices[] = {
      // Peaks, TFLOP/s: tf32, bf16, fp16, fp8, mxfp8, mxfp6, mxfp4, nvfp4.
      withPeaks({"A100", 312e12, 2.039e12, 300e9, 0.7, 0.8, 108, 2,
                 85'899'345'920, 32e9},
                {156, 312, 312, 0, 0, 0, 0, 0}, 2.437),
      withPeaks({"H100", 989e12, 3.35e12, 450e9, 0.7, 0.8, 132, 2,
                 85'520'809'984, 64e9},
                {494.5, 989, 989, 1978, 0, 0, 0, 0}, 3.865),
      withPeaks({"H200", 989e12, 4.8e12, 450e9, 0.7, 0.8, 132, 2,
                 150'754'820'096, 64e9},
                {494.5, 989, 989, 1978, 0, 0, 0, 0}, 3.865),
      withPeaks({"B200", 2250e12, 8.0e12, 900e9, 0.7, 0.8, 148, 2,
                 192'265'846'784, 64e9},
                {1125, 2250, 2250, 4500, 4500, 4500, 9000, 9000}, 4.395),
      withPeaks({"GB200", 2500e12, 8.0e12, 900e9, 0.7, 0.8, 148, 2,
                 198'674'743'296, 225e9},
                {1250, 2500, 2500, 5000, 5000, 5000, 10000, 10000}, 4.883),
      // Blackwell Ultra: fp4 1.5x Blackwell's, the rest as Blackwell.
      withPeaks({"B300", 2250e12, 8.0e12, 900e9, 0.7, 0.8, 148, 2,
                 288'000'000'000, 64e9},
                {1125, 2250, 2250, 4500, 4500, 4500, 13500, 13500}, 8.790),
      withPeaks({"GB300", 2500e12, 8.0e12, 900e9, 0.7, 0.8, 148, 2,
                 288'000'000'000, 225e9},
                {1250, 2500, 2500, 5000, 5000, 5000, 15000, 15000}, 9.766),
      withPeaks({"MI300X", 1307e12, 5.3e12, 448e9, 0.6, 0.8, 304, 2,
                 205'822'885'888, 64e9},
                {653.5, 1307, 1307, 2614, 0, 0, 0, 0}),
      // 256 CUs at 2.4 GHz: 4096 bf16, 8192 fp8 and 16384 fp6/fp4 FLOPs a
      // CU and clock (AMD's 2.5, 5 and 10.1 PFLOP/s); no TF32 unit.
      withPeaks({"MI355X", 2516.5824e12, 8.0e12, 537.6e9, 0.6, 0.8, 256, 2,
                 288'000'000'000, 64e9},
                {0, 2516.5824, 2516.5824, 5033.1648, 5033.1648, 10066.3296,
                 10066.3296, 0}),
  };
  return devices;
}

const DeviceSpec *stg::lookupBuiltinDevice(llvm::StringRef name) {
  for (const DeviceSpec &device : getBuiltinDevices())
    if (name.equals_insensitive(device.name))
      return &device;
  return nullptr;
}

llvm::Expected<DeviceSpec> stg::loadDevice(llvm::StringRef nameOrFile) {
  if (const DeviceSpec *builtin = lookupBuiltinDevice(nameOrFile))
    return *builtin;
  if (!nameOrFile.endswith(".yaml") && !nameOrFile.endswith(".yml")) {
    std::string names;
    for (const DeviceSpec &device : getBuiltinDevices())
      names += (names.empty() ? "" : ", ") + device.name;
    return llvm::createStringError(std::errc::invalid_argument,
                                   "unknown device '%s' (built in: %s; or a "
                                   ".yaml file)",
                                   nameOrFile.str().c_str(), names.c_str());
  }
  auto text = readInputFile(nameOrFile, MaxSpecBytes, "device file");
  if (!text)
    return text.takeError();
  return parseDevice((*text)->getBuffer(), nameOrFile);
}

/// Reads `peak_tflops` into `device`: a number is the bf16 peak (and fp16's,
/// which every tensor core runs at the bf16 rate); a map gives the dense
/// TFLOP/s of each precision by name, bf16 required, fp16 the bf16 peak
/// unless given, and 0 (or leaving one out) for a format the device has no
/// unit for.
static llvm::Error readPeaks(const YAML::Node &node, llvm::StringRef file,
                             DeviceSpec &device) {
  // Finite and in a range real hardware spans: no NaN, infinity or
  // denormal reaches a duration.
  constexpr double Low = 1e-3, High = 1e6;
  if (!node.IsMap()) {
    std::optional<double> tflops = getNumberInRange(node, Low, High);
    if (!tflops)
      return makeYAMLError(file, node.Mark(),
                           describeNumberError("peak_tflops", node, Low, High));
    device.setPeakFlops(Precision::BF16, *tflops * 1e12);
    device.setPeakFlops(Precision::FP16, *tflops * 1e12);
    return llvm::Error::success();
  }
  bool hasBf16 = false, hasFp16 = false;
  for (const auto &entry : node) {
    std::string name = entry.first.Scalar();
    std::optional<Precision> precision = parsePrecision(name);
    if (!precision) {
      std::string names;
      for (unsigned index = 0; index < NumPrecisions; ++index)
        names += (index ? ", " : "") + getPrecisionName(Precision(index)).str();
      return makeYAMLError(file, entry.first.Mark(),
                           "unknown precision '" + name +
                               "' in 'peak_tflops' (" + names + ")");
    }
    // 0 says the device has no unit for the format; bf16 must have one.
    bool isBf16 = *precision == Precision::BF16;
    std::optional<double> tflops = getNumberInRange(entry.second, 0, High);
    if (!tflops || (*tflops < Low && (isBf16 || *tflops != 0))) {
      std::string key = "peak_tflops." + name;
      return makeYAMLError(file, entry.second.Mark(),
                           describeNumberError(key, entry.second, Low, High) +
                               (isBf16 ? "" : " (or 0: no such unit)"));
    }
    device.setPeakFlops(*precision, *tflops * 1e12);
    hasBf16 |= isBf16;
    hasFp16 |= *precision == Precision::FP16;
  }
  if (!hasBf16)
    return makeYAMLError(file, node.Mark(),
                         "'peak_tflops' has no 'bf16' (the peak the roofline uses)");
  if (!hasFp16)
    device.setPeakFlops(Precision::FP16, device.peakFlops);
  return llvm::Error::success();
}

llvm::Expected<DeviceSpec> stg::parseDevice(llvm::StringRef text,
                                            llvm::StringRef nameOrFile) {
  YAML::Node root;
  try {
    root = YAML::Load(text.str());
  } catch (const YAML::Exception &e) {
    return makeYAMLError(nameOrFile, e.mark, e.msg);
  }
  if (!root.IsMap())
    return makeYAMLError(nameOrFile, root.Mark(),
                         "expected a map of device fields");
  if (std::optional<YAML::Node> duplicate = findDuplicateKey(root))
    return makeYAMLError(nameOrFile, duplicate->Mark(),
                         "key '" + duplicate->Scalar() + "' is given twice");
  DeviceSpec device;
  device.name = "custom";
  // Each number finite and in a range real hardware spans: no NaN,
  // infinity or denormal reaches a duration.
  struct Field {
    const char *key;
    double *value;
    double scale, low, high;
    bool required;
  };
  Field fields[] = {
      {"memory_bandwidth_gbps", &device.memoryBandwidth, 1e9, 1e-3, 1e6, true},
      {"link_bandwidth_gbps", &device.linkBandwidth, 1e9, 1e-3, 1e6, true},
      {"host_bandwidth_gbps", &device.hostBandwidth, 1e9, 1e-3, 1e6, false},
      {"compute_efficiency", &device.computeEfficiency, 1, 0.01, 1, false},
      {"memory_efficiency", &device.memoryEfficiency, 1, 0.01, 1, false},
      {"low_precision_efficiency", &device.lowPrecisionEfficiency, 1, 0.01, 1,
       false},
      {"attention_efficiency", &device.attentionEfficiency, 1, 0.01, 1, false},
      {"attention_row_flops", &device.attentionRowFlops, 1, 0, 1e9, false},
      {"attention_backward_row_flops", &device.attentionBackwardRowFlops, 1, 0,
       1e9, false},
      {"exponential_tera_per_s", &device.exponentialRate, 1e12, 1e-3, 1e6,
       false},
      {"exponential_efficiency", &device.exponentialEfficiency, 1, 0.01, 1,
       false},
  };
  std::set<std::string> seen;
  for (const auto &entry : root) {
    std::string key = entry.first.as<std::string>("");
    seen.insert(key);
    if (key == "name") {
      device.name = entry.second.as<std::string>("");
      continue;
    }
    if (key == "peak_tflops") {
      if (llvm::Error error = readPeaks(entry.second, nameOrFile, device))
        return error;
      continue;
    }
    if (key == "launch_us") {
      std::optional<double> micros = getNumberInRange(entry.second, 0, 1000);
      if (!micros)
        return makeYAMLError(nameOrFile, entry.second.Mark(),
                             describeNumberError(key, entry.second, 0, 1000));
      device.launchMicros = *micros;
      continue;
    }
    if (key == "memory_gb") {
      std::optional<double> gigabytes = getNumberInRange(entry.second, 0, 1e6);
      if (!gigabytes)
        return makeYAMLError(nameOrFile, entry.second.Mark(),
                             describeNumberError(key, entry.second, 0, 1e6));
      device.memoryBytes = uint64_t(*gigabytes * 1e9);
      continue;
    }
    if (key == "compute_units") {
      std::optional<double> units = getNumberInRange(entry.second, 0, 100000);
      if (!units || *units != std::floor(*units))
        return makeYAMLError(
            nameOrFile, entry.second.Mark(),
            describeNumberError(key, entry.second, 0, 100000) +
                " (a whole number)");
      device.computeUnits = unsigned(*units);
      continue;
    }
    auto field = llvm::find_if(fields, [&](const Field &f) {
      return key == f.key;
    });
    if (field == std::end(fields))
      return makeYAMLError(nameOrFile, entry.first.Mark(),
                           "unknown key '" + key + "'");
    std::optional<double> number =
        getNumberInRange(entry.second, field->low, field->high);
    if (!number)
      return makeYAMLError(
          nameOrFile, entry.second.Mark(),
          describeNumberError(key, entry.second, field->low, field->high));
    *field->value = *number * field->scale;
  }
  if (!seen.count("peak_tflops"))
    return makeYAMLError(nameOrFile, root.Mark(), "missing 'peak_tflops'");
  for (const Field &field : fields)
    if (field.required && !seen.count(field.key))
      return makeYAMLError(nameOrFile, root.Mark(),
                           "missing '" + llvm::Twine(field.key) + "'");
  return device;
}

llvm::Expected<MeasuredKernels> MeasuredKernels::load(llvm::StringRef path) {
  auto buffer = readInputFile(path, MaxTableBytes, "measured-kernel table");
  if (!buffer)
    return buffer.takeError();
  return parse((*buffer)->getBuffer(), path);
}

llvm::Expected<MeasuredKernels> MeasuredKernels::parse(llvm::StringRef text,
                                                       llvm::StringRef path) {
  MeasuredKernels table;
  llvm::SmallVector<llvm::StringRef, 64> lines;
  text.split(lines, '\n');
  for (size_t index = 0; index < lines.size(); ++index) {
    llvm::StringRef line = lines[index].trim();
    if (line.empty() || line.startswith("#") ||
        (index == 0 && line.startswith("op_type")))
      continue;
    llvm::SmallVector<llvm::StringRef, 4> cells;
    line.split(cells, ',');
    auto bad = [&](const llvm::Twine &why) {
      return llvm::createStringError(
          std::errc::invalid_argument, "%s:%zu: %s", path.str().c_str(),
          index + 1, why.str().c_str());
    };
    if (cells.size() != 4)
      return bad("expected op_type,num_ops,tensor_size,micros");
    std::string opType = cells[0].trim().str();
    llvm::StringRef flopsText = cells[1].trim(), bytesText = cells[2].trim();
    int64_t flops = 0;
    uint64_t bytes = 0, micros = 0;
    if (flopsText != "*" && (flopsText.getAsInteger(10, flops) || flops < 0))
      return bad("num_ops '" + flopsText +
                 "' is not a non-negative integer or *");
    if (bytesText != "*" && bytesText.getAsInteger(10, bytes))
      return bad("tensor_size '" + bytesText +
                 "' is not a non-negative integer or *");
    // A day of one kernel is far past any measurement.
    constexpr uint64_t MaxMicros = 86400ull * 1000000;
    if (cells[3].trim().getAsInteger(10, micros) || micros > MaxMicros)
      return bad("micros '" + cells[3].trim() +
                 "' is not an integer from 0 to " + llvm::Twine(MaxMicros));
    if (flopsText == "*" && bytesText == "*")
      table.byType[opType] = micros;
    else if (bytesText == "*")
      table.byFlops[{opType, flops}] = micros;
    else if (flopsText == "*")
      table.byBytes[{opType, bytes}] = micros;
    else
      table.exact[{opType, flops, bytes}] = micros;
  }
  return table;
}

uint64_t MeasuredKernels::lookup(llvm::StringRef opType, int64_t flops,
                                 uint64_t bytes) const {
  std::string type = opType.str();
  if (auto it = exact.find({type, flops, bytes}); it != exact.end())
    return it->second;
  if (auto it = byFlops.find({type, flops}); it != byFlops.end())
    return it->second;
  if (auto it = byBytes.find({type, bytes}); it != byBytes.end())
    return it->second;
  if (auto it = byType.find(type); it != byType.end())
    return it->second;
  return 0;
}
