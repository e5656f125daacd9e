//===- ServingSimulation.cpp - Continuous batching over requests ----------===//
//
// A discrete-event run of the deployment (ServingSimulation.h). Events are
// arrivals, iteration ends and KV transfers' ends, taken in time order and,
// at equal times, in the order they were made, so a run is a function of
// its inputs and seed. Requests are turns of conversations (one turn each
// unless the workload says more); a turn goes to the engine that caches
// its conversation's context, else to the one the router picks (the least
// loaded, Dynamo's KV router's or SGLang's choice: Routing.cpp). An engine
// that is idle starts an iteration as soon as it has work: it admits waiting
// sequences (first come, first served; the head of the queue waits for
// room rather than being overtaken) to the replica that holds the
// conversation's context, else the least busy, then gives each of its
// attention replicas its decode tokens first and prefill chunks after, up
// to the token budget, as vLLM's scheduler does (without chunked prefill,
// whole prompts while the next fits, as TensorRT-LLM's
// MicroBatchScheduler stops at the first that does not; without mixed
// batches, a replica with a prompt ready runs only prompts, as SGLang's
// scheduler runs a prefill batch before its decode batch). The iteration
// takes its slowest replica's time (the replicas of a MoE instance meet in
// the experts' all-to-all) plus the engine's overhead. What the replicas'
// caches hold, and when a sequence fits, is ServingCache.cpp's.
//
// Most iterations of a loaded engine only decode, and most of its
// sequences only yield a token. Where each decoding sequence yields
// exactly one a step and keeps its reservation (no speculation, no
// on-demand blocks), a replica counts them instead of stepping each: its
// steps give every sequence's tokens, sums give the step's decode context,
// and a queue ordered by the step each finishes at says who is done, so an
// iteration costs what changes in it, not a pass over the batch. The runs
// are the same, number for number, as stepping one by one.
//
//===----------------------------------------------------------------------===//

#include "Simulation.h"

#include "stg/Serve/RequestLengths.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <cassert>
#include <cmath>

using namespace stg;
using namespace stg::serve;

void Simulation::addPool(const EnginePool &pool, llvm::StringRef name,
                         bool prefill, bool decode) {
  const IterationCostModel &cost = *pool.cost;
  double perToken = cost.kvBytes(double(settings.limits.maxContext)) /
                    double(settings.limits.maxContext);
  for (unsigned instance = 0; instance < pool.instances; ++instance)
    for (unsigned slot = 0; slot < cost.stages; ++slot) {
      Engine engine;
      engine.cost = &cost;
      engine.prefill = prefill;
      engine.decode = decode;
      engine.replicas.resize(cost.replicas);
      for (Replica &replica : engine.replicas)
        replica.prefixes.resize(workload.prefixGroups);
      engines.push_back(std::move(engine));
      EngineRecord record;
      record.name = llvm::formatv("{0}.{1}.{2}", name, instance, slot).str();
      record.prefill = prefill;
      record.decode = decode;
      if (perToken > 0)
        record.kvTokens = uint64_t(cost.kvBudget / cost.stages /
                                   perToken) *
                          cost.replicas;
      result.engines.push_back(std::move(record));
    }
  result.gpus += pool.instances * cost.gpus;
}

void Simulation::startConversation(double time) {
  conversations.emplace_back();
  issueTurn(time, uint32_t(conversations.size() - 1));
}

void Simulation::issueTurn(double time, uint32_t conversation) {
  Conversation &state = conversations[conversation];
  const RequestLengths &lengths =
      workload
          .lengths[(uint64_t(conversation) * workload.turns + state.nextTurn) %
                   workload.lengths.size()];
  RequestRecord record;
  record.input = state.history + lengths.input;
  record.output = lengths.output;
  record.conversation = conversation;
  record.turn = state.nextTurn++;
  record.arrival = time;
  result.requests.push_back(record);
  sequences.emplace_back().target = record.input;
  push(time, EventKind::Arrival, uint32_t(issued++));
}

