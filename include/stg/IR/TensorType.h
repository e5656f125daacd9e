//===- TensorType.h - Mesh axes, distributions, tensor types ----*- C++ -*-===//
//
// A tensor type is an element type, a logical shape (one Expr per dimension)
// and a Distribution: for every mesh axis, one of the paper's three layouts.
//
//   Duplicated      every rank of the axis holds the whole tensor (default)
//   Partition(d)    dimension d is split over the axis            [X/a, ...]
//   PartialSum      each rank holds a partial sum                 [...] @ a
//
// A dimension may be partitioned over several axes (`S/(sp*cp)`); the order
// is major to minor. Axes are owned by the Module and referred to by pointer.
//
//===----------------------------------------------------------------------===//

#ifndef STG_IR_TENSORTYPE_H
#define STG_IR_TENSORTYPE_H

#include "stg/IR/Expr.h"
#include "stg/Support/Diagnostics.h"

#include "llvm/ADT/SmallVector.h"

#include <optional>
#include <string>

namespace stg {

enum class ElementType { BF16, FP16, FP32, FP8, I8, I32, I64, Bool };

llvm::StringRef getElementTypeName(ElementType type);
std::optional<ElementType> parseElementType(llvm::StringRef name);
unsigned getElementTypeBytes(ElementType type);

/// A mesh axis (`axis dp;`) or an alias of one (`axis sp = tp if opt;`).
struct Axis {
  std::string name;
  GiNaC::symbol degree;       ///< The axis size as a symbol, e.g. `tp`.
  const Axis *alias = nullptr; ///< For `sp = tp`: the axis whose ranks sp uses.
  std::string condition;      ///< Option that enables the alias, if any.
  bool negated = false;       ///< `if !opt`.
  bool active = true;         ///< False when the condition is off: degree 1.
  SourceLoc loc;
  SourceLoc conditionLoc;     ///< The option's name in `if opt`.
  /// The degree, once the mesh is known (`--set tp=8`, `stagec --tp 8`);
  /// unset means 1. Aliases take their target's.
  std::optional<long long> size;
  /// Extents this axis may outnumber, every rank then holding one whole:
  /// grouped-query attention's key/value heads, replicated where tp exceeds
  /// them (vLLM; check-divisibility allows it). Set by `distribute`.
  llvm::SmallVector<Expr, 1> replicatedExtents;

  /// The axis whose ranks this one runs on, or null when it is inactive.
  const Axis *resolve() const;
  /// Whether a rank holds at least one of `extent` when this axis splits it.
  bool mayReplicate(const Expr &extent) const;
};

/// The per-axis layout of a tensor.
class Distribution {
public:
  enum class Kind { Duplicated, Partition, PartialSum };
  struct OnAxis {
    Kind kind = Kind::Duplicated;
    unsigned dim = 0; ///< Partitioned dimension, for Kind::Partition.
  };

  explicit Distribution(unsigned rank = 0) : partitions(rank) {}

  unsigned getRank() const { return partitions.size(); }
  /// Axes that split dimension `dim`, major to minor.
  llvm::ArrayRef<const Axis *> getPartition(unsigned dim) const {
    return partitions[dim];
  }
  llvm::ArrayRef<const Axis *> getPartialSum() const { return partialSum; }

  void addPartition(unsigned dim, const Axis *axis) {
    partitions[dim].push_back(axis);
  }
  void addPartialSum(const Axis *axis) { partialSum.push_back(axis); }

  /// How the tensor is laid out on `axis`.
  OnAxis on(const Axis *axis) const;
  /// The same layout with every PartialSum dropped: what a gradient of a
  /// partial value has (each rank's partial gets the whole gradient).
  Distribution withoutPartialSum() const;
  /// The same layout with `axis` Duplicated.
  Distribution withoutAxis(const Axis *axis) const;

  /// True if some axis appears twice (two dims, or a dim and `@`).
  const Axis *findRepeatedAxis() const;

  bool operator==(const Distribution &other) const;
  bool operator!=(const Distribution &other) const { return !(*this == other); }

private:
  llvm::SmallVector<llvm::SmallVector<const Axis *, 2>, 4> partitions;
  llvm::SmallVector<const Axis *, 2> partialSum;
};

class TensorType {
public:
  TensorType() = default;
  TensorType(ElementType elementType, llvm::SmallVector<Expr, 4> shape,
             Distribution distribution)
      : elementType(elementType), shape(std::move(shape)),
        distribution(std::move(distribution)) {}

  ElementType getElementType() const { return elementType; }
  unsigned getRank() const { return shape.size(); }
  llvm::ArrayRef<Expr> getShape() const { return shape; }
  const Expr &getDim(unsigned i) const { return shape[i]; }
  const Distribution &getDistribution() const { return distribution; }

  /// The extent of dimension `i` on one rank: the logical extent divided by
  /// the degrees of the active axes that partition it.
  Expr getLocalDim(unsigned i) const;
  /// Number of elements on one rank.
  Expr getLocalNumElements() const;
  /// Bytes on one rank.
  Expr getLocalBytes() const {
    return getLocalNumElements() * getElementTypeBytes(elementType);
  }
  /// The same element type and shape, laid out as `layout`.
  TensorType withDistribution(Distribution layout) const {
    return TensorType(elementType, shape, std::move(layout));
  }

  /// Number of elements of the whole (logical) tensor.
  Expr getNumElementsLogical() const;

  bool operator==(const TensorType &other) const;
  bool operator!=(const TensorType &other) const { return !(*this == other); }

  /// Prints `bf16[B/dp, S/(sp*cp), D] @ tp`.
  void print(llvm::raw_ostream &os, const ExprPrinter &printer) const;

private:
  ElementType elementType = ElementType::BF16;
  llvm::SmallVector<Expr, 4> shape;
  Distribution distribution;
};

} // namespace stg

#endif // STG_IR_TENSORTYPE_H
