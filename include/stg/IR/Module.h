//===- Module.h - A whole STG program ---------------------------*- C++ -*-===//
//
// The module is what the front end builds and every pass transforms: the
// symbolic dims with their current bindings, the mesh axes, the options, the
// signatures of the blocks that were declared, and the model graph with all
// block calls inlined.
//
//===----------------------------------------------------------------------===//

#ifndef STG_IR_MODULE_H
#define STG_IR_MODULE_H

#include "stg/IR/Expr.h"
#include "stg/IR/Graph.h"
#include "stg/IR/Precision.h"
#include "stg/IR/Memory.h"
#include "stg/IR/TensorType.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"

#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace stg {

/// `dim D = 8192;` or `dim DH = D / NH;` or `dim B;` (value from --set).
struct Dim {
  std::string name;
  GiNaC::symbol symbol;
  std::optional<Expr> value; ///< Default, derived expression, or `set` value.
  SourceLoc loc;
};

/// `option sequence_parallel = true;`
struct Option {
  using Value = std::variant<bool, Expr, std::string>;
  std::string name;
  Value value;
  SourceLoc loc;

  bool isBool() const { return std::holds_alternative<bool>(value); }
};

/// A block's declared interface (bodies are inlined into the model).
struct BlockSignature {
  std::string name;
  std::vector<std::pair<std::string, TensorType>> params;
  std::optional<TensorType> result;
  SourceLoc loc;
};

class Module {
public:
  Module();

  SymbolTable &getSymbols() { return symbols; }
  const SymbolTable &getSymbols() const { return symbols; }
  ExprPrinter getPrinter() const { return ExprPrinter(&symbols); }

  Dim *addDim(llvm::StringRef name, SourceLoc loc);
  Dim *lookupDim(llvm::StringRef name);
  const Dim *lookupDim(llvm::StringRef name) const {
    return const_cast<Module *>(this)->lookupDim(name);
  }
  llvm::ArrayRef<std::unique_ptr<Dim>> getDims() const { return dims; }

  Axis *addAxis(llvm::StringRef name, SourceLoc loc);
  Axis *lookupAxis(llvm::StringRef name);
  const Axis *lookupAxis(llvm::StringRef name) const;
  llvm::ArrayRef<std::unique_ptr<Axis>> getAxes() const { return axes; }

  Option *addOption(llvm::StringRef name, Option::Value value, SourceLoc loc);
  Option *lookupOption(llvm::StringRef name);
  const Option *lookupOption(llvm::StringRef name) const;
  llvm::ArrayRef<std::unique_ptr<Option>> getOptions() const {
    return options;
  }
  /// The default element type: the override if set (`stagec --dtype`), else
  /// `option dtype = "fp32";`, else bf16.
  ElementType getDefaultElementType() const;
  /// The recipe of `option precision` (stagec --precision) when it is one,
  /// else nothing: the ops compute in their element types.
  std::optional<Precision> getPrecisionRecipe() const;
  /// Whether `option cp_comm_type` (stagec --cp-comm-type) is "a2a":
  /// attention trades the sequence split for a head split (Ulysses).
  bool hasContextParallelAllToAll() const;
  /// Whether `option linear_kernels` (stagec --linear-kernels) is
  /// "fused": an inference step's linear GEMMs that read the same input
  /// share a kernel (lib/Instantiate/OpNumbers.cpp).
  bool hasFusedLinearKernels() const;
  void setElementTypeOverride(ElementType type) { elementTypeOverride = type; }

  void addBlockSignature(BlockSignature signature) {
    blocks.push_back(std::move(signature));
  }
  llvm::ArrayRef<BlockSignature> getBlockSignatures() const { return blocks; }

  /// The model graph; null for a file of blocks only.
  Graph *getModel() const { return model.get(); }
  Graph *createModel(llvm::StringRef name, SourceLoc loc);
  SourceLoc getModelLoc() const { return modelLoc; }

  /// The gradient of a weight, as `autodiff` derived it (null if none).
  Value *getGradient(const Value *param) const {
    return gradients.lookup(param);
  }
  void setGradient(const Value *param, Value *gradient) {
    gradients[param] = gradient;
  }
  /// All weight gradients (unordered: walk the graph for an order).
  const llvm::DenseMap<const Value *, Value *> &getGradients() const {
    return gradients;
  }

  /// `e` with dims bound (bindDims) and every axis degree replaced by its
  /// size: an alias by its target's, an unset or inactive axis by 1.
  /// Nothing if the numbers divide by zero, as bindDims.
  std::optional<Expr> bindAll(const Expr &e) const;
  /// bindAll of each dim's symbol, in the order of getDims(): the
  /// bindings looked up once for all of them.
  std::vector<std::optional<Expr>> bindAllDims() const;

  /// The bound value of the dim called `name`, if the module declares it
  /// and it binds to an integer.
  std::optional<long long> getDimValue(llvm::StringRef name) const;

  /// The values of the dims and axis degrees `e` mentions, as a message
  /// says which binding made an expression fail: "D = 4, tp = 8".
  std::string describeBindings(const Expr &e) const;

  /// The per-rank memory the `memory` pass computed, if it ran.
  const std::optional<MemoryBreakdown> &getMemory() const { return memory; }
  void setMemory(MemoryBreakdown breakdown) { memory = std::move(breakdown); }

  /// Makes every use of `from` in the model, except in `except`, a use of
  /// `to`, including the module's record of gradients. Passes use this
  /// rather than Graph::replaceUsesOf.
  void replaceUsesOf(Value *from, Value *to, const Op *except = nullptr);

  /// `e` with every dim that has a value replaced by it, repeatedly, so
  /// derived dims reach numbers once their inputs have them. Nothing if the
  /// numbers divide by zero (`D / (D - 4)` with D = 4): symbolic
  /// expressions that are fine become poles only once bound, so every
  /// caller reports that at its own location.
  std::optional<Expr> bindDims(const Expr &e) const;

  /// Returns `base` if no value has that name yet, else `base_1`, `base_2`...
  std::string makeUniqueName(llvm::StringRef base);

private:
  SymbolTable symbols;
  std::vector<std::unique_ptr<Dim>> dims;
  std::vector<std::unique_ptr<Axis>> axes;
  std::vector<std::unique_ptr<Option>> options;
  std::vector<BlockSignature> blocks;
  std::unique_ptr<Graph> model;
  SourceLoc modelLoc;
  llvm::StringMap<unsigned> nameCounts;
  llvm::DenseMap<const Value *, Value *> gradients;
  std::optional<MemoryBreakdown> memory;

  /// bindAll's substitution while the bindings stay as they were: every
  /// dim and degree resolved once, so binding an expression is one
  /// substitution (a plan search binds thousands per plan).
  struct BindingCache {
    std::vector<std::optional<Expr>> dimValues; ///< The snapshot.
    std::vector<long long> degrees;             ///< The snapshot.
    GiNaC::exmap resolved;
    bool usable = false; ///< False if some dim does not resolve.
  };
  mutable std::optional<BindingCache> bindings;
  const BindingCache &getBindings() const;
  std::optional<ElementType> elementTypeOverride;
};

} // namespace stg

#endif // STG_IR_MODULE_H
