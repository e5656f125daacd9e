//===- RankFormats.h - One rank's nodes, as Chakra or readable text -*- C++ -*-===//
//
// The pieces of a rank's Chakra node (the part all ranks of a stage share
// and the rank's own attributes) and the readable formats built from the
// same pieces, so every format shows exactly what the trace holds.
//
//===----------------------------------------------------------------------===//

#ifndef STG_LIB_EMIT_RANKFORMATS_H
#define STG_LIB_EMIT_RANKFORMATS_H

#include "stg/Emit/TraceEmitter.h"

namespace stg {

ChakraProtoMsg::NodeType getChakraNodeType(ProgramNodeKind kind);

/// Id, name, type, dependencies, duration and the attributes every rank of
/// the stage shares. With `orderingAsDataDeps` the node's ordering edges
/// join its data_deps.
void fillSharedPart(const ProgramNode &node, uint64_t id,
                    bool orderingAsDataDeps, ChakraProtoMsg::Node &out);
/// The attributes that differ by rank: `pg_name`, `comm_src`, `comm_dst`.
void fillRankPart(const ProgramSet &programs, const CommGroups &groups,
                  const ProgramNode &node, unsigned rank,
                  ChakraProtoMsg::Node &out);

/// Writes `rank`'s nodes to `path` as JSON (Chakra jsonizer style) or as a
/// Graphviz digraph; from `own` if given, else from its stage's program.
llvm::Error writeReadableRank(const ProgramSet &programs,
                              const CommGroups &groups, unsigned rank,
                              llvm::StringRef path, const EmitOptions &options,
                              const StageProgram *own = nullptr);

} // namespace stg

#endif // STG_LIB_EMIT_RANKFORMATS_H
