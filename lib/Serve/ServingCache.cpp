//===- ServingCache.cpp - The replicas' KV caches in a serving run --------===//
//
// What a serving run's replicas hold (Simulation.h): a sequence's
// reservation, its whole cache from admission or (KVAllocation::OnDemand)
// a block more as its output needs one, preempting the newest sequence
// when none is free; with prefix caching each prefix group's blocks, left
// by the first sequence that computes them (or a trace's prompt blocks,
// each kept by the first sequence that computes it), and each conversation's
// context between its turns, evicted least recently cached first when
// room is needed (before any preemption), to host memory when the engine
// offloads KV blocks, and then the prefixes nothing reads, least recently
// read first; and the check, before the run, that every request fits an
// empty engine.
//
//===----------------------------------------------------------------------===//

#include "Simulation.h"

#include "stg/Serve/RequestLengths.h"

#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cassert>

using namespace stg;
using namespace stg::serve;

double Simulation::getKVNeed(const Engine &engine,
                             const RequestLengths &lengths) const {
  // A prefill engine keeps the prompt's cache until it has been sent.
  return getKVBytes(engine,
                    lengths.input + (engine.decode ? lengths.output : 1));
}

double Simulation::getKVBytes(const Engine &engine, uint64_t tokens) const {
  uint64_t block = settings.blockTokens;
  tokens = (tokens + block - 1) / block * block;
  return engine.cost->kvBytes(double(tokens));
}

void Simulation::release(Replica &replica, const SequenceState &sequence,
                         uint32_t request) {
  replica.kvUsed -= sequence.kvReserved;
  if (!workload.promptBlocks.empty() && sequence.shared)
    replica.blocks.release(getPromptBlocks(request).take_front(
        sequence.shared / workload.promptBlocks.tokens));
}

void Simulation::preempt(Engine &engine, Replica &replica) {
  uint32_t request = replica.running.back();
  replica.running.pop_back();
  if (!replica.prefilling.empty() && replica.prefilling.back() == request)
    replica.prefilling.pop_back();
  SequenceState &sequence = sequences[request];
  assert(!sequence.counted && "only on-demand caches preempt: no counting");
  release(replica, sequence, request);
  sequence.kvReserved = 0;
  sequence.cached = sequence.prefilled = sequence.shared = 0;
  sequence.readyAt = 0;
  sequence.target = result.requests[request].input + sequence.generated;
  engine.waiting.push_front(request);
  ++result.preemptions;
}

uint64_t Simulation::getReusablePrefix(const Engine &engine,
                                       uint32_t request) const {
  uint64_t input = result.requests[request].input;
  if (!settings.prefixCaching || !engine.prefill || input < 2)
    return 0;
  if (uint64_t block = workload.promptBlocks.tokens)
    return std::min<uint64_t>(getPromptBlocks(request).size(),
                              (input - 1) / block) *
           block;
  uint64_t tokens = std::min(workload.sharedPrefix, input - 1);
  return tokens / settings.blockTokens * settings.blockTokens;
}

uint64_t Simulation::getCachedPrefix(const Replica &replica, uint32_t request,
                                     uint64_t reusable) const {
  if (uint64_t block = workload.promptBlocks.tokens)
    return replica.blocks.countHeld(
               getPromptBlocks(request).take_front(reusable / block)) *
           block;
  return std::min(reusable, replica.prefixes[getPrefixGroup(request)].tokens);
}

uint64_t Simulation::getOffloadedPrefix(const Replica &replica,
                                        uint32_t request, uint64_t reusable,
                                        uint64_t shared) const {
  uint64_t block = workload.promptBlocks.tokens;
  if (!block || !(settings.offloadBytes > 0))
    return 0;
  llvm::ArrayRef<uint64_t> ids =
      getPromptBlocks(request).take_front(reusable / block);
  return replica.hostBlocks.countHeld(ids.drop_front(shared / block)) * block;
}

void Simulation::offloadBlock(Replica &replica,
                              const BlockCache::Evicted &block) {
  if (block.bytes > settings.offloadBytes)
    return;
  // A copy kept from before is kept anew; else the least recently read go
  // for its room.
  if (!replica.hostBlocks.countHeld(block.id))
    while (replica.hostUsed + block.bytes > settings.offloadBytes) {
      std::optional<BlockCache::Evicted> dropped =
          replica.hostBlocks.evictOldest();
      if (!dropped)
        break; // Empty: what is left of hostUsed is rounding.
      replica.hostUsed -= dropped->bytes;
    }
  replica.hostUsed +=
      block.bytes - replica.hostBlocks.keep(block.id, block.depth, block.bytes,
                                            block.lastRead);
}

