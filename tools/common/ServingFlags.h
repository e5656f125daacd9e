//===- ServingFlags.h - The serving engine's shared flags -------*- C++ -*-===//
//
// The engine's flags that `stagec --mode serve` and `stage-search --serve`
// read the same way: `--kv-allocation`, `--chunked-prefill`, `--mixed-batches`,
// `--linear-kernels` (stagec's prefill and decode too), `--shared-prefix`,
// `--turns`, `--think-time-ms`, `--kv-offload-gb` and `--prefix-caching`,
// and speculative decoding's `--speculative-tokens`, `--acceptance-rate`
// and `--draft-layers` (docs/serving.md).
//
//===----------------------------------------------------------------------===//

#ifndef STG_TOOLS_COMMON_SERVINGFLAGS_H
#define STG_TOOLS_COMMON_SERVINGFLAGS_H

#include "CommandLine.h"

#include "stg/Serve/RequestLengths.h"
#include "stg/Serve/ServingSimulation.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLExtras.h"

#include <optional>
#include <string>
#include <vector>

namespace stg {

/// `--kv-allocation reserve|on-demand` into `name`; parseKVAllocation
/// reads it.
inline void addKVAllocationOption(CLI::App &app, std::string &name,
                                  const std::string &group) {
  app.add_option("--kv-allocation", name,
                 "reserve (default: a sequence's whole cache at admission, "
                 "as TensorRT-LLM's GUARANTEED_NO_EVICT) or on-demand (a "
                 "block as it grows, preempting the newest sequence when "
                 "full, to recompute later, as vLLM)")
      ->check(
          CLI::IsMember({getKVAllocationName(KVAllocation::Reserve).str(),
                         getKVAllocationName(KVAllocation::OnDemand).str()}))
      ->group(group);
}

/// `--kv-memory-fraction` (vLLM's gpu_memory_utilization) or
/// `--kv-free-memory-fraction` (TensorRT-LLM's free_gpu_memory_fraction):
/// the memory an engine gives its KV cache.
inline void addKVMemoryOptions(CLI::App &app, double &fraction,
                               std::optional<double> &freeFraction,
                               const std::string &group) {
  CLI::Option *whole =
      app.add_option("--kv-memory-fraction", fraction,
                     "fraction of device memory the engine uses: weights, "
                     "activations, then the KV cache (gpu_memory_utilization; "
                     "default 0.9)")
          ->check(finiteNumber(0.01, 1))
          ->group(group);
  app.add_option("--kv-free-memory-fraction", freeFraction,
                 "instead: the KV cache's fraction of the memory the weights "
                 "and activations leave (TensorRT-LLM's "
                 "free_gpu_memory_fraction)")
      ->check(finiteNumber(0.01, 1))
      ->excludes(whole)
      ->group(group);
}

/// `--router`, `--kv-overlap-weight` and the cache-aware router's
/// thresholds: how requests find their engines. The routers' names go to
/// `routers` (parseRouters reads them): one, or with `several` a
/// comma-separated list to search over.
inline void addRouterOptions(CLI::App &app, std::vector<std::string> &routers,
                             bool several, double &weight,
                             CacheAwareRouting &cacheAware,
                             const std::string &group) {
  CLI::Option *option = app.add_option(
      "--router", routers,
      std::string(several ? "routers to try, comma-separated: " : "") +
          "load (default: a request goes to the engine with the fewest "
          "sequences), kv (to the attention replica where its uncached "
          "prompt tokens and the pending prefills, by --kv-overlap-weight, "
          "plus the tokens its sequences hold cost least, as NVIDIA "
          "Dynamo's KV router) or cache-aware (SGLang's router: the least "
          "loaded engine while loads are out of balance, else the one "
          "caching most of the prompt if over --cache-threshold of it, "
          "else the one sent the fewest prompt tokens)");
  option
      ->check(CLI::IsMember({getRouterName(Router::Load).str(),
                             getRouterName(Router::KVAware).str(),
                             getRouterName(Router::CacheAware).str()}))
      ->group(group);
  if (several)
    option->delimiter(',');
  else
    option->expected(1);
  app.add_option("--kv-overlap-weight", weight,
                 "with --router kv: the weight of prefill tokens against "
                 "held ones (Dynamo's kv-overlap-score-weight; default 1; "
                 "higher favours cache hits, lower balances load)")
      ->check(finiteNumber(0, 1e6))
      ->group(group);
  app.add_option("--cache-threshold", cacheAware.cacheThreshold,
                 "with --router cache-aware: the share of a prompt an "
                 "engine must cache to get it (default 0.3, sgl-router's)")
      ->check(finiteNumber(0, 1))
      ->group(group);
  app.add_option("--balance-abs-threshold", cacheAware.balanceAbsolute,
                 "with --router cache-aware: loads are out of balance when "
                 "the most loaded engine has more than this many requests "
                 "over the least, and --balance-rel-threshold times its "
                 "(default 64)")
      ->check(wholeNumber(0, 1000000))
      ->group(group);
  app.add_option("--balance-rel-threshold", cacheAware.balanceRelative,
                 "with --router cache-aware: loads are out of balance when "
                 "the most loaded engine has more than this many times the "
                 "requests of the least, and --balance-abs-threshold more "
                 "(default 1.5)")
      ->check(finiteNumber(1, 1e6))
      ->group(group);
}

/// The routers `names` name, each once, in the order Router lists them.
inline std::vector<Router> parseRouters(const std::vector<std::string> &names) {
  std::vector<Router> routers;
  for (Router router : {Router::Load, Router::KVAware, Router::CacheAware})
    if (llvm::is_contained(names, getRouterName(router)))
      routers.push_back(router);
  return routers;
}

/// What is wrong with the flags addRouterOptions read, if anything.
inline std::optional<std::string>
checkRouterOptions(const CLI::App &app, llvm::ArrayRef<Router> routers) {
  if (app.count("--kv-overlap-weight") &&
      !llvm::is_contained(routers, Router::KVAware))
    return std::string("--kv-overlap-weight weighs the costs of --router kv");
  for (const char *flag : {"--cache-threshold", "--balance-abs-threshold",
                           "--balance-rel-threshold"})
    if (app.count(flag) && !llvm::is_contained(routers, Router::CacheAware))
      return std::string(flag) + " is a threshold of --router cache-aware";
  return std::nullopt;
}

/// `--kv-window-cache window|whole` into `whole` (ServingLimits::
/// wholeWindowCaches).
inline void addWindowCacheOption(CLI::App &app, bool &whole,
                                 const std::string &group) {
  app.add_option_function<std::string>(
         "--kv-window-cache",
         [&whole](const std::string &value) { whole = value == "whole"; },
         "how the engine keeps a sliding-window or chunked layer's cache: "
         "window (default: its window's positions, as vLLM's hybrid KV "
         "cache manager and SGLang) or whole (blocks for the whole "
         "sequence, as TensorRT-LLM sizes them; attention still reads the "
         "window)")
      ->check(CLI::IsMember({"window", "whole"}))
      ->group(group);
}

/// A flag `name on|off` into `setting`.
inline void addSwitchOption(CLI::App &app, const std::string &name,
                            bool &setting, const std::string &help,
                            const std::string &group) {
  app.add_option_function<std::string>(
         name,
         [&setting](const std::string &value) { setting = value == "on"; },
         help)
      ->check(CLI::IsMember({"on", "off"}))
      ->group(group);
}

/// `--chunked-prefill on|off` into `setting` (ServingEngineSettings::
/// chunkedPrefill).
inline void addChunkedPrefillOption(CLI::App &app, bool &setting,
                                    const std::string &group) {
  addSwitchOption(app, "--chunked-prefill", setting,
                  "on (default: a prompt runs in chunks that fill each "
                  "iteration's --max-batched-tokens, as vLLM and SGLang) or "
                  "off (a prompt runs whole in one iteration, as "
                  "TensorRT-LLM's default; the budget must hold the longest)",
                  group);
}

/// `--mixed-batches on|off` into `setting` (ServingEngineSettings::
/// mixedBatches).
inline void addMixedBatchesOption(CLI::App &app, bool &setting,
                                  const std::string &group) {
  addSwitchOption(app, "--mixed-batches", setting,
                  "on (default: an iteration runs the decodes and the "
                  "prefill chunks together, as vLLM and TensorRT-LLM) or off "
                  "(a replica with a prompt ready runs only prompts, its "
                  "decodes waiting for an iteration with none, as SGLang's "
                  "scheduler without --enable-mixed-chunk)",
                  group);
}

/// `--linear-kernels separate|fused` into `name` ("fused" sets
/// CompileOptions::fusedLinearKernels).
inline void addLinearKernelsOption(CLI::App &app, std::string &name,
                                   const std::string &group) {
  app.add_option("--linear-kernels", name,
                 "inference: separate (default: a kernel per linear layer's "
                 "GEMM) or fused (the GEMMs that read the same input, q, k "
                 "and v or gate and up, as one kernel, as engines load "
                 "their weights; docs/serving.md)")
      ->check(CLI::IsMember({"separate", "fused"}))
      ->group(group);
}

/// `--burstiness`: the gamma shape of the gaps between arrivals at a
/// request rate (stagec's --request-rate, the search's rates).
inline void addBurstinessOption(CLI::App &app, double &burstiness,
                                const std::string &group) {
  app.add_option("--burstiness", burstiness,
                 "with --request-rate: the shape of the gamma distribution "
                 "of the gaps between arrivals (vLLM's): 1 is Poisson "
                 "(default), below 1 burstier, above 1 more even")
      ->check(finiteNumber(MinBurstiness, MaxBurstiness))
      ->group(group);
}

/// The requests' shared prefix, their conversations, and whether the
/// engine caches what they share.
struct PrefixCachingFlags {
  uint64_t sharedPrefix = 0;
  unsigned prefixGroups = 1;
  unsigned turns = 1;
  double thinkTimeMillis = 0;
  double offloadGB = 0;
  std::string caching; ///< `on` or `off`; empty: not given, on.
};

inline void addPrefixCachingOptions(CLI::App &app, PrefixCachingFlags &flags,
                                    const std::string &group) {
  app.add_option("--shared-prefix", flags.sharedPrefix,
                 "the first N tokens of every prompt are the same (a system "
                 "prompt, few-shot examples; default 0)")
      ->check(wholeNumber(0, MaxRequestTokens))
      ->group(group);
  app.add_option("--prefix-groups", flags.prefixGroups,
                 "with --shared-prefix: G prefixes, each its own, conversation "
                 "c's prompts beginning with prefix c mod G (a system prompt "
                 "per application; default 1)")
      ->check(wholeNumber(1, 65536))
      ->group(group);
  app.add_option("--turns", flags.turns,
                 "multi-turn conversations: each is N requests, one after "
                 "another, each prompt holding the conversation so far (the "
                 "earlier prompts and outputs) before its new input "
                 "(default 1)")
      ->check(wholeNumber(1, 256))
      ->group(group);
  app.add_option("--think-time-ms", flags.thinkTimeMillis,
                 "with --turns: the time between a turn's last token and "
                 "the next turn (default 0)")
      ->check(finiteNumber(0, 1e9))
      ->group(group);
  app.add_option("--kv-offload-gb", flags.offloadGB,
                 "with --turns or a trace of prompt blocks: host memory a "
                 "GPU gives the conversations' contexts (or the blocks) "
                 "evicted from its KV cache, read back over the host link "
                 "before the prefill that reads them (default 0)")
      ->check(finiteNumber(0, 1e6))
      ->group(group);
  app.add_option("--prefix-caching", flags.caching,
                 "with --shared-prefix, --turns or a trace of prompt "
                 "blocks: on (default, as vLLM, SGLang and TensorRT-LLM "
                 "run) keeps the prefix's (or the prompts') whole blocks in "
                 "the cache of each attention replica that computed them, "
                 "and a conversation's context where its turn ran until "
                 "room is needed, and prompts prefill only what follows "
                 "what is cached; off prefills every prompt whole")
      ->check(CLI::IsMember({"on", "off"}))
      ->group(group);
}

constexpr const char *OffloadNeeds =
    "--kv-offload-gb needs --turns N (N > 1) or a --lengths trace whose "
    "prompts name their blocks (hash_ids)";

constexpr const char *PrefixCachingNeeds =
    "--prefix-caching needs --shared-prefix N (N > 0), --turns N (N > 1) or "
    "a --lengths trace whose prompts name their blocks (hash_ids)";

/// What is wrong with the flags addPrefixCachingOptions read, if anything.
inline std::optional<std::string>
checkPrefixCachingOptions(const CLI::App &app,
                          const PrefixCachingFlags &flags) {
  // With a --lengths file, checkPromptBlocks decides once it is read.
  if (!flags.caching.empty() && !flags.sharedPrefix && flags.turns < 2 &&
      !app.count("--lengths"))
    return std::string(PrefixCachingNeeds);
  if (app.count("--prefix-groups") && !flags.sharedPrefix)
    return std::string("--prefix-groups needs --shared-prefix N (N > 0)");
  if (app.count("--think-time-ms") && flags.turns < 2)
    return std::string("--think-time-ms needs --turns N (N > 1)");
  if (flags.offloadGB > 0 && flags.turns < 2 && !app.count("--lengths"))
    return std::string(OffloadNeeds);
  if (flags.offloadGB > 0 && flags.caching == "off")
    return std::string("--kv-offload-gb keeps what is cached: it needs "
                       "--prefix-caching on");
  return std::nullopt;
}

/// `--trace-block-tokens`: what a `--lengths` trace's hash id stands for.
inline void addTraceBlockOption(CLI::App &app,
                                std::optional<uint64_t> &blockTokens,
                                const std::string &group) {
  app.add_option("--trace-block-tokens", blockTokens,
                 "with a --lengths trace of JSON lines: the tokens each of a "
                 "prompt's hash_ids stands for (default 512, Mooncake's)")
      ->check(wholeNumber(1, MaxRequestTokens))
      ->group(group);
}

/// What is wrong with running the prompt blocks of the trace at `path`
/// with these flags, if anything: the blocks say what the prompts share,
/// so no shared prefix or conversations beside them, and each block is
/// whole KV pages.
inline std::optional<std::string>
checkPromptBlocks(const PromptBlocks &blocks, const std::string &path,
                  std::optional<uint64_t> blockTokens,
                  const PrefixCachingFlags &flags, unsigned kvBlockTokens) {
  if (blocks.empty()) {
    if (blockTokens)
      return "--trace-block-tokens: " + path +
             " names no prompt blocks (hash_ids)";
    if (!flags.caching.empty() && !flags.sharedPrefix && flags.turns < 2)
      return std::string(PrefixCachingNeeds);
    if (flags.offloadGB > 0 && flags.turns < 2)
      return std::string(OffloadNeeds);
    return std::nullopt;
  }
  if (flags.sharedPrefix)
    return "--shared-prefix: " + path +
           "'s hash_ids say which prompts share which blocks";
  if (flags.turns > 1)
    return "--turns: " + path +
           "'s hash_ids name each prompt's blocks, and a turn's prompt "
           "holds the conversation before it";
  if (blocks.tokens % kvBlockTokens)
    return "--trace-block-tokens " + std::to_string(blocks.tokens) +
           " is not a whole number of KV cache pages of " +
           std::to_string(kvBlockTokens) + " tokens (--kv-block-tokens)";
  return std::nullopt;
}

/// What is wrong with offloading KV blocks (`offloading`: the engine
/// settings' offloadBytes > 0) on `system`, if anything.
inline std::optional<std::string> checkOffloadLink(bool offloading,
                                                   const SystemSpec &system) {
  if (offloading && !(system.device.hostBandwidth > 0))
    return "--kv-offload-gb: the " + system.device.name +
           " has no host link bandwidth (a device file's "
           "host_bandwidth_gbps)";
  return std::nullopt;
}

/// The flags into the workload's shared prefixes and conversations (a
/// run's, or a search's for every run) and the engine's setting.
inline void applyPrefixCachingOptions(const PrefixCachingFlags &flags,
                                      uint64_t &sharedPrefix,
                                      unsigned &prefixGroups, unsigned &turns,
                                      double &thinkMicros,
                                      ServingEngineSettings &settings) {
  sharedPrefix = flags.sharedPrefix;
  prefixGroups = flags.prefixGroups;
  turns = flags.turns;
  thinkMicros = flags.thinkTimeMillis * 1e3;
  settings.offloadBytes = flags.offloadGB * 1e9;
  settings.prefixCaching = flags.caching != "off";
}

inline void addSpeculationOptions(CLI::App &app,
                                  SpeculativeDecoding &speculation,
                                  const std::string &group) {
  app.add_option("--speculative-tokens", speculation.draftTokens,
                 "speculative decoding: draft tokens each decode step "
                 "proposes and verifies (an MTP module's, EAGLE's; default "
                 "0, none)")
      ->check(wholeNumber(0, 64))
      ->group(group);
  app.add_option("--acceptance-rate", speculation.acceptance,
                 "with --speculative-tokens: the chance each draft token is "
                 "accepted after those before it")
      ->check(finiteNumber(0, 1))
      ->group(group);
  app.add_option("--draft-layers", speculation.draftLayers,
                 "with --speculative-tokens: decoder layers a draft token "
                 "runs, with the LM head (default 1: an MTP module)")
      ->check(wholeNumber(1, 1024))
      ->group(group);
}

/// What is wrong with the flags addSpeculationOptions read, if anything.
inline std::optional<std::string>
checkSpeculationOptions(const CLI::App &app,
                        const SpeculativeDecoding &speculation) {
  bool speculative = speculation.draftTokens > 0;
  for (const char *flag : {"--acceptance-rate", "--draft-layers"})
    if (!speculative && app.count(flag))
      return std::string(flag) + " needs --speculative-tokens N (N > 0)";
  if (speculative && !app.count("--acceptance-rate"))
    return std::string("--speculative-tokens needs --acceptance-rate P: how "
                       "often a draft token is accepted depends on the "
                       "model, the draft and the data");
  return std::nullopt;
}

} // namespace stg

#endif // STG_TOOLS_COMMON_SERVINGFLAGS_H
