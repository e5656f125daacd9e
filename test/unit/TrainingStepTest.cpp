//===- TrainingStepTest.cpp - FLOPs of a whole instantiated training step -===//
//
// The cost model's promise for training, checked on the instantiated
// programs rather than on formulas: a training step costs its forward pass
// three times (each einsum's two transposed einsums, every other kernel's
// backward factor of 2) plus the optimizer, and full recomputation adds
// exactly one more forward of the recomputed repeat.
//
//===----------------------------------------------------------------------===//

#include "stg/Driver/Compile.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include "CompileForTest.h"

#include "gtest/gtest.h"

using namespace stg;

namespace {

/// A chain without residual adds, whose gradients need no accumulation:
/// every backward kernel is exactly twice its forward kernel.
const char *const ChainModel = R"(
dim B = 4;
dim S = 8;
dim D = 16;
dim F = 64;
dim L = 3;
axis dp, tp, pp;

block mlp(x: [B/dp, S, D]) -> [B/dp, S, D] {
  param w1: [D, F/tp];
  param w2: [F/tp, D];
  h = einsum[bsd,df->bsf](x, w1);
  y: [B/dp, S, D] = einsum[bsf,fd->bsd](gelu(h), w2);
  return y;
}

model chain {
  x: [B/dp, S, D] = input();
  repeat L { x = mlp(x); }
  loss = cross_entropy(x);
}
)";

struct StepFlops {
  uint64_t forward = 0, backward = 0, optimizer = 0, repeatForward = 0;
  uint64_t total() const { return forward + backward + optimizer; }
};

class TrainingStepTest : public ::testing::Test {
protected:
  void SetUp() override {
    int fd;
    ASSERT_FALSE(llvm::sys::fs::createTemporaryFile("chain", "stg", fd, path));
    llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
    os << ChainModel;
  }
  void TearDown() override { llvm::sys::fs::remove(path); }

  /// Per-rank FLOPs of one step, by phase, summed over every stage.
  StepFlops compile(CompileOptions options) {
    options.input = path.str().str();
    std::optional<CompiledModel> compiled = compileForTest(options);
    StepFlops flops;
    if (!compiled)
      return flops;
    for (const StageProgram &program : compiled->programs.stages)
      for (const ProgramNode &node : program.nodes) {
        if (node.kind != ProgramNodeKind::Compute)
          continue;
        if (node.phase == Phase::Forward) {
          flops.forward += node.numOps;
          if (node.layer >= 0)
            flops.repeatForward += node.numOps;
        } else if (node.phase == Phase::Backward) {
          flops.backward += node.numOps;
        } else {
          flops.optimizer += node.numOps;
        }
      }
    return flops;
  }

  llvm::SmallString<128> path;
};

TEST_F(TrainingStepTest, StepIsThreeForwardsPlusOptimizer) {
  CompileOptions prefill;
  prefill.mode = "prefill";
  StepFlops inference = compile(prefill);
  StepFlops training = compile(CompileOptions());
  ASSERT_GT(inference.forward, 0u);
  EXPECT_EQ(inference.backward, 0u);
  EXPECT_EQ(inference.optimizer, 0u);
  EXPECT_EQ(training.forward, inference.forward);
  EXPECT_EQ(training.backward, 2 * training.forward);
  // Adam: 12 flops per weight element; 3 layers of two D x F matrices.
  EXPECT_EQ(training.optimizer, 12u * 3 * 2 * 16 * 64);
}

TEST_F(TrainingStepTest, SameStepOverAMeshAndPipeline) {
  CompileOptions options;
  options.degrees = {{"tp", 2}, {"dp", 2}, {"pp", 3}};
  options.microbatches = 3;
  StepFlops split = compile(options);
  StepFlops whole = compile(CompileOptions());
  // Per rank, the repeat's work is split four ways (dp x tp) and done for
  // each of three micro-batches; the stages together run every layer.
  EXPECT_EQ(split.backward, 2 * split.forward);
  EXPECT_EQ(split.repeatForward * 4, whole.repeatForward * 3);
}

