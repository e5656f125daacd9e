//===- OpNumbers.h - An op's costs, evaluated once -----------------*- C++ -*-===//
//
// The symbolic cost of an op (lib/IR/Cost.h) bound to numbers. Every
// instance of an op (each layer, each micro-batch, each rank) has the same
// costs, so they are evaluated once per op and cached: GiNaC substitution
// costs microseconds, and a 32K-rank run has billions of node instances.
// A caller that instantiates one module many times with the same dims and
// degrees (the plan search: plans that differ in interleaving or rank
// order) may keep the cache across instantiations; one that binds other
// numbers calls forgetNumbers, which keeps the symbolic costs (they depend
// on the module alone) and drops only what they evaluated to.
//
// The costs are evaluated from CompiledExprs over the bound value of each
// symbol (bound once per binding), not by GiNaC substitution; only what
// those cannot answer exactly, errors included, takes the GiNaC path.
//
// The cache also keeps, per placement, which values a training stage holds
// in memory (StageMemoryKeys): they depend on the module alone, and the
// search prices each plan's memory from them without walking the stage.
//
//===----------------------------------------------------------------------===//

#ifndef STG_INSTANTIATE_OPNUMBERS_H
#define STG_INSTANTIATE_OPNUMBERS_H

#include "stg/IR/CompiledExpr.h"
#include "stg/IR/Cost.h"
#include "stg/IR/Module.h"
#include "stg/IR/Precision.h"
#include "stg/Instantiate/Program.h"
#include "stg/Support/Diagnostics.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallVector.h"

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

namespace stg {

struct OpNumbers {
  GemmShape gemm; ///< A two-operand einsum's matrix shape.
  int64_t flops = 0;
  uint64_t bytesAccessed = 0;
  int64_t commBytes = 0; ///< Collectives: the `bytes` attribute.
  /// Of bytesAccessed, what a low-precision GEMM's casts move.
  uint64_t castBytes = 0;
  /// A fused attention's query rows (batch x heads x queries) and the
  /// exponentials its softmax computes (getAttentionExponentials).
  int64_t attentionRows = 0;
  int64_t attentionExps = 0;
  /// What the op computes in: the `precision` pass's, else its element
  /// type's (fp32 GEMMs in tf32).
  Precision precision = Precision::BF16;
  /// An inference GEMM's kernel, shared with the linear GEMMs that read
  /// its input (OpNumberCache::addSharedKernel).
  SharedKernel kernel;
};

/// What a training stage's memory sums, from the module and its placement
/// alone (StageMemory.cpp): each value it keeps, with how many instances
/// (layers) of it, and the unfused attentions whose scores it keeps.
struct StageMemoryKeys {
  std::vector<std::pair<const Value *, uint64_t>> declarations, steps, saved;
  std::vector<std::pair<const Op *, uint64_t>> unfusedAttention;
  /// A low-precision recipe's copies: a saved value that only
  /// low-precision GEMMs read back is kept in their format (Transformer
  /// Engine saves the cast input), and a weight they read has a cast copy
  /// beside it. By value, the format.
  llvm::DenseMap<const Value *, Precision> savedFormats, weightCopies;
};

class OpNumberCache {
public:
  OpNumberCache(const Module &module, DiagnosticEngine &diags)
      : module(module), diags(&diags) {}

  /// Where later errors go, when the cache outlives the engine it was made
  /// with. An error is reported once; its op stays null in the cache.
  void setDiagnostics(DiagnosticEngine &engine) { diags = &engine; }
  /// Drops the evaluated numbers, after the module's dims or degrees
  /// changed; the symbolic costs stay.
  void forgetNumbers() {
    ops.clear();
    kernelsShared.clear();
    values.clear();
    symbolValues.clear();
  }

  /// The numbers of `op`, or null after reporting a cost that does not
  /// evaluate to a number.
  const OpNumbers *get(const Op &op);
  /// Bytes of `value` on one rank (a message between stages).
  std::optional<int64_t> getLocalBytes(const Value &value, SourceLoc loc);
  /// The memory keys of a stage of a placement, named by `placement`
  /// (stages, chunks, the stage, the chunks' layer counts), if known. They
  /// depend on the module alone: binding other numbers keeps them.
  const StageMemoryKeys *
  findStageMemoryKeys(const std::vector<unsigned> &placement) const {
    auto found = memoryKeys.find(placement);
    return found == memoryKeys.end() ? nullptr : &found->second;
  }
  const StageMemoryKeys &addStageMemoryKeys(std::vector<unsigned> placement,
                                            StageMemoryKeys keys) {
    return memoryKeys[std::move(placement)] = std::move(keys);
  }
  /// `e` bound to a non-negative count, or nothing after reporting why
  /// not (`what` names it: "FLOPs of 'einsum' '%y'"). A fraction is an
  /// error too, unless `roundUp` (a formula that is an average by design).
  std::optional<int64_t> evaluate(const Expr &e, SourceLoc loc,
                                  llvm::StringRef what, bool roundUp = false);

private:
  /// `e` bound to a count, or nothing (evaluate says why).
  std::optional<int64_t> tryEvaluate(const Expr &e, bool roundUp) const;
  /// `e` bound exactly from `program`, its compiled form, or nothing when
  /// the program cannot tell (then bind `e` with GiNaC).
  std::optional<Rational> tryCompiled(const CompiledExpr &program);
  /// tryEvaluate, from `program` where it can tell.
  std::optional<int64_t> tryEvaluate(const Expr &e, const CompiledExpr &program,
                                     bool roundUp);
  /// False after reporting a sliding or chunked attention (or its
  /// gradient) whose window is not a positive integer once bound.
  bool checkWindow(const Op &op, llvm::StringRef what);
  /// The matrix shape of a two-operand einsum: output indices of both
  /// operands are the batch, of the first only M, of the second only N;
  /// contracted ones K. Empty for anything else.
  GemmShape getGemmShape(const Op &einsum);

