//===- ServingSimulation.h - Continuous batching over requests ---*- C++
//-*-===//
//
// The scheduler above the iteration clock: requests arrive (a closed loop
// of clients, a rate, or a trace's times), queue, and run on engines that batch
// them continuously as vLLM, SGLang and TensorRT-LLM do. Each iteration runs
// the running sequences' decode tokens plus prefill chunks up to a token
// budget; a sequence is admitted only when the KV cache can hold all its tokens
// (TensorRT-LLM's guaranteed-no-evict policy), in paged blocks. A
// deployment is aggregated (prefill and decode on the same engines) or
// disaggregated (prefill engines hand each sequence's KV cache to decode
// engines over the scale-out network). docs/serving.md has the model and
// what it leaves out.
//
//===----------------------------------------------------------------------===//

#ifndef STG_SERVE_SERVINGSIMULATION_H
#define STG_SERVE_SERVINGSIMULATION_H

#include "stg/Serve/IterationCost.h"
#include "stg/Support/Diagnostics.h"

#include "llvm/ADT/ArrayRef.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace stg {

struct RequestLengths {
  uint64_t input = 0, output = 0;
};

/// The blocks a trace says each prompt is made of (Mooncake's `hash_ids`):
/// equal ids are equal content, and so is everything before them in their
/// prompts, so two prompts share the blocks up to their first different id.
/// Prefix caching reads a prompt's leading blocks that its replica holds.
struct PromptBlocks {
  uint64_t tokens = 0; ///< Each block's; 0: the prompts name no blocks.
  std::vector<uint64_t> ids;
  /// Line i's ids are ids[begin[i]] to ids[begin[i + 1]]: a line each, and
  /// one past the last.
  std::vector<uint64_t> begin;

  bool empty() const { return !tokens; }
  llvm::ArrayRef<uint64_t> getLine(size_t line) const {
    return llvm::ArrayRef<uint64_t>(ids).slice(begin[line],
                                               begin[line + 1] - begin[line]);
  }
};

/// The largest id a block may have: every double below it is a whole
/// number, as JSON's numbers are read.
constexpr uint64_t MaxBlockId = (uint64_t(1) << 53) - 1;

/// Engines of one plan: `instances` copies of a model instance. With
/// pipeline stages each instance runs one batch per stage at once
/// (vLLM's virtual engines), so it is `stages` engines.
struct EnginePool {
  const IterationCostModel *cost = nullptr;
  unsigned instances = 1;
  std::string plan; ///< How the instance is split, for reports: "tp4".
};

struct ServingDeployment {
  /// Aggregated: `decode` alone serves both phases. Disaggregated: `prefill`
  /// runs the prompts, `decode` the rest.
  std::optional<EnginePool> prefill;
  EnginePool decode;
  /// The network a KV cache crosses between the pools (scale-out tier).
  double transferBandwidth = 0; ///< Bytes/s per GPU, effective.
  double transferLatencyMicros = 0;
  /// A GPU's link to its host's memory, where offloaded KV blocks go
  /// (ServingEngineSettings::offloadBytes): bytes/s, effective.
  double hostBandwidth = 0;

  bool isDisaggregated() const { return prefill.has_value(); }
};

/// Sets the links `deployment` uses on `system`: the scale-out tier (the
/// scale-up one without it) for KV transfers between the pools, the
/// device's host link for offloaded KV blocks, each at its efficiency.
void setDeploymentLinks(ServingDeployment &deployment,
                        const SystemSpec &system);

struct ServingWorkload {
  /// Each request's lengths, used in turn (one entry: fixed lengths).
  std::vector<RequestLengths> lengths;
  /// The first tokens of every prompt, the same for all requests (a system
  /// prompt, few-shot examples): what prefix caching can reuse. With
  /// `prefixGroups` groups, conversation c's prompts begin with group
  /// c mod prefixGroups's prefix, each its own (SGLang's generated shared
  /// prefix benchmark: a system prompt per application).
  uint64_t sharedPrefix = 0;
  unsigned prefixGroups = 1;
  /// Multi-turn conversations: each conversation is `turns` requests, one
  /// after another, each sent `thinkMicros` after the last one finished
  /// with the conversation so far (the earlier prompts and outputs) before
  /// its own new input, what prefix caching can reuse. Turn t of
  /// conversation c takes its new input and its output from
  /// lengths[c x turns + t], cyclically.
  unsigned turns = 1;
  double thinkMicros = 0;
  uint64_t requests = 0; ///< All turns of all conversations.
  /// A closed loop of clients, each sending its next request when the last
  /// one finished; or arrivals at a rate (requests/s; infinity: all at
  /// once), gaps from `seed` drawn from a gamma distribution of shape
  /// `burstiness` (vLLM benchmark_serving's: 1 is Poisson, below 1
  /// burstier); or arrivals at given times.
  std::optional<uint64_t> concurrency;
  std::optional<double> requestRate;
  double burstiness = 1;
  uint64_t seed = 0;
  /// Each request's arrival, microseconds from the first, in the order the
  /// requests are sent (a trace: RequestTrace::arrivals); single turns.
  std::vector<double> arrivals;
  /// The blocks of each line of `lengths` (a trace's); single turns and no
  /// shared prefix, which they replace.
  PromptBlocks promptBlocks;
};

