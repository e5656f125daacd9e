//===- SearchResults.cpp - A plan search's table and its files ------------===//

#include "stg/Search/SearchResults.h"

#include "stg/Support/Version.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/Format.h"

#include <charconv>
#include <climits>
#include <cmath>
#include <functional>
#include <set>
#include <tuple>
#include <type_traits>

using namespace stg;

/// Prints `value` as printf's "%.*f" (fixed) or "%.*g" (general) would,
/// through std::to_chars, which is specified to give the same characters
/// and is several times faster: a table has millions of numbers.
static void writeNumber(llvm::raw_ostream &os, double value,
                        std::chars_format format, int precision) {
  char buffer[128];
  auto [end, error] = std::to_chars(buffer, std::end(buffer), value, format,
                                    precision);
  if (error == std::errc()) {
    os.write(buffer, end - buffer);
    return;
  }
  // Longer than the buffer: a fixed number past 10^100.
  os << llvm::format(format == std::chars_format::fixed ? "%.*f" : "%.*g",
                     precision, value);
}

/// As llvm::json::OStream prints a double: 17 significant digits.
static void writeJSONNumber(llvm::json::OStream &json, double value) {
  json.rawValue([&](llvm::raw_ostream &os) {
    writeNumber(os, value, std::chars_format::general, 17);
  });
}

void stg::rankPlans(SearchTable &table) {
  // Equal times go to the smaller plan, so the best is on the Pareto front.
  // Times are equal to the nanosecond: below that, they differ only in how
  // the estimate's additions rounded.
  auto order = [](const PlanResult &plan) {
    double nanos = plan.stepMicros * 1e3;
    long long time = std::isfinite(nanos) && std::abs(nanos) < 1e18
                         ? std::llround(nanos)
                         : LLONG_MAX;
    return std::make_tuple(unsigned(plan.status), time, plan.memory.total(),
                           plan.plan.getLabel());
  };
  std::vector<
      std::pair<std::tuple<unsigned, long long, uint64_t, std::string>, size_t>>
      keys;
  for (size_t index = 0; index < table.plans.size(); ++index)
    keys.push_back({order(table.plans[index]), index});
  llvm::sort(keys);
  std::vector<PlanResult> sorted;
  for (const auto &key : keys)
    sorted.push_back(std::move(table.plans[key.second]));
  unsigned rank = 0;
  for (PlanResult &plan : sorted)
    plan.rank = plan.status == PlanStatus::Fits ? ++rank : 0;
  table.plans = std::move(sorted);
}

static llvm::json::Object countsJSON(const std::map<std::string, uint64_t> &counts) {
  llvm::json::Object object;
  for (const auto &[reason, count] : counts)
    object[reason] = int64_t(count);
  return object;
}

