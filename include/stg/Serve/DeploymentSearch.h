//===- DeploymentSearch.h - The best serving deployments ---------*- C++ -*-===//
//
// `stage-search --serve`: for a model, a cluster, a GPU budget and a
// workload, every aggregated and disaggregated deployment, run at each
// workload point (a concurrency or a request rate) and ranked by output
// tokens/s per GPU among those that meet the SLOs, with the Pareto front
// of tokens/s per GPU against tokens/s per user (docs/search.md, "Serving
// deployments").
//
// The space: instance plans (tp, pp, ep, precision, two-batch overlap; pp
// only as deep as memory needs unless listed), and from them aggregated
// deployments (as many instances as the budget holds) and disaggregated
// ones (x prefill and y decode instances that leave fewer GPUs idle than
// either pool's instance takes), each under every batch cap. An instance's
// cost model (IterationCostModel::build) depends on its plan and the
// engine's limits, not on instance counts or the load: it is built once
// and shared by every deployment and workload point. The runs are
// continuous-batching simulations (simulateServing), in threads; a run
// depends on its inputs alone, so the table is the same whatever the
// number of threads.
//
//===----------------------------------------------------------------------===//

#ifndef STG_SERVE_DEPLOYMENTSEARCH_H
#define STG_SERVE_DEPLOYMENTSEARCH_H

#include "stg/Serve/ServingReport.h"
#include "stg/Serve/ServingSimulation.h"

