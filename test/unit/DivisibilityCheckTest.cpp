//===- DivisibilityCheckTest.cpp - One check, many bindings ---------------===//
//
// The plan search collects a module's extents once (DivisibilityCheck) and
// checks them under each plan's degrees: it must report what a fresh
// check-divisibility pass reports for that binding, word for word and in
// the same order.
//
//===----------------------------------------------------------------------===//

#include "stg/Passes/DivisibilityCheck.h"
#include "stg/Driver/Compile.h"
#include "stg/Passes/Passes.h"

#include "gtest/gtest.h"

using namespace stg;

namespace {

TEST(DivisibilityCheck, ReportsWhatTheFreshPassReportsForEachBinding) {
  CompileOptions options;
  options.input = std::string(STG_SOURCE_TEMPLATES_DIR) + "/llama3-8b.stg";
  options.overrides = {{"L", "4"}};
  std::string errors;
  llvm::raw_string_ostream os(errors);
  DiagnosticEngine diags(os);
  std::unique_ptr<Module> module = loadModel(options, diags);
  ASSERT_TRUE(module) << os.str();
  // The search's pipeline: everything but the check itself.
  std::string pipeline = getPassPipeline(options);
  PassManager passes;
  ASSERT_TRUE(succeeded(
      passes.addPipeline(llvm::StringRef(pipeline).rsplit(',').first, diags)));
  ASSERT_TRUE(succeeded(passes.run(*module, diags))) << os.str();

  DivisibilityCheck reused(*module);
  unsigned passing = 0, failing = 0;
  // tp = 3 splits no head count; tp = 16 replicates the 8 KV heads, which
  // weights split; cp = 7 does not divide the sequence, nor does cp = 16384,
  // which would replicate a weight's extent but not the data's; the last
  // binding passes again after failures.
  for (auto [tp, dp, cp, microBatch] : {std::tuple{1u, 1u, 1u, 1},
                                        {2u, 2u, 1u, 1},
                                        {3u, 1u, 1u, 1},
                                        {16u, 1u, 1u, 1},
                                        {8u, 3u, 1u, 4},
                                        {4u, 2u, 7u, 3},
                                        {3u, 1u, 7u, 1},
                                        {1u, 1u, 16384u, 1},
                                        {2u, 2u, 1u, 1}}) {
    CompileOptions plan = options;
    plan.degrees = {{"tp", tp}, {"dp", dp}, {"cp", cp}};
    module->lookupDim("MB")->value = Expr(microBatch);
    std::string bindErrors;
    llvm::raw_string_ostream bindStream(bindErrors);
    DiagnosticEngine bindDiags(bindStream);
    ASSERT_TRUE(bindPlan(*module, plan, bindDiags)) << bindStream.str();

    std::string fromReused, fromPass;
    llvm::raw_string_ostream reusedStream(fromReused), passStream(fromPass);
    DiagnosticEngine reusedDiags(reusedStream), passDiags(passStream);
    bool reusedPasses = succeeded(reused.check(reusedDiags));
    bool freshPasses =
        succeeded(createCheckDivisibilityPass()->run(*module, passDiags));
    EXPECT_EQ(reusedPasses, freshPasses) << "tp " << tp << " cp " << cp;
    EXPECT_EQ(reusedStream.str(), passStream.str());
    ++(freshPasses ? passing : failing);
    if (tp == 3 && cp == 1) {
      // One extent under two sets of axes: a report for each, in the
      // order of their first values.
      size_t sequence = fromReused.find("is S = 8192, which sp*cp = 3");
      size_t tensor = fromReused.find("is S = 8192, which tp*cp = 3");
      EXPECT_NE(sequence, std::string::npos) << fromReused;
      EXPECT_NE(tensor, std::string::npos) << fromReused;
      EXPECT_LT(sequence, tensor);
    }
  }
  EXPECT_EQ(passing, 5u);
  EXPECT_EQ(failing, 4u);
}

} // namespace

namespace {

/// What bindAll gives each dim's symbol, one call per dim.
std::vector<std::optional<Expr>> bindEachDim(const Module &module) {
  std::vector<std::optional<Expr>> values;
  for (const auto &dim : module.getDims())
    values.push_back(module.bindAll(dim->symbol));
  return values;
}

TEST(DivisibilityCheck, BindsAllDimsAsBindAllBindsEach) {
  CompileOptions options;
  options.input = std::string(STG_SOURCE_TEMPLATES_DIR) + "/llama3-8b.stg";
  std::string errors;
  llvm::raw_string_ostream os(errors);
  DiagnosticEngine diags(os);
  std::unique_ptr<Module> module = loadModel(options, diags);
  ASSERT_TRUE(module) << os.str();
  options.degrees = {{"tp", 4}, {"dp", 2}};
  ASSERT_TRUE(bindPlan(*module, options, diags)) << os.str();
  Dim *heads = module->lookupDim("NH");
  ASSERT_TRUE(heads && module->lookupDim("DH"));
  // Bound, rebound, and with NH = 0, where DH = D / NH divides by zero and
  // the bindings are resolved one expression at a time.
  for (int value : {32, 64, 0}) {
    heads->value = Expr(value);
    std::vector<std::optional<Expr>> all = module->bindAllDims(),
                                     each = bindEachDim(*module);
    ASSERT_EQ(all.size(), each.size());
    for (size_t index = 0; index < all.size(); ++index) {
      const std::string &name = module->getDims()[index]->name;
      ASSERT_EQ(all[index].has_value(), each[index].has_value()) << name;
      if (all[index]) {
        EXPECT_TRUE(all[index]->is_equal(*each[index])) << name;
      }
    }
    for (size_t index = 0; index < all.size(); ++index) {
      if (module->getDims()[index]->name != "DH")
        continue;
      if (value == 0) {
        EXPECT_FALSE(all[index]); // 4096 / 0.
      } else {
        EXPECT_TRUE(all[index] && all[index]->is_equal(Expr(4096 / value)));
      }
    }
  }
}

} // namespace
