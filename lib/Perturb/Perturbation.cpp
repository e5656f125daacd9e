//===- Perturbation.cpp - Reproducible stragglers and slow links ----------===//

#include "stg/Perturb/Perturbation.h"

#include "stg/Perturb/SeedSequence.h"
#include "stg/Support/CheckedMath.h"

#include "llvm/Support/JSON.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
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

llvm::StringRef stg::getRuleKindName(PerturbationRule::Kind kind) {
  switch (kind) {
  case PerturbationRule::Kind::GpuSlowdown:
    return "gpu_slowdown";
  case PerturbationRule::Kind::NicSlowdown:
    return "nic_slowdown";
  case PerturbationRule::Kind::LinkSlowdown:
    return "link_slowdown";
  }
  return "gpu_slowdown";
}

void stg::scaleNode(ProgramNode &node, double factor) {
  if (node.kind == ProgramNodeKind::Compute) {
    node.numOps = scaleCount(node.numOps, factor);
    node.durationMicros = scaleCount(node.durationMicros, factor);
  } else {
    node.commBytes = scaleCount(node.commBytes, factor);
  }
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
  // A slower link stretches collectives; a send and its receive would
  // disagree on the size.
  if (rule.kind == Rule::Kind::LinkSlowdown &&
      node.kind != ProgramNodeKind::Collective)
    return false;
  if (!matchesPass(rule.pass, node.phase))
    return false;
  if (rule.microbatches && !rule.microbatches->count(node.microbatch))
    return false;
  if (rule.collectives && !rule.collectives->count(getCommName(node)))
    return false;
  return true;
}

} // namespace

llvm::Error stg::checkLinkRules(const PerturbationSpec &spec,
                                const ProgramSet &programs) {
  const Mesh &mesh = programs.mesh;
  for (const Rule &rule : spec.rules) {
    if (rule.kind != Rule::Kind::LinkSlowdown)
      continue;
    std::string where = spec.path + ":" + std::to_string(rule.line) +
                        ": link_slowdown: ";
    if (rule.chance != 1.0 ||
        rule.slowdown.kind != SlowdownDistribution::Kind::Constant)
      return llvm::createStringError(
          std::errc::invalid_argument,
          "%sneeds chance 1 and a constant slowdown: every rank of a "
          "collective runs over the same link, so all must draw alike",
          where.c_str());
    if (!rule.ranks)
      continue;
    // Each selected rank's matched collectives: their groups must be
    // selected whole.
    llvm::SmallVector<unsigned, 16> members;
    for (unsigned rank : *rule.ranks) {
      const StageProgram &stage =
          programs.stages[programs.getStageOfRank(rank)];
      llvm::SmallVector<AxisMask, 4> groups;
      for (const ProgramNode &node : stage.nodes)
        if (matchesNode(rule, node) && !llvm::is_contained(groups, node.group))
          groups.push_back(node.group);
      for (AxisMask group : groups) {
        members.clear();
        mesh.getGroupMembers(rank, group, members);
        for (unsigned member : members)
          if (!rule.ranks->count(member))
            return llvm::createStringError(
                std::errc::invalid_argument,
                "%srank %u's collectives over %s also run on rank %u, which "
                "the rule does not select: a slower link slows every rank "
                "of a collective, so select its group whole",
                where.c_str(), rank, mesh.describeMask(group).c_str(),
                member);
      }
    }
  }
  return llvm::Error::success();
}

