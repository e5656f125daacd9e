//===- Simulation.h - The serving run's engines and requests ---*- C++ -*-===//
//
// The state of a discrete-event serving run (ServingSimulation.h), shared
// by its two halves: the scheduler's events, iterations and routing
// (ServingSimulation.cpp) and the replicas' KV caches, that is the
// reservations, preemption, the cached prefixes (a prefix group's, or a
// trace's prompt blocks) and conversations' contexts (in host memory too),
// and the check that every request fits (ServingCache.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef STG_LIB_SERVE_SIMULATION_H
#define STG_LIB_SERVE_SIMULATION_H

#include "BlockCache.h"
#include "ContextCache.h"
#include "stg/Serve/ServingSimulation.h"

#include <deque>
#include <optional>
#include <queue>
#include <random>
#include <vector>

namespace stg::serve {

/// When the first `count` conversations of an open-loop `workload` arrive,
/// microseconds from the first (Arrivals.cpp).
std::vector<double> getArrivalTimes(const ServingWorkload &workload,
                                    uint64_t count);

/// A request's arrival, an engine's iteration's end, a KV cache's
/// transfer's end, or a sequence's context read back from host memory.
enum class EventKind : uint8_t {
  Arrival,
  IterationEnd,
  TransferEnd,
  ReloadEnd
};

struct Event {
  double time;
  uint64_t order;
  EventKind kind;
  uint32_t index; ///< The request, or the engine of an IterationEnd or a
                  ///< ReloadEnd.

  bool operator>(const Event &other) const {
    return time != other.time ? time > other.time : order > other.order;
  }
};

/// A request's progress on the engine that holds it.
struct SequenceState {
  unsigned replica = 0;
  uint64_t prefilled = 0, generated = 0;
  /// The tokens to prefill: the prompt, or after a preemption the prompt
  /// and the output so far.
  uint64_t target = 0;
  uint64_t cached = 0;  ///< Tokens whose KV it holds.
  /// Of those, the replica's cached prefix (its group's, or the leading
  /// blocks of its prompt it reads from the replica's BlockCache).
  uint64_t shared = 0;
  bool started = false; ///< Its first token is out.
  bool admitted = false; ///< An engine has admitted it once.
  double kvReserved = 0;
  /// When its context, read back from host memory, is in the device's
  /// cache: no prefill before.
  double readyAt = 0;
  /// Its place in its replica's running sequences: they run in admission
  /// order.
  uint64_t admission = 0;
  /// Decoding and counted by its replica's steps (Simulation::countDecodes):
  /// `generated` is as of the replica's step `countedFrom`, one token more
  /// a step since.
  bool counted = false;
  uint64_t countedFrom = 0;
};

/// When a counted sequence yields its last token: at its replica's step
/// `step`; sequences finishing at one step go in admission order.
struct CountedFinish {
  uint64_t step, admission;
  uint32_t request;

  bool operator>(const CountedFinish &other) const {
    return step != other.step ? step > other.step : admission > other.admission;
  }
};

/// A group's shared prefix in a replica's cache.
struct CachedPrefix {
  /// Its tokens held (whole blocks; prompts shorter than the prefix leave
  /// less of it).
  uint64_t tokens = 0;
  uint64_t lastRead = 0; ///< When a prompt last read it, in reads.
};

struct Replica {
  std::vector<uint32_t> running; ///< Requests, in admission order.
  /// Those with prompt tokens left to prefill, in admission order.
  std::vector<uint32_t> prefilling;
  /// Decode steps the replica has run, and the sequences they count
  /// (Simulation::countDecodes): how many, their input and generated
  /// tokens and their steps when counting began, summed, and when each
  /// finishes. A step's decode context is then a sum, not a loop.
  uint64_t steps = 0, decoding = 0, countedTokens = 0, countedFrom = 0;
  /// Whether the iteration under way runs its decodes: not where it runs
  /// only prompts (ServingEngineSettings::mixedBatches).
  bool decodes = true;
  std::priority_queue<CountedFinish, std::vector<CountedFinish>,
                      std::greater<CountedFinish>>
      finishing;
  /// Its sequences' reservations, cached prefixes and cached contexts.
  double kvUsed = 0;
  std::vector<CachedPrefix> prefixes; ///< By prefix group.
  BlockCache blocks;     ///< A trace's prompt blocks (PromptBlocks).
  BlockCache hostBlocks; ///< Those evicted to host memory (KV offload).
  ContextCache contexts; ///< Conversations' contexts between turns.
  /// Contexts evicted to host memory (KV offload); the bytes of these and
  /// of hostBlocks.
  ContextCache hostContexts;
  double hostUsed = 0;
};

/// A multi-turn conversation between its requests.
struct Conversation {
  uint64_t history = 0; ///< Its prompts and outputs so far.
  unsigned nextTurn = 0;
  /// Where its context is cached (-1: nowhere), and whether in the
  /// replica's host memory.
  int engine = -1;
  unsigned replica = 0;
  bool onHost = false;
};

struct PlannedWork {
  uint32_t request;
  uint64_t prefillTokens; ///< 0: a decode token.
};

struct Engine {
  const IterationCostModel *cost = nullptr;
  bool prefill = true, decode = true;
  std::vector<Replica> replicas;
  std::deque<uint32_t> waiting;
  /// The prompt tokens of the requests routed here for their prefill.
  uint64_t routedTokens = 0;
  bool busy = false, touched = false;
  std::vector<PlannedWork> planned;
  /// Each replica's work in the iteration being planned (kept for its
  /// room).
  std::vector<IterationWork> works;