namespace {

/// A field of a plan's entry in plans.json.
struct PlanField {
  std::string key;
  std::function<void(llvm::json::OStream &, const PlanResult &)> write;
  /// Whether the plan has the field (null: every plan).
  bool (*has)(const PlanResult &) = nullptr;
};

/// The fields of a plan's entry, in the order of their keys, as LLVM prints
/// an object's: the entries are streamed, without building an object each.
const std::vector<PlanField> &getPlanFields() {
  static const std::vector<PlanField> fields = [] {
    using OStream = llvm::json::OStream;
    auto priced = [](const PlanResult &result) {
      return result.status != PlanStatus::Failed;
    };
    auto number = [priced](double PlanResult::*member) {
      return [priced, member](OStream &json, const PlanResult &result) {
        if (priced(result))
          writeJSONNumber(json, result.*member);
        else
          json.value(nullptr);
      };
    };
    // A member of the plan, as JSON takes it.
    auto planMember = [](auto Plan::*member) {
      return [member](OStream &json, const PlanResult &result) {
        using Type = std::decay_t<decltype(result.plan.*member)>;
        if constexpr (std::is_same_v<Type, unsigned>)
          json.value(int64_t(result.plan.*member));
        else
          json.value(result.plan.*member);
      };
    };
    std::vector<PlanField> list{
        {"plan",
         [](OStream &json, const PlanResult &result) {
           json.value(result.plan.getLabel());
         }},
        {"micro_batch", planMember(&Plan::microBatchSize)},
        {"microbatches", planMember(&Plan::microbatches)},
        {"virtual_stages", planMember(&Plan::virtualStages)},
        {"recompute", planMember(&Plan::recompute)},
        // Only a low-precision recipe's, as pipeline_split.
        {"precision",
         [](OStream &json, const PlanResult &result) {
           json.value(getPrecisionName(result.plan.precision));
         },
         [](const PlanResult &result) {
           return result.plan.precision != Precision::BF16;
         }},
        {"weight_sharding",
         [](OStream &json, const PlanResult &result) {
           json.value(getWeightShardingName(result.plan.sharding));
         }},
        // Only an exchange other than the ring's, as pipeline_split.
        {"cp_comm_type",
         [](OStream &json, const PlanResult &result) {
           json.value(getCpExchangeName(result.plan.cpExchange));
         },
         [](const PlanResult &result) {
           return result.plan.cpExchange != CpExchange::Ring;
         }},
        // Only a schedule other than 1F1B's, as pipeline_split.
        {"schedule",
         [](OStream &json, const PlanResult &result) {
           json.value(getPipelineScheduleName(result.plan.schedule));
         },
         [](const PlanResult &result) {
           return result.plan.schedule != PipelineSchedule::OneFOneB;
         }},
        // Only an accounted split's: a search's files stay as they were
        // where no plan has one.
        {"pipeline_split",
         [](OStream &json, const PlanResult &result) {
           json.value(getLayerSplitName(result.plan.layerSplit));
         },
         [](const PlanResult &result) {
           return result.plan.layerSplit != LayerSplit::Even;
         }},
        {"sequence_parallel", planMember(&Plan::sequenceParallel)},
        {"tp_in_node", planMember(&Plan::tpInNode)},
        {"status",
         [](OStream &json, const PlanResult &result) {
           json.value(getPlanStatusName(result.status));
         }},
        {"reason", [](OStream &json,
                      const PlanResult &result) { json.value(result.reason); }},
        {"rank",
         [](OStream &json, const PlanResult &result) {
           if (result.rank)
             json.value(int64_t(result.rank));
           else
             json.value(nullptr);
         }},
        {"memory",
         [priced](OStream &json, const PlanResult &result) {
           if (!priced(result)) {
             json.value(nullptr);
             return;
           }
           const StageMemory &memory = result.memory;
           json.object([&] {
             json.attribute("activations", int64_t(memory.activations));
             json.attribute("gradients", int64_t(memory.gradients));
             json.attribute("optimizer", int64_t(memory.optimizer));
             json.attribute("state", int64_t(memory.state));
             json.attribute("total", int64_t(memory.total()));
             json.attribute("weights", int64_t(memory.weights));
           });
         }},
        {"step_micros", number(&PlanResult::stepMicros)},
        {"compute_micros", number(&PlanResult::computeMicros)},
        {"exposed_communication_micros",
         number(&PlanResult::exposedCommunicationMicros)},
        {"bubble_fraction", number(&PlanResult::bubbleFraction)},
        {"mfu", number(&PlanResult::mfu)},
        {"tokens_per_second_per_gpu",
         number(&PlanResult::tokensPerSecondPerGPU)}};
    for (size_t index = 0; index < PlanAxes.size(); ++index)
      list.push_back(
          {PlanAxes[index], [index](OStream &json, const PlanResult &result) {
             json.value(int64_t(result.plan.degrees[index]));
           }});
    llvm::sort(list, [](const PlanField &a, const PlanField &b) {
      return a.key < b.key;
    });
    return list;
  }();
  return fields;
}

} // namespace

void stg::writePlanJSON(llvm::json::OStream &json, const PlanResult &result) {
  json.object([&] {
    for (const PlanField &field : getPlanFields()) {
      if (field.has && !field.has(result))
        continue;
      json.attributeBegin(field.key);
      field.write(json, result);
      json.attributeEnd();
    }
  });
}

