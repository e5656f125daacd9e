//===- System.cpp - Built-in systems, the YAML format, group spans --------===//

#include "stg/Perf/System.h"

#include "stg/Support/InputFile.h"
#include "stg/Support/YAMLInput.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/Path.h"

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <set>

using namespace stg;

llvm::StringRef stg::getTopologyName(NetworkTopology topology) {
  switch (topology) {
  case NetworkTopology::Switch:
    return "switch";
  case NetworkTopology::Ring:
    return "ring";
  case NetworkTopology::FullyConnected:
    return "fully_connected";
  }
  llvm_unreachable("unknown topology");
}

llvm::StringRef stg::getAlgorithmName(CollectiveAlgorithm algorithm) {
  switch (algorithm) {
  case CollectiveAlgorithm::Ring:
    return "ring";
  case CollectiveAlgorithm::Direct:
    return "direct";
  case CollectiveAlgorithm::HalvingDoubling:
    return "halving_doubling";
  }
  llvm_unreachable("unknown algorithm");
}

static SystemSpec makeSystem(const char *name, const char *device,
                             unsigned gpusPerNode, double upGBps, double upNs,
                             NetworkTopology upTopology, double outGBps,
                             double outNs, bool upReduces = false) {
  SystemSpec system;
  system.name = name;
  system.device = *lookupBuiltinDevice(device);
  system.gpusPerNode = gpusPerNode;
  // Collectives reach about 80 % of NVLink's and Infinity Fabric's
  // bandwidth and 90 % of InfiniBand's (nccl-tests bus bandwidth on DGX
  // systems); docs/cluster.md has the calibration.
  system.scaleUp = {upGBps * 1e9,
                    upNs * 1e-9,
                    upTopology,
                    upTopology == NetworkTopology::FullyConnected
                        ? CollectiveAlgorithm::Direct
                        : CollectiveAlgorithm::Ring,
                    0.8,
                    upReduces};
  system.scaleOut = {outGBps * 1e9, outNs * 1e-9, NetworkTopology::Switch,
                     CollectiveAlgorithm::Ring, 0.9};
  return system;
}

llvm::ArrayRef<SystemSpec> stg::getBuiltinSystems() {
  // Per GPU and direction (docs/cluster.md has the sources). Scale-out is
  // the node's NICs shared by its GPUs: eight 200 Gb/s HDR, 400 Gb/s NDR or
  // 800 Gb/s ConnectX-8 ports for eight GPUs; one port a GPU in the NVL72
  // racks. MI355X: 7 Infinity Fabric links of 153.6 GB/s (both directions).
  // NVSwitch reduces in the switch (NVLink SHARP) from its third
  // generation, the H100's, on; the A100's does not.
  using T = NetworkTopology;
  constexpr bool InSwitchReduction = true;
  static const SystemSpec systems[] = {
      makeSystem("dgx-a100", "A100", 8, 300, 700, T::Switch, 25, 2000),
      makeSystem("dgx-h100", "H100", 8, 450, 700, T::Switch, 50, 2000,
                 InSwitchReduction),
      makeSystem("dgx-h200", "H200", 8, 450, 700, T::Switch, 50, 2000,
                 InSwitchReduction),
      makeSystem("dgx-b200", "B200", 8, 900, 700, T::Switch, 50, 2000,
                 InSwitchReduction),
      makeSystem("gb200-nvl72", "GB200", 72, 900, 700, T::Switch, 50, 2000,
                 InSwitchReduction),
      makeSystem("dgx-b300", "B300", 8, 900, 700, T::Switch, 100, 2000,
                 InSwitchReduction),
      makeSystem("gb300-nvl72", "GB300", 72, 900, 700, T::Switch, 100, 2000,
                 InSwitchReduction),
      makeSystem("mi300x", "MI300X", 8, 448, 700, T::FullyConnected, 50, 2000),
      makeSystem("mi355x", "MI355X", 8, 537.6, 700, T::FullyConnected, 50,
                 2000),
  };
  return systems;
}

