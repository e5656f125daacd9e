//===- PlanEvaluator.h - Compile and price one plan -------------*- C++ -*-===//
//
// Evaluates plans of one model on one system: compiles each (no trace
// files) and records per-rank peak memory by kind, the step time, MFU,
// tokens per second per GPU, exposed communication and the pipeline bubble.
//
// What plans share is done once: the model is parsed and taken through the
// passes once per structure (recomputation, weight sharding, sequence
// parallelism), since only check-divisibility reads the degrees (the
// search's shard-optimizer pads for any degrees, with expressions of
// theirs); a plan then binds its degrees and micro-batch size, is checked
// against the model's dims, and is instantiated with folded micro-batches
// (Program.h), so its cost does not grow with the micro-batch count. Plans
// that bind the same numbers share the check and the ops' costs, and a plan
// that differs from the previous one only in rank order reuses its
// programs. Results depend on the plan alone, not on what was cached.
//
// An evaluator is not thread-safe (GiNaC is not); the search runs one per
// worker process.
//
//===----------------------------------------------------------------------===//

#ifndef STG_SEARCH_PLANEVALUATOR_H
#define STG_SEARCH_PLANEVALUATOR_H

#include "stg/Driver/Compile.h"
#include "stg/Instantiate/OpNumbers.h"
#include "stg/Passes/DivisibilityCheck.h"
#include "stg/Perf/StepEstimate.h"
#include "stg/Perf/System.h"
#include "stg/Search/PlanSpace.h"

#include "llvm/ADT/StringMap.h"
#include "llvm/Support/Error.h"

#include <map>
#include <memory>
#include <string>

namespace stg {

enum class PlanStatus : uint8_t {
  Fits,       ///< Compiled, and its peak memory is within the limit.
  OverMemory, ///< Compiled, but a stage needs more than the limit.
  Failed,     ///< The model's dims do not split over the degrees, or the
              ///< compiler refused the plan: `reason` says why.
};

llvm::StringRef getPlanStatusName(PlanStatus status);

struct PlanResult {
  Plan plan;
  PlanStatus status = PlanStatus::Failed;
  std::string reason;
  /// The failure came from checking the model's dims against the degrees,
  /// before instantiation: the search counts such plans as pruned.
  bool prunedByModel = false;
  StageMemory memory; ///< The stage with the largest total.
  double stepMicros = 0;
  double computeMicros = 0;  ///< Mean over stages of compute busy time.
  double exposedCommunicationMicros = 0; ///< Compute waiting on collectives.
  double bubbleFraction = 0; ///< Mean share of the step spent waiting on
                             ///< other stages.
  double mfu = 0;
  double tokensPerSecondPerGPU = 0;
  unsigned rank = 0; ///< 1: the fastest plan that fits; 0: none.
};

/// What the search needs to know of the model, from one compile of it on
/// one GPU.
struct ModelFacts {
  ModelShape shape;
  std::string modelName;
  /// FLOPs of a training step of one sequence, forward and backward, with
  /// no recomputation: the model FLOPs of MFU.
  double flopsPerSequence = 0;
  uint64_t sequenceLength = 0; ///< The model's `S`, or 0.
};

/// Compiles `base` on one GPU with a micro-batch of one sequence and
/// reads the facts; the model must declare `dim MB`.
llvm::Expected<ModelFacts> readModelFacts(const CompileOptions &base);

class PlanEvaluator {
public:
  PlanEvaluator(CompileOptions base, SystemSpec system, ModelFacts facts,
                unsigned globalBatch, uint64_t memoryLimitBytes)
      : base(std::move(base)), system(std::move(system)),
        facts(std::move(facts)), globalBatch(globalBatch),
        memoryLimitBytes(memoryLimitBytes) {}

  PlanResult evaluate(const Plan &plan);
  /// The options that compile `plan` as stagec would (without folding).
  CompileOptions getCompileOptions(const Plan &plan) const;

private:
  /// The module of the plan's structure, through the passes that do not
  /// read degrees; nullptr after reporting why not.
  CompileOptions base;
  SystemSpec system;
  ModelFacts facts;
  unsigned globalBatch;
  uint64_t memoryLimitBytes;
  /// A module through the passes, and what was bound on it: plans that
  /// bind the same degrees and micro-batch size (they differ in
  /// interleaving or rank order) share its check, and the ops' numbers of
  /// the last such binding.
  struct CachedModule {
    PreparedModel prepared;
    std::string bound; ///< Degrees and micro-batch size, last bound.
    /// check-divisibility's extents, collected at the first check.
    std::unique_ptr<DivisibilityCheck> divisibility;
    /// What the check of a binding found (plans of other virtual stages
    /// come back to it): why check-divisibility refused it, or empty; and
    /// its replicated extents (DivisibilityCheck::getReplicatedExtents),
    /// which key the structure its programs share with other plans.
    struct BindingCheck {
      std::string failure, replicated;
    };
    llvm::StringMap<BindingCheck> checks;
    std::unique_ptr<OpNumberCache> numbers;
  };
  CachedModule *getModule(const Plan &plan, const CompileOptions &options,
                          DiagnosticEngine &diags);
  struct CachedStructure;
  /// The structure whose programs are `plan`'s, priced: a cached one's
  /// re-priced when both have one structure (Plan::getStructureKey, and the
  /// same `replicated` extents), or else instantiated; null after reporting
  /// why not.
  CachedStructure *getPrograms(const Plan &plan, CachedModule &cached,
                               const Mesh &mesh, const CompileOptions &options,
                               llvm::StringRef replicated,
                               DiagnosticEngine &diags);

  std::map<std::string, CachedModule> modules;
  /// The programs of a structure built or moved to another micro-batch
  /// count, for its family's next plans.
  struct CachedStructure {
    std::string key, familyKey;
    /// The module binding (CachedModule::bound) the programs are priced
    /// for, if they are priced.
    std::string pricedFor;
    ProgramSet programs;
    ProgramSources sources;
    StepShapeCache shapes;
  };
  /// The structures of the last few families, the latest first: a
  /// family's plans that replicate an extent and those that do not (tp
  /// past the KV heads) alternate in the search's order, and each keeps
  /// its programs.
  std::vector<std::unique_ptr<CachedStructure>> structures;
  static constexpr size_t MaxCachedStructures = 4;
  /// The cached structure of `familyKey`, moved to the front; null if none.
  CachedStructure *findStructure(llvm::StringRef familyKey);
};

} // namespace stg

#endif // STG_SEARCH_PLANEVALUATOR_H