void stg::writeJSON(llvm::raw_ostream &os, const SearchTable &table) {
  const SearchHeader &header = table.header;
  llvm::json::Object fields{
      {"generator", "stage-search"},
      {"generator_version", header.generatorVersion},
      {"input", header.input},
      {"model", header.model},
      {"gpus", int64_t(header.gpus)},
      {"global_batch", int64_t(header.globalBatch)},
      {"sequence", int64_t(header.sequenceLength)},
      {"system",
       llvm::json::Object{{"name", header.system},
                          {"accelerator", header.accelerator},
                          {"gpus_per_node", int64_t(header.gpusPerNode)},
                          {"memory_bytes", int64_t(header.deviceMemoryBytes)}}},
      {"memory_margin", header.memoryMargin},
      {"memory_limit_bytes", int64_t(header.memoryLimitBytes)},
      {"pruned", countsJSON(table.pruned)},
      {"pruned_by_model", countsJSON(table.prunedByModel)},
      {"shard", llvm::json::Object{{"index", int64_t(header.shardIndex)},
                                   {"count", int64_t(header.shardCount)}}}};
  // Only with bound pruning: a search without it writes what it always did.
  if (header.pruneBounds)
    fields["pruned_by_bounds"] = countsJSON(table.prunedByBounds);
  // Keys sorted, as LLVM prints objects; the plans streamed one by one, so
  // that a table of a million plans is never one JSON value in memory.
  std::vector<std::string> keys{"plans"};
  for (const auto &entry : fields)
    keys.push_back(entry.first.str());
  llvm::sort(keys);
  llvm::json::OStream json(os, 2);
  json.object([&] {
    for (const std::string &key : keys) {
      if (key != "plans") {
        json.attribute(key, std::move(*fields.get(key)));
        continue;
      }
      json.attributeArray("plans", [&] {
        for (const PlanResult &plan : table.plans)
          writePlanJSON(json, plan);
      });
    }
  });
  os << "\n";
}

namespace {

/// Reads fields of a JSON object, remembering the first that is missing
/// or of the wrong kind.
class FieldReader {
public:
  FieldReader(const llvm::json::Object *found, std::string &error,
              std::string where)
      : object(found ? found : &Empty), error(error), where(std::move(where)) {
    if (!found)
      fail("", "an object");
  }

  template <typename T> T integer(llvm::StringRef key) {
    auto value = object->getInteger(key);
    if (!value || *value < 0 || uint64_t(*value) > std::numeric_limits<T>::max())
      return fail(key, "a whole number"), T();
    return T(*value);
  }
  double number(llvm::StringRef key) {
    auto value = object->getNumber(key);
    if (!value || !std::isfinite(*value))
      return fail(key, "a number"), 0;
    return *value;
  }
  std::string string(llvm::StringRef key) {
    auto value = object->getString(key);
    if (!value)
      return fail(key, "a string"), "";
    return value->str();
  }
  /// A field written only where it differs from what its absence means:
  /// `parse` reads its text into `field`; `refused` (that meaning) and what
  /// `parse` rejects fail, saying `expected`.
  template <typename T, typename Parse>
  void optional(llvm::StringRef key, T &field, std::optional<T> refused,
                Parse parse, llvm::StringRef expected) {
    if (!object->get(key))
      return;
    std::optional<T> parsed = parse(string(key));
    if (parsed && parsed != refused)
      field = *parsed;
    else
      fail(key, expected);
  }
  bool boolean(llvm::StringRef key) {
    auto value = object->getBoolean(key);
    if (!value)
      return fail(key, "true or false"), false;
    return *value;
  }
  const llvm::json::Object *child(llvm::StringRef key) {
    const llvm::json::Object *value = object->getObject(key);
    if (!value)
      fail(key, "an object");
    return value;
  }
  std::map<std::string, uint64_t> counts(llvm::StringRef key) {
    std::map<std::string, uint64_t> counts;
    if (const llvm::json::Object *map = child(key)) {
      FieldReader reader(map, error, where + "." + key.str());
      for (const auto &entry : *map)
        counts[entry.first.str()] = reader.integer<uint64_t>(entry.first);
    }
    return counts;
  }
  void fail(llvm::StringRef key, llvm::StringRef expected) {
    if (error.empty())
      error = (where + (key.empty() ? "" : "." + key.str()) + " is not " +
               expected)
                  .str();
  }

private:
  static inline const llvm::json::Object Empty;
  const llvm::json::Object *object;
  std::string &error;
  std::string where;
};

} // namespace