void Simulation::startIteration(unsigned index, double now) {
  Engine &engine = engines[index];
  if (engine.busy)
    return;
  const ServingLimits &limits = settings.limits;
  double budget = engine.cost->kvBudget / engine.cost->stages;
  bool onDemand = settings.kvAllocation == KVAllocation::OnDemand;
  // Admit from the head of the queue while some replica has room: the one
  // that holds the conversation's context, else the least busy, after
  // evicting other contexts.
  while (!engine.waiting.empty()) {
    uint32_t request = engine.waiting.front();
    const RequestRecord &record = result.requests[request];
    SequenceState &sequence = sequences[request];
    const Conversation &conversation = conversations[record.conversation];
    // A prompt not yet begun reads what a replica holds of its prefix.
    unsigned group = getPrefixGroup(request);
    uint64_t prefix =
        sequence.prefilled ? 0 : getReusablePrefix(engine, request);
    auto getNeed = [&](uint64_t shared) {
      return onDemand
                 ? getKVBytes(engine, sequence.target + 1 - shared)
                 : getKVNeed(engine, {record.input - shared, record.output});
    };
    int chosen = -1;
    uint64_t chosenHit = 0, chosenShared = 0;
    double chosenNeed = 0, chosenCost = 0;
    bool chosenHome = false;
    bool byCost = settings.router == Router::KVAware && engine.prefill;
    double queued = byCost ? getQueuedPrefill(engine) : 0;
    for (unsigned slot = 0; slot < engine.replicas.size(); ++slot) {
      const Replica &replica = engine.replicas[slot];
      uint64_t shared = getCachedPrefix(replica, request, prefix);
      uint64_t hit = shared;
      bool home = conversation.engine == int(index) &&
                  conversation.replica == slot && !sequence.prefilled;
      bool onHost = home && conversation.onHost;
      if (home)
        hit = std::max(hit, (onHost ? replica.hostContexts : replica.contexts)
                                .find(record.conversation)
                                ->tokens);
      // A trace's blocks past those on the device may be in host memory.
      uint64_t offloaded = getOffloadedPrefix(replica, request, prefix, shared);
      hit += offloaded;
      // What is read back from host memory needs device blocks again.
      double need = getNeed(onHost || offloaded ? shared : hit);
      double room = budget - replica.kvUsed +
                    replica.contexts.getEvictableBytes(record.conversation);
      if (need > room) // Prefixes nothing reads go last.
        room += getEvictablePrefixBytes(engine, replica, request);
      if (replica.running.size() >= limits.maxBatch || need > room)
        continue;
      // The KV router's cost, else the fewest running, decides among the
      // replicas that are not the conversation's home.
      double cost = byCost ? getRoutingCost(replica, request, hit, queued) : 0;
      bool better =
          byCost ? cost < chosenCost
                 : replica.running.size() <
                       engine.replicas[chosen < 0 ? 0 : chosen].running.size();
      if (chosen < 0 || (home && !chosenHome) || (!chosenHome && better)) {
        chosen = int(slot);
        chosenHit = hit;
        chosenShared = shared;
        chosenNeed = need;
        chosenCost = cost;
        chosenHome = home;
      }
    }
    if (chosen < 0)
      break;
    engine.waiting.pop_front();
    // A turn prefilled away from its cached context leaves it unread.
    if (!chosenHome && engine.prefill && !sequence.prefilled)
      dropContext(record.conversation);
    Replica &replica = engine.replicas[chosen];
    sequence.replica = unsigned(chosen);
    sequence.kvReserved = chosenNeed;
    // The conversation's context is the sequence's before any eviction
    // makes room.
    if (chosenHome) {
      Conversation &state = conversations[record.conversation];
      if (state.onHost) {
        // Read back over the host link before the prefill goes on.
        double bytes = replica.hostContexts.take(record.conversation)->bytes;
        replica.hostUsed -= bytes;
        sequence.readyAt = now + bytes / deployment.hostBandwidth * 1e6;
        push(sequence.readyAt, EventKind::ReloadEnd, index);
        result.hostHitTokens += chosenHit;
      } else {
        // Its blocks become the sequence's.
        sequence.kvReserved +=
            replica.contexts.take(record.conversation)->bytes;
      }
      state.engine = -1;
    }
    // What it reads of the cache is its own before any eviction makes
    // room.
    if (chosenHit) {
      sequence.shared = chosenShared;
      if (uint64_t block = workload.promptBlocks.tokens) {
        llvm::ArrayRef<uint64_t> ids =
            getPromptBlocks(request).take_front(chosenHit / block);
        replica.blocks.read(ids.take_front(sequence.shared / block),
                            ++prefixReads);
        // Blocks in host memory are read back over the host link before
        // the prefill goes on, and keep their copies there.
        if (chosenHit > sequence.shared) {
          ids = ids.drop_front(sequence.shared / block);
          replica.hostBlocks.read(ids, prefixReads);
          replica.hostBlocks.release(ids);
          double bytes = getKVBytes(engine, chosenHit) -
                         getKVBytes(engine, sequence.shared);
          sequence.readyAt = now + bytes / deployment.hostBandwidth * 1e6;
          push(sequence.readyAt, EventKind::ReloadEnd, index);
          result.hostHitTokens += chosenHit - sequence.shared;
        }
      } else if (sequence.shared) {
        replica.prefixes[group].lastRead = ++prefixReads;
      }
      sequence.prefilled = sequence.cached = chosenHit;
      result.prefixHitTokens += chosenHit;
    }
    while (replica.kvUsed + chosenNeed > budget &&
           evictForRoom(engine, replica, record.conversation, group)) {
    }
    replica.running.push_back(request);
    replica.kvUsed += chosenNeed;
    sequence.admission = admissions++;
    if (sequence.prefilled < sequence.target)
      replica.prefilling.push_back(request);
    else if (engine.decode) // Its cache came from a prefill engine.
      startDecoding(replica, request);
    // A preempted sequence readmitted, or one at its decode pool, keeps
    // its first admission.
    if (!sequence.started && !sequence.admitted) {
      result.requests[request].admitted = now;
      sequence.admitted = true;
    }
  }
  if (onDemand && engine.decode)
    for (Replica &replica : engine.replicas)
      growCaches(engine, replica, budget);

  engine.planned.clear();
  std::vector<IterationWork> &works = engine.works;
  works.clear();
  uint64_t decodes = 0, prefillTokens = 0, running = 0;
  double kvUsed = 0;
  uint64_t decodeContext = 0, prefillChunks = 0;
  for (Replica &replica : engine.replicas) {
    IterationWork work;
    uint64_t tokens = 0;
    running += replica.running.size();
    kvUsed += replica.kvUsed;
    replica.decodes = settings.mixedBatches ||
                      llvm::none_of(replica.prefilling, [&](uint32_t request) {
                        return sequences[request].readyAt <= now;
                      });
    if (replica.decodes && countDecodes) {
      work.decodeSequences = tokens = replica.decoding;
      work.decodeContext = replica.countedTokens +
                           replica.decoding * replica.steps -
                           replica.countedFrom;
    } else if (replica.decodes) {
      for (uint32_t request : replica.running) {
        const SequenceState &sequence = sequences[request];
        if (sequence.prefilled < sequence.target || !engine.decode)
          continue;
        engine.planned.push_back({request, 0});
        ++work.decodeSequences;
        work.decodeContext +=
            result.requests[request].input + sequence.generated;
        // Its token and the drafts it verifies take the budget.
        tokens += 1 + settings.speculation.draftTokens;
      }
    }
    work.sampled = work.decodeSequences;
    if (work.decodeSequences && settings.speculation.draftTokens) {
      work.draftTokens = settings.speculation.draftTokens;
      work.draftShare = double(settings.speculation.draftLayers) /
                        double(engine.cost->layers);
    }
    for (uint32_t request : replica.prefilling) {
      const SequenceState &sequence = sequences[request];
      if (sequence.readyAt > now)
        continue;
      uint64_t rest = sequence.target - sequence.prefilled;
      uint64_t room =
          limits.maxBatchedTokens - std::min(tokens, limits.maxBatchedTokens);
      if (!room || (!settings.chunkedPrefill && rest > room))
        break;
      uint64_t chunk = std::min(rest, room);
      engine.planned.push_back({request, chunk});
      work.prefill.push_back({chunk, sequence.prefilled});
      tokens += chunk;
      prefillTokens += chunk;
      if (sequence.prefilled + chunk == sequence.target)
        ++work.sampled;
    }
    decodes += work.decodeSequences;
    decodeContext += work.decodeContext;
    prefillChunks += work.prefill.size();
    works.push_back(std::move(work));
  }
  bool enginePrefills = llvm::any_of(
      works, [](const IterationWork &work) { return !work.prefill.empty(); });
  double slowest = 0;
  for (IterationWork &work : works) {
    work.enginePrefills = enginePrefills;
    slowest = std::max(slowest, engine.cost->getMicros(work));
  }
  if (engine.planned.empty() && !decodes)
    return;
  IterationRecord record;
  record.engine = index;
  record.start = now;
  record.micros = slowest + settings.iterationOverheadMicros;
  record.decodeSequences = decodes;
  record.decodeContext = decodeContext;
  record.prefillChunks = prefillChunks;
  record.prefillTokens = prefillTokens;
  record.running = running;
  record.waiting = engine.waiting.size();
  record.kvUsed = budget > 0 ? kvUsed / (budget * engine.replicas.size()) : 0;
  result.iterations.push_back(record);
  engine.busy = true;
  push(now + record.micros, EventKind::IterationEnd, index);
}

