//===- AstraConfig.cpp - ASTRA-sim configs for a system -------------------===//

#include "stg/Emit/AstraConfig.h"

#include "stg/Emit/OutputDirectory.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <vector>

using namespace stg;

/// ASTRA-sim spells stagec's snake_case names in camel case: topologies
/// capitalised (`fully_connected` is `FullyConnected`), algorithms not
/// (`halving_doubling` is `halvingDoubling`).
static std::string toCamelCase(llvm::StringRef name, bool capitalise) {
  std::string result;
  bool upper = capitalise;
  for (char c : name) {
    if (c == '_') {
      upper = true;
      continue;
    }
    result += upper ? llvm::toUpper(c) : c;
    upper = false;
  }
  return result;
}

/// ASTRA-sim's analytical backend converts its bandwidths with 2^30 bytes
/// to the GB (astra-network-analytical, bw_GBps_to_Bpns).
static constexpr double GiB = 1073741824.0;

/// The latency of one link, from the tier's NPU-to-NPU latency: through a
/// switch a message crosses two links, which ASTRA-sim charges each.
static double getLinkLatency(const NetworkTier &tier) {
  return tier.topology == NetworkTopology::Switch ? tier.latency / 2
                                                  : tier.latency;
}

llvm::Error stg::writeAstraConfigs(llvm::StringRef directory,
                                   const SystemSpec &system,
                                   unsigned numRanks) {
  // A dimension per tier: ASTRA-sim numbers NPUs with dimension 0 fastest,
  // so rank r is on node r / gpus_per_node, as the estimate places it.
  std::vector<unsigned> sizes;
  std::vector<const NetworkTier *> tiers;
  if (numRanks <= system.gpusPerNode) {
    sizes = {numRanks};
    tiers = {&system.scaleUp};
  } else if (numRanks % system.gpusPerNode == 0) {
    sizes = {system.gpusPerNode, numRanks / system.gpusPerNode};
    tiers = {&system.scaleUp, &system.scaleOut};
  } else {
    return llvm::createStringError(
        std::errc::invalid_argument,
        "%u ranks do not fill whole nodes of %u GPUs, which ASTRA-sim's "
        "network dimensions cannot describe",
        numRanks, system.gpusPerNode);
  }
  auto list = [&](auto field) {
    std::string text;
    llvm::raw_string_ostream os(text);
    for (size_t i = 0; i < tiers.size(); ++i)
      os << (i ? ", " : "") << field(i);
    return os.str();
  };
  if (llvm::Error err = writeTextFile(directory, "network.yml", [&](auto &os) {
        os << "# " << system.name << ": " << numRanks << " NPUs\n"
           << "topology: [ " << list([&](size_t i) {
                return toCamelCase(getTopologyName(tiers[i]->topology),
                                   /*capitalise=*/true);
              })
           << " ]\n"
           << "npus_count: [ " << list([&](size_t i) { return sizes[i]; })
           << " ]\n"
           << "bandwidth: [ " << list([&](size_t i) {
                return llvm::formatv("{0:F3}",
                                     tiers[i]->getEffectiveBandwidth() / GiB)
                    .str();
              })
           << " ]  # GiB/s per NPU, as collectives reach it (ASTRA-sim's "
              "\"GB/s\" is 2^30 bytes)\n"
           << "latency: [ " << list([&](size_t i) {
                return llvm::formatv("{0:F3}", getLinkLatency(*tiers[i]) * 1e9)
                    .str();
              })
           << " ]  # ns per link\n";
      }))
    return err;
  std::string algorithms = list([&](size_t i) {
    return "\"" +
           toCamelCase(getAlgorithmName(tiers[i]->algorithm),
                       /*capitalise=*/false) +
           "\"";
  });
  // One chunk a collective, one chunk in flight a dimension: each
  // collective runs whole, one after another, as the estimate prices it.
  // More splits and chunks make ASTRA-sim's congestion-unaware network run
  // collectives side by side at full bandwidth each (docs/validation.md).
  if (llvm::Error err = writeTextFile(directory, "system.json", [&](auto &os) {
        os << "{\n"
           << "  \"scheduling-policy\": \"LIFO\",\n"
           << "  \"endpoint-delay\": 10,\n"
           << "  \"active-chunks-per-dimension\": 1,\n"
           << "  \"preferred-dataset-splits\": 1,\n"
           << "  \"all-reduce-implementation\": [" << algorithms << "],\n"
           << "  \"all-gather-implementation\": [" << algorithms << "],\n"
           << "  \"reduce-scatter-implementation\": [" << algorithms << "],\n"
           << "  \"all-to-all-implementation\": [" << algorithms << "],\n"
           << "  \"collective-optimization\": \"localBWAware\",\n"
           << "  \"local-mem-bw\": "
           << llvm::formatv("{0:F0}", system.device.memoryBandwidth / 1e9)
           << ",\n"
           << "  \"boost-mode\": 0,\n"
           << "  \"roofline-enabled\": 0,\n"
           << "  \"peak-perf\": "
           << llvm::formatv("{0:F0}", system.device.peakFlops / 1e12) << "\n"
           << "}\n";
      }))
    return err;
  return writeTextFile(directory, "memory.json", [](auto &os) {
    os << "{\n  \"memory-type\": \"NO_MEMORY_EXPANSION\"\n}\n";
  });
}

std::vector<std::string> stg::getAstraArguments(llvm::StringRef outputDir,
                                                llvm::StringRef prefix) {
  std::string traces = (outputDir + "/" + prefix).str();
  std::string astra = (outputDir + "/astra/").str();
  return {"--workload-configuration=" + traces,
          "--comm-group-configuration=" + traces + ".json",
          "--system-configuration=" + astra + "system.json",
          "--network-configuration=" + astra + "network.yml",
          "--remote-memory-configuration=" + astra + "memory.json"};
}

std::string stg::getAstraCommand(llvm::StringRef outputDir,
                                 llvm::StringRef prefix) {
  std::string command = AstraSimBinary;
  for (const std::string &argument : getAstraArguments(outputDir, prefix))
    command += " " + argument;
  return command;
}

llvm::Error stg::writeAstraSetup(llvm::StringRef directory,
                                 llvm::StringRef target,
                                 const SystemSpec &system, unsigned numRanks,
                                 llvm::StringRef prefix,
                                 llvm::json::Object &manifest) {
  llvm::SmallString<256> astra(directory);
  llvm::sys::path::append(astra, "astra");
  if (std::error_code ec = llvm::sys::fs::create_directory(astra))
    return llvm::createStringError(ec, "cannot create %s", astra.c_str());
  if (llvm::Error err = writeAstraConfigs(astra, system, numRanks)) {
    // Nothing half-written beside the traces.
    if (std::error_code ec = llvm::sys::fs::remove_directories(astra))
      return llvm::createStringError(ec, "cannot remove %s", astra.c_str());
    manifest["astra_sim"] = llvm::json::Object{
        {"note", "no configs: " + llvm::toString(std::move(err))}};
    return llvm::Error::success();
  }
  manifest["astra_sim"] =
      llvm::json::Object{{"command", getAstraCommand(target, prefix)}};
  return llvm::Error::success();
}
