//===- PassManagerTest.cpp - Registry, pipelines, and layout resolution ---===//

#include "stg/IR/DistributionRules.h"
#include "stg/Parse/Parser.h"
#include "stg/Passes/Pass.h"

#include "gtest/gtest.h"

using namespace stg;

namespace {

/// Records that it ran, and fails when asked to.
class ProbePass : public Pass {
public:
  ProbePass(std::vector<std::string> &log, std::string name, bool fail)
      : log(log), name(std::move(name)), fail(fail) {}
  llvm::StringRef getName() const override { return name; }
  LogicalResult run(Module &, DiagnosticEngine &) override {
    log.push_back(name);
    return failure(fail);
  }

private:
  std::vector<std::string> &log;
  std::string name;
  bool fail;
};

TEST(PassRegistry, KnowsTheBuiltinPassesInOrder) {
  std::vector<std::string> names;
  for (const PassRegistry::Entry *entry : PassRegistry::global().getEntries())
    names.push_back(entry->name);
  EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
  for (const char *name : {"shape-infer", "distribute", "match-collectives"})
    EXPECT_TRUE(PassRegistry::global().lookup(name)) << name;
}

TEST(PassRegistry, RejectsADuplicateName) {
  PassRegistry registry;
  std::vector<std::string> log;
  auto factory = [&] { return std::make_unique<ProbePass>(log, "a", false); };
  EXPECT_TRUE(registry.registerPass("a", "first", factory));
  EXPECT_FALSE(registry.registerPass("a", "second", factory));
  EXPECT_EQ(registry.lookup("a")->description, "first");
}

TEST(PassManager, RunsInOrderAndStopsAtTheFirstFailure) {
  PassRegistry registry;
  std::vector<std::string> log;
  for (auto [name, fail] : {std::pair{"one", false}, {"two", true}, {"three", false}})
    registry.registerPass(name, "", [&log, name = std::string(name), fail = fail] {
      return std::make_unique<ProbePass>(log, name, fail);
    });
  std::string errors;
  llvm::raw_string_ostream os(errors);
  DiagnosticEngine diags(os);
  PassManager passes;
  ASSERT_TRUE(succeeded(passes.addPipeline("one, two,three", diags, registry)));
  Module module;
  EXPECT_TRUE(failed(passes.run(module, diags)));
  EXPECT_EQ(log, (std::vector<std::string>{"one", "two"}));
}

TEST(PassManager, ReportsAnUnknownPass) {
  std::string errors;
  llvm::raw_string_ostream os(errors);
  DiagnosticEngine diags(os);
  diags.setProgramName("test");
  PassManager passes;
  EXPECT_TRUE(failed(passes.addPipeline("shape-infer,no-such-pass", diags)));
  EXPECT_NE(os.str().find("test: error: unknown pass 'no-such-pass' (known: "),
            std::string::npos)
      << os.str();
}

TEST(PassManager, PrintsAfterEachPass) {
  std::string errors, printed;
  llvm::raw_string_ostream errs(errors), out(printed);
  DiagnosticEngine diags(errs);
  auto module = parseSource("dim D = 4;\nmodel m { x: [D] = input(); y = relu(x); }\n",
                            "p.stg", {}, diags);
  ASSERT_TRUE(module) << errs.str();
  PassManagerOptions options;
  options.printAfterAll = true;
  options.verifyEach = true;
  options.printStream = &out;
  PassManager passes(options);
  ASSERT_TRUE(succeeded(passes.addPipeline("shape-infer", diags)));
  ASSERT_TRUE(succeeded(passes.run(*module, diags))) << errs.str();
  EXPECT_NE(out.str().find("// ----- IR after shape-infer ----- //"),
            std::string::npos);
  EXPECT_NE(out.str().find("%y = relu(%x) : bf16[D]"), std::string::npos)
      << out.str();
}

TEST(ResolveDistribution, ReplacesAliasesAndDropsInactiveAxes) {
  Module module;
  Axis *tp = module.addAxis("tp", {});
  Axis *sp = module.addAxis("sp", {});
  sp->alias = tp;
  Axis *fsdp = module.addAxis("fsdp", {});
  fsdp->alias = module.addAxis("dp", {});
  fsdp->active = false;

  Distribution dist(2);
  dist.addPartition(0, sp);
  dist.addPartition(1, fsdp);
  const Axis *conflict = nullptr;
  Distribution resolved = resolveDistribution(dist, &conflict);
  EXPECT_EQ(conflict, nullptr);
  EXPECT_EQ(resolved.getPartition(0).size(), 1u);
  EXPECT_EQ(resolved.getPartition(0)[0], tp);
  EXPECT_TRUE(resolved.getPartition(1).empty());

  // S/sp together with @ tp uses tp's ranks twice.
  dist.addPartialSum(tp);
  (void)resolveDistribution(dist, &conflict);
  EXPECT_EQ(conflict, tp);
}

} // namespace