/// The most and least --burstiness: gamma shapes whose gaps stay finite
/// and positive in a double.
constexpr double MinBurstiness = 0.01, MaxBurstiness = 100;

/// The engine's own time per iteration (scheduling, input preparation,
/// sampling) that the tools assume: fitted on the published low-concurrency
/// serving runs (docs/serving.md, "Validation").
constexpr double DefaultIterationOverheadMicros = 1500;

/// Requests a run sends when not told: ten a client, at least 100, for
/// `concurrency` clients; 1000 at a request rate.
inline uint64_t getDefaultRequests(std::optional<uint64_t> concurrency) {
  return concurrency ? std::max<uint64_t>(100, 10 * *concurrency) : 1000;
}

/// Speculative decoding (a draft proposes tokens that one step of the
/// model verifies): an MTP module, EAGLE's head or a small draft model.
struct SpeculativeDecoding {
  unsigned draftTokens = 0; ///< Proposed a decode step; 0: none.
  /// The chance each draft token is accepted, given that those before it
  /// were: a step yields 1 + the accepted prefix, (1 - p^(n+1)) / (1 - p)
  /// tokens on average.
  double acceptance = 0;
  /// The decoder layers a draft token runs (with the LM head): 1 for an
  /// MTP module or EAGLE.
  unsigned draftLayers = 1;
};

/// How an engine gives sequences their KV cache.
enum class KVAllocation {
  /// A sequence's whole cache, prompt and output, at admission; it is never
  /// evicted (TensorRT-LLM's GUARANTEED_NO_EVICT).
  Reserve,
  /// The prompt's blocks at admission, a block more as the output grows;
  /// when the cache is full the newest sequence is preempted, its cache
  /// freed, and recomputed from its prompt and output so far when it is
  /// admitted again (vLLM's scheduler).
  OnDemand,
};

/// `reserve` or `on-demand`, as `--kv-allocation` names them.
llvm::StringRef getKVAllocationName(KVAllocation allocation);
std::optional<KVAllocation> parseKVAllocation(llvm::StringRef name);

/// How a pool's requests are sent to its engines.
enum class Router {
  /// To the engine with the fewest sequences waiting or running.
  Load,
  /// To the attention replica, of any engine, where the request costs
  /// least: the prompt tokens its cache does not hold and the prefills
  /// pending there, weighted by ServingEngineSettings::kvOverlapWeight,
  /// plus the tokens its running sequences hold (NVIDIA Dynamo's KV
  /// router's cost, in tokens rather than blocks).
  KVAware,
  /// SGLang's cache-aware router (CacheAwareRouting): to the least loaded
  /// engine while the loads are out of balance, else to the engine that
  /// caches the longest prefix of the prompt if that is enough of it, else
  /// to the engine sent the fewest prompt tokens (sgl-router's smallest
  /// radix tree).
  CacheAware,
};

/// `load`, `kv` or `cache-aware`, as `--router` names them.
llvm::StringRef getRouterName(Router router);
std::optional<Router> parseRouter(llvm::StringRef name);

/// The router that routes requests as `router` does where `engines`
/// engines prefill (an aggregated pool's, or the prefill pool's; decode
/// engines go by load whatever the router), each of `replicas` attention
/// replicas: with one engine only the KV router still chooses, among its
/// replicas, and the others route as by load.
Router getEffectiveRouter(Router router, unsigned engines, unsigned replicas);

/// The thresholds of SGLang's cache-aware router, with sgl-router's
/// defaults (`--cache-threshold`, `--balance-abs-threshold`,
/// `--balance-rel-threshold`). Loads are requests waiting or running.
struct CacheAwareRouting {
  /// The share of the prompt an engine must cache for the cache to decide.
  double cacheThreshold = 0.3;
  /// Out of balance: the most loaded engine has more than this many
  /// requests over the least loaded, and more than relative times its.
  uint64_t balanceAbsolute = 64;
  double balanceRelative = 1.5;
};