void Simulation::keepPrefix(Engine &engine, uint32_t request) {
  SequenceState &sequence = sequences[request];
  Replica &replica = engine.replicas[sequence.replica];
  uint64_t prefix = getReusablePrefix(engine, request);
  if (uint64_t block = workload.promptBlocks.tokens) {
    // The blocks it has computed beyond those it read become the
    // replica's, or are dropped for the copies the replica has.
    uint64_t computed = std::min(prefix, sequence.prefilled / block * block);
    if (computed <= sequence.shared)
      return;
    replica.kvUsed -= replica.blocks.add(
        getPromptBlocks(request).slice(sequence.shared / block,
                                       (computed - sequence.shared) / block),
        sequence.shared / block,
        [&](uint64_t depth) { return getBlockBytes(engine, depth); },
        ++prefixReads);
    sequence.kvReserved -=
        getKVBytes(engine, computed) - getKVBytes(engine, sequence.shared);
    sequence.shared = computed;
    return;
  }
  CachedPrefix &cached = replica.prefixes[getPrefixGroup(request)];
  if (prefix <= cached.tokens || sequence.prefilled < prefix)
    return;
  // Its blocks of the prefix become the replica's: it reads them as shared.
  // They replace what the replica held beyond what this sequence read
  // (cached by another after this one's admission).
  replica.kvUsed -=
      getKVBytes(engine, cached.tokens) -
      getKVBytes(engine, std::min(sequence.shared, cached.tokens));
  cached.tokens = prefix;
  cached.lastRead = ++prefixReads;
  sequence.kvReserved -=
      getKVBytes(engine, prefix) - getKVBytes(engine, sequence.shared);
  sequence.shared = prefix;
}

std::vector<bool> Simulation::getPrefixesInUse(const Replica &replica) const {
  std::vector<bool> inUse(workload.prefixGroups);
  for (uint32_t request : replica.running)
    if (sequences[request].shared)
      inUse[getPrefixGroup(request)] = true;
  for (const ContextCache *cache : {&replica.contexts, &replica.hostContexts})
    for (const ContextCache::Entry &entry : cache->getEntries())
      inUse[entry.conversation % workload.prefixGroups] = true;
  return inUse;
}

double Simulation::getEvictablePrefixBytes(const Engine &engine,
                                           const Replica &replica,
                                           uint32_t request) const {
  if (uint64_t block = workload.promptBlocks.tokens)
    return replica.blocks.getEvictableBytes(getPromptBlocks(request).take_front(
        getReplicaHit(engine, replica, request) / block));
  if (!workload.sharedPrefix)
    return 0;
  unsigned keep = getPrefixGroup(request);
  std::vector<bool> inUse = getPrefixesInUse(replica);
  double bytes = 0;
  for (unsigned group = 0; group < replica.prefixes.size(); ++group)
    if (group != keep && !inUse[group])
      bytes += getKVBytes(engine, replica.prefixes[group].tokens);
  return bytes;
}

bool Simulation::evictPrefix(const Engine &engine, Replica &replica,
                             unsigned keep) {
  if (!workload.promptBlocks.empty()) {
    std::optional<BlockCache::Evicted> evicted = replica.blocks.evictOldest();
    if (!evicted)
      return false;
    replica.kvUsed -= evicted->bytes;
    offloadBlock(replica, *evicted);
    return true;
  }
  if (!workload.sharedPrefix)
    return false;
  std::vector<bool> inUse = getPrefixesInUse(replica);
  CachedPrefix *oldest = nullptr;
  for (unsigned group = 0; group < replica.prefixes.size(); ++group) {
    CachedPrefix &cached = replica.prefixes[group];
    if (group != keep && !inUse[group] && cached.tokens &&
        (!oldest || cached.lastRead < oldest->lastRead))
      oldest = &cached;
  }
  if (!oldest)
    return false;
  replica.kvUsed -= getKVBytes(engine, oldest->tokens);
  *oldest = CachedPrefix();
  return true;
}

bool Simulation::evictContext(Replica &replica, std::optional<uint32_t> keep) {
  std::optional<ContextCache::Entry> evicted =
      replica.contexts.evictOldest(keep);
  if (!evicted)
    return false;
  replica.kvUsed -= evicted->bytes;
  Conversation &conversation = conversations[evicted->conversation];
  if (evicted->bytes > settings.offloadBytes) {
    result.evictedTokens += evicted->tokens;
    conversation.engine = -1;
    return true;
  }
  // Offloaded: host memory drops its least recently cached for the room.
  while (replica.hostUsed + evicted->bytes > settings.offloadBytes) {
    std::optional<ContextCache::Entry> dropped =
        replica.hostContexts.evictOldest({});
    if (!dropped)
      break; // Empty: what is left of hostUsed is rounding.
    replica.hostUsed -= dropped->bytes;
    result.evictedTokens += dropped->tokens;
    conversations[dropped->conversation].engine = -1;
  }
  replica.hostContexts.insert(*evicted);
  replica.hostUsed += evicted->bytes;
  conversation.onHost = true;
  return true;
}

