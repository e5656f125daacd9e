//===- DevicePeaksTest.cpp - Dense peaks per precision, built-in and read -===//
//
// Every built-in device has a bf16 peak, the one durations use; the other
// precisions have the datasheets' peaks, 0 where the device has no unit
// for the format. A device file gives them as a number (bf16) or a map.
//
//===----------------------------------------------------------------------===//

#include "stg/Perf/DeviceModel.h"

#include "gtest/gtest.h"

using namespace stg;

namespace {

const DeviceSpec &getBuiltin(llvm::StringRef name) {
  const DeviceSpec *device = lookupBuiltinDevice(name);
  // The tests below name only devices that exist; a missing one fails here.
  EXPECT_TRUE(device) << name.str();
  static const DeviceSpec none;
  return device ? *device : none;
}

TEST(DevicePeaksTest, EveryBuiltinHasABf16PeakThatIsPeakFlops) {
  for (const DeviceSpec &device : getBuiltinDevices()) {
    EXPECT_GT(device.getPeakFlops(Precision::BF16), 0) << device.name;
    EXPECT_EQ(device.getPeakFlops(Precision::BF16), device.peakFlops)
        << device.name;
    EXPECT_TRUE(device.supports(Precision::BF16)) << device.name;
    // fp16 runs at the bf16 rate on every tensor core modelled.
    EXPECT_EQ(device.getPeakFlops(Precision::FP16), device.peakFlops)
        << device.name;
    // No format is slower than bf16 but tf32.
    for (unsigned index = 0; index < NumPrecisions; ++index) {
      Precision precision = Precision(index);
      double peak = device.getPeakFlops(precision);
      EXPECT_GE(peak, 0) << device.name;
      if (peak > 0 && precision != Precision::TF32) {
        EXPECT_GE(peak, device.peakFlops)
            << device.name << " " << getPrecisionName(precision).str();
      }
    }
  }
}

TEST(DevicePeaksTest, AmpereHasNoFp8AndHopperNoMicroscaling) {
  const DeviceSpec &a100 = getBuiltin("A100");
  EXPECT_DOUBLE_EQ(a100.getPeakFlops(Precision::TF32), 156e12);
  EXPECT_DOUBLE_EQ(a100.getPeakFlops(Precision::BF16), 312e12);
  for (Precision precision :
       {Precision::FP8, Precision::MXFP8, Precision::MXFP6, Precision::MXFP4,
        Precision::NVFP4}) {
    EXPECT_FALSE(a100.supports(precision)) << getPrecisionName(precision).str();
    EXPECT_EQ(a100.getPeakFlops(precision), 0);
  }
  for (const char *name : {"H100", "H200"}) {
    const DeviceSpec &hopper = getBuiltin(name);
    // One clock for every format: fp8 twice bf16, tf32 half.
    EXPECT_DOUBLE_EQ(hopper.getPeakFlops(Precision::FP8),
                     2 * hopper.getPeakFlops(Precision::BF16))
        << name;
    EXPECT_DOUBLE_EQ(hopper.getPeakFlops(Precision::TF32),
                     hopper.getPeakFlops(Precision::BF16) / 2)
        << name;
    for (Precision precision : {Precision::MXFP8, Precision::MXFP6,
                                Precision::MXFP4, Precision::NVFP4})
      EXPECT_FALSE(hopper.supports(precision))
          << name << " " << getPrecisionName(precision).str();
  }
  const DeviceSpec &mi300x = getBuiltin("MI300X");
  EXPECT_DOUBLE_EQ(mi300x.getPeakFlops(Precision::FP8), 2614e12);
  EXPECT_FALSE(mi300x.supports(Precision::MXFP4));
}

TEST(DevicePeaksTest, BlackwellComputesEveryFormat) {
  for (const char *name : {"B200", "GB200", "B300", "GB300"}) {
    const DeviceSpec &device = getBuiltin(name);
    for (unsigned index = 0; index < NumPrecisions; ++index)
      EXPECT_TRUE(device.supports(Precision(index)))
          << name << " " << getPrecisionName(Precision(index)).str();
    // MX fp8 and fp6 run at the fp8 rate; mxfp4 and nvfp4 at one fp4 rate.
    double fp8 = device.getPeakFlops(Precision::FP8);
    EXPECT_DOUBLE_EQ(fp8, 2 * device.peakFlops) << name;
    EXPECT_DOUBLE_EQ(device.getPeakFlops(Precision::MXFP8), fp8) << name;
    EXPECT_DOUBLE_EQ(device.getPeakFlops(Precision::MXFP6), fp8) << name;
    EXPECT_DOUBLE_EQ(device.getPeakFlops(Precision::MXFP4),
                     device.getPeakFlops(Precision::NVFP4))
        << name;
  }
  EXPECT_DOUBLE_EQ(getBuiltin("B200").getPeakFlops(Precision::NVFP4), 9e15);
  EXPECT_DOUBLE_EQ(getBuiltin("GB200").getPeakFlops(Precision::NVFP4), 10e15);
}

TEST(DevicePeaksTest, BlackwellUltraAndMI355XAreBuiltIn) {
  // Blackwell Ultra: Blackwell's bf16 and fp8, 1.5x its fp4, 288 GB.
  const DeviceSpec &b300 = getBuiltin("b300");
  EXPECT_EQ(b300.name, "B300");
  EXPECT_DOUBLE_EQ(b300.peakFlops, 2250e12);
  EXPECT_DOUBLE_EQ(b300.getPeakFlops(Precision::FP8), 4500e12);
  EXPECT_DOUBLE_EQ(b300.getPeakFlops(Precision::NVFP4), 13500e12);
  EXPECT_EQ(b300.memoryBytes, 288'000'000'000u);
  EXPECT_DOUBLE_EQ(b300.linkBandwidth, 900e9);
  const DeviceSpec &gb300 = getBuiltin("GB300");
  EXPECT_DOUBLE_EQ(gb300.peakFlops, 2500e12);
  EXPECT_DOUBLE_EQ(gb300.getPeakFlops(Precision::FP8), 5000e12);
  EXPECT_DOUBLE_EQ(gb300.getPeakFlops(Precision::NVFP4), 15000e12);
  EXPECT_DOUBLE_EQ(gb300.getPeakFlops(Precision::TF32), 1250e12);
  EXPECT_EQ(gb300.memoryBytes, 288'000'000'000u);
  EXPECT_DOUBLE_EQ(gb300.getPeakFlops(Precision::NVFP4) /
                       getBuiltin("GB200").getPeakFlops(Precision::NVFP4),
                   1.5);

  // MI355X: about 2.5 PFLOP/s bf16, 5 fp8, 10 mxfp6 and mxfp4; no tf32
  // (CDNA 4 has no XF32 unit) and no nvfp4.
  const DeviceSpec &mi355x = getBuiltin("MI355X");
  EXPECT_NEAR(mi355x.peakFlops, 2.5e15, 0.02e15);
  EXPECT_NEAR(mi355x.getPeakFlops(Precision::FP8), 5e15, 0.04e15);
  EXPECT_DOUBLE_EQ(mi355x.getPeakFlops(Precision::MXFP8),
                   mi355x.getPeakFlops(Precision::FP8));
  for (Precision precision : {Precision::MXFP6, Precision::MXFP4})
    EXPECT_NEAR(mi355x.getPeakFlops(precision), 10.1e15, 0.05e15);
  EXPECT_FALSE(mi355x.supports(Precision::TF32));
  EXPECT_FALSE(mi355x.supports(Precision::NVFP4));
  EXPECT_EQ(mi355x.computeUnits, 256u);
  EXPECT_EQ(mi355x.memoryBytes, 288'000'000'000u);
  EXPECT_DOUBLE_EQ(mi355x.memoryBandwidth, 8e12);
}

TEST(DevicePeaksTest, SetPeakFlopsOfBf16IsPeakFlops) {
  DeviceSpec device{"test", 100e12, 1e12, 1e9};
  device.setPeakFlops(Precision::BF16, 200e12);
  EXPECT_DOUBLE_EQ(device.peakFlops, 200e12);
  device.setPeakFlops(Precision::FP8, 400e12);
  EXPECT_DOUBLE_EQ(device.getPeakFlops(Precision::FP8), 400e12);
  EXPECT_FALSE(device.supports(Precision::NVFP4));
}

const char *const Bandwidths =
    "memory_bandwidth_gbps: 3350\nlink_bandwidth_gbps: 450\n";

llvm::Expected<DeviceSpec> parseWithPeaks(const std::string &peaks) {
  return parseDevice("name: gpu\n" + peaks + "\n" + Bandwidths, "gpu.yaml");
}

std::string parseError(const std::string &peaks) {
  llvm::Expected<DeviceSpec> device = parseWithPeaks(peaks);
  if (device)
    return "parsed";
  return llvm::toString(device.takeError());
}

TEST(DevicePeaksTest, ANumberIsTheBf16AndFp16Peak) {
  llvm::Expected<DeviceSpec> device = parseWithPeaks("peak_tflops: 989");
  ASSERT_TRUE(bool(device)) << llvm::toString(device.takeError());
  EXPECT_DOUBLE_EQ(device->peakFlops, 989e12);
  EXPECT_DOUBLE_EQ(device->getPeakFlops(Precision::FP16), 989e12);
  // Nothing said of the other formats: no unit for them.
  EXPECT_FALSE(device->supports(Precision::FP8));
  EXPECT_FALSE(device->supports(Precision::TF32));
}

TEST(DevicePeaksTest, AMapGivesEachPrecision) {
  llvm::Expected<DeviceSpec> device = parseWithPeaks(
      "peak_tflops: {tf32: 495, bf16: 989, fp8: 1979, nvfp4: 0}");
  ASSERT_TRUE(bool(device)) << llvm::toString(device.takeError());
  EXPECT_DOUBLE_EQ(device->peakFlops, 989e12);
  EXPECT_DOUBLE_EQ(device->getPeakFlops(Precision::TF32), 495e12);
  EXPECT_DOUBLE_EQ(device->getPeakFlops(Precision::FP8), 1979e12);
  // fp16 defaults to bf16; nvfp4 0 and mxfp4 unsaid: no unit.
  EXPECT_DOUBLE_EQ(device->getPeakFlops(Precision::FP16), 989e12);
  EXPECT_FALSE(device->supports(Precision::NVFP4));
  EXPECT_FALSE(device->supports(Precision::MXFP4));

  llvm::Expected<DeviceSpec> block = parseWithPeaks(
      "peak_tflops:\n  bf16: 2500\n  fp16: 2000\n  mxfp4: 10000");
  ASSERT_TRUE(bool(block)) << llvm::toString(block.takeError());
  EXPECT_DOUBLE_EQ(block->getPeakFlops(Precision::FP16), 2000e12);
  EXPECT_DOUBLE_EQ(block->getPeakFlops(Precision::MXFP4), 10000e12);
}

TEST(DevicePeaksTest, BadPeaksAreLocatedErrors) {
  EXPECT_EQ(parseError("peak_tflops: {bf16: 989, fp9: 1}"),
            "gpu.yaml:2:26: unknown precision 'fp9' in 'peak_tflops' (tf32, "
            "bf16, fp16, fp8, mxfp8, mxfp6, mxfp4, nvfp4)");
  EXPECT_EQ(parseError("peak_tflops: {bf16: 989, fp8: -5}"),
            "gpu.yaml:2:31: 'peak_tflops.fp8' must be a number from 0.001 to "
            "1e+06, found -5 (or 0: no such unit)");
  EXPECT_EQ(parseError("peak_tflops: {bf16: .nan}"),
            "gpu.yaml:2:21: 'peak_tflops.bf16' must be a number from 0.001 to "
            "1e+06, found .nan");
  EXPECT_EQ(parseError("peak_tflops: {bf16: 989, tf32: .inf}"),
            "gpu.yaml:2:32: 'peak_tflops.tf32' must be a number from 0.001 to "
            "1e+06, found .inf (or 0: no such unit)");
  // bf16 is the peak durations use: it must be there, and not 0.
  EXPECT_EQ(parseError("peak_tflops: {tf32: 495, fp8: 1979}"),
            "gpu.yaml:2:14: 'peak_tflops' has no 'bf16' (the peak the "
            "roofline uses)");
  EXPECT_EQ(parseError("peak_tflops: {bf16: 0}"),
            "gpu.yaml:2:21: 'peak_tflops.bf16' must be a number from 0.001 to "
            "1e+06, found 0");
  // Denormal-small peaks are not 0 and not real hardware.
  EXPECT_EQ(parseError("peak_tflops: {bf16: 1, fp8: 1e-320}"),
            "gpu.yaml:2:29: 'peak_tflops.fp8' must be a number from 0.001 to "
            "1e+06, found 1e-320 (or 0: no such unit)");
  EXPECT_EQ(parseError("peak_tflops: {bf16: 1, bf16: 2}"),
            "gpu.yaml:2:24: key 'bf16' is given twice");
  EXPECT_EQ(parseError("peak_tflops: [989]"),
            "gpu.yaml:2:14: 'peak_tflops' must be a number from 0.001 to "
            "1e+06, found a non-number");
}

} // namespace
