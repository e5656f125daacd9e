//===- VariantEstimate.cpp - Step times of perturbed variants -------------===//
//
// Draw each rank, merge the draws per replica and stage (the longest factor
// and delay of a node), replay each perturbed replica on a per-thread copy
// of the clean programs edited in place, and take the longest step.
//
//===----------------------------------------------------------------------===//

#include "stg/Perturb/VariantEstimate.h"

#include "stg/Support/CheckedMath.h"

#include "llvm/Support/Threading.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <map>
#include <mutex>
#include <thread>
#include <tuple>

using namespace stg;

VariantEstimator::VariantEstimator(const PerturbationSpec &spec,
                                   const ProgramSet &programs,
                                   const SystemSpec &system)
    : programs(programs), system(system),
      draws(spec, programs, &system.device) {
  // The axes ranks meet on before the step ends: those of the collectives
  // on the forward/backward stream of the replay (StepEstimate.h), and the
  // pipeline's, along which stages send.
  for (const StageProgram &stage : programs.stages)
    for (const ProgramNode &node : stage.nodes)
      if (node.kind == ProgramNodeKind::Collective &&
          node.phase != Phase::GradientSync && node.phase != Phase::Optimizer)
        lockstepAxes |= node.group;
  numReplicas = programs.mesh.getNumRanks() /
                programs.mesh.getGroupSize(getReplicaAxes());
}

AxisMask VariantEstimator::getReplicaAxes() const {
  // A folded dualpipe's halves send to each other too.
  AxisMask replicaAxes = lockstepAxes;
  for (int axis : {programs.pipelineAxis, programs.mirrorAxis})
    if (axis >= 0)
      replicaAxes |= AxisMask(1) << axis;
  return replicaAxes;
}

unsigned VariantEstimator::getReplica(unsigned rank) const {
  return programs.mesh.getGroupIndex(rank, getReplicaAxes());
}

std::vector<ReplicaChanges>
VariantEstimator::drawReplicas(unsigned variant) const {
  // Every rank's changes as (replica, stage, node) entries, then the
  // longest factor and delay of each node of a replica's stage.
  struct Entry {
    unsigned replica, stage;
    NodeChange change;
  };
  std::vector<Entry> entries;
  std::vector<NodeChange> changes;
  for (unsigned rank = 0; rank < programs.mesh.getNumRanks(); ++rank) {
    draws.draw(variant, rank, changes);
    if (changes.empty())
      continue;
    unsigned replica = getReplica(rank);
    unsigned stage = programs.getStageOfRank(rank);
    for (const NodeChange &change : changes)
      // A change that changes nothing (a delay rounded to 0 us) is left out,
      // so that such a replica counts as clean.
      if (change.factor != 1.0 || change.delayMicros)
        entries.push_back({replica, stage, change});
  }
  llvm::sort(entries, [](const Entry &a, const Entry &b) {
    return std::tie(a.replica, a.stage, a.change.node) <
           std::tie(b.replica, b.stage, b.change.node);
  });
  std::vector<ReplicaChanges> replicas;
  for (const Entry &entry : entries) {
    if (replicas.empty() || replicas.back().replica != entry.replica)
      replicas.push_back({entry.replica, {}});
    std::vector<StageChanges> &stages = replicas.back().stages;
    if (stages.empty() || stages.back().stage != entry.stage)
      stages.push_back({entry.stage, {}});
    std::vector<NodeChange> &nodes = stages.back().nodes;
    if (nodes.empty() || nodes.back().node != entry.change.node) {
      nodes.push_back({entry.change.node, entry.change.factor,
                       entry.change.delayMicros, 0});
      continue;
    }
    nodes.back().factor = std::max(nodes.back().factor, entry.change.factor);
    nodes.back().delayMicros =
        std::max(nodes.back().delayMicros, entry.change.delayMicros);
  }
  return replicas;
}

ProgramSet
VariantEstimator::getReplicaPrograms(const ReplicaChanges &changes) const {
  ProgramSet result = programs;
  for (const StageChanges &stage : changes.stages)
    result.stages[stage.stage] = applyNodeChanges(programs.stages[stage.stage],
                                                  stage.nodes, &system.device);
  return result;
}

