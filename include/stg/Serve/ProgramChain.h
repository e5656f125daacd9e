//===- ProgramChain.h - Stage programs run one after another ----*- C++ -*-===//
//
// A serving window's trace is many programs in a row on the same ranks:
// each iteration's decode step and prefill chunk, compiled on their own. A
// chain appends a program to a stage's program the way instantiation
// appends a schedule step: the program's first nodes wait for the last
// ones before it (through one barrier node when there are several), its
// steps stay steps, so the step estimate replays the chain as it would
// have been built, and its sends and receives get tags of their own.
// Messages between instances (a KV cache from a prefill rank to a decode
// rank) ride in a link's first step.
//
//===----------------------------------------------------------------------===//

#ifndef STG_SERVE_PROGRAMCHAIN_H
#define STG_SERVE_PROGRAMCHAIN_H

#include "stg/Instantiate/Program.h"

#include "llvm/ADT/ArrayRef.h"

#include <string>
#include <vector>

namespace stg {

struct ChainLink {
  /// The program to append, or null for a link of messages alone.
  const StageProgram *program = nullptr;
  /// Prefixed to the names of the program's nodes: `iter3.decode`.
  std::string name;
  int32_t tagOffset = 0;   ///< Added to the program's send and receive tags.
  unsigned peerOffset = 0; ///< Added to their peer stages.
  /// Sends and receives run in the link's first step, waiting for what came
  /// before the link as its first nodes do; taken as they are.
  std::vector<ProgramNode> messages;
  /// The program's first nodes also wait for the receives among
  /// `messages`: a decode step reads the caches they bring.
  bool waitForReceives = false;
  /// Each axis of the program's mesh as axes of the chain's, for its
  /// collectives' groups (PairMesh.h); empty: the same mesh.
  llvm::ArrayRef<AxisMask> axisMap;
};

/// Appends `link` to `chain`: nodes, steps, schedule, layers, and the
/// memory as the larger of the two. The link's program is not folded.
void appendChainLink(StageProgram &chain, const ChainLink &link);

/// The highest tag of the program's sends and receives, or -1 if none.
int32_t getMaxTag(const StageProgram &program);

} // namespace stg

#endif // STG_SERVE_PROGRAMCHAIN_H