uint64_t Simulation::drawStepTokens() {
  const SpeculativeDecoding &speculation = settings.speculation;
  uint64_t tokens = 1;
  for (unsigned draft = 0; draft < speculation.draftTokens; ++draft) {
    double uniform = double(acceptances() >> 11) * 0x1.0p-53;
    if (uniform >= speculation.acceptance)
      break;
    ++tokens;
  }
  return tokens;
}

double Simulation::getTransferMicros(uint32_t request) const {
  const IterationCostModel &from = *deployment.prefill->cost;
  const IterationCostModel &to = *deployment.decode.cost;
  unsigned fromRanks = std::max(1u, from.gpus / from.replicas);
  unsigned toRanks = std::max(1u, to.gpus / to.replicas);
  // Each rank holds its heads' and layers' share; the fewer ranks' links
  // carry the whole cache.
  double bytes = from.kvBytes(double(result.requests[request].input)) * fromRanks;
  double links = double(std::min(fromRanks, toRanks));
  return bytes / (links * deployment.transferBandwidth) * 1e6 +
         deployment.transferLatencyMicros;
}

void Simulation::finish(uint32_t request, double now) {
  RequestRecord &record = result.requests[request];
  record.finish = now;
  ++finished;
  if (issued >= workload.requests)
    return;
  uint32_t conversation = record.conversation;
  if (conversations[conversation].nextTurn < workload.turns) {
    conversations[conversation].history = record.input + record.output;
    issueTurn(now + workload.thinkMicros, conversation);
  } else if (workload.concurrency) {
    startConversation(now);
  }
}