#include "llvm/Support/raw_ostream.h"

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace stg {

/// How one instance is split, and what it computes in.
struct InstancePlan {
  unsigned tp = 1, pp = 1, ep = 1;
  Precision precision = Precision::BF16;
  /// Each iteration in two overlapped halves (stagec's
  /// --two-batch-overlap).
  bool twoBatchOverlap = false;

  unsigned getGPUs() const { return tp * pp * ep; }
  /// `tp4`, `tp2pp2`, `tp1ep8` (as stagec's --prefill-pool spells a plan).
  std::string getLabel() const;
  /// The mesh degrees above one, as CompileOptions take them.
  std::vector<std::pair<std::string, unsigned>> getDegrees() const;
};

/// An instance plan that was built: whether one request of the workload
/// fits its KV cache as a prefill instance (the input and one token) and
/// as a decode or aggregated one (input and output), or why it failed.
struct InstancePlanResult {
  InstancePlan plan;
  bool fitsPrefill = false, fitsDecode = false;
  bool failed = false;
  std::string reason; ///< Why it fits neither, or the compiler's message.
  uint64_t weightBytes = 0;
  double kvBudgetBytes = 0; ///< A rank's KV cache (IterationCostModel).
  /// The KV cache of an instance's attention replica (all of its pipeline
  /// slots), in tokens.
  uint64_t kvTokens = 0;
};

/// `instances` copies of the instance plan `plan` (an index into
/// DeploymentTable::plans).
struct PoolChoice {
  unsigned plan = 0;
  unsigned instances = 1;
};

struct Deployment {
  /// Disaggregated: the prefill pool; `serve` is then the decode pool.
  std::optional<PoolChoice> prefill;
  /// Aggregated: the instances that run both phases.
  PoolChoice serve;
};

enum class RunStatus : uint8_t {
  Meets,  ///< Ran and meets the SLOs (every run, without SLOs).
  Misses, ///< Ran and misses an SLO (`reason` says which).
  Failed, ///< Did not run (`reason` has the simulation's message).
};

/// One deployment under one batch cap at one workload point.
struct DeploymentRun {
  Deployment deployment;
  uint64_t maxBatch = 0;
  Router router = Router::Load;
  /// False when no attention replica ever ran `maxBatch` sequences: every
  /// larger cap gives the same run, which is not repeated in the table.
  bool maxBatchBinding = true;
  std::optional<uint64_t> concurrency;
  std::optional<double> requestRate; ///< Infinity: all at once.
  uint64_t requests = 0;
  unsigned gpus = 0; ///< The deployment's, not the budget.
  RunStatus status = RunStatus::Failed;
  std::string reason;
  ServingSummary summary;
  unsigned rank = 0;   ///< From 1 among those that meet the SLOs; else 0.
  bool pareto = false; ///< On the front among those that meet the SLOs.
};

/// Which latency figure the SLOs bound.
enum class SLOStatistic : uint8_t { Mean, P50, P90, P99 };
llvm::StringRef getSLOStatisticName(SLOStatistic statistic);
std::optional<SLOStatistic> parseSLOStatistic(llvm::StringRef name);
double getLatencyStatistic(const LatencySummary &summary,
                           SLOStatistic statistic);

struct DeploymentSearchOptions {
  /// The model (input, -I, --set, --dtype, the KV cache's type); its
  /// degrees, precision and mode are the search's.
  CompileOptions base;
  unsigned gpus = 0; ///< The budget.
  /// Degrees to try; empty: tp every power of two up to a node (and the
  /// budget), ep 1 (every power of two up to the budget for a model with
  /// experts), pp the least power of two at which a request fits.
  std::vector<unsigned> tp, pp, ep;
  std::vector<Precision> precisions = {Precision::BF16};
  /// Two-batch overlap off, on or both; on is tried only with ep > 1,
  /// where there are exchanges between ranks to hide.
  std::vector<bool> twoBatchOverlap = {false};
  std::vector<uint64_t> maxBatches = {256};
  bool aggregated = true, disaggregated = true;

  /// The requests' lengths (one entry: fixed lengths) and the workload
  /// points: concurrencies or request rates, one run each.
  std::vector<RequestLengths> lengths;
  std::string lengthsFile; ///< Where `lengths` came from, if a file.
  /// The file's prompt blocks (a trace's hash_ids), if it names any.
  PromptBlocks promptBlocks;
  std::vector<uint64_t> concurrencies;
  std::vector<double> requestRates;
  /// Requests a run; none: 10 x the concurrency (at least 100), or 1000 at
  /// a request rate, as stagec --mode serve.
  std::optional<uint64_t> requests;
  /// The first requests of a run, run but not measured (stagec's
  /// --warmup-requests); fewer than any run's requests.
  uint64_t warmupRequests = 0;
  uint64_t seed = 0; ///< Of the arrivals at a request rate.
  double burstiness = 1; ///< The gamma shape of their gaps (1: Poisson).
  /// The prompts' shared prefixes and the conversations' turns and think
  /// time (ServingWorkload's).
  uint64_t sharedPrefix = 0;
  unsigned prefixGroups = 1;
  unsigned turns = 1;
  double thinkMicros = 0;

  /// The engine's settings but the batch cap, the router (and the longest
  /// context, which the lengths give). ServingEngineSettings' own
  /// defaults: no engine time an iteration, where stage-search sets
  /// stagec's 1.5 ms.
  ServingEngineSettings engine;
  /// The routers to try, each a run of every deployment where it routes
  /// otherwise than the routers before it (routers choose among the
  /// engines that prefill; with one, only the KV router, among its
  /// attention replicas).
  std::vector<Router> routers = {Router::Load};

  std::optional<double> maxTTFTMillis, maxTPOTMillis;
  SLOStatistic sloStatistic = SLOStatistic::P50;
  /// Per-request SLOs instead (DistServe's): a run meets them when at least
  /// this share of its measured requests is within every bound; the
  /// statistic then only picks the latencies shown.
  std::optional<double> sloAttainment;

  /// The per-request bounds a run's summary counts, with sloAttainment.
  ServingSLO getRequestSLO() const {
    return sloAttainment ? ServingSLO{maxTTFTMillis, maxTPOTMillis, {}}
                         : ServingSLO{};
  }

  /// A disaggregated pair of plans adds prefill instances until this many
  /// runs in a row miss the time-per-token SLO, or, after a run that meets
  /// the SLOs, miss one or are beaten in both throughputs by such a run
  /// (0: every split).
  unsigned splitPatience = 2;

  unsigned jobs = 1; ///< Threads for the runs.
  /// The most runs a search takes (refused beyond, once the plans are
  /// built and before any run).
  uint64_t maxRuns = 1'000'000;
};

/// Called as a group of runs finishes: runs done, of how many (the runs
/// left out count as done).
using DeploymentProgress = std::function<void(size_t done, size_t total)>;

struct DeploymentTable {
  std::string input, model, system, accelerator;
  unsigned gpus = 0, gpusPerNode = 0;
  uint64_t deviceMemoryBytes = 0;
  /// Every instance plan built, in the order tried.
  std::vector<InstancePlanResult> plans;
  uint64_t aggregatedDeployments = 0, disaggregatedDeployments = 0;
  /// Runs the space has (deployments x caps x routers x points), those
  /// left out because they would repeat another (a smaller cap that never
  /// bound, a router that routes the deployment as an earlier one), and
  /// those a sweep over splits stopped before (splitPatience).
  uint64_t candidateRuns = 0, repeatedRuns = 0, skippedRuns = 0;
  std::vector<DeploymentRun> runs;
};

/// Every maximal deployment of `plans` on `gpus` GPUs: aggregated ones
/// from the plans that fit a whole request, disaggregated ones from a
/// prefill plan and a decode plan of the same precision and two-batch
/// overlap (stagec sets both for the whole deployment). In order: the
/// aggregated by plan, then the disaggregated by prefill plan, decode plan
/// and prefill instances.
std::vector<Deployment>
enumerateDeployments(llvm::ArrayRef<InstancePlanResult> plans, unsigned gpus,
                     bool aggregated, bool disaggregated);

/// The requests of a run at workload point `point` (the concurrencies'
/// first, then the request rates'), and the fewest of any point.
uint64_t getRunRequests(const DeploymentSearchOptions &options, size_t point);
uint64_t getFewestRequests(const DeploymentSearchOptions &options);

/// What compiles an instance of `plan` in the search.
CompileOptions getInstanceOptions(const DeploymentSearchOptions &options,
                                  const InstancePlan &plan);
/// The engine's limits in every run but the batch cap: the longest context
/// is the lengths'.
ServingLimits getSearchLimits(const DeploymentSearchOptions &options);
/// The workload of the runs at point `point`.
ServingWorkload getPointWorkload(const DeploymentSearchOptions &options,
                                 size_t point);

/// Builds the plans, runs every deployment at every point and ranks the
/// runs. Errors (a model without MB, a system without memory, a space past
/// maxRuns) go to `diags`; a plan or run that fails is a row of the table.
std::optional<DeploymentTable>
searchDeployments(const DeploymentSearchOptions &options,
                  const SystemSpec &system, DiagnosticEngine &diags,
                  const DeploymentProgress &progress = nullptr);

/// `value` as the flags take it: a whole number in digits (`2000`), else
/// the shortest decimal that reads back the same (`0.5`), or `inf`.
std::string formatShortest(double value);

/// Whether `summary` meets the SLOs (summarized with
/// options.getRequestSLO()); if not, why.
std::optional<std::string> checkSLOs(const ServingSummary &summary,
                                     const DeploymentSearchOptions &options);

/// Sorts the runs (those that meet the SLOs by output tokens/s per GPU,
/// then per user, then those that miss by the same, then the failed; ties
/// keep their order), numbers the first from 1 and marks their Pareto
/// front: the runs no other run beats in both tokens/s per GPU and per
/// user (at least as good in both, better in one).
void rankDeployments(DeploymentTable &table);

/// `8xtp8` (aggregated) or `2xtp8 -> 6xtp4` (prefill to decode), with the
/// precision after a space unless bf16.
std::string getDeploymentLabel(const DeploymentTable &table,
                               const Deployment &deployment);

/// The flags after the model that make `stagec --mode serve` run `run`
/// alone (with `--report`, the same figures).
std::string getStagecFlags(const DeploymentTable &table,
                           const DeploymentRun &run,
                           const DeploymentSearchOptions &options);

/// deployments.json: the search's inputs, the instance plans, and every
/// run, ranked first.
void writeDeploymentsJSON(llvm::raw_ostream &os, const DeploymentTable &table,
                          const DeploymentSearchOptions &options);
/// deployments.csv: one row a run.
void writeDeploymentsCSV(llvm::raw_ostream &os, const DeploymentTable &table);
/// The search in a few lines, the `top` best runs, and the Pareto front.
void printDeploymentSummary(llvm::raw_ostream &os, const DeploymentTable &table,
                            const DeploymentSearchOptions &options,
                            unsigned top);

} // namespace stg

#endif // STG_SERVE_DEPLOYMENTSEARCH_H
