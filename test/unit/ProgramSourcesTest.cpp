//===- ProgramSourcesTest.cpp - Re-priced programs against fresh ones -----===//
//
// The plan search builds a program set once per structure and re-prices it
// for each plan (repriceProgramSet): every field of every node, step, fold
// and stage memory must then be what instantiating that plan gives, and an
// error the one instantiation reports; the replay keeps the structure's
// step shapes for every plan of it (StepShapeCache).
//
//===----------------------------------------------------------------------===//

#include "stg/Driver/Compile.h"
#include "stg/Instantiate/OpNumbers.h"
#include "stg/Perf/DeviceModel.h"
#include "stg/Perf/StepEstimate.h"

#include "CompileForTest.h"
#include "ExpectSamePrograms.h"

#include "gtest/gtest.h"

#include <set>

using namespace stg;

namespace {

/// Nodes whose numbers differ between `a` and `b`, of one structure.
size_t countRepriced(const ProgramSet &a, const ProgramSet &b) {
  size_t changed = 0;
  for (size_t stage = 0; stage < a.stages.size(); ++stage)
    for (size_t id = 0; id < a.stages[stage].nodes.size(); ++id) {
      const ProgramNode &x = a.stages[stage].nodes[id];
      const ProgramNode &y = b.stages[stage].nodes[id];
      changed += x.numOps != y.numOps || x.commBytes != y.commBytes ||
                 x.group != y.group;
    }
  return changed;
}

struct Binding {
  unsigned dp, tp;
  const char *rankOrder;
};

/// (folded, virtual stages)
class ProgramSourcesTest
    : public ::testing::TestWithParam<std::tuple<bool, unsigned>> {
protected:
  CompileOptions getOptions(Binding binding) const {
    CompileOptions options;
    options.input = std::string(STG_SOURCE_TEMPLATES_DIR) + "/llama3-8b.stg";
    options.overrides = {{"L", "4"}, {"S", "1024"}};
    options.degrees = {{"dp", binding.dp}, {"tp", binding.tp}, {"pp", 2}};
    options.rankOrder = binding.rankOrder;
    options.microbatches = 4;
    options.virtualStages = std::get<1>(GetParam());
    options.foldMicrobatches = options.foldLayers = std::get<0>(GetParam());
    return options;
  }
  /// Compiles with an engine that outlives the module, which points into
  /// the sources it parsed.
  std::optional<CompiledModel> compile(Binding binding) {
    std::optional<CompiledModel> compiled =
        compileModel(getOptions(binding), parsed);
    EXPECT_TRUE(compiled) << parsedLog;
    return compiled;
  }

  /// Compiles for `first` into `built`, then instantiates that module
  /// again with its sources recorded into `set` and `sources`.
  void buildRecorded() {
    built = compile(first);
    ASSERT_TRUE(built);
    std::optional<Mesh> mesh =
        bindPlan(*built->module, getOptions(first), diags);
    ASSERT_TRUE(mesh) << errors;
    set = instantiateModel(*built->module, *mesh, getOptions(first), diags,
                           nullptr, &sources);
    ASSERT_TRUE(set) << errors;
  }
  /// Re-prices `set` for `binding`.
  bool reprice(Binding binding) {
    std::optional<Mesh> mesh =
        bindPlan(*built->module, getOptions(binding), diags);
    OpNumberCache numbers(*built->module, diags);
    return mesh && succeeded(repriceProgramSet(
                       *set, sources, *built->module, *mesh,
                       getInstantiateOptions(*mesh, getOptions(binding)),
                       numbers, diags));
  }

  const Binding first{2, 2, DefaultRankOrder}, second{4, 8, "dp,tp,cp,ep,pp"};
  std::optional<CompiledModel> built;
  ProgramSources sources;
  std::optional<ProgramSet> set;

  std::string parsedLog;
  llvm::raw_string_ostream parsedStream{parsedLog};
  DiagnosticEngine parsed{parsedStream};
  std::string errors;
  llvm::raw_string_ostream errorStream{errors};
  DiagnosticEngine diags{errorStream};
};

TEST_P(ProgramSourcesTest, ARepricedSetIsTheOtherBindingsSet) {
  ASSERT_NO_FATAL_FAILURE(buildRecorded());
  expectSameSet(*set, built->programs); // Recording changes nothing.
  ASSERT_EQ(sources.stages.size(), 2u);
  // A query is recorded once, and each stage lists, once, every query its
  // nodes take their numbers from.
  std::set<std::pair<const Op *, const Value *>> distinct;
  for (const ProgramSources::Query &query : sources.queries)
    EXPECT_TRUE(distinct.insert({query.op, query.value}).second);
  for (unsigned stage = 0; stage < 2; ++stage) {
    const ProgramSources::Stage &recorded = sources.stages[stage];
    std::set<uint32_t> listed(recorded.queries.begin(), recorded.queries.end());
    EXPECT_EQ(listed.size(), recorded.queries.size());
    for (uint32_t query : recorded.nodeQueries)
      EXPECT_TRUE(query == ProgramSources::NoQuery || listed.count(query));
    EXPECT_LT(recorded.queries.size(), set->stages[stage].nodes.size());
  }

  std::optional<CompiledModel> fresh = compileForTest(getOptions(second));
  ASSERT_TRUE(fresh);
  ASSERT_TRUE(reprice(second)) << errors;
  EXPECT_GT(countRepriced(*set, built->programs), 10u);
  expectSameSet(*set, fresh->programs);
}

TEST_P(ProgramSourcesTest, ARepricedSetFailsAsItsInstantiation) {
  ASSERT_NO_FATAL_FAILURE(buildRecorded());

  // tp 3 splits no head count evenly: instantiation reports an op whose
  // numbers are not whole (check-divisibility, which would prune it first,
  // is not run here).
  Binding uneven{2, 3, DefaultRankOrder};
  std::optional<Mesh> mesh =
      bindPlan(*built->module, getOptions(uneven), diags);
  ASSERT_TRUE(mesh) << errors;
  InstantiateOptions options = getInstantiateOptions(*mesh, getOptions(uneven));
  std::string instantiated, repriced;
  {
    llvm::raw_string_ostream out(instantiated);
    DiagnosticEngine engine(out);
    EXPECT_FALSE(instantiate(*built->module, *mesh, options, engine));
  }
  {
    llvm::raw_string_ostream out(repriced);
    DiagnosticEngine engine(out);
    OpNumberCache numbers(*built->module, engine);
    EXPECT_TRUE(failed(repriceProgramSet(*set, sources, *built->module, *mesh,
                                         options, numbers, engine)));
  }
  EXPECT_NE(instantiated.find("llama.stg:30:8: error: "), std::string::npos)
      << instantiated;
  EXPECT_NE(instantiated.find("not a whole number"), std::string::npos)
      << instantiated;
  EXPECT_EQ(repriced, instantiated);

  // A mesh that splits other axes has other collectives: refused.
  std::string refused;
  llvm::raw_string_ostream out(refused);
  DiagnosticEngine engine(out);
  mesh = bindPlan(*built->module, getOptions({2, 1, DefaultRankOrder}), engine);
  ASSERT_TRUE(mesh) << refused;
  OpNumberCache numbers(*built->module, engine);
  EXPECT_TRUE(failed(repriceProgramSet(*set, sources, *built->module, *mesh,
                                       options, numbers, engine)));
  EXPECT_NE(refused.find("splits other axes"), std::string::npos) << refused;
}

TEST_P(ProgramSourcesTest, AShapeCacheServesEveryBindingOfAStructure) {
  // The step shapes' structure kept from one binding prices another's as
  // a replay without it does.
  llvm::Expected<SystemSpec> system = loadSystem("dgx-h100");
  ASSERT_TRUE(bool(system)) << llvm::toString(system.takeError());
  StepShapeCache shapes;
  std::vector<double> steps;
  for (Binding binding :
       {Binding{2, 2, DefaultRankOrder}, Binding{4, 8, "dp,tp,cp,ep,pp"},
        Binding{8, 2, DefaultRankOrder}}) {
    std::optional<CompiledModel> compiled = compile(binding);
    ASSERT_TRUE(compiled);
    applyDeviceModel(compiled->programs, system->device, nullptr);
    llvm::Expected<StepEstimate> cached =
        estimateStep(compiled->programs, *system, nullptr, &shapes);
    llvm::Expected<StepEstimate> fresh =
        estimateStep(compiled->programs, *system);
    ASSERT_TRUE(cached && fresh);
    EXPECT_EQ(cached->stepMicros, fresh->stepMicros);
    for (size_t stage = 0; stage < fresh->stages.size(); ++stage)
      EXPECT_EQ(cached->stages[stage].pipelineWaitMicros,
                fresh->stages[stage].pipelineWaitMicros);
    steps.push_back(fresh->stepMicros);
  }
  EXPECT_NE(steps[0], steps[1]);
  EXPECT_NE(steps[1], steps[2]);
}

TEST_P(ProgramSourcesTest, PricingByQueryTimesEveryNodeAlike) {
  // The device model priced once per query gives each compute node the
  // time pricing it alone gives, for a build and for a re-priced set.
  llvm::Expected<SystemSpec> system = loadSystem("dgx-h100");
  ASSERT_TRUE(bool(system)) << llvm::toString(system.takeError());
  ASSERT_NO_FATAL_FAILURE(buildRecorded());
  auto expectSameTimes = [&](ProgramSet &byQuery) {
    ProgramSet byNode = byQuery;
    applyDeviceModel(byNode, system->device, nullptr);
    applyDeviceModel(byQuery, system->device, nullptr, sources);
    size_t compute = 0;
    for (size_t stage = 0; stage < byNode.stages.size(); ++stage)
      for (size_t id = 0; id < byNode.stages[stage].nodes.size(); ++id) {
        const ProgramNode &node = byNode.stages[stage].nodes[id];
        compute += node.kind == ProgramNodeKind::Compute;
        EXPECT_EQ(byQuery.stages[stage].nodes[id].durationMicros,
                  node.durationMicros)
            << node.name;
      }
    EXPECT_LT(sources.queries.size(), compute);
  };
  expectSameTimes(*set);
  ASSERT_TRUE(reprice(second)) << errors;
  expectSameTimes(*set);
}

INSTANTIATE_TEST_SUITE_P(
    FoldedOrNot, ProgramSourcesTest,
    ::testing::Combine(::testing::Bool(), ::testing::Values(1u, 2u)),
    [](const ::testing::TestParamInfo<std::tuple<bool, unsigned>> &info) {
      return std::string(std::get<0>(info.param) ? "Folded" : "Flat") + "V" +
             std::to_string(std::get<1>(info.param));
    });

} // namespace
