//===- Graph.h - Values, ops and graphs of the STG IR -----------*- C++ -*-===//
//
// A Graph is an ordered list of Ops in SSA form: every Value is defined once,
// by an op result or as a graph argument, and is used after its definition.
// Block calls are inlined when the IR is built, so a graph holds only builtin
// ops; a `repeat` op owns a nested body Graph whose arguments are the
// loop-carried values and whose `yield` op passes them to the next
// repetition. The body is kept once, however many times it repeats: later
// passes split and number the repetitions (`layer.3.*`) without copying.
// A body may hold several layers (a layer pattern's period, as Gemma 3's
// five local layers and one global): each op then says which of them it
// belongs to, so that pipeline stages can split between them.
//
// Values carry hierarchical names (`layer.decoder.swiglu.w_up`) that are
// unique in the module; the Module hands them out.
//
//===----------------------------------------------------------------------===//

#ifndef STG_IR_GRAPH_H
#define STG_IR_GRAPH_H

#include "stg/IR/Attribute.h"
#include "stg/IR/OpKind.h"
#include "stg/IR/TensorType.h"
#include "stg/Support/Diagnostics.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/SmallVector.h"

#include <memory>
#include <string>
#include <vector>

namespace stg {

class Graph;
class Op;

class Value {
public:
  Value(std::string name, Op *definingOp, unsigned resultIndex)
      : name(std::move(name)), definingOp(definingOp),
        resultIndex(resultIndex) {}

  llvm::StringRef getName() const { return name; }
  /// The op that defines this value, or null for a graph argument.
  Op *getDefiningOp() const { return definingOp; }
  /// Whether a `param` op defines it: a weight.
  bool isParam() const;
  unsigned getResultIndex() const { return resultIndex; }

  bool hasType() const { return type.has_value(); }
  const TensorType &getType() const { return *type; }
  void setType(TensorType newType) { type = std::move(newType); }
  /// True if the user wrote the type (an anchor for distribution passes).
  bool isAnnotated() const { return annotated; }
  void setAnnotated(bool value) { annotated = value; }

  /// A value whose layout this one should preferably share: a gradient's
  /// primal. `distribute` counts it as a vote, never as a constraint.
  Value *getLayoutHint() const { return layoutHint; }
  void setLayoutHint(Value *value) { layoutHint = value; }

private:
  std::string name;
  Op *definingOp;
  unsigned resultIndex;
  std::optional<TensorType> type;
  bool annotated = false;
  Value *layoutHint = nullptr;
};

/// Which part of a training step an op belongs to. GradientSync marks the
/// reduction of a weight's gradient over the data-parallel axes: with
/// micro-batches it runs once, after the last one's backward.
enum class Phase { Forward, Backward, GradientSync, Optimizer };

class Op {
public:
  Op(OpKind kind, SourceLoc loc) : kind(kind), loc(loc) {}

  Phase getPhase() const { return phase; }
  void setPhase(Phase value) { phase = value; }

  OpKind getKind() const { return kind; }
  const OpInfo &getInfo() const { return getOpInfo(kind); }
  llvm::StringRef getKindName() const { return getInfo().name; }
  SourceLoc getLoc() const { return loc; }

  llvm::ArrayRef<Value *> getOperands() const { return operands; }
  Value *getOperand(unsigned i) const { return operands[i]; }
  void addOperand(Value *value) { operands.push_back(value); }
  void setOperand(unsigned i, Value *value) { operands[i] = value; }

  llvm::ArrayRef<Value *> getResults() const { return results; }
  Value *getResult(unsigned i = 0) const { return results[i]; }
  void addResult(Value *value) { results.push_back(value); }

  llvm::ArrayRef<NamedAttribute> getAttrs() const { return attrs; }
  const Attribute *getAttr(llvm::StringRef name) const;
  void setAttr(llvm::StringRef name, Attribute value);

  /// The body of a `repeat`; null for every other op.
  Graph *getBody() const { return body.get(); }
  void setBody(std::unique_ptr<Graph> graph);

  Graph *getParent() const { return parent; }
  void setParent(Graph *graph) { parent = graph; }