  /// An op's cost formulas: FLOPs and bytes, or a collective's size.
  struct Formulas {
    Expr flops, bytes, castBytes, attentionRows, attentionExps;
    CompiledExpr flopsProgram, bytesProgram, castBytesProgram,
        attentionRowsProgram, attentionExpsProgram;
    /// A linear GEMM's input bytes and their cast's (getGemmInputBytes).
    Expr inputBytes, inputCastBytes;
    CompiledExpr inputBytesProgram, inputCastBytesProgram;
    /// An einsum's local operand dims, operand by operand.
    std::vector<CompiledExpr> gemmDims;
    /// An experts' GEMM's: its weight's bytes, the tokens routed, top-k
    /// and the expert count (getExpertWeightReads).
    std::optional<ExpertWeightReads> expertReads;
    CompiledExpr expertPrograms[4];
    /// An op on an experts' slots: the rows that hold tokens, of all
    /// (getSlotFill).
    std::optional<SlotFill> slotFill;
    CompiledExpr slotFillPrograms[2];
    CompiledExpr slotBytesProgram; ///< Its slotBytes, where it has them.
  };
  /// `program`'s value under the current binding, or nothing.
  std::optional<double> tryCompiledNumber(const CompiledExpr &program);
  /// An experts' GEMM's weight bytes, and how many of them it leaves
  /// unread: the weights of the experts that get no token ({0, 0} for any
  /// other op, or where the numbers do not evaluate).
  std::pair<uint64_t, uint64_t> getExpertWeightBytes(const Formulas &costs);
  /// The share of an op's slot rows that hold tokens (1 for an op on no
  /// slots, or where the numbers do not evaluate).
  double getSlotFill(const Formulas &costs);
  /// Whether the module trains (has a backward): a training step's slots
  /// are full but for each rank's rounding, which its forward and backward
  /// both keep, so slot fill applies to inference only.
  bool isTraining();
  Formulas &getFormulas(const Op &op);
  /// `op`'s own numbers, each GEMM a kernel of its own (get adds the
  /// shared kernel).
  const OpNumbers *getOwn(const Op &op);
  /// The kernel an inference GEMM shares with the linear GEMMs that read
  /// its input (canShareKernel), in its `numbers`; false after reporting
  /// a cost that does not evaluate.
  bool addSharedKernel(const Op &op, OpNumbers &numbers);
  /// The GEMMs that share `op`'s kernel, `op` among them, in the model's
  /// order; fewer than two: none.
  llvm::ArrayRef<const Op *> getKernelSiblings(const Op &op);

  const Module &module;
  DiagnosticEngine *diags;
  std::optional<bool> training; ///< isTraining's answer, once known.
  /// The module's hasFusedLinearKernels, once known.
  std::optional<bool> fusedLinearKernels;
  llvm::DenseMap<const Op *, std::optional<OpNumbers>> ops;
  /// The ops of `ops` whose shared kernel get has added.
  llvm::DenseSet<const Op *> kernelsShared;
  /// By linear GEMM, the GEMMs that can share its kernel (from the module
  /// alone; built on first use).
  std::optional<llvm::DenseMap<const Op *, llvm::SmallVector<const Op *, 4>>>
      kernelSiblings;
  llvm::DenseMap<const Value *, std::optional<int64_t>> values;
  llvm::DenseMap<const Op *, Formulas> formulas;
  llvm::DenseMap<const Value *, std::pair<Expr, CompiledExpr>> valueBytes;
  /// The symbols the compiled formulas mention, and their values under the
  /// current binding (filled as formulas need them; nothing: not a
  /// rational).
  SymbolSlots slots;
  std::vector<std::optional<Rational>> symbolValues;
  std::map<std::vector<unsigned>, StageMemoryKeys> memoryKeys;
};

} // namespace stg

#endif // STG_INSTANTIATE_OPNUMBERS_H