  uint64_t getLoad() const {
    uint64_t load = waiting.size();
    for (const Replica &replica : replicas)
      load += replica.running.size();
    return load;
  }
};

class Simulation {
public:
  Simulation(const ServingDeployment &deployment,
             const ServingEngineSettings &settings,
             const ServingWorkload &workload, DiagnosticEngine &diags)
      : deployment(deployment), settings(settings), workload(workload),
        diags(diags), acceptances(workload.seed ^ 0x5eed'acce'97ed'0001ull),
        countDecodes(!settings.speculation.draftTokens &&
                     settings.kvAllocation == KVAllocation::Reserve) {}

  std::optional<ServingResult> run();

private:
  void addPool(const EnginePool &pool, llvm::StringRef name, bool prefill,
               bool decode);
  bool checkFits();
  void push(double time, EventKind kind, uint32_t index) {
    events.push({time, nextOrder++, kind, index});
  }
  void startConversation(double time);
  /// Sends the conversation's next turn, to arrive at `time`.
  void issueTurn(double time, uint32_t conversation);
  void handle(const Event &event);
  void route(uint32_t request, bool toPrefill);
  /// What sending `request` to `replica` costs the KV router
  /// (Router::KVAware), with `hit` of its prompt's tokens cached there and
  /// `queued` prefill tokens of its engine's queue (getQueuedPrefill).
  double getRoutingCost(const Replica &replica, uint32_t request, uint64_t hit,
                        double queued) const;
  /// The prompt tokens `engine`'s queue holds, a share for each replica:
  /// the queue is not yet any replica's.
  double getQueuedPrefill(const Engine &engine) const;
  /// The engine of [first, last) with the fewest requests waiting or
  /// running, the first of equals.
  unsigned getLeastLoaded(unsigned first, unsigned last) const;
  /// The engine of [first, last) that SGLang's cache-aware router sends
  /// `request` to (Router::CacheAware).
  unsigned routeByCache(uint32_t request, unsigned first, unsigned last) const;
  /// The tokens of `request`'s prompt that `replica` of `engine` holds.
  uint64_t getReplicaHit(const Engine &engine, const Replica &replica,
                         uint32_t request) const {
    return getCachedPrefix(replica, request,
                           getReusablePrefix(engine, request));
  }
  /// Marks an engine to start an iteration once the events of this time
  /// are all taken: requests that arrive together are batched together.
  void touch(unsigned engine) {
    if (!engines[engine].touched)
      touched.push_back(engine);
    engines[engine].touched = true;
  }
  void startIteration(unsigned engine, double now);
  void endIteration(unsigned engine, double now);
  /// A sequence of `replica` begins decoding: counted from now on where
  /// decodes are counted (countDecodes).
  void startDecoding(Replica &replica, uint32_t request);
  /// Its tokens generated so far.
  uint64_t getGenerated(const Replica &replica,
                        const SequenceState &sequence) const {
    return sequence.generated +
           (sequence.counted ? replica.steps - sequence.countedFrom : 0);
  }
  /// A step of `replica` of engine `index` ends: the counted sequences it
  /// gave their last token are done, in admission order.
  void endCountedStep(unsigned index, Replica &replica, double now);
  /// A planned decode token or prefill chunk of engine `index` is done.
  void endWork(unsigned index, const PlannedWork &work, double now);
  /// A sequence of engine `index` is done there: it leaves its replica,
  /// and its KV cache goes to a decode engine or the request finishes.
  void retire(unsigned index, uint32_t request, double now);
  void finish(uint32_t request, double now);
  double getKVNeed(const Engine &engine, const RequestLengths &lengths) const;
  /// The KV of `tokens`, in whole blocks.
  double getKVBytes(const Engine &engine, uint64_t tokens) const;
  /// On-demand allocation: gives each decoding sequence of `replica` the
  /// blocks its next step writes, preempting the newest when none is free.
  void growCaches(Engine &engine, Replica &replica, double budget);
  void preempt(Engine &engine, Replica &replica);
  /// Evicts `replica`'s least recently cached context but `keep`'s;
  /// false when it holds none.
  bool evictContext(Replica &replica, std::optional<uint32_t> keep);
  /// Drops the conversation's cached context, wherever it is.
  void dropContext(uint32_t conversation);
  /// After a turn: keeps its context where it ran if the conversation goes
  /// on there, and says whether it did.
  bool keepContext(unsigned engine, uint32_t request);
  /// The tokens of `request`'s prompt that prefix caching can read
  /// instead of prefilling: the shared prefix's whole KV blocks, or the
  /// trace's blocks of its prompt, short of the prompt's last token (its
  /// logits are needed).
  uint64_t getReusablePrefix(const Engine &engine, uint32_t request) const;
  /// Of those, the tokens `replica` holds.
  uint64_t getCachedPrefix(const Replica &replica, uint32_t request,
                           uint64_t reusable) const;
  /// Of those after the `shared` tokens `replica` holds, the tokens its
  /// host memory holds of a trace's blocks (KV offload).
  uint64_t getOffloadedPrefix(const Replica &replica, uint32_t request,
                              uint64_t reusable, uint64_t shared) const;
  /// Keeps a block the device of `replica` evicted in its host memory,
  /// which drops its least recently read for the room.
  void offloadBlock(Replica &replica, const BlockCache::Evicted &block);
  /// After a prefill chunk of `request`: its replica keeps what it has
  /// computed of the shared prefix beyond what it held.
  void keepPrefix(Engine &engine, uint32_t request);
  /// A sequence of `replica` leaves it: its reservation is freed, and the
  /// trace's blocks it read are read by one sequence fewer.
  void release(Replica &replica, const SequenceState &sequence,
               uint32_t request);
  unsigned getPrefixGroup(uint32_t request) const {
    return result.requests[request].conversation % workload.prefixGroups;
  }
  /// The trace's blocks of `request`'s prompt (PromptBlocks).
  llvm::ArrayRef<uint64_t> getPromptBlocks(uint32_t request) const {
    return workload.promptBlocks.getLine(result.requests[request].conversation %
                                         workload.lengths.size());
  }
  /// The bytes of the block at `depth` in a prompt, on `engine`.
  double getBlockBytes(const Engine &engine, uint64_t depth) const {
    uint64_t tokens = workload.promptBlocks.tokens;
    return getKVBytes(engine, (depth + 1) * tokens) -
           getKVBytes(engine, depth * tokens);
  }
  /// Which groups' prefixes something on `replica` reads: a running
  /// sequence, or a cached context (whose bytes leave the prefix out).
  std::vector<bool> getPrefixesInUse(const Replica &replica) const;
  /// The bytes of `replica`'s cached prefixes that nothing reads, but those
  /// `request` would read (its group's, or its prompt's cached blocks).
  double getEvictablePrefixBytes(const Engine &engine, const Replica &replica,
                                 uint32_t request) const;
  /// Evicts the least recently read of those but `keep`'s group's prefix
  /// (a trace's blocks that a sequence reads stay anyway); false when there
  /// is none.
  bool evictPrefix(const Engine &engine, Replica &replica, unsigned keep);
  /// Evicts for room: a cached context (but `keepConversation`'s), else a
  /// cached prefix nothing reads (but `keepGroup`'s).
  bool evictForRoom(const Engine &engine, Replica &replica,
                    std::optional<uint32_t> keepConversation,
                    std::optional<unsigned> keepGroup) {
    return evictContext(replica, keepConversation) ||
           evictPrefix(engine, replica, keepGroup.value_or(~0u));
  }
  double getTransferMicros(uint32_t request) const;

  const ServingDeployment &deployment;
  const ServingEngineSettings &settings;
  const ServingWorkload &workload;
  DiagnosticEngine &diags;

  ServingResult result;
  std::vector<Engine> engines;
  std::vector<unsigned> touched;
  unsigned firstDecodeEngine = 0;
  std::vector<SequenceState> sequences;
  std::vector<Conversation> conversations;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events;
  uint64_t nextOrder = 0, issued = 0, finished = 0, prefixReads = 0;
  uint64_t admissions = 0;
  /// Draws the accepted drafts of each speculative step, from the seed.
  std::mt19937_64 acceptances;
  /// Every decoding sequence yields one token a step and keeps its
  /// reservation (no speculation, no on-demand blocks): its replica's
  /// steps count its tokens, and an iteration costs what changes in it,
  /// not a pass over every running sequence.
  const bool countDecodes;
  /// The tokens a speculative decode step yields: its own and the accepted
  /// prefix of its drafts.
  uint64_t drawStepTokens();
};

} // namespace stg::serve

#endif // STG_LIB_SERVE_SIMULATION_H
