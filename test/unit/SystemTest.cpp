//===- SystemTest.cpp - Built-in systems and the system file's device -----===//

#include "stg/Perf/System.h"

#include "ScratchDirectoryTest.h"

#include "gtest/gtest.h"

#include <fstream>
#include <string>
#include <vector>

using namespace stg;

namespace {

SystemSpec loadBuiltin(llvm::StringRef name) {
  llvm::Expected<SystemSpec> system = loadSystem(name);
  if (!system) {
    ADD_FAILURE() << llvm::toString(system.takeError());
    return SystemSpec();
  }
  return *system;
}

TEST(SystemTest, EveryBuiltinSystemHasAComputingDevice) {
  std::vector<std::string> names;
  for (const SystemSpec &system : getBuiltinSystems()) {
    names.push_back(system.name);
    EXPECT_GT(system.device.getPeakFlops(Precision::BF16), 0) << system.name;
    EXPECT_GT(system.scaleUp.bandwidth, system.scaleOut.bandwidth)
        << system.name;
  }
  EXPECT_EQ(names,
            (std::vector<std::string>{"dgx-a100", "dgx-h100", "dgx-h200",
                                      "dgx-b200", "gb200-nvl72", "dgx-b300",
                                      "gb300-nvl72", "mi300x", "mi355x"}));
}

TEST(SystemTest, DgxH200IsTheDgxH100NetworkAroundH200s) {
  SystemSpec h200 = loadBuiltin("dgx-h200"), h100 = loadBuiltin("dgx-h100");
  EXPECT_EQ(h200.device.name, "H200");
  EXPECT_EQ(h200.device.memoryBytes, 143'771ull << 20); // nvidia-smi's MiB
  EXPECT_DOUBLE_EQ(h200.device.memoryBandwidth, 4.8e12);
  EXPECT_EQ(h200.gpusPerNode, h100.gpusPerNode);
  EXPECT_DOUBLE_EQ(h200.scaleUp.bandwidth, h100.scaleUp.bandwidth);
  EXPECT_DOUBLE_EQ(h200.scaleOut.bandwidth, h100.scaleOut.bandwidth);
  // Both NVSwitch generations 3: NVLS; the A100's generation 2 is not.
  EXPECT_TRUE(h200.scaleUp.inNetworkReduction);
  EXPECT_TRUE(h100.scaleUp.inNetworkReduction);
  EXPECT_FALSE(loadBuiltin("dgx-a100").scaleUp.inNetworkReduction);
}

TEST(SystemTest, BlackwellUltraSystems) {
  // DGX B300: eight B300s on NVLink 5 (900 GB/s a direction), eight
  // 800 Gb/s ConnectX-8 ports: 100 GB/s a GPU.
  SystemSpec dgx = loadBuiltin("dgx-b300");
  EXPECT_EQ(dgx.device.name, "B300");
  EXPECT_EQ(dgx.gpusPerNode, 8u);
  EXPECT_DOUBLE_EQ(dgx.scaleUp.bandwidth, 900e9);
  EXPECT_DOUBLE_EQ(dgx.scaleOut.bandwidth, 100e9);
  EXPECT_EQ(dgx.scaleUp.algorithm, CollectiveAlgorithm::Ring);
  // GB300 NVL72: one NVLink domain of 72, 800 Gb/s a GPU out of it.
  SystemSpec nvl72 = loadBuiltin("GB300-NVL72");
  EXPECT_EQ(nvl72.device.name, "GB300");
  EXPECT_EQ(nvl72.gpusPerNode, 72u);
  EXPECT_DOUBLE_EQ(nvl72.scaleUp.bandwidth, 900e9);
  EXPECT_DOUBLE_EQ(nvl72.scaleOut.bandwidth, 100e9);
  EXPECT_DOUBLE_EQ(nvl72.device.getPeakFlops(Precision::NVFP4), 15e15);
}

TEST(SystemTest, MI355XIsModelledAsMI300X) {
  // Eight OAMs fully connected by 7 Infinity Fabric links (153.6 GB/s both
  // directions each), the direct algorithm, a 400 Gb/s NIC a GPU.
  SystemSpec mi355x = loadBuiltin("mi355x");
  SystemSpec mi300x = loadBuiltin("mi300x");
  EXPECT_EQ(mi355x.device.name, "MI355X");
  EXPECT_EQ(mi355x.gpusPerNode, mi300x.gpusPerNode);
  EXPECT_DOUBLE_EQ(mi355x.scaleUp.bandwidth, 7 * 153.6e9 / 2);
  EXPECT_EQ(mi355x.scaleUp.topology, NetworkTopology::FullyConnected);
  EXPECT_EQ(mi355x.scaleUp.algorithm, mi300x.scaleUp.algorithm);
  EXPECT_DOUBLE_EQ(mi355x.scaleUp.efficiency, mi300x.scaleUp.efficiency);
  EXPECT_DOUBLE_EQ(mi355x.scaleOut.bandwidth, mi300x.scaleOut.bandwidth);
  EXPECT_DOUBLE_EQ(mi355x.scaleOut.latency, mi300x.scaleOut.latency);
}

TEST(SystemTest, UnknownSystemsListTheBuiltins) {
  llvm::Expected<SystemSpec> system = loadSystem("dgx-z9000");
  ASSERT_FALSE(bool(system));
  EXPECT_EQ(
      llvm::toString(system.takeError()),
      "unknown system 'dgx-z9000' (built in: dgx-a100, dgx-h100, "
      "dgx-h200, dgx-b200, gb200-nvl72, dgx-b300, gb300-nvl72, mi300x, mi355x; "
      "or a .yaml file)");
}

class SystemFileTest : public ScratchDirectoryTest {
protected:
  std::string write(llvm::StringRef name, llvm::StringRef text) {
    std::string file = path(name);
    std::ofstream(file) << text.str();
    return file;
  }
};

TEST_F(SystemFileTest, AnAcceleratorFileGivesPeaksPerPrecision) {
  write("gpu.yaml", "name: gpu\n"
                    "peak_tflops: {tf32: 500, bf16: 1000, fp8: 2000}\n"
                    "memory_bandwidth_gbps: 4000\n"
                    "link_bandwidth_gbps: 450\n");
  std::string cluster = write(
      "cluster.yaml", "accelerator: gpu.yaml\n"
                      "gpus_per_node: 8\n"
                      "scale_up: {bandwidth_gbps: 450, latency_ns: 700}\n"
                      "scale_out: {bandwidth_gbps: 50, latency_ns: 2000}\n");
  llvm::Expected<SystemSpec> system = loadSystem(cluster);
  ASSERT_TRUE(bool(system)) << llvm::toString(system.takeError());
  EXPECT_DOUBLE_EQ(system->device.peakFlops, 1000e12);
  EXPECT_DOUBLE_EQ(system->device.getPeakFlops(Precision::FP8), 2000e12);
  EXPECT_FALSE(system->device.supports(Precision::NVFP4));

  // A bad peak in the accelerator file names that file, line and column.
  write("bad.yaml", "peak_tflops: {bf16: 1000, fp8: .nan}\n"
                    "memory_bandwidth_gbps: 4000\n"
                    "link_bandwidth_gbps: 450\n");
  std::string badCluster =
      write("bad-cluster.yaml",
            "accelerator: bad.yaml\n"
            "gpus_per_node: 8\n"
            "scale_up: {bandwidth_gbps: 450, latency_ns: 700}\n"
            "scale_out: {bandwidth_gbps: 50, latency_ns: 2000}\n");
  llvm::Expected<SystemSpec> bad = loadSystem(badCluster);
  ASSERT_FALSE(bool(bad));
  std::string message = llvm::toString(bad.takeError());
  EXPECT_NE(message.find("bad.yaml:1:32: 'peak_tflops.fp8' must be a number"),
            std::string::npos)
      << message;
}

} // namespace