void Simulation::startDecoding(Replica &replica, uint32_t request) {
  if (!countDecodes)
    return;
  SequenceState &sequence = sequences[request];
  const RequestRecord &record = result.requests[request];
  sequence.counted = true;
  sequence.countedFrom = replica.steps;
  ++replica.decoding;
  replica.countedTokens += record.input + sequence.generated;
  replica.countedFrom += replica.steps;
  replica.finishing.push({replica.steps + record.output - sequence.generated,
                          sequence.admission, request});
}

void Simulation::retire(unsigned index, uint32_t request, double now) {
  Engine &engine = engines[index];
  SequenceState &sequence = sequences[request];
  Replica &replica = engine.replicas[sequence.replica];
  replica.running.erase(llvm::find(replica.running, request));
  if (!keepContext(index, request))
    release(replica, sequence, request);
  RequestRecord &record = result.requests[request];
  if (!engine.decode && record.output > 1) {
    record.transfer = getTransferMicros(request);
    push(now + record.transfer, EventKind::TransferEnd, request);
  } else {
    finish(request, now);
  }
}

void Simulation::endCountedStep(unsigned index, Replica &replica, double now) {
  ++replica.steps;
  while (!replica.finishing.empty() &&
         replica.finishing.top().step == replica.steps) {
    uint32_t request = replica.finishing.top().request;
    replica.finishing.pop();
    SequenceState &sequence = sequences[request];
    const RequestRecord &record = result.requests[request];
    --replica.decoding;
    replica.countedTokens -= record.input + sequence.generated;
    replica.countedFrom -= sequence.countedFrom;
    sequence.cached += record.output - sequence.generated;
    sequence.generated = record.output;
    sequence.counted = false;
    retire(index, request, now);
  }
}

