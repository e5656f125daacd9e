//===- ParamCount.h - Trainable parameters of a model -----------*- C++ -*-===//
//
// The number of trainable parameter elements of a module's model: the
// logical (unsharded) size of every `param`, a repeat body's params counted
// once per repetition. It is a symbolic Expr over dims; Module::bindDims
// turns it into a number once the dims have values. Distributions do not
// change it (a weight split over tp is still one weight), and a weight used
// twice (tied embeddings) is one param op, so it counts once.
//
//===----------------------------------------------------------------------===//

#ifndef STG_IR_PARAMCOUNT_H
#define STG_IR_PARAMCOUNT_H

#include "stg/IR/Expr.h"

namespace stg {

class Graph;
class Module;

/// Parameter elements of `graph`: the product of each `param` op's logical
/// shape, summed, with a repeat's body multiplied by its count.
Expr countParameters(const Graph &graph);

/// Parameter elements of the module's model (0 for a file of blocks only).
Expr countParameters(const Module &module);

/// Parameter elements of the model's embedding tables: the params an
/// `embedding` op looks up (through the layout, shard and collective ops
/// distribution puts between them), each counted once. CCL-Bench's workload
/// card records them apart (`num_params_embedding`), since they add no
/// FLOPs per token.
Expr countEmbeddingParameters(const Module &module);

/// The parameters one token uses: all but the routed experts' weights not
/// chosen for it. A routed expert's weight is a param of two or more
/// dimensions whose first extent is the expert count of a `route` op in the
/// same body; of those, a token uses topk/experts. Equal to
/// countParameters for a dense model.
Expr countActiveParameters(const Module &module);

} // namespace stg

#endif // STG_IR_PARAMCOUNT_H
