//===- Perturbation.h - Reproducible stragglers and slow links --*- C++ -*-===//
//
// MLSynth-style what-ifs written into the traces themselves, so any
// simulator can study variability without changes (spec: docs/
// perturbation.md). A spec (YAML) lists rules:
//
//   gpu_slowdown  multiplies matched compute nodes' num_ops (and
//                 duration_micros) by 1 + slowdown;
//   nic_slowdown  puts a delay node before each matched communication node,
//                 which then depends on it: a COMP node whose duration is
//                 slowdown x the communication's modelled time (size / link
//                 bandwidth) and whose num_ops is that delay at peak FLOP/s,
//                 so replay and roofline simulation charge the same delay
//                 (a late start: the compute stream waits too);
//   link_slowdown multiplies matched communication nodes' comm_size by
//                 1 + slowdown: the same transfer over a link that much
//                 slower, on the communication stream only (MLSynth's
//                 Fig. 5, an all-reduce given less bandwidth);
//
// selected by rank, layer (the repetition index), pass, micro-batch and
// collective type, each (rank, layer) unit drawn with probability `chance`.
// A global `scale` multiplies FLOPs, bytes and message sizes (scale-down).
//
// Draws are reproducible and independent of threads: rule r on rank n in
// variant k draws from a std::mt19937_64 seeded with
// std::seed_seq{seed & 0xffffffff, seed >> 32, k, r, n}, three uniforms per
// unit, units in order (top level, then the stage's layers ascending). The
// distributions are computed here from those uniforms (Box-Muller for the
// normal), not by the standard library, whose algorithms differ between
// implementations.
//
// Only perturbed ranks get their own program; the others are stamped from
// their stage's shared one. The draws (PerturbationDraws) are apart from
// the copy (applyNodeChanges), so that a variant's step estimate
// (VariantEstimate.h) can take the changes without a program per rank.
//
//===----------------------------------------------------------------------===//

#ifndef STG_PERTURB_PERTURBATION_H
#define STG_PERTURB_PERTURBATION_H

#include "stg/Instantiate/Program.h"
#include "stg/Perf/DeviceModel.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace stg {

/// The largest slowdown a sample takes (1001x slower); larger draws are
/// clamped, so no duration overflows.
constexpr double MaxSlowdown = 1000;

struct SlowdownDistribution {
  enum class Kind { Constant, Normal, LogNormal, Uniform };
  Kind kind = Kind::Constant;
  double value = 0;        ///< Constant.
  double mean = 0, std = 0; ///< Normal; LogNormal of the underlying normal.
  double low = 0, high = 0; ///< Uniform.

  /// The slowdown for uniforms `u1`, `u2` in [0, 1); in [0, MaxSlowdown].
  double sample(double u1, double u2) const;
};

struct PerturbationRule {
  enum class Kind { GpuSlowdown, NicSlowdown, LinkSlowdown };
  enum class Pass { Forward, Backward, Optimizer, Any };
  Kind kind = Kind::GpuSlowdown;
  std::optional<std::set<unsigned>> ranks;      ///< Unset: all.
  std::optional<std::set<int>> layers;          ///< Unset: all (and top level).
  Pass pass = Pass::Any;
  std::optional<std::set<int>> microbatches;    ///< Unset: all.
  double chance = 1.0;
  SlowdownDistribution slowdown;
  /// nic_slowdown, link_slowdown: ALL_REDUCE, ..., SEND, RECV; unset: every
  /// communication.
  std::optional<std::set<std::string>> collectives;
  unsigned line = 0; ///< Where the rule starts in the spec, for messages.
};

struct PerturbationSpec {
  std::string path;
  uint64_t seed = 0;
  double scale = 1.0;
  std::vector<PerturbationRule> rules;

  bool needsDevice() const;
};

/// Reads and checks a spec against the run: ranks below `numRanks`,
/// layers below `numLayers`, micro-batches below `numMicrobatches`. Errors
/// name the file, line, column and key.
llvm::Expected<PerturbationSpec> loadPerturbationSpec(llvm::StringRef path,
                                                      unsigned numRanks,
                                                      unsigned numLayers,
                                                      unsigned numMicrobatches);
/// The spec of a YAML text, as loadPerturbationSpec reads a file.
llvm::Expected<PerturbationSpec>
parsePerturbationSpec(llvm::StringRef text, llvm::StringRef path,
                      unsigned numRanks, unsigned numLayers,
                      unsigned numMicrobatches);

/// One changed node of a variant, for `perturbations.json`.
struct PerturbationRecord {
  unsigned rank = 0;
  uint64_t node = 0; ///< Id in the variant's file.
  std::string name;
  unsigned rule = 0;
  double factor = 1.0;      ///< gpu_slowdown (num_ops), link_slowdown (size).
  uint64_t delayMicros = 0; ///< nic_slowdown.
  uint64_t delayNode = 0;   ///< nic_slowdown: the inserted node's id.
};

