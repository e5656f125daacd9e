//===- ModelFlops.h - The work of a step in the model's terms ---*- C++ -*-===//
//
// MFU divides the model's FLOPs by what the GPUs could have done, so the
// numerator must not depend on the plan: recomputation and work that tensor
// parallelism repeats on every rank (norms without sequence parallelism)
// are the plan's cost, not the model's. The model FLOPs of a step are
// therefore those of the same model and step compiled on one GPU without
// recomputation (every op once, forward and backward, no optimizer; one
// GPU per pipeline stage, which splits the layers, not the ops), scaled
// from that compile's batch to the plan's: the plan's batch dim `B` times
// its micro-batches over the one-GPU `B`. stage-search's readModelFacts
// counts the same way.
//
//===----------------------------------------------------------------------===//

#ifndef STG_DRIVER_MODELFLOPS_H
#define STG_DRIVER_MODELFLOPS_H

#include "stg/Driver/Compile.h"

#include "llvm/Support/Error.h"

#include <optional>

namespace stg {

/// The options of the reference compile for the plan `compiled`, compiled
/// with `plan`: one GPU per pipeline stage (every other axis degree 1,
/// also one set with `--set`), one micro-batch, no recomputation, no
/// sharding; the dims, options, mode, context and rank order stay.
CompileOptions getReferenceOptions(const CompileOptions &plan,
                                   const CompiledModel &compiled);

/// The FLOPs of the compute nodes of every rank, summed over the schedule
/// steps (a folded program's replayed steps count each time), without or
/// with the optimizer's.
double countProgramFlops(const ProgramSet &programs, bool withOptimizer);

/// The model FLOPs of one step of the plan `compiled`, compiled with
/// `plan`. Fails, with the compiler's first message, if the reference
/// compile does.
llvm::Expected<double> countModelFlops(const CompileOptions &plan,
                                       const CompiledModel &compiled);

/// Sequences per step: the model's `B` (the micro-batch of all replicas)
/// times the micro-batches; nothing if the model declares no `B`.
std::optional<double> countStepSequences(const Module &module,
                                         const ProgramSet &programs);

/// Tokens per step: sequences times the bound sequence length `S` (1 in a
/// decode step: one new token per sequence); nothing without `B` or `S`.
std::optional<double> countStepTokens(const Module &module,
                                      const ProgramSet &programs);

} // namespace stg

#endif // STG_DRIVER_MODELFLOPS_H
