//===- HandBuiltPrograms.h - Nodes and a cluster for clock tests -*- C++ -*-===//
//
// The replay's tests (step estimate, metrics, what-if variants) build small
// programs by hand and price them on a made-up device whose numbers make
// times easy to work out: 1 TFLOP/s, links of 1 GB/s (1000 bytes per
// microsecond) without latency.
//
//===----------------------------------------------------------------------===//

#ifndef STG_TEST_UNIT_HANDBUILTPROGRAMS_H
#define STG_TEST_UNIT_HANDBUILTPROGRAMS_H

#include "stg/Instantiate/Program.h"
#include "stg/Perf/System.h"

namespace stg {

inline const DeviceSpec TestDevice{"test", 1e12, 1e12, 1e9, 1.0, 1.0};

/// Two nodes of two GPUs: scale-up 1 GB/s with 1 us a step, scale-out
/// 0.1 GB/s with 10 us a step.
inline SystemSpec makeTwoTierSystem() {
  SystemSpec system = makeSingleDomainSystem(TestDevice, 4);
  system.gpusPerNode = 2;
  system.scaleUp = {1e9, 1e-6, NetworkTopology::Switch,
                    CollectiveAlgorithm::Ring};
  system.scaleOut = {1e8, 10e-6, NetworkTopology::Switch,
                     CollectiveAlgorithm::Ring};
  return system;
}

/// A kernel of `micros` and `flops`.
inline ProgramNode makeCompute(uint64_t micros,
                               llvm::SmallVector<uint32_t, 4> deps,
                               int64_t flops = 0) {
  ProgramNode node;
  node.durationMicros = micros;
  node.numOps = flops;
  node.dataDeps = deps;
  return node;
}

/// A send or receive of `bytes` to or from stage `peer`, tag 7.
inline ProgramNode makeMessage(ProgramNodeKind kind, unsigned peer,
                               int64_t bytes,
                               llvm::SmallVector<uint32_t, 4> deps) {
  ProgramNode node;
  node.kind = kind;
  node.peerStage = peer;
  node.commBytes = bytes;
  node.tag = 7;
  node.dataDeps = deps;
  return node;
}

} // namespace stg

#endif // STG_TEST_UNIT_HANDBUILTPROGRAMS_H
