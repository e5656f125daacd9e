//===- System.h - The cluster a plan runs on --------------------*- C++ -*-===//
//
// A system is an accelerator (DeviceSpec), how many of them share a node
// (the scale-up domain: NVLink, Infinity Fabric), and two network tiers:
// scale-up inside a node and scale-out between nodes, each with a per-GPU
// bandwidth, a per-step latency, a topology and a collective algorithm.
// Ranks fill nodes in rank order (rank r is on node r / gpus_per_node), so
// `--rank-order` decides which groups stay inside a node.
//
// The built-in systems take their figures from the vendors' datasheets
// (docs/cluster.md names each source); a YAML file describes any other.
//
//===----------------------------------------------------------------------===//

#ifndef STG_PERF_SYSTEM_H
#define STG_PERF_SYSTEM_H

#include "stg/Instantiate/Mesh.h"
#include "stg/Perf/DeviceModel.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <string>

namespace stg {

enum class NetworkTopology { Switch, Ring, FullyConnected };
enum class CollectiveAlgorithm { Ring, Direct, HalvingDoubling };

llvm::StringRef getTopologyName(NetworkTopology topology);
llvm::StringRef getAlgorithmName(CollectiveAlgorithm algorithm);

struct NetworkTier {
  double bandwidth = 0; ///< Bytes/s per GPU and direction (the datasheet).
  double latency = 0;   ///< Seconds per algorithm step (alpha).
  NetworkTopology topology = NetworkTopology::Switch;
  CollectiveAlgorithm algorithm = CollectiveAlgorithm::Ring;
  /// The fraction of `bandwidth` collectives reach (NCCL's bus bandwidth
  /// over the link's): 0.8 on NVLink, 0.9 on InfiniBand.
  double efficiency = 1;
  /// The switches reduce (NVLink SHARP: NVSwitch from its third
  /// generation), so an all-reduce inside the tier may run as NCCL's NVLS
  /// (getCollectiveMicros).
  bool inNetworkReduction = false;

  double getEffectiveBandwidth() const { return bandwidth * efficiency; }
};

/// NCCL's NVLS all-reduce: its algorithm bandwidth at large sizes, a share
/// of the tier's line rate (480 GB/s of bus bandwidth on eight H100s, 275
/// GB/s of algorithm bandwidth over 450 GB/s links: NVIDIA's nccl-tests
/// issue 212), and its latency (25 us, NCCL's tuning table for NVLS over
/// NVLink), which keeps small reductions on the ring.
inline constexpr double NvlsBandwidthShare = 275.0 / 450.0;
inline constexpr double NvlsLatencySeconds = 25e-6;

struct SystemSpec {
  std::string name;
  DeviceSpec device;
  unsigned gpusPerNode = 8;
  NetworkTier scaleUp;
  NetworkTier scaleOut;

  unsigned getNode(unsigned rank) const { return rank / gpusPerNode; }
};

/// dgx-a100, dgx-h100, dgx-h200, dgx-b200, gb200-nvl72, dgx-b300,
/// gb300-nvl72, mi300x, mi355x.
llvm::ArrayRef<SystemSpec> getBuiltinSystems();
/// Their names for messages and help, the last two joined by `last`.
std::string getBuiltinSystemNames(llvm::StringRef last = ", ");

/// A built-in system's name, or a YAML file (docs/cluster.md has the
/// format); errors are `file:line:col: message`.
llvm::Expected<SystemSpec> loadSystem(llvm::StringRef nameOrFile);
/// The system of a YAML text; `name` is its file, for messages and for
/// finding an `accelerator` file beside it.
llvm::Expected<SystemSpec> parseSystem(llvm::StringRef text,
                                       llvm::StringRef name);

/// What `--device` alone means: one scale-up domain that holds every rank,
/// at the device's link bandwidth and no latency.
SystemSpec makeSingleDomainSystem(const DeviceSpec &device, unsigned ranks);

/// How the members of a communicator group sit on the nodes.
struct GroupSpan {
  unsigned members = 1;
  unsigned nodes = 1;
  unsigned perNode = 1; ///< The most members on one node.
};

/// The span of the group of `rank` over the axes of `mask`.
GroupSpan getGroupSpan(const Mesh &mesh, const SystemSpec &system,
                       unsigned rank, AxisMask mask);

} // namespace stg

#endif // STG_PERF_SYSTEM_H