namespace {

/// A replica's changes as a cache key.
using ChangeKey = std::vector<std::tuple<unsigned, uint32_t, double, uint64_t>>;

ChangeKey getKey(const ReplicaChanges &changes) {
  ChangeKey key;
  for (const StageChanges &stage : changes.stages)
    for (const NodeChange &node : stage.nodes)
      key.emplace_back(stage.stage, node.node, node.factor, node.delayMicros);
  return key;
}

/// One thread's replays: a copy of the clean programs that each replica's
/// changes are made in and undone from, and the steps of the changes seen
/// so far (an estimate depends only on its programs).
class ReplicaReplayer {
public:
  explicit ReplicaReplayer(const VariantEstimator &estimator)
      : estimator(estimator), scratch(estimator.getPrograms()) {}

  llvm::Expected<double> estimate(const ReplicaChanges &changes);

private:
  /// Node changes the cached keys may hold together (24 MB); past it the
  /// cache starts over, a bound on memory that changes no result.
  static constexpr size_t MaxCachedChanges = 1 << 20;

  const VariantEstimator &estimator;
  ProgramSet scratch;
  std::map<ChangeKey, double> cache;
  size_t cachedChanges = 0;
};

} // namespace

llvm::Expected<double>
ReplicaReplayer::estimate(const ReplicaChanges &changes) {
  ChangeKey key = getKey(changes);
  auto cached = cache.find(key);
  if (cached != cache.end())
    return cached->second;

  const ProgramSet &clean = estimator.getPrograms();
  struct Edited {
    unsigned stage;
    uint32_t node;
  };
  std::vector<Edited> edited;
  std::vector<std::pair<unsigned, StageProgram>> replaced;
  for (const StageChanges &stage : changes.stages) {
    bool delays = llvm::any_of(
        stage.nodes, [](const NodeChange &node) { return node.delayMicros; });
    if (delays) {
      // Delay nodes shift the ids: a new program for this stage.
      replaced.push_back(
          {stage.stage, applyNodeChanges(clean.stages[stage.stage], stage.nodes,
                                         &estimator.getSystem().device)});
      std::swap(replaced.back().second, scratch.stages[stage.stage]);
      continue;
    }
    for (const NodeChange &change : stage.nodes) {
      const ProgramNode &base = clean.stages[stage.stage].nodes[change.node];
      ProgramNode &node = scratch.stages[stage.stage].nodes[change.node];
      node.numOps = base.numOps; // The scaled fields, from the clean node.
      node.durationMicros = base.durationMicros;
      node.commBytes = base.commBytes;
      scaleNode(node, change.factor);
      edited.push_back({stage.stage, change.node});
    }
  }
  llvm::Expected<StepEstimate> step =
      estimateStep(scratch, estimator.getSystem());
  for (auto &[stage, program] : replaced)
    std::swap(program, scratch.stages[stage]);
  for (const Edited &edit : edited) {
    const ProgramNode &base = clean.stages[edit.stage].nodes[edit.node];
    ProgramNode &node = scratch.stages[edit.stage].nodes[edit.node];
    node.numOps = base.numOps;
    node.durationMicros = base.durationMicros;
    node.commBytes = base.commBytes;
  }
  if (!step)
    return step.takeError();
  if (cachedChanges + key.size() > MaxCachedChanges) {
    cache.clear();
    cachedChanges = 0;
  }
  if (key.size() <= MaxCachedChanges) {
    cachedChanges += key.size();
    cache.emplace(std::move(key), step->stepMicros);
  }
  return step->stepMicros;
}

