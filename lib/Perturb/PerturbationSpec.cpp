//===- PerturbationSpec.cpp - Reading a perturbation spec (YAML) ----------===//
//
// yaml-cpp parses; this file checks every key against what it may hold and
// against the run (ranks, layers, micro-batches), so a bad spec is reported
// at its line before anything is written.
//
//===----------------------------------------------------------------------===//

#include "stg/Perturb/Perturbation.h"

#include "stg/Support/InputFile.h"
#include "stg/Support/YAMLInput.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>

using namespace stg;

namespace {

class SpecReader {
public:
  SpecReader(std::string path, unsigned numRanks, unsigned numLayers,
             unsigned numMicrobatches)
      : path(std::move(path)), numRanks(numRanks), numLayers(numLayers),
        numMicrobatches(numMicrobatches) {}

  PerturbationSpec read(const YAML::Node &root);

private:
  [[noreturn]] void fail(const YAML::Node &node, const std::string &message) {
    throw YAMLNodeError{node.Mark(), message};
  }
  /// A finite number in [low, high], or a located error.
  double readNumber(const YAML::Node &node, const std::string &key,
                    double low, double high);
  std::set<int> readIndices(const YAML::Node &node, const std::string &key,
                            unsigned limit, const char *what);
  std::optional<std::set<int>> readSelector(const YAML::Node &map,
                                            const std::string &key,
                                            unsigned limit, const char *what);
  SlowdownDistribution readSlowdown(const YAML::Node &node);
  PerturbationRule readRule(const YAML::Node &node);

  std::string path;
  unsigned numRanks, numLayers, numMicrobatches;
};

} // namespace

double SpecReader::readNumber(const YAML::Node &node, const std::string &key,
                              double low, double high) {
  if (std::optional<double> value = getNumberInRange(node, low, high))
    return *value;
  fail(node, describeNumberError(key, node, low, high));
}

std::set<int> SpecReader::readIndices(const YAML::Node &node,
                                      const std::string &key, unsigned limit,
                                      const char *what) {
  if (!node.IsSequence())
    fail(node, "'" + key + "' must be a list of " + what + "s");
  std::set<int> indices;
  for (const YAML::Node &item : node) {
    double value = readNumber(item, key, -1e15, 1e15);
    if (value < 0 || value >= limit || value != std::floor(value))
      fail(item, "'" + key + "': " + what + " " + item.Scalar() +
                     " is not in 0.." + std::to_string(int(limit) - 1));
    indices.insert(int(value));
  }
  return indices;
}

/// `ranks: [3]`, `ranks: all`, or `rank_range: [0, 7]` (inclusive).
std::optional<std::set<int>>
SpecReader::readSelector(const YAML::Node &map, const std::string &key,
                         unsigned limit, const char *what) {
  std::string singular = key.substr(0, key.size() - 1);
  if (const YAML::Node range = map[singular + "_range"]) {
    if (map[key])
      fail(range, "give '" + key + "' or '" + singular + "_range', not both");
    readIndices(range, singular + "_range", limit, what); // Both in range.
    if (range.size() != 2)
      fail(range, "'" + singular + "_range' must be [first, last]");
    int first = readNumber(range[0], singular + "_range", 0, limit);
    int last = readNumber(range[1], singular + "_range", 0, limit);
    if (first > last)
      fail(range, "'" + singular + "_range' is empty: first > last");
    std::set<int> indices;
    for (int i = first; i <= last; ++i)
      indices.insert(i);
    return indices;
  }
  const YAML::Node node = map[key];
  if (!node || (node.IsScalar() && node.Scalar() == "all"))
    return std::nullopt;
  return readIndices(node, key, limit, what);
}

SlowdownDistribution SpecReader::readSlowdown(const YAML::Node &node) {
  if (!node.IsMap())
    fail(node, "'slowdown' must be a map like {type: constant, value: 0.1}");
  SlowdownDistribution dist;
  std::string type = node["type"] ? node["type"].Scalar() : "";
  std::set<std::string> allowed = {"type"};
  // Wide enough for any real study; MaxSlowdown clamps each draw.
  auto number = [&](const char *key, double low = -MaxSlowdown,
                    double high = MaxSlowdown) {
    allowed.insert(key);
    if (!node[key])
      fail(node, "slowdown of type '" + type + "' needs '" + key + "'");
    return readNumber(node[key], key, low, high);
  };
  using K = SlowdownDistribution::Kind;
  if (type == "constant") {
    dist.kind = K::Constant;
    dist.value = number("value");
  } else if (type == "normal" || type == "lognormal") {
    dist.kind = type == "normal" ? K::Normal : K::LogNormal;
    dist.mean = number("mean");
    dist.std = number("std", 0, 100);
  } else if (type == "uniform") {
    dist.kind = K::Uniform;
    dist.low = number("low");
    dist.high = number("high");
    if (dist.high < dist.low)
      fail(node["high"], "'high' must not be below 'low'");
  } else {
    fail(node["type"] ? node["type"] : node,
         "'type' must be constant, normal, lognormal or uniform");
  }
  for (const auto &entry : node)
    if (!allowed.count(entry.first.Scalar()))
      fail(entry.first, "unknown key '" + entry.first.Scalar() +
                            "' in a " + type + " slowdown");
  return dist;
}