PerturbationDraws::PerturbationDraws(const PerturbationSpec &spec,
                                     const ProgramSet &programs,
                                     const DeviceSpec *device)
    : spec(spec), programs(programs), device(device),
      stages(programs.stages.size()) {
  for (size_t stage = 0; stage < programs.stages.size(); ++stage) {
    const StageProgram &base = programs.stages[stage];
    StageUnits &units = stages[stage];
    std::vector<unsigned> &unitLayers = units.unitLayers;
    unitLayers = base.layers;
    for (const ProgramNode &node : base.nodes)
      if (node.layer >= 0 &&
          !std::binary_search(base.layers.begin(), base.layers.end(),
                              unsigned(node.layer)))
        unitLayers.push_back(node.layer);
    llvm::sort(unitLayers.begin() + base.layers.size(), unitLayers.end());
    unitLayers.erase(
        std::unique(unitLayers.begin() + base.layers.size(), unitLayers.end()),
        unitLayers.end());
    auto unitOf = [&](int layer) -> uint32_t {
      if (layer < 0)
        return 0;
      auto own = llvm::lower_bound(base.layers, unsigned(layer));
      if (own != base.layers.end() && *own == unsigned(layer))
        return own - base.layers.begin() + 1;
      auto foreign = std::lower_bound(unitLayers.begin() + base.layers.size(),
                                      unitLayers.end(), unsigned(layer));
      return foreign - unitLayers.begin() + 1;
    };
    std::vector<uint32_t> unitOfNode;
    unitOfNode.reserve(base.nodes.size());
    for (const ProgramNode &node : base.nodes)
      unitOfNode.push_back(unitOf(node.layer));
    // Per rule, the matched nodes grouped by unit (a counting sort, so each
    // unit's nodes stay ascending).
    size_t numUnits = unitLayers.size() + 1;
    units.begin.resize(spec.rules.size());
    units.nodes.resize(spec.rules.size());
    for (size_t r = 0; r < spec.rules.size(); ++r) {
      std::vector<uint32_t> &begin = units.begin[r];
      std::vector<uint32_t> &nodes = units.nodes[r];
      begin.assign(numUnits + 1, 0);
      for (size_t id = 0; id < base.nodes.size(); ++id)
        if (matchesNode(spec.rules[r], base.nodes[id]))
          ++begin[unitOfNode[id] + 1];
      for (size_t u = 0; u < numUnits; ++u)
        begin[u + 1] += begin[u];
      nodes.resize(begin[numUnits]);
      std::vector<uint32_t> filled(begin.begin(), begin.end() - 1);
      for (size_t id = 0; id < base.nodes.size(); ++id)
        if (matchesNode(spec.rules[r], base.nodes[id]))
          nodes[filled[unitOfNode[id]]++] = uint32_t(id);
    }
  }
}

void PerturbationDraws::draw(unsigned variant, unsigned rank,
                             std::vector<NodeChange> &changes) const {
  changes.clear();
  unsigned stage = programs.getStageOfRank(rank);
  const StageProgram &base = programs.stages[stage];
  const StageUnits &units = stages[stage];
  size_t numUnits = units.unitLayers.size() + 1;
  // What each rule does to each matched node of a selected unit, in rule
  // order; merged per node below.
  struct Hit {
    uint32_t node;
    unsigned rule;
    double slowdown;
  };
  llvm::SmallVector<Hit, 16> hits;
  for (unsigned r = 0; r < spec.rules.size(); ++r) {
    const Rule &rule = spec.rules[r];
    if (rule.ranks && !rule.ranks->count(rank))
      continue;
    // A rule that can select nothing here need not draw: each rule and
    // rank has its own stream, so no other draw changes.
    if (rule.chance == 0 || units.nodes[r].empty())
      continue;
    // std::seed_seq's numbers (SeedSequence.h).
    SeedSequence seeds{uint32_t(spec.seed), uint32_t(spec.seed >> 32),
                       uint32_t(variant), uint32_t(r), uint32_t(rank)};
    std::mt19937_64 stream(seeds);
    auto uniform = [&] { return (stream() >> 11) * 0x1.0p-53; };
    const std::vector<uint32_t> &begin = units.begin[r];
    const std::vector<uint32_t> &nodes = units.nodes[r];
    for (size_t u = 0; u < numUnits; ++u) {
      // Three uniforms per unit, drawn or not: a unit's draw does not
      // depend on the units before it.
      double chance = uniform(), u1 = uniform(), u2 = uniform();
      int layer = u == 0 ? -1 : int(units.unitLayers[u - 1]);
      bool inLayers = !rule.layers || (layer >= 0 && rule.layers->count(layer));
      if (!inLayers || !(chance < rule.chance) || begin[u] == begin[u + 1])
        continue;
      double slowdown = rule.slowdown.sample(u1, u2);
      if (slowdown == 0)
        continue;
      for (uint32_t i = begin[u]; i < begin[u + 1]; ++i)
        hits.push_back({nodes[i], r, slowdown});
    }
  }
  // By node, each node's hits in rule order: factors multiply and delays
  // add in that order.
  std::stable_sort(hits.begin(), hits.end(),
                   [](const Hit &a, const Hit &b) { return a.node < b.node; });
  for (const Hit &hit : hits) {
    if (changes.empty() || changes.back().node != hit.node)
      changes.push_back({hit.node, 1.0, 0, 0});
    NodeChange &change = changes.back();
    change.rule = hit.rule;
    if (spec.rules[hit.rule].kind != Rule::Kind::NicSlowdown) {
      change.factor *= 1 + hit.slowdown; // Of the work, or of the transfer.
      continue;
    }
    const ProgramNode &node = base.nodes[hit.node];
    double commMicros = node.commBytes / device->linkBandwidth * 1e6;
    change.delayMicros = std::min<uint64_t>(
        uint64_t(toCount(double(change.delayMicros) +
                         toCount(hit.slowdown * commMicros))),
        uint64_t(std::numeric_limits<int64_t>::max()));
  }
}

