//===- Routing.cpp - Which engine a request goes to ----------------------===//
//
// A request is routed when it arrives (to a prefill engine, or an
// aggregated one) and again when its prefill ends on a disaggregated
// deployment (to a decode engine). By load, the engine with the fewest
// requests waiting or running; by the KV router (Dynamo's), the attention
// replica, of any engine, whose cost in tokens is least; by SGLang's
// cache-aware router, the least loaded while loads are out of balance,
// else the engine caching most of the prompt if that is enough of it, else
// the engine sent the fewest prompt tokens (ServingSimulation.h's Router).
// A conversation's later turn goes where its context is cached whatever
// the router says. Ties go to the first engine, so a run stays a function
// of its inputs.
//
//===----------------------------------------------------------------------===//

#include "Simulation.h"

#include "llvm/Support/ErrorHandling.h"

#include <algorithm>

using namespace stg;
using namespace stg::serve;

double Simulation::getQueuedPrefill(const Engine &engine) const {
  uint64_t tokens = 0;
  for (uint32_t waiting : engine.waiting)
    tokens += result.requests[waiting].input;
  return double(tokens) / double(engine.replicas.size());
}

double Simulation::getRoutingCost(const Replica &replica, uint32_t request,
                                  uint64_t hit, double queued) const {
  uint64_t input = result.requests[request].input;
  double prefill = double(input - hit) + queued, held = double(input);
  for (uint32_t running : replica.running) {
    const SequenceState &sequence = sequences[running];
    prefill += double(sequence.target - sequence.prefilled);
    held += double(result.requests[running].input +
                   getGenerated(replica, sequence));
  }
  return settings.kvOverlapWeight * prefill + held;
}

unsigned Simulation::getLeastLoaded(unsigned first, unsigned last) const {
  unsigned best = first;
  for (unsigned index = first + 1; index < last; ++index)
    if (engines[index].getLoad() < engines[best].getLoad())
      best = index;
  return best;
}

unsigned Simulation::routeByCache(uint32_t request, unsigned first,
                                  unsigned last) const {
  const CacheAwareRouting &rule = settings.cacheAware;
  unsigned leastLoaded = getLeastLoaded(first, last);
  uint64_t least = engines[leastLoaded].getLoad(), most = least;
  for (unsigned index = first; index < last; ++index)
    most = std::max(most, engines[index].getLoad());
  if (most - least > rule.balanceAbsolute &&
      double(most) > double(least) * rule.balanceRelative)
    return leastLoaded;
  // The engine whose cache holds the longest prefix of the prompt, if it
  // holds enough of it (sgl-router's match rate, in tokens).
  unsigned matched = first;
  uint64_t longest = 0;
  for (unsigned index = first; index < last; ++index)
    for (const Replica &replica : engines[index].replicas)
      if (uint64_t hit = getReplicaHit(engines[index], replica, request);
          hit > longest) {
        longest = hit;
        matched = index;
      }
  if (double(longest) >
      rule.cacheThreshold * double(result.requests[request].input))
    return matched;
  // Else the engine sent the fewest prompt tokens: sgl-router's smallest
  // tree, its record of the prompts it sent each engine.
  unsigned smallest = first;
  for (unsigned index = first + 1; index < last; ++index)
    if (engines[index].routedTokens < engines[smallest].routedTokens)
      smallest = index;
  return smallest;
}

void Simulation::route(uint32_t request, bool toPrefill) {
  // Aggregated engines take both phases; else a pool's engines its phase.
  bool aggregated = !deployment.isDisaggregated();
  unsigned first = aggregated || toPrefill ? 0 : firstDecodeEngine;
  unsigned last =
      !aggregated && toPrefill ? firstDecodeEngine : unsigned(engines.size());
  unsigned best = first;
  if (toPrefill && settings.router == Router::KVAware) {
    std::optional<double> cheapest;
    for (unsigned index = first; index < last; ++index) {
      double queued = getQueuedPrefill(engines[index]);
      for (const Replica &replica : engines[index].replicas) {
        double cost = getRoutingCost(
            replica, request, getReplicaHit(engines[index], replica, request),
            queued);
        if (!cheapest || cost < *cheapest) {
          cheapest = cost;
          best = index;
        }
      }
    }
  } else if (toPrefill && settings.router == Router::CacheAware) {
    best = routeByCache(request, first, last);
  } else {
    best = getLeastLoaded(first, last);
  }
  // A conversation's turn goes where its context is cached.
  int home = conversations[result.requests[request].conversation].engine;
  if (toPrefill && home >= int(first) && home < int(last))
    best = unsigned(home);
  if (toPrefill)
    engines[best].routedTokens += result.requests[request].input;
  engines[best].waiting.push_back(request);
  touch(best);
}

Router stg::getEffectiveRouter(Router router, unsigned engines,
                               unsigned replicas) {
  if (engines > 1 || (router == Router::KVAware && replicas > 1))
    return router;
  return Router::Load;
}

llvm::StringRef stg::getRouterName(Router router) {
  switch (router) {
  case Router::Load:
    return "load";
  case Router::KVAware:
    return "kv";
  case Router::CacheAware:
    return "cache-aware";
  }
  llvm_unreachable("unknown router");
}

std::optional<Router> stg::parseRouter(llvm::StringRef name) {
  for (Router router : {Router::Load, Router::KVAware, Router::CacheAware})
    if (name == getRouterName(router))
      return router;
  return std::nullopt;
}
