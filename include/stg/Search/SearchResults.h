//===- SearchResults.h - A plan search's table and its files ----*- C++ -*-===//
//
// The results of a search: what was searched (model, GPUs, batch, system,
// memory limit, shard), how many plans each reason pruned, and every plan
// compiled, fitting or not. Ranking orders the plans that fit by step
// time; the table is written as JSON (`plans.json`, which `merge` and
// `stage-plot` read back) and CSV, and printed as a text table.
//
// Writing is deterministic, and a merge of the shards of a search writes
// the same bytes as the whole search.
//
//===----------------------------------------------------------------------===//

#ifndef STG_SEARCH_SEARCHRESULTS_H
#define STG_SEARCH_SEARCHRESULTS_H

#include "stg/Search/PlanEvaluator.h"

#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <map>
#include <string>
#include <vector>

namespace stg {

struct SearchHeader {
  std::string generatorVersion;
  std::string input;
  std::string model;
  unsigned gpus = 0;
  unsigned globalBatch = 0;
  uint64_t sequenceLength = 0;
  std::string system;
  std::string accelerator;
  unsigned gpusPerNode = 0;
  uint64_t deviceMemoryBytes = 0;
  double memoryMargin = 0;
  uint64_t memoryLimitBytes = 0;
  unsigned shardIndex = 0, shardCount = 1;
  /// Whether bound pruning ran (--prune-bounds on): plans.json then has
  /// `pruned_by_bounds`, and the summary its lines.
  bool pruneBounds = false;
};

struct SearchTable {
  SearchHeader header;
  /// Plans removed by arithmetic before compiling (the same in every
  /// shard), and by the model's dims (counted by the shard that checked).
  std::map<std::string, uint64_t> pruned, prunedByModel;
  /// Plans the bounds removed before compiling (BoundPruning.h), counted
  /// by the shard that evaluated them against its own best.
  std::map<std::string, uint64_t> prunedByBounds;
  std::vector<PlanResult> plans;
};

/// Sorts the plans (fitting by step time, then over-memory by step time,
/// then failed; ties by memory, then label) and numbers the fitting ones
/// from 1.
void rankPlans(SearchTable &table);

/// Writes plans.json.
void writeJSON(llvm::raw_ostream &os, const SearchTable &table);
/// Reads what toJSON wrote; `name` is for messages.
llvm::Expected<SearchTable> parseSearchTable(llvm::StringRef text,
                                             llvm::StringRef name);
void writeCSV(llvm::raw_ostream &os, const SearchTable &table);

/// One plan's entry of plans.json, as the next value of `json`.
void writePlanJSON(llvm::json::OStream &json, const PlanResult &result);
/// The search in a few lines and the `top` best plans as a table.
void printSearchSummary(llvm::raw_ostream &os, const SearchTable &table,
                        unsigned top);

/// The union of shards of one search, ranked; fails if they are not of the
/// same search or a shard is missing or repeated.
llvm::Expected<SearchTable> mergeTables(std::vector<SearchTable> shards);

/// The plan labelled `label` (Plan::getLabel), or null.
const PlanResult *findPlan(const SearchTable &table, llvm::StringRef label);

} // namespace stg

#endif // STG_SEARCH_SEARCHRESULTS_H