void Simulation::dropContext(uint32_t conversation) {
  Conversation &state = conversations[conversation];
  if (state.engine < 0)
    return;
  Replica &replica = engines[state.engine].replicas[state.replica];
  ContextCache &cache = state.onHost ? replica.hostContexts : replica.contexts;
  std::optional<ContextCache::Entry> dropped = cache.take(conversation);
  (state.onHost ? replica.hostUsed : replica.kvUsed) -= dropped->bytes;
  result.evictedTokens += dropped->tokens;
  state.engine = -1;
}

bool Simulation::keepContext(unsigned index, uint32_t request) {
  const RequestRecord &record = result.requests[request];
  Engine &engine = engines[index];
  if (!settings.prefixCaching || !engine.prefill ||
      record.turn + 1 >= workload.turns || issued >= workload.requests)
    return false;
  // What the next turn can read: its prompt's KV, and on an engine that
  // decoded it the output's but the last token's (never run through the
  // model), in whole blocks.
  const SequenceState &sequence = sequences[request];
  uint64_t tokens =
      engine.decode ? record.input + record.output - 1 : record.input;
  tokens = tokens / settings.blockTokens * settings.blockTokens;
  Replica &replica = engine.replicas[sequence.replica];
  replica.contexts.insert({record.conversation, tokens, sequence.kvReserved});
  Conversation &conversation = conversations[record.conversation];
  conversation.engine = int(index);
  conversation.replica = sequence.replica;
  conversation.onHost = false;
  return true;
}

void Simulation::growCaches(Engine &engine, Replica &replica, double budget) {
  for (size_t index = 0; index < replica.running.size(); ++index) {
    uint32_t request = replica.running[index];
    SequenceState &sequence = sequences[request];
    if (sequence.prefilled < sequence.target)
      continue; // Its prompt's blocks came with its admission.
    // Its token and drafts, no more than its output has left: a request
    // that fits an empty engine (checkFits) never outgrows it alone.
    uint64_t stepTokens = std::min<uint64_t>(
        1 + settings.speculation.draftTokens,
        result.requests[request].output - sequence.generated);
    double extra =
        getKVBytes(engine, sequence.cached - sequence.shared + stepTokens) -
        sequence.kvReserved;
    if (extra <= 0)
      continue;
    // Cached contexts and prefixes go before running sequences.
    while (replica.kvUsed + extra > budget &&
           evictForRoom(engine, replica, std::nullopt, std::nullopt)) {
    }
    while (replica.kvUsed + extra > budget && replica.running.size() > index)
      preempt(engine, replica);
    if (replica.running.size() <= index)
      break; // It was the newest.
    sequence.kvReserved += extra;
    replica.kvUsed += extra;
  }
}

bool Simulation::checkFits() {
  // The turns that need the most: the longest context (a decoding
  // engine's cache), the longest prompt (a prefill engine's, and without
  // chunked prefill one iteration's).
  RequestLengths longestContext, longestPrompt;
  forEachTurn(
      workload.lengths, workload.turns, [&](uint64_t prompt, uint64_t output) {
        if (prompt + output > longestContext.input + longestContext.output)
          longestContext = {prompt, output};
        if (prompt > longestPrompt.input)
          longestPrompt = {prompt, output};
      });
  for (const Engine &engine : engines) {
    const RequestLengths &lengths =
        engine.decode ? longestContext : longestPrompt;
    double need = getKVNeed(engine, lengths);
    double budget = engine.cost->kvBudget / engine.cost->stages;
    if (need > budget) {
      diags.error(
          {}, llvm::formatv("a request of {0} input and {1} output tokens "
                            "needs {2:F2} GB of KV cache a rank, and an "
                            "engine has {3:F2} GB beside its weights and "
                            "activations; use more GPUs an instance, shorter "
                            "requests or a larger --kv-memory-fraction",
                            lengths.input, lengths.output, need / 1e9,
                            std::max(0.0, budget) / 1e9)
                  .str());
      return false;
    }
  }
  if (settings.chunkedPrefill)
    return true;
  // Whole prompts: the longest must fit one iteration, and with on-demand
  // allocation so must a preempted sequence's prompt and output so far.
  bool onDemand = settings.kvAllocation == KVAllocation::OnDemand;
  const RequestLengths &lengths = onDemand ? longestContext : longestPrompt;
  uint64_t longest =
      onDemand ? lengths.input + lengths.output - 1 : lengths.input;
  if (longest > settings.limits.maxBatchedTokens) {
    diags.error(
        {}, llvm::formatv("without chunked prefill a request of {0} input "
                          "and {1} output tokens prefills {2} tokens in one "
                          "iteration, over its budget of {3}; raise "
                          "--max-batched-tokens or turn --chunked-prefill on",
                          lengths.input, lengths.output, longest,
                          settings.limits.maxBatchedTokens)
                .str());
    return false;
  }
  return true;
}