  /// For the backward `repeat` of a training step: the forward repeat whose
  /// repetitions it runs in reverse. Its body may use the forward body's
  /// values, meaning those of the same repetition.
  Op *getForwardRepeat() const { return forwardRepeat; }
  void setForwardRepeat(Op *op) { forwardRepeat = op; }

  /// Which layer of its repeat body the op belongs to (0 .. the body's
  /// getNumLayers() - 1); 0 at the top level. Ops inserted next to an op
  /// take its layer; a backward op takes its forward op's.
  unsigned getBodyLayer() const { return bodyLayer; }
  void setBodyLayer(unsigned layer) { bodyLayer = layer; }

private:
  OpKind kind;
  SourceLoc loc;
  llvm::SmallVector<Value *, 3> operands;
  llvm::SmallVector<Value *, 1> results;
  llvm::SmallVector<NamedAttribute, 2> attrs;
  std::unique_ptr<Graph> body;
  Graph *parent = nullptr;
  Op *forwardRepeat = nullptr;
  Phase phase = Phase::Forward;
  unsigned bodyLayer = 0;
};

inline bool Value::isParam() const {
  return definingOp && definingOp->getKind() == OpKind::Param;
}

class Graph {
public:
  explicit Graph(std::string name) : name(std::move(name)) {}

  llvm::StringRef getName() const { return name; }
  /// The op owning this graph as its body, or null for the top level.
  Op *getParentOp() const { return parentOp; }
  void setParentOp(Op *op) { parentOp = op; }

  /// The layers one repetition of this body runs (1 unless a layer pattern
  /// made it a period of several).
  unsigned getNumLayers() const { return numLayers; }
  void setNumLayers(unsigned layers) { numLayers = layers; }

  llvm::ArrayRef<std::unique_ptr<Op>> getOps() const { return ops; }
  llvm::ArrayRef<Value *> getArguments() const { return arguments; }

  /// Appends a new op at the end of the graph (in body layer 0).
  Op *createOp(OpKind kind, SourceLoc loc);
  /// Inserts a new op right before `anchor`, which must be in this graph,
  /// in `anchor`'s body layer.
  Op *createOpBefore(Op *anchor, OpKind kind, SourceLoc loc);
  /// Inserts a new op right after `anchor`, which must be in this graph,
  /// in `anchor`'s body layer.
  Op *createOpAfter(Op *anchor, OpKind kind, SourceLoc loc);
  /// Removes `op` (which must have no remaining uses) and its results.
  void eraseOp(Op *op);

  /// Calls `fn` on every op of this graph and of nested bodies, in program
  /// order (a repeat before its body). `fn` must not insert or erase ops.
  void walk(llvm::function_ref<void(Op &)> fn) const;
  /// Calls `fn` on every value defined in this graph and nested bodies:
  /// arguments and op results.
  void walkValues(llvm::function_ref<void(const Value *)> fn) const;
  /// Every value of this graph and nested bodies with the ops that read it,
  /// in program order (the IR keeps no use lists).
  using Users = llvm::DenseMap<const Value *, llvm::SmallVector<const Op *, 2>>;
  Users collectUsers() const;
  /// True if every value of this graph and nested bodies has a type (shape
  /// inference has run).
  bool allValuesTyped() const;
  /// Makes every use of `from` in this graph and nested bodies, except in
  /// `except`, a use of `to`.
  void replaceUsesOf(Value *from, Value *to, const Op *except = nullptr);
  /// Creates a value defined by `op` (appended to its results).
  Value *createResult(Op *op, std::string name);
  /// Creates a graph argument (a repeat's loop-carried value).
  Value *createArgument(std::string name);

  /// The terminating `yield` of a repeat body, if any.
  Op *getTerminator() const;

private:
  Op *insertOp(size_t position, OpKind kind, SourceLoc loc);
  size_t indexOf(const Op *op) const;

  std::string name;
  Op *parentOp = nullptr;
  unsigned numLayers = 1;
  std::vector<std::unique_ptr<Op>> ops;
  std::vector<std::unique_ptr<Value>> values;
  llvm::SmallVector<Value *, 2> arguments;
};

} // namespace stg

#endif // STG_IR_GRAPH_H
