//===- ServingWindowPlan.cpp - Which iterations a window holds ------------===//
//
// The window's iterations and KV transfers, from the serving run's records
// alone (chooseServingWindow), and their description for the manifest.
//
//===----------------------------------------------------------------------===//

#include "stg/Serve/ServingWindow.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <cmath>
#include <map>

using namespace stg;

namespace {

uint64_t divideUp(uint64_t value, uint64_t by) { return (value + by - 1) / by; }

/// The run's iterations on engines [first, first + count), in start order.
std::vector<size_t> getInstanceRecords(const ServingResult &result,
                                       unsigned first, unsigned count) {
  std::vector<size_t> records;
  for (size_t index = 0; index < result.iterations.size(); ++index) {
    unsigned engine = result.iterations[index].engine;
    if (engine >= first && engine < first + count)
      records.push_back(index);
  }
  return records;
}

/// The first of `records` that starts at or after `time`.
size_t findStart(const ServingResult &result,
                 const std::vector<size_t> &records, double time) {
  return std::partition_point(records.begin(), records.end(),
                              [&](size_t index) {
                                return result.iterations[index].start < time;
                              }) -
         records.begin();
}

/// `count` of `records` from `begin`, moved back when fewer follow.
std::vector<WindowIteration> pickIterations(const ServingResult &result,
                                            const std::vector<size_t> &records,
                                            size_t begin, size_t count,
                                            unsigned replicas) {
  if (records.size() - begin < count)
    begin = records.size() > count ? records.size() - count : 0;
  std::vector<WindowIteration> picked;
  for (size_t position = begin;
       position < records.size() && picked.size() < count; ++position) {
    const IterationRecord &record = result.iterations[records[position]];
    WindowIteration iteration;
    iteration.record = records[position];
    iteration.decodeSequences = divideUp(record.decodeSequences, replicas);
    if (record.decodeSequences)
      iteration.decodeContext = std::max<uint64_t>(
          1, uint64_t(std::llround(double(record.decodeContext) /
                                   double(record.decodeSequences))));
    if (record.prefillTokens) {
      iteration.prefillSequences = divideUp(record.prefillChunks, replicas);
      iteration.prefillTokens = divideUp(
          divideUp(record.prefillTokens, replicas), iteration.prefillSequences);
    }
    picked.push_back(iteration);
  }
  return picked;
}

} // namespace

ServingWindowPlan stg::chooseServingWindow(const ServingDeployment &deployment,
                                           const ServingResult &result,
                                           unsigned count) {
  ServingWindowPlan plan;
  double lastFinish = 0;
  for (const RequestRecord &request : result.requests)
    lastFinish = std::max(lastFinish, request.finish);
  const EnginePool &first =
      deployment.isDisaggregated() ? *deployment.prefill : deployment.decode;
  std::vector<size_t> records =
      getInstanceRecords(result, 0, first.cost->stages);
  plan.iterations = pickIterations(result, records,
                                   findStart(result, records, lastFinish / 2),
                                   count, first.cost->replicas);
  if (plan.iterations.empty())
    return plan;
  auto getEnd = [&](const WindowIteration &iteration) {
    const IterationRecord &record = result.iterations[iteration.record];
    return record.start + record.micros;
  };
  // An instance of pipeline stages runs as many iterations at once.
  auto getBusy = [&](const std::vector<WindowIteration> &iterations,
                     unsigned stages) {
    double busy = 0;
    for (const WindowIteration &iteration : iterations)
      busy += result.iterations[iteration.record].micros;
    return busy / stages;
  };
  plan.startMicros = result.iterations[plan.iterations.front().record].start;
  plan.endMicros = getEnd(plan.iterations.back());
  plan.busyMicros = getBusy(plan.iterations, first.cost->stages);
  if (!deployment.isDisaggregated())
    return plan;

  // The decode instance's iterations over the same time: those that start
  // in it, at least one.
  const EnginePool &decode = deployment.decode;
  unsigned firstDecodeEngine = first.instances * first.cost->stages;
  records = getInstanceRecords(result, firstDecodeEngine, decode.cost->stages);
  size_t begin = findStart(result, records, plan.startMicros);
  size_t end = findStart(result, records, plan.endMicros);
  plan.decodeIterations =
      pickIterations(result, records, begin,
                     std::clamp<size_t>(end - begin, 1, MaxWindowIterations),
                     decode.cost->replicas);
  for (const WindowIteration &iteration : plan.decodeIterations) {
    plan.startMicros =
        std::min(plan.startMicros, result.iterations[iteration.record].start);
    plan.endMicros = std::max(plan.endMicros, getEnd(iteration));
  }
  plan.busyMicros = std::max(
      plan.busyMicros, getBusy(plan.decodeIterations, decode.cost->stages));

  // A sequence whose prefill ended with a window iteration of its engine
  // (the run stamps its first token with that iteration's end) and that
  // has tokens left to decode moves to the decode instance.
  std::map<std::pair<unsigned, double>, unsigned> windowEnds;
  for (unsigned index = 0; index < plan.iterations.size(); ++index) {
    const IterationRecord &record =
        result.iterations[plan.iterations[index].record];
    windowEnds[{record.engine, record.start + record.micros}] = index;
  }
  const IterationCostModel &cost = *decode.cost;
  for (uint32_t request = 0; request < result.requests.size(); ++request) {
    const RequestRecord &record = result.requests[request];
    auto found = windowEnds.find({record.prefillEngine, record.firstToken});
    if (found == windowEnds.end() || record.output <= 1)
      continue;
    WindowTransfer transfer;
    transfer.request = request;
    transfer.afterPrefill = found->second;
    double arrival = record.firstToken + record.transfer;
    for (unsigned index = 0; index < plan.decodeIterations.size(); ++index)
      if (result.iterations[plan.decodeIterations[index].record].start >=
          arrival) {
        transfer.beforeDecode = index;
        break;
      }
    transfer.bytesPerRank = uint64_t(std::max(
        1.0, std::round(cost.kvBytes(double(record.input)) / cost.replicas)));
    plan.transfers.push_back(transfer);
  }
  llvm::stable_sort(plan.transfers,
                    [](const WindowTransfer &a, const WindowTransfer &b) {
                      return a.afterPrefill < b.afterPrefill;
                    });
  return plan;
}