void Simulation::endWork(unsigned index, const PlannedWork &work, double now) {
  Engine &engine = engines[index];
  SequenceState &sequence = sequences[work.request];
  RequestRecord &record = result.requests[work.request];
  Replica &replica = engine.replicas[sequence.replica];
  bool done = false;
  if (work.prefillTokens) {
    sequence.prefilled += work.prefillTokens;
    sequence.cached += work.prefillTokens;
    keepPrefix(engine, work.request);
    if (sequence.prefilled < sequence.target)
      return;
    replica.prefilling.erase(llvm::find(replica.prefilling, work.request));
    if (!sequence.started) {
      record.firstToken = now;
      record.prefillEngine = index;
      sequence.started = true;
      sequence.generated = 1;
      done = record.output == 1 || !engine.decode;
    } else {
      // A recomputed sequence samples its next token.
      sequence.generated = std::min(record.output, sequence.generated + 1);
      done = sequence.generated == record.output;
    }
    if (!done)
      startDecoding(replica, work.request);
  } else {
    uint64_t tokens = drawStepTokens();
    sequence.generated = std::min(record.output, sequence.generated + tokens);
    sequence.cached += tokens;
    done = sequence.generated == record.output;
  }
  if (done)
    retire(index, work.request, now);
}

void Simulation::endIteration(unsigned index, double now) {
  Engine &engine = engines[index];
  engine.busy = false;
  // Each replica's decodes, then its prefill chunks, as they were planned.
  size_t next = 0;
  for (unsigned slot = 0; slot < engine.replicas.size(); ++slot) {
    if (engine.replicas[slot].decodes)
      endCountedStep(index, engine.replicas[slot], now);
    for (; next < engine.planned.size() &&
           sequences[engine.planned[next].request].replica == slot;
         ++next)
      endWork(index, engine.planned[next], now);
  }
  touch(index);
}

void Simulation::handle(const Event &event) {
  switch (event.kind) {
  case EventKind::Arrival:
    route(event.index, true);
    break;
  case EventKind::TransferEnd: {
    SequenceState &sequence = sequences[event.index] = SequenceState();
    sequence.prefilled = sequence.target = sequence.cached =
        result.requests[event.index].input;
    sequence.generated = 1;
    sequence.started = true;
    route(event.index, false);
    break;
  }
  case EventKind::IterationEnd:
    endIteration(event.index, event.time);
    break;
  case EventKind::ReloadEnd:
    touch(event.index);
    break;
  }
}

std::optional<ServingResult> Simulation::run() {
  if (deployment.prefill) {
    addPool(*deployment.prefill, "prefill", true, false);
    firstDecodeEngine = unsigned(engines.size());
    addPool(deployment.decode, "decode", false, true);
  } else {
    addPool(deployment.decode, "serve", true, true);
  }
  if (!checkFits())
    return std::nullopt;
  result.requests.reserve(workload.requests);
  if (workload.concurrency) {
    for (uint64_t client = 0;
         client < *workload.concurrency && issued < workload.requests; ++client)
      startConversation(0);
  } else {
    // Conversations arrive at the rate or the trace's times, their later
    // turns as the earlier end.
    uint64_t starts = (workload.requests + workload.turns - 1) / workload.turns;
    for (double time : getArrivalTimes(workload, starts))
      startConversation(time);
  }
  while (!events.empty()) {
    Event event = events.top();
    events.pop();
    handle(event);
    if (!events.empty() && events.top().time == event.time)
      continue;
    llvm::sort(touched);
    for (unsigned engine : touched) {
      engines[engine].touched = false;
      startIteration(engine, event.time);
    }
    touched.clear();
  }
  // Every request fits an empty engine (checkFits), so none can starve.
  assert(finished == workload.requests && "a request never finished");
  for (const RequestRecord &record : result.requests)
    if (!std::isfinite(record.finish)) {
      diags.error({}, "the serving run's clock overflowed: fewer or shorter "
                      "requests");
      return std::nullopt;
    }
  return std::move(result);
}

void stg::setDeploymentLinks(ServingDeployment &deployment,
                             const SystemSpec &system) {
  const NetworkTier &tier =
      system.scaleOut.bandwidth > 0 ? system.scaleOut : system.scaleUp;
  deployment.transferBandwidth = tier.getEffectiveBandwidth();
  deployment.transferLatencyMicros = tier.latency * 1e6;
  // Copies over the host link reach what copies in memory do of theirs.
  deployment.hostBandwidth =
      system.device.hostBandwidth * system.device.memoryEfficiency;
}

llvm::StringRef stg::getKVAllocationName(KVAllocation allocation) {
  return allocation == KVAllocation::OnDemand ? "on-demand" : "reserve";
}