llvm::Expected<VariantSteps>
stg::estimateVariants(const PerturbationSpec &spec, const ProgramSet &programs,
                      const SystemSpec &system, unsigned count,
                      const VariantEstimateOptions &options) {
  ProgramSet scaled = scalePrograms(programs, spec.scale);
  VariantSteps result;
  result.spec = spec.path;
  result.seed = spec.seed;
  result.scale = spec.scale;
  result.gpus = programs.mesh.getNumRanks();
  llvm::Expected<StepEstimate> clean = estimateStep(scaled, system);
  if (!clean)
    return clean.takeError();
  result.cleanMicros = clean->stepMicros;
  VariantEstimator estimator(spec, scaled, system);
  result.replicas = estimator.getNumReplicas();
  result.variantMicros.assign(count, result.cleanMicros);

  // Workers take the next variant until none is left; each result goes to
  // its variant's slot, and the first error by variant index is reported.
  std::vector<std::string> errors(count);
  std::atomic<unsigned> next{0};
  std::mutex progressMutex;
  unsigned done = 0;
  auto work = [&] {
    ReplicaReplayer replayer(estimator);
    for (unsigned variant = next++; variant < count; variant = next++) {
      std::vector<ReplicaChanges> replicas = estimator.drawReplicas(variant);
      double step = replicas.size() < estimator.getNumReplicas()
                        ? result.cleanMicros
                        : 0.0;
      for (const ReplicaChanges &replica : replicas) {
        llvm::Expected<double> replicaStep = replayer.estimate(replica);
        if (!replicaStep) {
          errors[variant] = llvm::toString(replicaStep.takeError());
          break;
        }
        step = std::max(step, *replicaStep);
      }
      result.variantMicros[variant] = step;
      if (options.progress) {
        std::lock_guard<std::mutex> lock(progressMutex);
        options.progress(++done, count);
      }
    }
  };
  unsigned jobs = options.jobs
                      ? options.jobs
                      : llvm::hardware_concurrency().compute_thread_count();
  jobs = std::max(1u, std::min(jobs, count));
  std::vector<std::thread> threads;
  for (unsigned i = 1; i < jobs; ++i)
    threads.emplace_back(work);
  work();
  for (std::thread &thread : threads)
    thread.join();

  for (unsigned variant = 0; variant < count; ++variant)
    if (!errors[variant].empty())
      return llvm::createStringError(std::errc::invalid_argument,
                                     "variant %u: %s", variant,
                                     errors[variant].c_str());
  for (double micros : result.variantMicros)
    if (!std::isfinite(micros))
      return llvm::createStringError(std::errc::result_out_of_range,
                                     "a variant's step time is not finite");
  return result;
}

Percentiles stg::getPercentiles(llvm::ArrayRef<double> values) {
  std::vector<double> sorted(values.begin(), values.end());
  llvm::sort(sorted);
  Percentiles result;
  if (sorted.empty())
    return result;
  size_t n = sorted.size();
  auto nearestRank = [&](unsigned percent) {
    // ceil(p n / 100) in integers, as a 1-based rank; at least the first.
    size_t rank = (size_t(percent) * n + 99) / 100;
    return sorted[std::max<size_t>(rank, 1) - 1];
  };
  result.min = sorted.front();
  result.median = nearestRank(50);
  result.p90 = nearestRank(90);
  result.p99 = nearestRank(99);
  result.max = sorted.back();
  // In sorted order, so the sum does not depend on the variants' order.
  double sum = 0;
  for (double value : sorted)
    sum += value;
  result.mean = sum / n;
  return result;
}

std::vector<double> VariantSteps::getSlowdowns() const {
  std::vector<double> slowdowns;
  for (double micros : variantMicros)
    slowdowns.push_back(cleanMicros > 0 ? (micros - cleanMicros) / cleanMicros
                                        : 0.0);
  return slowdowns;
}

std::vector<double> VariantSteps::getWastedGpuSeconds() const {
  std::vector<double> wasted;
  for (double micros : variantMicros)
    wasted.push_back(gpus * (micros - cleanMicros) / 1e6);
  return wasted;
}

double VariantSteps::getWastedFraction() const {
  double lost = 0, total = 0;
  for (double micros : variantMicros) {
    lost += micros - cleanMicros;
    total += micros;
  }
  return total > 0 ? lost / total : 0.0;
}