llvm::json::Object stg::describeServingWindow(const ServingWindowPlan &plan,
                                              const ServingResult &result) {
  // Microseconds to the nanosecond: the same text on every platform.
  auto micros = [](double value) { return std::round(value * 1e3) / 1e3; };
  auto describe = [&](const std::vector<WindowIteration> &iterations) {
    llvm::json::Array list;
    for (const WindowIteration &iteration : iterations) {
      const IterationRecord &record = result.iterations[iteration.record];
      list.push_back(llvm::json::Object{
          {"engine", result.engines[record.engine].name},
          {"start_us", micros(record.start)},
          {"micros", micros(record.micros)},
          {"decode_sequences", int64_t(iteration.decodeSequences)},
          {"decode_context", int64_t(iteration.decodeContext)},
          {"prefill_sequences", int64_t(iteration.prefillSequences)},
          {"prefill_tokens", int64_t(iteration.prefillTokens)}});
    }
    return list;
  };
  llvm::json::Object object{
      {"start_us", micros(plan.startMicros)},
      {"end_us", micros(plan.endMicros)},
      {"simulated_micros", micros(plan.endMicros - plan.startMicros)},
      {"busy_micros", micros(plan.busyMicros)},
      {"iterations", describe(plan.iterations)}};
  if (!plan.decodeIterations.empty()) {
    object["decode_iterations"] = describe(plan.decodeIterations);
    llvm::json::Array transfers;
    for (const WindowTransfer &transfer : plan.transfers)
      transfers.push_back(llvm::json::Object{
          {"request", int64_t(transfer.request)},
          {"after_prefill_iteration", int64_t(transfer.afterPrefill)},
          {"before_decode_iteration",
           transfer.beforeDecode
               ? llvm::json::Value(int64_t(*transfer.beforeDecode))
               : llvm::json::Value(nullptr)},
          {"bytes_per_rank", int64_t(transfer.bytesPerRank)}});
    object["kv_transfers"] = std::move(transfers);
  }
  return object;
}

llvm::json::Value stg::buildWindowManifest(const ServingWindow &window,
                                           const ServingResult &result,
                                           const SystemSpec &system,
                                           const ManifestInputs &inputs,
                                           const StepEstimate &estimate) {
  const ProgramSet &programs = window.programs;
  llvm::json::Value manifest = buildManifest(
      *window.module, programs, summarize(programs), inputs, &estimate);
  llvm::json::Object &fields = *manifest.getAsObject();
  fields["system"] = describeSystem(system);
  llvm::json::Object described = describeServingWindow(window.plan, result);
  if (window.pair)
    described["instances"] = describePairMesh(*window.pair);
  fields["serving_window"] = std::move(described);
  return manifest;
}
