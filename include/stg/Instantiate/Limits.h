//===- Limits.h - The largest plans stagec instantiates ---------*- C++ -*-===//
//
// Counts past which a plan would not fit this machine's memory or the
// trace format's integers. Each is checked where the count is first known
// (the mesh, the placement, the stage builder) with an error that names the
// limit, so an absurd input fails in milliseconds instead of running until
// memory is gone. docs/cli.md lists them.
//
//===----------------------------------------------------------------------===//

#ifndef STG_INSTANTIATE_LIMITS_H
#define STG_INSTANTIATE_LIMITS_H

#include <cstdint>

namespace stg {

/// Ranks in a mesh: 2^20, a million GPUs, 32 times the largest set
/// measured (docs/performance.md).
constexpr uint64_t MaxRanks = uint64_t(1) << 20;
/// Layers (of every repeat together; a layer pattern's repetition runs
/// several).
constexpr int64_t MaxLayers = 1 << 16;
/// Micro-batches in one step.
constexpr unsigned MaxMicrobatches = 1 << 16;
/// Nodes in one stage's program: about 4 GB of program in memory.
constexpr uint64_t MaxStageNodes = uint64_t(1) << 25;

} // namespace stg

#endif // STG_INSTANTIATE_LIMITS_H