struct ServingEngineSettings {
  ServingLimits limits;
  Router router = Router::Load;
  /// The KV router's weight of prefill tokens against held ones (Dynamo's
  /// kv-overlap-score-weight): above 1 favours cache hits, below 1 load.
  double kvOverlapWeight = 1;
  CacheAwareRouting cacheAware;
  SpeculativeDecoding speculation;
  KVAllocation kvAllocation = KVAllocation::Reserve;
  /// Prefix caching (vLLM's automatic prefix caching, SGLang's radix cache,
  /// TensorRT-LLM's KV-cache block reuse): the whole blocks of a shared
  /// prefix (or of a trace's prompts, PromptBlocks), once an attention
  /// replica has computed them, stay in its cache (evicted, least recently
  /// read first, for room when nothing there reads them), and a prompt
  /// admitted there prefills only what follows them;
  /// a conversation's context stays where its turn ran, until its next
  /// turn reads it or room is needed (least recently cached first).
  bool prefixCaching = true;
  /// Chunked prefill (vLLM's and SGLang's default): a prompt runs in
  /// chunks that fill what the iteration's token budget leaves. Without it
  /// (TensorRT-LLM's default) a prompt runs whole in one iteration, and the
  /// prompts after the first that does not fit wait for the next.
  bool chunkedPrefill = true;
  /// Mixed batches (vLLM's and TensorRT-LLM's): an iteration runs the
  /// decodes and the prefill chunks together. Without them (SGLang's
  /// scheduler unless --enable-mixed-chunk) a replica with a prompt ready
  /// runs only prompts in an iteration, and its decodes wait for one with
  /// none.
  bool mixedBatches = true;
  /// KV offload (TensorRT-LLM's host cache, vLLM's and LMCache's CPU
  /// offloading): host memory per GPU that keeps the conversations'
  /// contexts evicted from the device's cache, least recently cached
  /// dropped first; a turn whose context is there reads it back over the
  /// host link before its prefill. 0: none.
  double offloadBytes = 0;
  unsigned blockTokens = 16; ///< KV cache page (vLLM's block_size).
  /// The engine's own time per iteration: scheduling, input preparation,
  /// sampling (docs/serving.md has the figure and its source).
  double iterationOverheadMicros = 0;
};

/// What happened to a request, in microseconds from the first arrival.
struct RequestRecord {
  uint64_t input = 0, output = 0;
  uint32_t conversation = 0; ///< Its conversation, and its turn there.
  unsigned turn = 0;
  double arrival = 0, firstToken = 0, finish = 0;
  /// When an engine first admitted it (its prefill pool's, when
  /// disaggregated): what it waited in the queue before.
  double admitted = 0;
  double transfer = 0; ///< Disaggregated: the KV cache's move.
  unsigned prefillEngine = 0; ///< The engine that ran its prefill.
};

/// One iteration of one engine.
struct IterationRecord {
  unsigned engine = 0;
  double start = 0, micros = 0;
  uint64_t decodeSequences = 0, prefillTokens = 0;
  uint64_t running = 0, waiting = 0;
  double kvUsed = 0; ///< Fraction of the engine's KV cache reserved.
  uint64_t decodeContext = 0; ///< Summed over the decode sequences.
  uint64_t prefillChunks = 0; ///< Sequences with prefill tokens.
};

struct EngineRecord {
  std::string name; ///< `decode.0.1`: pool, instance, pipeline slot.
  bool prefill = false, decode = true;
  uint64_t kvTokens = 0; ///< KV cache capacity in tokens (one sequence's).
};

struct ServingResult {
  std::vector<RequestRecord> requests;
  std::vector<IterationRecord> iterations;
  std::vector<EngineRecord> engines;
  unsigned gpus = 0;
  uint64_t preemptions = 0; ///< KVAllocation::OnDemand's evictions.
  /// Prompt tokens read from a cached prefix instead of prefilled.
  uint64_t prefixHitTokens = 0;
  /// Of those, read back from host memory (KV offload).
  uint64_t hostHitTokens = 0;
  /// Tokens of conversations' cached contexts evicted before their next
  /// turn could read them (least recently cached first).
  uint64_t evictedTokens = 0;
};

/// Runs the workload to the last request's end. Errors when a request can
/// never fit an engine's KV cache or token budget.
std::optional<ServingResult>
simulateServing(const ServingDeployment &deployment,
                const ServingEngineSettings &settings,
                const ServingWorkload &workload, DiagnosticEngine &diags);

} // namespace stg

#endif // STG_SERVE_SERVINGSIMULATION_H