static PlanResult readPlan(const llvm::json::Object *object,
                           std::string &error, llvm::StringRef where) {
  FieldReader read(object, error, where.str());
  PlanResult result;
  Plan &plan = result.plan;
  for (size_t index = 0; index < PlanAxes.size(); ++index)
    plan.degrees[index] = std::max(1u, read.integer<unsigned>(PlanAxes[index]));
  plan.microBatchSize = read.integer<unsigned>("micro_batch");
  plan.microbatches = read.integer<unsigned>("microbatches");
  plan.virtualStages = read.integer<unsigned>("virtual_stages");
  plan.recompute = read.string("recompute");
  plan.sequenceParallel = read.boolean("sequence_parallel");
  plan.tpInNode = read.boolean("tp_in_node");
  read.optional("pipeline_split", plan.layerSplit,
                std::optional(LayerSplit::Even), parseLayerSplit,
                "embedding, loss, embedding+loss or first-last");
  read.optional("cp_comm_type", plan.cpExchange,
                std::optional(CpExchange::Ring), parseCpExchange,
                "all_gather or a2a");
  read.optional("schedule", plan.schedule,
                std::optional(PipelineSchedule::OneFOneB),
                parsePipelineSchedule,
                "1f1b, zb-h1, zb-v, dualpipev, dualpipe or combined-1f1b");
  read.optional<Precision>("precision", plan.precision, std::nullopt,
                           parseRecipe, getRecipeNames(" or "));
  std::string sharding = read.string("weight_sharding");
  if (std::optional<WeightSharding> parsed = parseWeightSharding(sharding))
    plan.sharding = *parsed;
  else
    read.fail("weight_sharding", "none, distributed-optimizer or fsdp");
  std::string status = read.string("status");
  if (status == "fits")
    result.status = PlanStatus::Fits;
  else if (status == "over-memory")
    result.status = PlanStatus::OverMemory;
  else if (status != "failed")
    read.fail("status", "fits, over-memory or failed");
  result.reason = read.string("reason");
  // Unranked results (from a search worker) have none.
  if (object && object->getInteger("rank"))
    result.rank = read.integer<unsigned>("rank");
  if (read.string("plan") != plan.getLabel())
    read.fail("plan", "the label of the plan's fields");
  if (result.status == PlanStatus::Failed)
    return result;
  FieldReader memory(read.child("memory"), error, (where + ".memory").str());
  result.memory.weights = memory.integer<uint64_t>("weights");
  result.memory.gradients = memory.integer<uint64_t>("gradients");
  result.memory.optimizer = memory.integer<uint64_t>("optimizer");
  result.memory.activations = memory.integer<uint64_t>("activations");
  result.memory.state = memory.integer<uint64_t>("state");
  result.stepMicros = read.number("step_micros");
  result.computeMicros = read.number("compute_micros");
  result.exposedCommunicationMicros =
      read.number("exposed_communication_micros");
  result.bubbleFraction = read.number("bubble_fraction");
  result.mfu = read.number("mfu");
  result.tokensPerSecondPerGPU = read.number("tokens_per_second_per_gpu");
  return result;
}

llvm::Expected<SearchTable> stg::parseSearchTable(llvm::StringRef text,
                                                  llvm::StringRef name) {
  llvm::Expected<llvm::json::Value> value = llvm::json::parse(text);
  if (!value)
    return llvm::createStringError(std::errc::invalid_argument, "%s: %s",
                                   name.str().c_str(),
                                   llvm::toString(value.takeError()).c_str());
  std::string error;
  FieldReader read(value->getAsObject(), error, "the file");
  SearchTable table;
  SearchHeader &header = table.header;
  if (read.string("generator") != "stage-search")
    read.fail("generator", "stage-search");
  header.generatorVersion = read.string("generator_version");
  header.input = read.string("input");
  header.model = read.string("model");
  header.gpus = read.integer<unsigned>("gpus");
  header.globalBatch = read.integer<unsigned>("global_batch");
  header.sequenceLength = read.integer<uint64_t>("sequence");
  FieldReader system(read.child("system"), error, "system");
  header.system = system.string("name");
  header.accelerator = system.string("accelerator");
  header.gpusPerNode = system.integer<unsigned>("gpus_per_node");
  header.deviceMemoryBytes = system.integer<uint64_t>("memory_bytes");
  header.memoryMargin = read.number("memory_margin");
  header.memoryLimitBytes = read.integer<uint64_t>("memory_limit_bytes");
  table.pruned = read.counts("pruned");
  table.prunedByModel = read.counts("pruned_by_model");
  if (value->getAsObject() && value->getAsObject()->get("pruned_by_bounds")) {
    header.pruneBounds = true;
    table.prunedByBounds = read.counts("pruned_by_bounds");
  }
  FieldReader shard(read.child("shard"), error, "shard");
  header.shardIndex = shard.integer<unsigned>("index");
  header.shardCount = shard.integer<unsigned>("count");
  const llvm::json::Array *plans =
      value->getAsObject() ? value->getAsObject()->getArray("plans") : nullptr;
  if (!plans)
    read.fail("plans", "an array");
  else
    for (size_t index = 0; index < plans->size() && error.empty(); ++index)
      table.plans.push_back(readPlan((*plans)[index].getAsObject(), error,
                                     "plans[" + std::to_string(index) + "]"));
  if (!error.empty())
    return llvm::createStringError(std::errc::invalid_argument,
                                   "%s: %s; not a plans.json of stage-search",
                                   name.str().c_str(), error.c_str());
  return table;
}

