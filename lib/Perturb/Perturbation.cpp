//===- Perturbation.cpp - Reproducible stragglers and slow links ----------===//

#include "stg/Perturb/Perturbation.h"

#include "stg/Support/CheckedMath.h"

#include "llvm/Support/JSON.h"

#include <cmath>
#include <random>

using namespace stg;

double SlowdownDistribution::sample(double u1, double u2) const {
  double slowdown = 0;
  // Box-Muller, with u1 moved into (0, 1] so the logarithm is finite.
  auto normal = [&] {
    return mean + std * std::sqrt(-2 * std::log(1 - u1)) *
                      std::cos(2 * M_PI * u2);
  };
  switch (kind) {
  case Kind::Constant:
    slowdown = value;
    break;
  case Kind::Normal:
    slowdown = normal();
    break;
  case Kind::LogNormal:
    slowdown = std::exp(normal());
    break;
  case Kind::Uniform:
    slowdown = low + (high - low) * u1;
    break;
  }
  // At most 1000 (1001x slower): a lognormal tail must not become an
  // infinite duration.
  return std::clamp(slowdown, 0.0, MaxSlowdown);
}

static int64_t scaled(int64_t value, double scale) {
  if (value <= 0)
    return 0;
  return std::max<int64_t>(1, scaleCount(value, scale));
}

ProgramSet stg::scalePrograms(const ProgramSet &programs, double scale) {
  ProgramSet result = programs;
  if (scale == 1.0)
    return result;
  for (StageProgram &program : result.stages) {
    for (ProgramNode &node : program.nodes) {
      node.numOps = scaled(node.numOps, scale);
      node.tensorBytes = scaled(node.tensorBytes, scale);
      node.commBytes = scaled(node.commBytes, scale);
      node.durationMicros = scaled(node.durationMicros, scale);
    }
  }
  return result;
}

namespace {

using Rule = PerturbationRule;

bool matchesPass(Rule::Pass pass, Phase phase) {
  switch (pass) {
  case Rule::Pass::Forward:
    return phase == Phase::Forward;
  case Rule::Pass::Backward:
    return phase == Phase::Backward;
  case Rule::Pass::Optimizer:
    return phase == Phase::GradientSync || phase == Phase::Optimizer;
  case Rule::Pass::Any:
    return true;
  }
  return false;
}

std::string getCommName(const ProgramNode &node) {
  if (node.kind == ProgramNodeKind::Send)
    return "SEND";
  if (node.kind == ProgramNodeKind::Recv)
    return "RECV";
  return getCollectiveName(node.commType).str();
}

bool matchesNode(const Rule &rule, const ProgramNode &node) {
  bool compute = node.kind == ProgramNodeKind::Compute;
  if (compute != (rule.kind == Rule::Kind::GpuSlowdown))
    return false;
  if (!matchesPass(rule.pass, node.phase))
    return false;
  if (rule.microbatches && !rule.microbatches->count(node.microbatch))
    return false;
  if (rule.collectives && !rule.collectives->count(getCommName(node)))
    return false;
  return true;
}

/// What a rule drew for one (rank, layer) unit.
struct UnitDraw {
  bool selected = false;
  double slowdown = 0;
};

} // namespace