StageProgram stg::applyNodeChanges(const StageProgram &base,
                                   llvm::ArrayRef<NodeChange> changes,
                                   const DeviceSpec *device, unsigned rank,
                                   std::vector<PerturbationRecord> *records) {
  // Copy the program, inserting a delay node before each delayed
  // communication and renumbering. A folded layer's copies have no nodes
  // of their own to change.
  assert(base.folds.empty() && "perturbing a program with folded layers");
  StageProgram program;
  program.stage = base.stage;
  program.layers = base.layers;
  program.schedule = base.schedule;
  program.memory = base.memory;
  size_t numNodes = base.nodes.size();
  program.nodes.reserve(numNodes + changes.size());
  std::vector<uint32_t> newId(numNodes);
  // Where each old node's run of new nodes (its delay, then itself)
  // starts; a step moves with its first and its end node.
  std::vector<uint32_t> newStart(numNodes + 1);
  auto remap = [&](llvm::SmallVectorImpl<uint32_t> &deps) {
    for (uint32_t &dep : deps)
      dep = newId[dep];
  };
  const NodeChange *change = changes.begin();
  for (size_t id = 0; id < numNodes; ++id) {
    newStart[id] = program.nodes.size();
    ProgramNode node = base.nodes[id];
    remap(node.dataDeps);
    remap(node.ctrlDeps);
    bool changed = change != changes.end() && change->node == id;
    if (changed && change->delayMicros) {
      ProgramNode delay;
      delay.kind = ProgramNodeKind::Compute;
      delay.name = node.name + ".delay";
      delay.opType = "delay";
      delay.durationMicros = change->delayMicros;
      delay.numOps = toCount(change->delayMicros * 1e-6 * device->peakFlops);
      delay.tensorBytes = 1; // Compute-bound at any roofline.
      delay.phase = node.phase;
      delay.layer = node.layer;
      delay.microbatch = node.microbatch;
      delay.dataDeps = node.dataDeps;
      delay.ctrlDeps = node.ctrlDeps;
      uint32_t delayId = program.nodes.size();
      program.nodes.push_back(std::move(delay));
      node.ctrlDeps.push_back(delayId);
      if (records)
        records->push_back({rank, delayId + 1ull, node.name, change->rule, 1.0,
                            change->delayMicros, delayId});
    } else if (changed && change->factor != 1.0) {
      scaleNode(node, change->factor);
      if (records)
        records->push_back({rank, program.nodes.size(), node.name, change->rule,
                            change->factor, 0, 0});
    }
    if (changed)
      ++change;
    newId[id] = program.nodes.size();
    program.nodes.push_back(std::move(node));
  }
  newStart[numNodes] = program.nodes.size();
  for (const ProgramStep &step : base.steps)
    program.steps.push_back(
        {newStart[step.begin], newStart[step.end], step.tagOffset, -1});
  return program;
}

std::optional<StageProgram>
Perturber::perturb(unsigned rank,
                   std::vector<PerturbationRecord> &records) const {
  std::vector<NodeChange> changes;
  draws.draw(variant, rank, changes);
  if (changes.empty())
    return std::nullopt;
  return applyNodeChanges(programs.stages[programs.getStageOfRank(rank)],
                          changes, device, rank, &records);
}

llvm::json::Value stg::getSeedJSON(uint64_t seed) {
  if (seed <= uint64_t(std::numeric_limits<int64_t>::max()))
    return int64_t(seed);
  return std::to_string(seed);
}

void stg::writePerturbationRecords(
    llvm::raw_ostream &os, const PerturbationSpec &spec, unsigned variant,
    const std::vector<std::vector<PerturbationRecord>> &recordsByRank) {
  llvm::json::OStream json(os, 1);
  json.object([&] {
    json.attribute("spec", spec.path);
    json.attribute("seed", getSeedJSON(spec.seed));
    json.attribute("variant", int64_t(variant));
    json.attribute("scale", spec.scale);
    json.attributeArray("changes", [&] {
      for (const std::vector<PerturbationRecord> &records : recordsByRank)
        for (const PerturbationRecord &record : records)
          json.object([&] {
            const Rule &rule = spec.rules[record.rule];
            bool delay = rule.kind == Rule::Kind::NicSlowdown;
            json.attribute("rank", int64_t(record.rank));
            json.attribute("node", int64_t(record.node));
            json.attribute("name", record.name);
            json.attribute("rule", int64_t(record.rule));
            json.attribute("kind", getRuleKindName(rule.kind));
            if (!delay) {
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