/// A CSV field: quoted when it holds a comma or a quote.
static std::string csvField(llvm::StringRef text) {
  if (!text.contains(',') && !text.contains('"'))
    return text.str();
  std::string quoted = "\"";
  for (char c : text)
    quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

void stg::writeCSV(llvm::raw_ostream &os, const SearchTable &table) {
  os << "rank,plan,status";
  for (const char *axis : PlanAxes)
    os << ',' << axis;
  os << ",micro_batch,microbatches,virtual_stages,recompute,weight_sharding,"
        "sequence_parallel,tp_in_node,step_s,mfu,tokens_per_s_per_gpu,"
        "memory_gb,weights_gb,gradients_gb,optimizer_gb,activations_gb,"
        "state_gb,compute_s,exposed_communication_s,bubble_fraction,reason\n";
  for (const PlanResult &result : table.plans) {
    const Plan &plan = result.plan;
    if (result.rank)
      os << result.rank;
    os << ',' << csvField(plan.getLabel()) << ','
       << getPlanStatusName(result.status);
    for (unsigned degree : plan.degrees)
      os << ',' << degree;
    os << ',' << plan.microBatchSize << ',' << plan.microbatches << ','
       << plan.virtualStages << ',' << plan.recompute << ','
       << getWeightShardingName(plan.sharding) << ','
       << (plan.sequenceParallel ? "true" : "false") << ','
       << (plan.tpInNode ? "true" : "false");
    if (result.status == PlanStatus::Failed) {
      os << ",,,,,,,,,,,,," << csvField(result.reason) << "\n";
      continue;
    }
    const StageMemory &memory = result.memory;
    auto field = [&](double value, int decimals) {
      os << ',';
      writeNumber(os, value, std::chars_format::fixed, decimals);
    };
    field(result.stepMicros / 1e6, 6);
    field(result.mfu, 4);
    field(result.tokensPerSecondPerGPU, 1);
    for (uint64_t bytes : {memory.total(), memory.weights, memory.gradients,
                           memory.optimizer, memory.activations, memory.state})
      field(bytes / 1e9, 3);
    field(result.computeMicros / 1e6, 6);
    field(result.exposedCommunicationMicros / 1e6, 6);
    field(result.bubbleFraction, 4);
    os << ',' << csvField(result.reason) << "\n";
  }
}

void stg::printSearchSummary(llvm::raw_ostream &os, const SearchTable &table,
                             unsigned top) {
  const SearchHeader &header = table.header;
  uint64_t pruned = 0, prunedByModel = 0, prunedByBounds = 0, fits = 0,
           failed = 0;
  for (const auto &entry : table.pruned)
    pruned += entry.second;
  for (const auto &entry : table.prunedByModel)
    prunedByModel += entry.second;
  for (const auto &entry : table.prunedByBounds)
    prunedByBounds += entry.second;
  for (const PlanResult &plan : table.plans) {
    fits += plan.status == PlanStatus::Fits;
    failed += plan.status == PlanStatus::Failed;
  }
  os << header.model << " on " << header.gpus << " GPUs of " << header.system
     << ", global batch " << header.globalBatch << " x "
     << header.sequenceLength << " tokens";
  // A shard counts the arithmetic's prunes of the whole space, the rest of
  // its own slice.
  if (header.shardCount > 1)
    os << ", shard " << header.shardIndex << " of " << header.shardCount
       << " (from \"pruned by the model's dims\" on, its slice)\n";
  else
    os << ": " << (pruned + prunedByModel + prunedByBounds + table.plans.size())
       << " candidate plans\n";
  os << "  pruned before compiling: " << pruned << "\n";
  for (const auto &[reason, count] : table.pruned)
    os << llvm::format("    %10llu  ", (unsigned long long)count) << reason
       << "\n";
  os << "  pruned by the model's dims: " << prunedByModel << "\n";
  for (const auto &[reason, count] : table.prunedByModel)
    os << llvm::format("    %10llu  ", (unsigned long long)count) << reason
       << "\n";
  if (header.pruneBounds) {
    os << "  pruned by bounds before compiling: " << prunedByBounds << "\n";
    for (const auto &[reason, count] : table.prunedByBounds)
      os << llvm::format("    %10llu  ", (unsigned long long)count) << reason
         << "\n";
  }
  os << "  compiled: " << table.plans.size() << " (" << fits
     << " fit in " << llvm::format("%.1f", header.memoryLimitBytes / 1e9)
     << " GB, " << (table.plans.size() - fits - failed)
     << " need more, " << failed << " failed)\n";
  if (!fits)
    return;
  os << "\n rank    step      MFU  tokens/s/GPU  memory GB  exposed comm  "
        "bubble  plan\n";
  for (const PlanResult &plan : table.plans) {
    if (!plan.rank || plan.rank > top)
      break;
    os << llvm::format("%5u  %7.3f s  %5.1f %%  %12.0f  %9.1f  %10.3f s  "
                       "%5.1f %%  ",
                       plan.rank, plan.stepMicros / 1e6, 100 * plan.mfu,
                       plan.tokensPerSecondPerGPU, plan.memory.total() / 1e9,
                       plan.exposedCommunicationMicros / 1e6,
                       100 * plan.bubbleFraction)
       << plan.plan.getLabel() << "\n";
  }
}

llvm::Expected<SearchTable> stg::mergeTables(std::vector<SearchTable> shards) {
  if (shards.empty())
    return llvm::createStringError(std::errc::invalid_argument,
                                   "nothing to merge");
  SearchTable merged;
  merged.header = shards.front().header;
  merged.pruned = shards.front().pruned;
  unsigned count = merged.header.shardCount;
  std::set<unsigned> seen;
  auto sameSearch = [](SearchHeader a, SearchHeader b) {
    a.shardIndex = b.shardIndex = 0;
    auto fields = [](const SearchHeader &h) {
      return std::tie(h.generatorVersion, h.input, h.model, h.gpus,
                      h.globalBatch, h.sequenceLength, h.system, h.accelerator,
                      h.gpusPerNode, h.deviceMemoryBytes, h.memoryMargin,
                      h.memoryLimitBytes, h.shardCount, h.pruneBounds);
    };
    return fields(a) == fields(b);
  };
  for (SearchTable &shard : shards) {
    const SearchHeader &header = shard.header;
    if (!sameSearch(header, merged.header) || shard.pruned != merged.pruned)
      return llvm::createStringError(
          std::errc::invalid_argument,
          "the files are not shards of one search (model, GPUs, batch, "
          "system, memory limit, version, shard count and --prune-bounds "
          "must agree)");
    if (!seen.insert(header.shardIndex).second)
      return llvm::createStringError(std::errc::invalid_argument,
                                     "shard %u/%u is given twice",
                                     header.shardIndex, count);
    for (const auto &[reason, number] : shard.prunedByModel)
      merged.prunedByModel[reason] += number;
    for (const auto &[reason, number] : shard.prunedByBounds)
      merged.prunedByBounds[reason] += number;
    for (PlanResult &plan : shard.plans)
      merged.plans.push_back(std::move(plan));
  }
  if (seen.size() != count)
    return llvm::createStringError(std::errc::invalid_argument,
                                   "%zu of %u shards given; the union needs "
                                   "all",
                                   seen.size(), count);
  merged.header.shardIndex = 0;
  merged.header.shardCount = 1;
  rankPlans(merged);
  return merged;
}

const PlanResult *stg::findPlan(const SearchTable &table,
                                llvm::StringRef label) {
  for (const PlanResult &plan : table.plans)
    if (plan.plan.getLabel() == label)
      return &plan;
  return nullptr;
}