std::optional<StageProgram>
Perturber::perturb(unsigned rank,
                   std::vector<PerturbationRecord> &records) const {
  const StageProgram &base = programs.stages[programs.getStageOfRank(rank)];
  size_t numNodes = base.nodes.size();
  std::vector<double> factors(numNodes, 1.0);
  std::vector<uint64_t> delays(numNodes, 0);
  std::vector<unsigned> ruleOf(numNodes, 0);
  bool changed = false;
  // Unit 0 is the top level (layer -1), unit i the stage's i-th layer; then
  // the other stages' layers that some node here names (the receive of a
  // neighbour's activation or gradient), ascending.
  std::vector<unsigned> unitLayers = base.layers;
  for (const ProgramNode &node : base.nodes)
    if (node.layer >= 0 &&
        !std::binary_search(base.layers.begin(), base.layers.end(),
                            unsigned(node.layer)))
      unitLayers.push_back(node.layer);
  llvm::sort(unitLayers.begin() + base.layers.size(), unitLayers.end());
  unitLayers.erase(std::unique(unitLayers.begin() + base.layers.size(),
                               unitLayers.end()),
                   unitLayers.end());
  auto unitOf = [&](int layer) -> size_t {
    if (layer < 0)
      return 0;
    auto own = llvm::lower_bound(base.layers, unsigned(layer));
    if (own != base.layers.end() && *own == unsigned(layer))
      return own - base.layers.begin() + 1;
    auto foreign = std::lower_bound(unitLayers.begin() + base.layers.size(),
                                    unitLayers.end(), unsigned(layer));
    return foreign - unitLayers.begin() + 1;
  };
  std::vector<UnitDraw> units(unitLayers.size() + 1);
  for (unsigned r = 0; r < spec.rules.size(); ++r) {
    const Rule &rule = spec.rules[r];
    if (rule.ranks && !rule.ranks->count(rank))
      continue;
    std::seed_seq seeds{uint32_t(spec.seed), uint32_t(spec.seed >> 32),
                        uint32_t(variant), uint32_t(r), uint32_t(rank)};
    std::mt19937_64 stream(seeds);
    auto uniform = [&] { return (stream() >> 11) * 0x1.0p-53; };
    for (unsigned u = 0; u < units.size(); ++u) {
      double chance = uniform(), u1 = uniform(), u2 = uniform();
      int layer = u == 0 ? -1 : int(unitLayers[u - 1]);
      bool inLayers = !rule.layers || (layer >= 0 && rule.layers->count(layer));
      units[u] = {inLayers && chance < rule.chance,
                  rule.slowdown.sample(u1, u2)};
    }
    for (size_t id = 0; id < numNodes; ++id) {
      const ProgramNode &node = base.nodes[id];
      const UnitDraw &draw = units[unitOf(node.layer)];
      if (!draw.selected || draw.slowdown == 0 || !matchesNode(rule, node))
        continue;
      changed = true;
      ruleOf[id] = r;
      if (rule.kind == Rule::Kind::GpuSlowdown) {
        factors[id] *= 1 + draw.slowdown;
        continue;
      }
      double commMicros = node.commBytes / device->linkBandwidth * 1e6;
      delays[id] = std::min<uint64_t>(
          uint64_t(toCount(double(delays[id]) +
                           toCount(draw.slowdown * commMicros))),
          uint64_t(std::numeric_limits<int64_t>::max()));
    }
  }
  if (!changed)
    return std::nullopt;

  // Copy the program, inserting a delay node before each delayed
  // communication and renumbering. The copy keeps no steps: the inserted
  // nodes shift their ranges, and a program without steps replays as one.
  StageProgram program;
  program.stage = base.stage;
  program.layers = base.layers;
  program.schedule = base.schedule;
  program.memory = base.memory;
  std::vector<uint32_t> newId(numNodes);
  auto remap = [&](llvm::SmallVectorImpl<uint32_t> &deps) {
    for (uint32_t &dep : deps)
      dep = newId[dep];
  };
  for (size_t id = 0; id < numNodes; ++id) {
    ProgramNode node = base.nodes[id];
    remap(node.dataDeps);
    remap(node.ctrlDeps);
    if (delays[id]) {
      ProgramNode delay;
      delay.kind = ProgramNodeKind::Compute;
      delay.name = node.name + ".delay";
      delay.opType = "delay";
      delay.durationMicros = delays[id];
      delay.numOps = toCount(delays[id] * 1e-6 * device->peakFlops);
      delay.tensorBytes = 1; // Compute-bound at any roofline.
      delay.phase = node.phase;
      delay.layer = node.layer;
      delay.microbatch = node.microbatch;
      delay.dataDeps = node.dataDeps;
      delay.ctrlDeps = node.ctrlDeps;
      uint32_t delayId = program.nodes.size();
      program.nodes.push_back(std::move(delay));
      node.ctrlDeps.push_back(delayId);
      records.push_back({rank, delayId + 1ull, node.name, ruleOf[id], 1.0,
                         delays[id], delayId});
    } else if (factors[id] != 1.0) {
      node.numOps = scaleCount(node.numOps, factors[id]);
      node.durationMicros = scaleCount(node.durationMicros, factors[id]);
      records.push_back(
          {rank, program.nodes.size(), node.name, ruleOf[id], factors[id], 0, 0});
    }
    newId[id] = program.nodes.size();
    program.nodes.push_back(std::move(node));
  }
  return program;
}

void stg::writePerturbationRecords(
    llvm::raw_ostream &os, const PerturbationSpec &spec, unsigned variant,
    const std::vector<std::vector<PerturbationRecord>> &recordsByRank) {
  llvm::json::OStream json(os, 1);
  json.object([&] {
    json.attribute("spec", spec.path);
    json.attribute("seed", int64_t(spec.seed));
    json.attribute("variant", int64_t(variant));
    json.attribute("scale", spec.scale);
    json.attributeArray("changes", [&] {
      for (const std::vector<PerturbationRecord> &records : recordsByRank)
        for (const PerturbationRecord &record : records)
          json.object([&] {
            const Rule &rule = spec.rules[record.rule];
            bool gpu = rule.kind == Rule::Kind::GpuSlowdown;
            json.attribute("rank", int64_t(record.rank));
            json.attribute("node", int64_t(record.node));
            json.attribute("name", record.name);
            json.attribute("rule", int64_t(record.rule));
            json.attribute("kind", gpu ? "gpu_slowdown" : "nic_slowdown");
            if (gpu) {
              json.attribute("factor", record.factor);
            } else {
              json.attribute("delay_micros", int64_t(record.delayMicros));
              json.attribute("delay_node", int64_t(record.delayNode));
            }
          });
    });
  });
  os << '\n';
}
