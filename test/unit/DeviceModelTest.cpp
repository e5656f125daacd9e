//===- DeviceModelTest.cpp - Roofline durations and measured kernels ------===//

#include "stg/Perf/DeviceModel.h"

#include "ScratchDirectoryTest.h"

#include "llvm/Support/raw_ostream.h"

#include "gtest/gtest.h"

#include <fstream>

using namespace stg;

namespace {

/// An FP8 GEMM of `flops` that fills any machine, with `castBytes` of
/// casts.
ProgramNode makeGemmForUnits(int64_t flops, uint64_t castBytes) {
  ProgramNode node;
  node.opType = "einsum";
  node.numOps = flops;
  node.tensorBytes = castBytes + 1000;
  node.castBytes = castBytes;
  node.precision = Precision::FP8;
  node.gemm = {1, 128 * 1000, 256, 4096};
  return node;
}

TEST(DeviceModelTest, RooflineTakesTheSlowerOfComputeAndMemory) {
  DeviceSpec device{"test", 100e12, 1e12, 100e9, 0.5, 0.5};
  // 100 TFLOP at 50 TFLOP/s achievable: 2 s, compute-bound.
  EXPECT_EQ(device.getKernelMicros(100'000'000'000'000, 1000), 2'000'000u);
  // 1 GB at 0.5 TB/s achievable: 2000 us, memory-bound.
  EXPECT_EQ(device.getKernelMicros(1000, 1'000'000'000), 2000u);
  // Any work takes at least a microsecond; none takes none.
  EXPECT_EQ(device.getKernelMicros(10, 10), 1u);
  EXPECT_EQ(device.getKernelMicros(0, 0), 0u);
}

TEST(DeviceModelTest, AGemmThatFillsTheMachineHasNoIdleTail) {
  // 132 SMs and 128 x 256 tiles: 133 tiles are a wave and one tile, whose
  // K iterations stream-K spreads over the units (measured on H100 and
  // H200, docs/data/gpu), so the GEMM runs at the full rate.
  const DeviceSpec *h100 = lookupBuiltinDevice("H100");
  ASSERT_TRUE(h100);
  EXPECT_EQ(h100->computeUnits, 132u);
  EXPECT_DOUBLE_EQ(h100->getWaveEfficiency({1, 128 * 132, 256, 4096}), 1.0);
  EXPECT_DOUBLE_EQ(h100->getWaveEfficiency({1, 128 * 133, 256, 4096}), 1.0);
  EXPECT_DOUBLE_EQ(h100->getWaveEfficiency({2, 128 * 66, 200, 64}), 1.0);
  EXPECT_DOUBLE_EQ(h100->getWaveEfficiency(GemmShape()), 1.0);
  int64_t flops = 2 * int64_t(128 * 133) * 256 * 4096;
  EXPECT_EQ(h100->getGemmMicros(flops, 0, {1, 128 * 133, 256, 4096}),
            h100->getKernelMicros(flops, 0));
}

TEST(DeviceModelTest, AGemmOfLessThanAWaveIsSplitAlongK) {
  const DeviceSpec *h100 = lookupBuiltinDevice("H100");
  ASSERT_TRUE(h100);
  // 128 tokens through a 4096 x 4096 weight: 16 tiles of 16 pieces of K
  // each, more than the 132 units.
  EXPECT_DOUBLE_EQ(h100->getWaveEfficiency({1, 128, 4096, 4096}), 1.0);
  // A short K leaves nothing to split: 16 tiles, one piece of K = 256.
  EXPECT_DOUBLE_EQ(h100->getWaveEfficiency({1, 128, 4096, 256}), 16.0 / 132);
  // K = 1024 gives 4 pieces a tile.
  EXPECT_DOUBLE_EQ(h100->getWaveEfficiency({1, 128, 4096, 1024}), 64.0 / 132);
}

TEST(DeviceModelTest, EveryKernelPaysItsLaunch) {
  // A tiny kernel on an H100 takes its launch gap (2 us) and a little more;
  // no work takes nothing.
  const DeviceSpec *h100 = lookupBuiltinDevice("H100");
  ASSERT_TRUE(h100);
  EXPECT_EQ(h100->getKernelMicros(1000, 1000), 3u);
  EXPECT_EQ(h100->getKernelMicros(0, 0), 0u);
  llvm::Expected<DeviceSpec> custom =
      parseDevice("peak_tflops: 100\nmemory_bandwidth_gbps: 1000\n"
                  "link_bandwidth_gbps: 100\nlaunch_us: 10\n"
                  "compute_units: 80\n",
                  "gpu.yaml");
  ASSERT_TRUE(bool(custom)) << llvm::toString(custom.takeError());
  EXPECT_DOUBLE_EQ(custom->launchMicros, 10.0);
  EXPECT_EQ(custom->computeUnits, 80u);
  EXPECT_EQ(custom->getKernelMicros(1000, 1000), 11u);
  llvm::Expected<DeviceSpec> bad =
      parseDevice("peak_tflops: 100\nmemory_bandwidth_gbps: 1000\n"
                  "link_bandwidth_gbps: 100\ncompute_units: 1.5\n",
                  "gpu.yaml");
  ASSERT_FALSE(bool(bad));
  EXPECT_NE(llvm::toString(bad.takeError()).find("gpu.yaml:4:16:"),
            std::string::npos);
}

// A fused attention's products cannot outrun the exponentials of its
// softmax, one a kept score: the special function units' rate bounds FP8
// attention on Blackwell, where the tensor cores doubled and the SFUs did
// not; Blackwell Ultra doubles them.
TEST(DeviceModelTest, AttentionCannotOutrunItsExponentials) {
  // A billion kept scores of head size 128: 512 FLOPs each.
  const double exponentials = 1e9, flops = 512 * exponentials;
  auto micros = [&](const char *name, Precision precision) {
    return double(lookupBuiltinDevice(name)->getAttentionMicros(
        int64_t(flops), 0, 0, false, precision, exponentials));
  };
  // B200 in FP8: products 196 us at 0.58 of 4.5 PFLOP/s, exponentials
  // 414 us at 0.55 of 148 x 16 x 1.856 GHz; the launch gap besides.
  EXPECT_NEAR(micros("B200", Precision::FP8), 1e9 / (4.395e12 * 0.55) * 1e6 + 2,
              1);
  // Its bf16 products (393 us) are barely shorter than the exponentials.
  EXPECT_NEAR(micros("B200", Precision::BF16),
              1e9 / (4.395e12 * 0.55) * 1e6 + 2, 1);
  // Blackwell Ultra's doubled SFUs halve an exponential-bound kernel.
  EXPECT_NEAR(micros("B200", Precision::FP8) / micros("B300", Precision::FP8),
              2.0, 0.02);
  // An H100's bf16 attention is bound by its products (893 us), as
  // without the bound.
  DeviceSpec h100 = *lookupBuiltinDevice("H100");
  double bound = double(h100.getAttentionMicros(int64_t(flops), 0, 0, false,
                                                Precision::BF16, exponentials));
  h100.exponentialRate = 0;
  EXPECT_EQ(bound,
            double(h100.getAttentionMicros(int64_t(flops), 0, 0, false,
                                           Precision::BF16, exponentials)));
  EXPECT_NEAR(bound, flops / (989e12 * 0.58) * 1e6 + 2, 1);
  // A device file gives the rate and its efficiency, each checked.
  const std::string base = "peak_tflops: 100\nmemory_bandwidth_gbps: 1000\n"
                           "link_bandwidth_gbps: 100\n";
  llvm::Expected<DeviceSpec> custom =
      parseDevice(base + "exponential_tera_per_s: 2\n"
                         "exponential_efficiency: 0.5\n",
                  "gpu.yaml");
  ASSERT_TRUE(bool(custom)) << llvm::toString(custom.takeError());
  EXPECT_DOUBLE_EQ(custom->exponentialRate, 2e12);
  EXPECT_DOUBLE_EQ(custom->exponentialEfficiency, 0.5);
  llvm::Expected<DeviceSpec> bad =
      parseDevice(base + "exponential_efficiency: 2\n", "gpu.yaml");
  ASSERT_FALSE(bool(bad));
  EXPECT_NE(llvm::toString(bad.takeError()).find("gpu.yaml:4:"),
            std::string::npos);
}

// The link to host memory (serving's KV offload): the built-ins' from
// their datasheets, a device file's read and checked.
TEST(DeviceModelTest, DevicesKnowTheirHostLink) {
  EXPECT_DOUBLE_EQ(lookupBuiltinDevice("H100")->hostBandwidth, 64e9);
  EXPECT_DOUBLE_EQ(lookupBuiltinDevice("A100")->hostBandwidth, 32e9);
  // A Grace superchip's NVLink-C2C, 900 GB/s both ways for two GPUs.
  EXPECT_DOUBLE_EQ(lookupBuiltinDevice("GB200")->hostBandwidth, 225e9);
  const std::string base = "peak_tflops: 100\nmemory_bandwidth_gbps: 1000\n"
                           "link_bandwidth_gbps: 100\n";
  llvm::Expected<DeviceSpec> none = parseDevice(base, "gpu.yaml");
  ASSERT_TRUE(bool(none)) << llvm::toString(none.takeError());
  EXPECT_EQ(none->hostBandwidth, 0);
  llvm::Expected<DeviceSpec> custom =
      parseDevice(base + "host_bandwidth_gbps: 50\n", "gpu.yaml");
  ASSERT_TRUE(bool(custom)) << llvm::toString(custom.takeError());
  EXPECT_DOUBLE_EQ(custom->hostBandwidth, 50e9);
  llvm::Expected<DeviceSpec> bad =
      parseDevice(base + "host_bandwidth_gbps: nan\n", "gpu.yaml");
  ASSERT_FALSE(bool(bad));
  EXPECT_NE(llvm::toString(bad.takeError()).find("gpu.yaml:4:"),
            std::string::npos);
}

// A device file may set the attention kernel's fitted constants; each is
// checked where it is read.
TEST(DeviceModelTest, DeviceFilesSetAttentionsRowWork) {
  const std::string base = "peak_tflops: 100\nmemory_bandwidth_gbps: 1000\n"
                           "link_bandwidth_gbps: 100\n";
  llvm::Expected<DeviceSpec> custom =
      parseDevice(base + "attention_efficiency: 0.5\n"
                         "attention_row_flops: 2e5\n"
                         "attention_backward_row_flops: 3e6\n",
                  "gpu.yaml");
  ASSERT_TRUE(bool(custom)) << llvm::toString(custom.takeError());
  EXPECT_DOUBLE_EQ(custom->attentionEfficiency, 0.5);
  EXPECT_DOUBLE_EQ(custom->attentionRowFlops, 2e5);
  EXPECT_DOUBLE_EQ(custom->attentionBackwardRowFlops, 3e6);
  for (const char *bad : {"attention_row_flops: -1\n",
                          "attention_backward_row_flops: .nan\n",
                          "attention_row_flops: 1e12\n"}) {
    llvm::Expected<DeviceSpec> refused = parseDevice(base + bad, "gpu.yaml");
    ASSERT_FALSE(bool(refused)) << bad;
    EXPECT_NE(llvm::toString(refused.takeError()).find("gpu.yaml:4:"),
              std::string::npos)
        << bad;
  }
}

TEST(DeviceModelTest, BuiltinDevicesByNameInAnyCase) {
  const DeviceSpec *h100 = lookupBuiltinDevice("h100");
  ASSERT_TRUE(h100);
  EXPECT_EQ(h100->name, "H100");
  EXPECT_DOUBLE_EQ(h100->peakFlops, 989e12);
  for (const char *name : {"A100", "H200", "B200", "MI300X"})
    EXPECT_TRUE(lookupBuiltinDevice(name)) << name;
  llvm::Expected<DeviceSpec> unknown = loadDevice("Z80");
  ASSERT_FALSE(bool(unknown));
  EXPECT_NE(llvm::toString(unknown.takeError()).find("unknown device 'Z80'"),
            std::string::npos);
}

class MeasuredKernelsTest : public ScratchDirectoryTest {
protected:
  std::string writeTable(const char *text) {
    std::string file = path("kernels.csv");
    std::ofstream(file) << text;
    return file;
  }
};

TEST_F(MeasuredKernelsTest, ExactRowsWinOverWildcards) {
  auto table = MeasuredKernels::load(writeTable(
      "op_type,num_ops,tensor_size,micros\n"
      "einsum,100,20,7\n"
      "einsum,100,*,8\n"
      "einsum,*,20,9\n"
      "elementwise,*,*,3\n"));
  ASSERT_TRUE(bool(table)) << llvm::toString(table.takeError());
  EXPECT_EQ(table->size(), 4u);
  EXPECT_EQ(table->lookup("einsum", 100, 20), 7u);
  EXPECT_EQ(table->lookup("einsum", 100, 21), 8u);
  EXPECT_EQ(table->lookup("einsum", 99, 20), 9u);
  EXPECT_EQ(table->lookup("elementwise", 5, 5), 3u);
  EXPECT_EQ(table->lookup("attention", 100, 20), 0u);
}

TEST_F(MeasuredKernelsTest, BadRowsNameTheLine) {
  auto table = MeasuredKernels::load(writeTable("einsum,100,20,7\n"
                                                "einsum,lots,20,7\n"));
  ASSERT_FALSE(bool(table));
  std::string message = llvm::toString(table.takeError());
  EXPECT_NE(message.find("kernels.csv:2: num_ops 'lots' is not a "
                         "non-negative integer or *"),
            std::string::npos)
      << message;
}

TEST_F(MeasuredKernelsTest, NumbersOutOfRangeAreErrors) {
  for (const char *row : {"einsum,-5,20,7", "einsum,5,20,-7",
                          "einsum,5,20,99999999999999"}) {
    std::string text = std::string(row) + "\n";
    auto table = MeasuredKernels::load(writeTable(text.c_str()));
    ASSERT_FALSE(bool(table)) << row;
    std::string message = llvm::toString(table.takeError());
    EXPECT_NE(message.find("kernels.csv:1: "), std::string::npos) << message;
  }
}

TEST(DeviceModelTest, ApplyFillsEveryComputeNodeByRoofline) {
  ProgramSet programs;
  programs.stages.resize(1);
  ProgramNode einsum, add;
  einsum.opType = "einsum";
  einsum.numOps = 2'000'000'000'000;
  einsum.tensorBytes = 1000;
  add.opType = "elementwise";
  add.numOps = 10;
  add.tensorBytes = 1'000'000'000;
  programs.stages[0].nodes = {einsum, add};
  DeviceSpec device{"test", 1e12, 1e12, 1e9, 1.0, 1.0};
  applyDeviceModel(programs, device, nullptr);
  EXPECT_EQ(programs.stages[0].nodes[0].durationMicros, 2'000'000u);
  EXPECT_EQ(programs.stages[0].nodes[1].durationMicros, 1000u);
  // A device that counts no compute units says nothing of their use.
  EXPECT_EQ(programs.stages[0].nodes[0].unitUse, UnitUse());
  device.computeUnits = 100;
  applyDeviceModel(programs, device, nullptr);
  EXPECT_EQ(programs.stages[0].nodes[0].unitUse.busy, 100u);
  EXPECT_EQ(programs.stages[0].nodes[1].unitUse.busy, 1u);
}

// How a kernel uses the SMs decides how held ones slow it (HeldUnits.cpp):
// on an H200, a copy beside a kernel holding 66 of the 132 SMs took the
// same time, a large GEMM 1.8 x (docs/data/gpu/h200-held-sms.csv).
TEST(DeviceModelTest, KernelsUseTheUnitsTheirBoundNeeds) {
  DeviceSpec device{"test", 100e12, 1e12, 100e9, 0.5, 0.5};
  device.computeUnits = 100;
  device.setPeakFlops(Precision::FP8, 200e12);
  ProgramNode node;
  node.opType = "elementwise";
  // Bound by its FLOPs (2 s of them against 2 ns of bytes): every unit,
  // all of its time.
  node.numOps = 100'000'000'000'000;
  node.tensorBytes = 1000;
  EXPECT_EQ(device.getUnitUse(node).busy, 100u);
  EXPECT_EQ(device.getUnitUse(node).unbound, 0u);
  // Bound by memory: 0.2 ms of FLOPs over 2 ms of bytes keep a tenth of
  // the units busy, over all of its time.
  node.numOps = 10'000'000'000;
  node.tensorBytes = 1'000'000'000;
  EXPECT_EQ(device.getUnitUse(node).busy, 10u);
  EXPECT_EQ(device.getUnitUse(node).unbound, 0u);
  // Unfused attention: its products (0.2 ms) and its memory-bound kernels
  // (2 ms) one after another: every unit, over 1/11 of its time.
  node.opType = "attention_unfused";
  EXPECT_EQ(device.getUnitUse(node).busy, 100u);
  EXPECT_EQ(device.getUnitUse(node).unbound,
            uint16_t(std::lround(UnitUse::Scale * 10.0 / 11)));
  // An FP8 GEMM, 1 ms of FLOPs at 0.49 of 200 TFLOP/s, and 1 ms of casts:
  // the casts are time no unit bounds.
  ProgramNode gemm = makeGemmForUnits(98'000'000'000, 500'000'000);
  UnitUse use = device.getUnitUse(gemm);
  EXPECT_EQ(use.busy, 100u);
  EXPECT_EQ(use.unbound, UnitUse::Scale / 2);
  // A GEMM too small to fill the machine keeps its share busy: 16 tiles
  // of one piece of K (K = 256) on 100 units.
  gemm.castBytes = 0;
  gemm.gemm = {1, 128, 4096, 256};
  EXPECT_EQ(device.getUnitUse(gemm).busy, 16u);
  device.computeUnits = 0;
  EXPECT_EQ(device.getUnitUse(gemm), UnitUse());
}

} // namespace

namespace {

ProgramNode makeGemm(Precision precision, int64_t flops, uint64_t castBytes) {
  ProgramNode node;
  node.opType = "einsum";
  node.numOps = flops;
  node.tensorBytes = castBytes + 1000;
  node.castBytes = castBytes;
  node.precision = precision;
  node.gemm = {1, 128 * 132, 256, 4096}; // One full wave on an H100.
  return node;
}

// A GEMM runs at its precision's peak times that precision's efficiency;
// its casts are memory-bound kernels that add their time; a fused
// attention reaches attentionEfficiency of its peak, with fixed work per
// query row besides.
TEST(DeviceModelTest, KernelsRunAtTheirPrecisionsPeak) {
  DeviceSpec h100 = *lookupBuiltinDevice("H100");
  h100.launchMicros = 0;
  const int64_t flops = int64_t(1) << 45; // About 35 TFLOP.
  double bf16 = h100.getNodeMicros(makeGemm(Precision::BF16, flops, 0));
  double fp8 = h100.getNodeMicros(makeGemm(Precision::FP8, flops, 0));
  EXPECT_NEAR(bf16 / fp8,
              2 * h100.lowPrecisionEfficiency / h100.computeEfficiency, 1e-4);
  // 3.35 GB of casts at 80 % of 3.35 TB/s: 1250 us more.
  double cast =
      h100.getNodeMicros(makeGemm(Precision::FP8, flops, 3'350'000'000));
  EXPECT_NEAR(cast - fp8, 1250, 1.5);
  ProgramNode attention = makeGemm(Precision::BF16, flops, 0);
  attention.opType = "attention_backward";
  attention.gemm = GemmShape();
  EXPECT_NEAR(double(h100.getNodeMicros(attention)),
              flops / (989e12 * h100.attentionEfficiency) * 1e6, 1);
  // Each query row adds fixed work at the same rate, the backward's more.
  attention.attentionRows = int64_t(1) << 24;
  auto micros = [&](double rowFlops) {
    return (flops + double(attention.attentionRows) * rowFlops) /
           (989e12 * h100.attentionEfficiency) * 1e6;
  };
  EXPECT_NEAR(double(h100.getNodeMicros(attention)),
              micros(h100.attentionBackwardRowFlops), 1);
  attention.opType = "attention";
  EXPECT_NEAR(double(h100.getNodeMicros(attention)),
              micros(h100.attentionRowFlops), 1);
  // A context-parallel ring of 4 runs 4 kernels over the rows.
  EXPECT_NEAR(double(h100.getNodeMicros(attention, 4)),
              micros(4 * h100.attentionRowFlops), 1);
  EXPECT_GT(h100.attentionBackwardRowFlops, h100.attentionRowFlops);
}

// GEMMs that share a kernel (a fused QKV weight) each take their share, by
// FLOPs, of that kernel's time, one launch gap among them: 20 MB of
// weights streamed in one kernel, not a small GEMM's launch each.
TEST(DeviceModelTest, SiblingGemmsTakeTheirShareOfOneKernel) {
  DeviceSpec h100 = *lookupBuiltinDevice("H100");
  ProgramNode q = makeGemm(Precision::BF16, 2 * 16 * 4096 * 4096, 0);
  q.gemm = {1, 16, 4096, 4096};
  q.tensorBytes = 2 * (16 * 4096 + 4096 * 4096 + 16 * 4096);
  ProgramNode k = q;
  k.numOps /= 4;
  k.gemm.n = 1024;
  k.tensorBytes = 2 * (16 * 4096 + 4096 * 1024 + 16 * 1024);
  SharedKernel kernel;
  kernel.gemm = {1, 16, 4096 + 2 * 1024, 4096};
  kernel.flops = q.numOps + 2 * k.numOps;
  kernel.bytes = 2 * (16 * 4096 + 4096 * 6144 + 16 * 6144);
  double bandwidth = 3.35e12 * h100.memoryEfficiency;
  double fused = kernel.bytes / bandwidth * 1e6 + h100.launchMicros;
  // Apart: 33.6 MB and 8.5 MB, each with its launch gap.
  EXPECT_EQ(h100.getNodeMicros(q),
            uint64_t(std::ceil(q.tensorBytes / bandwidth * 1e6 + 2)));
  EXPECT_EQ(h100.getNodeMicros(k),
            uint64_t(std::ceil(k.tensorBytes / bandwidth * 1e6 + 2)));
  q.kernel = k.kernel = kernel;
  EXPECT_EQ(h100.getNodeMicros(q),
            uint64_t(std::llround(std::ceil(fused) * 4096 / 6144)));
  EXPECT_EQ(h100.getNodeMicros(k),
            uint64_t(std::llround(std::ceil(fused) * 1024 / 6144)));
  EXPECT_LT(h100.getNodeMicros(q) + 2 * h100.getNodeMicros(k),
            uint64_t(std::ceil(q.tensorBytes / bandwidth * 1e6 + 2)) +
                2 * uint64_t(std::ceil(k.tensorBytes / bandwidth * 1e6 + 2)));
}

// Served FP8 checkpoints carry static scales: an inference step's FP8 GEMM
// runs at the kernel's rate (computeEfficiency), a training step's at the
// recipe's lowPrecisionEfficiency.
TEST(DeviceModelTest, InferenceGemmsInFp8RunAtTheKernelsRate) {
  DeviceSpec h100 = *lookupBuiltinDevice("H100");
  h100.launchMicros = 0;
  const int64_t flops = int64_t(1) << 45;
  auto priced = [&](bool training) {
    ProgramSet programs;
    programs.training = training;
    programs.stages.resize(1);
    programs.stages[0].nodes.push_back(makeGemm(Precision::FP8, flops, 0));
    applyDeviceModel(programs, h100, nullptr);
    return double(programs.stages[0].nodes[0].durationMicros);
  };
  double fp8Peak = h100.getPeakFlops(Precision::FP8);
  EXPECT_NEAR(priced(true),
              flops / (fp8Peak * h100.lowPrecisionEfficiency) * 1e6, 1);
  EXPECT_NEAR(priced(false),
              flops / (fp8Peak * h100.computeEfficiency) * 1e6, 1);
}

// A precision a device has no unit for runs at its bf16 rate, and the
// tools are told which one it was (an FP8 recipe on an A100).
TEST(DeviceModelTest, APrecisionWithoutAUnitIsFound) {
  const DeviceSpec *a100 = lookupBuiltinDevice("A100");
  ASSERT_TRUE(a100);
  EXPECT_EQ(a100->getAchievableFlops(Precision::FP8,
                                     DeviceSpec::KernelKind::Gemm),
            a100->getAchievableFlops(Precision::BF16,
                                     DeviceSpec::KernelKind::Gemm));
  ProgramSet programs;
  programs.stages.emplace_back();
  programs.stages[0].nodes.push_back(makeGemm(Precision::BF16, 100, 0));
  EXPECT_FALSE(findUnsupportedPrecision(programs, *a100));
  programs.stages[0].nodes.push_back(makeGemm(Precision::FP8, 100, 0));
  EXPECT_EQ(findUnsupportedPrecision(programs, *a100), Precision::FP8);
  EXPECT_FALSE(findUnsupportedPrecision(programs, *lookupBuiltinDevice("H100")));
}

} // namespace