/// Fails unless every link_slowdown rule changes a collective on all of its
/// ranks alike (chance 1, a constant slowdown, whole groups selected): the
/// ranks of a collective must agree on its size.
llvm::Error checkLinkRules(const PerturbationSpec &spec,
                           const ProgramSet &programs);

/// `gpu_slowdown`, `nic_slowdown` or `link_slowdown`.
llvm::StringRef getRuleKindName(PerturbationRule::Kind kind);

/// A node `factor` times slower: a compute node's FLOPs and duration, a
/// communication's size (the same transfer over a slower link).
void scaleNode(ProgramNode &node, double factor);

/// `programs` with every FLOP count, byte count and message size times
/// `scale` (rounded, and at least 1 where it was not 0).
ProgramSet scalePrograms(const ProgramSet &programs, double scale);

/// What the rules do to one node of a rank's stage program.
struct NodeChange {
  uint32_t node = 0;        ///< Index in the stage program's nodes.
  /// gpu_slowdown: num_ops and duration multiplier; link_slowdown: comm_size.
  double factor = 1.0;
  uint64_t delayMicros = 0; ///< nic_slowdown: a delay node before it.
  unsigned rule = 0;        ///< The last rule that matched it.
};

/// The draws of a spec's rules on a program set: for a (variant, rank), the
/// changes to the nodes of the rank's stage program. Construction indexes,
/// once per stage and rule, the nodes each draw unit's rule matches, so a
/// draw visits only the nodes of the units it selects; a rank no unit
/// selects costs its random streams alone. Thread-safe once built.
class PerturbationDraws {
public:
  PerturbationDraws(const PerturbationSpec &spec, const ProgramSet &programs,
                    const DeviceSpec *device);

  /// Replaces `changes` with `rank`'s in `variant`, by ascending node; empty
  /// if no rule matches a node of it. A change may leave its node as it was
  /// (a delay that rounds to 0 us).
  void draw(unsigned variant, unsigned rank,
            std::vector<NodeChange> &changes) const;

  const PerturbationSpec &getSpec() const { return spec; }

private:
  /// One stage's draw units: unit 0 is the top level (layer -1), unit i the
  /// stage's i-th layer, then the other stages' layers that a node names
  /// (the receive of a neighbour's activation or gradient), ascending.
  struct StageUnits {
    std::vector<unsigned> unitLayers; ///< Of units 1, 2, ...
    /// Per rule: the nodes it matches in unit u are
    /// nodes[rule][begin[rule][u], begin[rule][u + 1]), ascending.
    std::vector<std::vector<uint32_t>> begin, nodes;
  };

  const PerturbationSpec &spec;
  const ProgramSet &programs;
  const DeviceSpec *device;
  std::vector<StageUnits> stages;
};

/// `base` with `changes` (by ascending node) made: matched compute nodes'
/// num_ops and duration times their factor, a COMP delay node inserted before
/// each delayed communication (which then depends on it), the nodes
/// renumbered and the schedule steps moved with them. Appends what changed
/// on `rank` to `records` if given. `device` is needed for delays. `base`
/// folds no layers (InstantiateOptions::foldLayers).
StageProgram
applyNodeChanges(const StageProgram &base, llvm::ArrayRef<NodeChange> changes,
                 const DeviceSpec *device, unsigned rank = 0,
                 std::vector<PerturbationRecord> *records = nullptr);

class Perturber {
public:
  Perturber(const PerturbationSpec &spec, const ProgramSet &programs,
            unsigned variant, const DeviceSpec *device)
      : programs(programs), variant(variant), device(device),
        draws(spec, programs, device) {}

  /// `rank`'s own program if a rule changes it (appending what changed to
  /// `records`), else nothing. Thread-safe.
  std::optional<StageProgram>
  perturb(unsigned rank, std::vector<PerturbationRecord> &records) const;

private:
  const ProgramSet &programs;
  unsigned variant;
  const DeviceSpec *device;
  PerturbationDraws draws;
};

/// A seed as JSON: a number while JSON readers hold it exactly (up to
/// 2^63 - 1), its digits as a string above.
llvm::json::Value getSeedJSON(uint64_t seed);

/// Writes `perturbations.json`: the spec, seed, variant and every change.
void writePerturbationRecords(
    llvm::raw_ostream &os, const PerturbationSpec &spec, unsigned variant,
    const std::vector<std::vector<PerturbationRecord>> &recordsByRank);

} // namespace stg

#endif // STG_PERTURB_PERTURBATION_H