std::string stg::getBuiltinSystemNames(llvm::StringRef last) {
  std::string names;
  llvm::ArrayRef<SystemSpec> systems = getBuiltinSystems();
  for (size_t i = 0; i < systems.size(); ++i) {
    if (i)
      names += i + 1 == systems.size() ? last.str() : ", ";
    names += systems[i].name;
  }
  return names;
}

SystemSpec stg::makeSingleDomainSystem(const DeviceSpec &device,
                                       unsigned ranks) {
  SystemSpec system;
  system.name = device.name;
  system.device = device;
  system.gpusPerNode = std::max(1u, ranks);
  system.scaleUp = {device.linkBandwidth, 0, NetworkTopology::Switch,
                    CollectiveAlgorithm::Ring};
  system.scaleOut = system.scaleUp;
  return system;
}

GroupSpan stg::getGroupSpan(const Mesh &mesh, const SystemSpec &system,
                            unsigned rank, AxisMask mask) {
  llvm::SmallVector<unsigned, 16> members;
  mesh.getGroupMembers(rank, mask, members);
  // The members come in increasing rank order, so their nodes in runs.
  llvm::SmallVector<unsigned, 16> nodes;
  for (unsigned member : members)
    nodes.push_back(system.getNode(member));
  if (!llvm::is_sorted(nodes))
    llvm::sort(nodes);
  GroupSpan span;
  span.members = members.size();
  span.nodes = span.perNode = 0;
  for (size_t begin = 0, end; begin < nodes.size(); begin = end) {
    end = begin + 1;
    while (end < nodes.size() && nodes[end] == nodes[begin])
      ++end;
    ++span.nodes;
    span.perNode = std::max(span.perNode, unsigned(end - begin));
  }
  return span;
}

//===----------------------------------------------------------------------===//
// The YAML format
//===----------------------------------------------------------------------===//

namespace {

class SystemReader {
public:
  explicit SystemReader(llvm::StringRef path) : path(path) {}
  SystemSpec read(const YAML::Node &root);

private:
  [[noreturn]] void fail(const YAML::Node &node, const std::string &message) {
    throw YAMLNodeError{node.Mark(), message};
  }
  double readNumber(const YAML::Node &map, const char *key, double low,
                    double high);
  NetworkTier readTier(const YAML::Node &node, const char *key);
  void checkKeys(const YAML::Node &map, std::set<std::string> allowed,
                 const char *what);

  llvm::StringRef path;
};

} // namespace

void SystemReader::checkKeys(const YAML::Node &map,
                             std::set<std::string> allowed, const char *what) {
  for (const auto &entry : map)
    if (!allowed.count(entry.first.Scalar()))
      fail(entry.first,
           "unknown key '" + entry.first.Scalar() + "' in " + what);
}

double SystemReader::readNumber(const YAML::Node &map, const char *key,
                                double low, double high) {
  const YAML::Node node = map[key];
  if (!node)
    fail(map, std::string("missing '") + key + "'");
  if (std::optional<double> value = getNumberInRange(node, low, high))
    return *value;
  fail(node, describeNumberError(key, node, low, high));
}