TEST_F(TrainingStepTest, FullRecomputeAddsOneForwardOfTheRepeat) {
  StepFlops plain = compile(CompileOptions());
  CompileOptions options;
  options.recompute = "full";
  StepFlops recomputed = compile(options);
  ASSERT_GT(plain.repeatForward, 0u);
  EXPECT_EQ(recomputed.forward, plain.forward);
  EXPECT_EQ(recomputed.optimizer, plain.optimizer);
  EXPECT_EQ(recomputed.backward, plain.backward + plain.repeatForward);
}

TEST_F(TrainingStepTest, EinsumNodesCarryTheirMatrixShapePerRank) {
  // h = einsum[bsd,df->bsf](x, w1) with dp = 2, tp = 2: M = (B/dp)*S = 16,
  // N = F/tp = 32, K = D = 16, one batch.
  CompileOptions options;
  options.input = path.str().str();
  options.degrees = {{"dp", 2}, {"tp", 2}};
  std::optional<CompiledModel> compiled = compileForTest(options);
  ASSERT_TRUE(compiled);
  const ProgramNode *first = nullptr;
  for (const ProgramNode &node : compiled->programs.stages[0].nodes)
    if (node.opType == "einsum") {
      first = &node;
      break;
    }
  ASSERT_TRUE(first);
  EXPECT_EQ(first->gemm.batch, 1);
  EXPECT_EQ(first->gemm.m, 16);
  EXPECT_EQ(first->gemm.n, 32);
  EXPECT_EQ(first->gemm.k, 16);
  EXPECT_EQ(first->numOps, 2 * 16 * 32 * 16);
}

// A fused attention's node carries its query rows on the rank (batch x
// local heads x local queries), which the kernel model prices fixed work
// for, and the kernels that go over them: a context-parallel ring's steps,
// one for all-to-all context parallelism.
TEST(AttentionRowsTest, FusedAttentionCarriesItsQueryRowsAndRingSteps) {
  struct Found {
    int64_t rows;
    unsigned passes; ///< The ring's group size, 1 without a ring.
  };
  auto attentionNodes = [](bool ring, bool allToAll = false) {
    CompileOptions options;
    options.input = std::string(STG_SOURCE_TEMPLATES_DIR) + "/llama3-8b.stg";
    options.overrides = {{"L", "1"}, {"S", "1024"}};
    options.degrees = {{"tp", 2}, {"cp", 2}};
    options.contextParallelRing = ring;
    options.contextParallelAllToAll = allToAll;
    std::vector<Found> found;
    if (std::optional<CompiledModel> compiled = compileForTest(options))
      for (const ProgramNode &node : compiled->programs.stages[0].nodes)
        if (llvm::StringRef(node.opType).startswith("attention"))
          found.push_back(
              {node.attentionRows,
               node.attentionRing
                   ? compiled->programs.mesh.getGroupSize(node.attentionRing)
                   : 1});
    return found;
  };
  // One sequence, 32 heads over tp 2, 1024 queries over cp 2.
  const int64_t rows = 1 * (32 / 2) * (1024 / 2);
  std::vector<Found> ring = attentionNodes(true);
  ASSERT_EQ(ring.size(), 2u); // The forward and its gradient.
  for (const Found &node : ring) {
    EXPECT_EQ(node.rows, rows);
    EXPECT_EQ(node.passes, 2u);
  }
  for (const Found &node : attentionNodes(false)) {
    EXPECT_EQ(node.rows, rows);
    EXPECT_EQ(node.passes, 1u);
  }
  // Ulysses: the whole sequence, a quarter of the heads, one kernel (even
  // with the ring asked for: nothing is gathered over cp).
  std::vector<Found> exchanged = attentionNodes(true, true);
  ASSERT_EQ(exchanged.size(), 2u);
  for (const Found &node : exchanged) {
    EXPECT_EQ(node.rows, 1 * (32 / 4) * 1024);
    EXPECT_EQ(node.passes, 1u);
  }
}

} // namespace
