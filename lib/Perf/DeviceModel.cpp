//===- DeviceModel.cpp - Kernel durations from a device's numbers ---------===//
//
// Built-in figures are the vendors' dense (not sparse) bf16 peaks and HBM
// bandwidths of the SXM/OAM parts; link bandwidth is the scale-up fabric per
// direction (NVLink 3/4/5, Infinity Fabric). The efficiencies are typical of
// large GEMMs and streaming kernels, not of any one library.
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

#include <cmath>
#include <set>

using namespace stg;

llvm::ArrayRef<DeviceSpec> stg::getBuiltinDevices() {
  static const DeviceSpec devices[] = {
      // name, bf16 FLOP/s, HBM B/s, link B/s, efficiencies, SMs/CUs,
      // launch gap (us; a typical figure between dependent kernels), HBM
      // bytes (B200 and GB200 as their DGX and NVL72 systems give them).
      {"A100", 312e12, 2.039e12, 300e9, 0.7, 0.8, 108, 2, 80'000'000'000},
      {"H100", 989e12, 3.35e12, 450e9, 0.7, 0.8, 132, 2, 80'000'000'000},
      {"H200", 989e12, 4.8e12, 450e9, 0.7, 0.8, 132, 2, 141'000'000'000},
      {"B200", 2250e12, 8.0e12, 900e9, 0.7, 0.8, 148, 2, 180'000'000'000},
      {"GB200", 2500e12, 8.0e12, 900e9, 0.7, 0.8, 148, 2, 186'000'000'000},
      {"MI300X", 1307e12, 5.3e12, 448e9, 0.6, 0.8, 304, 2, 192'000'000'000},
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
  struct Field {
    const char *key;
    double *value;
    double scale;
    bool required;
  };
  Field fields[] = {
      {"peak_tflops", &device.peakFlops, 1e12, true},
      {"memory_bandwidth_gbps", &device.memoryBandwidth, 1e9, true},
      {"link_bandwidth_gbps", &device.linkBandwidth, 1e9, true},
      {"compute_efficiency", &device.computeEfficiency, 1, false},
      {"memory_efficiency", &device.memoryEfficiency, 1, false},
  };
  std::set<std::string> seen;
  for (const auto &entry : root) {
    std::string key = entry.first.as<std::string>("");
    seen.insert(key);
    if (key == "name") {
      device.name = entry.second.as<std::string>("");
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
    // Finite and in a range real hardware spans: no NaN, infinity or
    // denormal reaches a duration.
    bool isEfficiency = field->scale == 1;
    double low = isEfficiency ? 0.01 : 1e-3, high = isEfficiency ? 1 : 1e6;
    std::optional<double> number = getNumberInRange(entry.second, low, high);
    if (!number)
      return makeYAMLError(nameOrFile, entry.second.Mark(),
                           describeNumberError(key, entry.second, low, high));
    double value = *number;
    *field->value = value * field->scale;
  }
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

// TEMPORARY until the devices carry their peaks per precision.
double DeviceSpec::getPeakFlops(Precision precision) const {
  switch (precision) {
  case Precision::TF32: return peakFlops / 2;
  case Precision::BF16:
  case Precision::FP16: return peakFlops;
  case Precision::FP8: return name == "A100" ? 0 : 2 * peakFlops;
  default: return 0;
  }
}