NetworkTier SystemReader::readTier(const YAML::Node &root, const char *key) {
  const YAML::Node node = root[key];
  if (!node)
    fail(root, std::string("missing '") + key + "'");
  if (!node.IsMap())
    fail(node, std::string("'") + key +
                   "' is a map: {bandwidth_gbps, latency_ns, topology, "
                   "algorithm}");
  checkKeys(node,
            {"bandwidth_gbps", "latency_ns", "topology", "algorithm",
             "efficiency", "in_network_reduction"},
            key);
  NetworkTier tier;
  tier.bandwidth = readNumber(node, "bandwidth_gbps", 1e-3, 1e6) * 1e9;
  tier.latency = readNumber(node, "latency_ns", 0, 1e9) * 1e-9;
  if (node["efficiency"])
    tier.efficiency = readNumber(node, "efficiency", 0.01, 1);
  if (const YAML::Node reduces = node["in_network_reduction"]) {
    if (!reduces.IsScalar() ||
        !YAML::convert<bool>::decode(reduces, tier.inNetworkReduction))
      fail(reduces, "'in_network_reduction' must be true or false");
  }
  if (const YAML::Node topology = node["topology"]) {
    std::string name = topology.Scalar();
    if (name == "switch")
      tier.topology = NetworkTopology::Switch;
    else if (name == "ring")
      tier.topology = NetworkTopology::Ring;
    else if (name == "fully_connected")
      tier.topology = NetworkTopology::FullyConnected;
    else
      fail(topology, "'topology' must be switch, ring or fully_connected");
  }
  if (const YAML::Node algorithm = node["algorithm"]) {
    std::string name = algorithm.Scalar();
    if (name == "ring")
      tier.algorithm = CollectiveAlgorithm::Ring;
    else if (name == "direct")
      tier.algorithm = CollectiveAlgorithm::Direct;
    else if (name == "halving_doubling")
      tier.algorithm = CollectiveAlgorithm::HalvingDoubling;
    else
      fail(algorithm, "'algorithm' must be ring, direct or halving_doubling");
  }
  return tier;
}

SystemSpec SystemReader::read(const YAML::Node &root) {
  if (!root.IsMap())
    fail(root, "a system is a map: name, accelerator, gpus_per_node, "
               "scale_up, scale_out");
  if (std::optional<YAML::Node> duplicate = findDuplicateKey(root))
    fail(*duplicate, "key '" + duplicate->Scalar() + "' is given twice");
  checkKeys(root,
            {"name", "accelerator", "gpus_per_node", "scale_up", "scale_out"},
            "a system");
  SystemSpec system;
  system.name = root["name"] ? root["name"].Scalar() : "custom";
  const YAML::Node accelerator = root["accelerator"];
  if (!accelerator || !accelerator.IsScalar())
    fail(accelerator ? accelerator : root,
         "'accelerator' names a built-in device or a device .yaml file");
  // A device file is found beside the system file.
  llvm::SmallString<256> devicePath(accelerator.Scalar());
  if (!lookupBuiltinDevice(devicePath) &&
      llvm::sys::path::is_relative(devicePath)) {
    llvm::SmallString<256> beside = llvm::sys::path::parent_path(path);
    llvm::sys::path::append(beside, devicePath);
    devicePath = beside;
  }
  llvm::Expected<DeviceSpec> device = loadDevice(devicePath);
  if (!device)
    fail(accelerator, "'accelerator': " + llvm::toString(device.takeError()));
  system.device = *device;
  system.gpusPerNode = unsigned(readNumber(root, "gpus_per_node", 1, 4096));
  if (root["gpus_per_node"].as<double>() != system.gpusPerNode)
    fail(root["gpus_per_node"], "'gpus_per_node' must be a whole number");
  system.scaleUp = readTier(root, "scale_up");
  system.scaleOut = readTier(root, "scale_out");
  return system;
}

llvm::Expected<SystemSpec> stg::parseSystem(llvm::StringRef text,
                                            llvm::StringRef name) {
  try {
    YAML::Node root = YAML::Load(text.str());
    return SystemReader(name).read(root);
  } catch (const YAMLNodeError &e) {
    return makeYAMLError(name, e.mark, e.message);
  } catch (const YAML::Exception &e) {
    return makeYAMLError(name, e.mark, e.msg);
  }
}

llvm::Expected<SystemSpec> stg::loadSystem(llvm::StringRef nameOrFile) {
  for (const SystemSpec &system : getBuiltinSystems())
    if (nameOrFile.equals_insensitive(system.name))
      return system;
  if (!nameOrFile.endswith(".yaml") && !nameOrFile.endswith(".yml"))
    return llvm::createStringError(
        std::errc::invalid_argument,
        "unknown system '%s' (built in: %s; or a .yaml file)",
        nameOrFile.str().c_str(), getBuiltinSystemNames().c_str());
  auto text = readInputFile(nameOrFile, MaxSpecBytes, "system file");
  if (!text)
    return text.takeError();
  return parseSystem((*text)->getBuffer(), nameOrFile);
}