PerturbationRule SpecReader::readRule(const YAML::Node &node) {
  if (!node.IsMap())
    fail(node, "a rule must be a map with a 'kind'");
  static const std::set<std::string> keys = {
      "kind",  "ranks",        "rank_range", "layers",   "layer_range",
      "pass",  "microbatches", "chance",     "slowdown", "collectives"};
  for (const auto &entry : node)
    if (!keys.count(entry.first.Scalar()))
      fail(entry.first, "unknown key '" + entry.first.Scalar() + "' in a rule");
  PerturbationRule rule;
  rule.line = node.Mark().line + 1;
  std::string kind = node["kind"] ? node["kind"].Scalar() : "";
  if (kind == "gpu_slowdown")
    rule.kind = PerturbationRule::Kind::GpuSlowdown;
  else if (kind == "nic_slowdown")
    rule.kind = PerturbationRule::Kind::NicSlowdown;
  else if (kind == "link_slowdown")
    rule.kind = PerturbationRule::Kind::LinkSlowdown;
  else
    fail(node["kind"] ? node["kind"] : node,
         "'kind' must be gpu_slowdown, nic_slowdown or link_slowdown");

  if (auto ranks = readSelector(node, "ranks", numRanks, "rank"))
    rule.ranks = std::set<unsigned>(ranks->begin(), ranks->end());
  rule.layers = readSelector(node, "layers", numLayers, "layer");
  if (const YAML::Node micro = node["microbatches"])
    rule.microbatches = readIndices(micro, "microbatches", numMicrobatches,
                                    "micro-batch");
  if (const YAML::Node pass = node["pass"]) {
    std::string text = pass.Scalar();
    using P = PerturbationRule::Pass;
    if (text == "forward")
      rule.pass = P::Forward;
    else if (text == "backward")
      rule.pass = P::Backward;
    else if (text == "optimizer")
      rule.pass = P::Optimizer;
    else if (text == "any")
      rule.pass = P::Any;
    else
      fail(pass, "'pass' must be forward, backward, optimizer or any");
  }
  if (const YAML::Node chance = node["chance"]) {
    rule.chance = readNumber(chance, "chance", 0, 1);
  }
  if (!node["slowdown"])
    fail(node, "a rule needs a 'slowdown'");
  rule.slowdown = readSlowdown(node["slowdown"]);
  if (const YAML::Node collectives = node["collectives"]) {
    if (rule.kind == PerturbationRule::Kind::GpuSlowdown)
      fail(collectives, "'collectives' filters nic_slowdown and "
                        "link_slowdown rules only");
    if (!collectives.IsSequence())
      fail(collectives, "'collectives' must be a list");
    static const std::set<std::string> names = {
        "ALL_REDUCE", "ALL_GATHER", "REDUCE_SCATTER", "ALL_TO_ALL",
        "SEND",       "RECV"};
    bool link = rule.kind == PerturbationRule::Kind::LinkSlowdown;
    rule.collectives.emplace();
    for (const YAML::Node &item : collectives) {
      if (!names.count(item.Scalar()))
        fail(item, "'collectives': '" + item.Scalar() +
                       "' is not ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER, "
                       "ALL_TO_ALL, SEND or RECV");
      if (link && (item.Scalar() == "SEND" || item.Scalar() == "RECV"))
        fail(item, "'collectives': link_slowdown slows collectives, not " +
                       item.Scalar() + " (its peer would disagree on the "
                       "size)");
      rule.collectives->insert(item.Scalar());
    }
  }
  return rule;
}

PerturbationSpec SpecReader::read(const YAML::Node &root) {
  if (!root.IsMap())
    fail(root, "a perturbation spec is a map with 'rules'");
  if (std::optional<YAML::Node> duplicate = findDuplicateKey(root))
    fail(*duplicate, "key '" + duplicate->Scalar() + "' is given twice");
  PerturbationSpec spec;
  spec.path = path;
  for (const auto &entry : root) {
    std::string key = entry.first.Scalar();
    if (key == "seed") {
      // Digits only: yaml-cpp would read -1 as 2^64 - 1.
      const std::string &text = entry.second.Scalar();
      if (text.empty() || text.size() > 20 ||
          !std::all_of(text.begin(), text.end(), ::isdigit) ||
          !YAML::convert<uint64_t>::decode(entry.second, spec.seed))
        fail(entry.second, "'seed' must be a whole number from 0 to 2^64-1");
    } else if (key == "scale") {
      spec.scale = readNumber(entry.second, "scale", 1e-6, 1e3);
    } else if (key == "rules") {
      if (!entry.second.IsSequence())
        fail(entry.second, "'rules' must be a list");
      for (const YAML::Node &rule : entry.second)
        spec.rules.push_back(readRule(rule));
    } else {
      fail(entry.first, "unknown key '" + key + "'");
    }
  }
  return spec;
}

bool PerturbationSpec::needsDevice() const {
  for (const PerturbationRule &rule : rules)
    if (rule.kind == PerturbationRule::Kind::NicSlowdown)
      return true;
  return false;
}

llvm::Expected<PerturbationSpec>
stg::loadPerturbationSpec(llvm::StringRef path, unsigned numRanks,
                          unsigned numLayers, unsigned numMicrobatches) {
  auto text = readInputFile(path, MaxSpecBytes, "perturbation spec");
  if (!text)
    return text.takeError();
  return parsePerturbationSpec((*text)->getBuffer(), path, numRanks, numLayers,
                               numMicrobatches);
}

llvm::Expected<PerturbationSpec>
stg::parsePerturbationSpec(llvm::StringRef text, llvm::StringRef path,
                           unsigned numRanks, unsigned numLayers,
                           unsigned numMicrobatches) {
  try {
    YAML::Node root = YAML::Load(text.str());
    SpecReader reader(path.str(), numRanks, numLayers, numMicrobatches);
    return reader.read(root);
  } catch (const YAMLNodeError &e) {
    return makeYAMLError(path, e.mark, e.message);
  } catch (const YAML::Exception &e) {
    return makeYAMLError(path, e.mark, e.msg);
  }
}