std::optional<KVAllocation> stg::parseKVAllocation(llvm::StringRef name) {
  for (KVAllocation allocation :
       {KVAllocation::Reserve, KVAllocation::OnDemand})
    if (name == getKVAllocationName(allocation))
      return allocation;
  return std::nullopt;
}

std::optional<ServingResult>
stg::simulateServing(const ServingDeployment &deployment,
                     const ServingEngineSettings &settings,
                     const ServingWorkload &workload, DiagnosticEngine &diags) {
  if (workload.lengths.empty() || !workload.requests) {
    diags.error({}, "a serving run needs at least one request");
    return std::nullopt;
  }
  if (workload.requestRate && !(*workload.requestRate > 0)) {
    diags.error({}, "a serving run's request rate must be above 0 requests "
                    "a second (infinity: all at once)");
    return std::nullopt;
  }
  if (!(workload.burstiness >= MinBurstiness &&
        workload.burstiness <= MaxBurstiness)) {
    diags.error({}, llvm::formatv("a serving run's burstiness must be from "
                                  "{0} to {1}",
                                  MinBurstiness, MaxBurstiness)
                        .str());
    return std::nullopt;
  }
  if (int(workload.concurrency.has_value()) +
          int(workload.requestRate.has_value()) +
          int(!workload.arrivals.empty()) !=
      1) {
    diags.error({}, "a serving run's requests arrive one way: from clients, "
                    "at a rate, or at given times");
    return std::nullopt;
  }
  if (!workload.arrivals.empty() &&
      (workload.turns != 1 || workload.requests > workload.arrivals.size() ||
       !llvm::is_sorted(workload.arrivals) ||
       !(workload.arrivals.front() >= 0) ||
       !std::isfinite(workload.arrivals.back()))) {
    diags.error({}, "a serving run's arrival times need single turns, one a "
                    "request, finite, from 0 and in order");
    return std::nullopt;
  }
  if (!(settings.offloadBytes >= 0) || !std::isfinite(settings.offloadBytes) ||
      (settings.offloadBytes > 0 && !(deployment.hostBandwidth > 0))) {
    diags.error({}, "KV offload needs a finite host memory of 0 or more and "
                    "a link to it (the device's host bandwidth)");
    return std::nullopt;
  }
  if (const PromptBlocks &blocks = workload.promptBlocks;
      !blocks.empty() &&
      (blocks.begin.size() != workload.lengths.size() + 1 ||
       blocks.begin.front() != 0 || blocks.begin.back() != blocks.ids.size() ||
       !llvm::is_sorted(blocks.begin) ||
       llvm::any_of(blocks.ids, [](uint64_t id) { return id > MaxBlockId; }) ||
       workload.turns != 1 || workload.sharedPrefix ||
       blocks.tokens % settings.blockTokens)) {
    diags.error({}, "a serving run's prompt blocks need a line of ids (each "
                    "at most 2^53 - 1) for each of its lengths, single turns, "
                    "no shared prefix, and whole KV pages a block");
    return std::nullopt;
  }
  if (!(settings.kvOverlapWeight >= 0) ||
      !std::isfinite(settings.kvOverlapWeight)) {
    diags.error({}, "the KV router's overlap weight must be finite and 0 "
                    "or more");
    return std::nullopt;
  }
  if (const CacheAwareRouting &rule = settings.cacheAware;
      !(rule.cacheThreshold >= 0 && rule.cacheThreshold <= 1) ||
      !(rule.balanceRelative >= 1) || !std::isfinite(rule.balanceRelative)) {
    diags.error({}, "the cache-aware router's cache threshold must lie in "
                    "[0, 1] and its relative balance threshold be finite "
                    "and 1 or more");
    return std::nullopt;
  }
  if (!workload.prefixGroups) {
    diags.error({}, "a serving run's prompts need at least one prefix group");
    return std::nullopt;
  }
  if (!workload.turns || !(workload.thinkMicros >= 0) ||
      !std::isfinite(workload.thinkMicros)) {
    diags.error({}, "a serving run's conversations need at least one turn "
                    "and a finite think time of 0 or more");
    return std::nullopt;
  }
  if (std::optional<std::string> error =
          checkConversationLength(workload.lengths, workload.turns)) {
    diags.error({}, *error);
    return std::nullopt;
  }
  return Simulation(deployment, settings, workload, diags).run();
}
