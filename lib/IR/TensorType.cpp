//===- TensorType.cpp - Mesh axes, distributions, tensor types ------------===//

#include "stg/IR/TensorType.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringSwitch.h"

using namespace stg;

llvm::StringRef stg::getElementTypeName(ElementType type) {
  switch (type) {
  case ElementType::BF16: return "bf16";
  case ElementType::FP16: return "fp16";
  case ElementType::FP32: return "fp32";
  case ElementType::FP8:  return "fp8";
  case ElementType::I8:   return "i8";
  case ElementType::I32:  return "i32";
  case ElementType::I64:  return "i64";
  case ElementType::Bool: return "bool";
  }
  llvm_unreachable("unknown element type");
}

std::optional<ElementType> stg::parseElementType(llvm::StringRef name) {
  return llvm::StringSwitch<std::optional<ElementType>>(name)
      .Case("bf16", ElementType::BF16)
      .Case("fp16", ElementType::FP16)
      .Case("fp32", ElementType::FP32)
      .Case("fp8", ElementType::FP8)
      .Case("i8", ElementType::I8)
      .Case("i32", ElementType::I32)
      .Case("i64", ElementType::I64)
      .Case("bool", ElementType::Bool)
      .Default(std::nullopt);
}

unsigned stg::getElementTypeBytes(ElementType type) {
  switch (type) {
  case ElementType::FP8:
  case ElementType::I8:
  case ElementType::Bool:
    return 1;
  case ElementType::BF16:
  case ElementType::FP16:
    return 2;
  case ElementType::FP32:
  case ElementType::I32:
    return 4;
  case ElementType::I64:
    return 8;
  }
  llvm_unreachable("unknown element type");
}

const Axis *Axis::resolve() const {
  if (!active)
    return nullptr;
  return alias ? alias->resolve() : this;
}

bool Axis::mayReplicate(const Expr &extent) const {
  return llvm::any_of(replicatedExtents,
                      [&](const Expr &e) { return e.is_equal(extent); });
}

//===----------------------------------------------------------------------===//
// Distribution
//===----------------------------------------------------------------------===//

Distribution::OnAxis Distribution::on(const Axis *axis) const {
  for (unsigned d = 0; d < partitions.size(); ++d)
    if (llvm::is_contained(partitions[d], axis))
      return {Kind::Partition, d};
  if (llvm::is_contained(partialSum, axis))
    return {Kind::PartialSum, 0};
  return {Kind::Duplicated, 0};
}

const Axis *Distribution::findRepeatedAxis() const {
  llvm::SmallVector<const Axis *, 8> seen;
  auto check = [&](const Axis *axis) -> bool {
    if (llvm::is_contained(seen, axis))
      return true;
    seen.push_back(axis);
    return false;
  };
  for (const auto &axes : partitions)
    for (const Axis *axis : axes)
      if (check(axis))
        return axis;
  for (const Axis *axis : partialSum)
    if (check(axis))
      return axis;
  return nullptr;
}

Distribution Distribution::withoutPartialSum() const {
  Distribution whole(getRank());
  whole.partitions = partitions;
  return whole;
}

Distribution Distribution::withoutAxis(const Axis *axis) const {
  Distribution result(getRank());
  for (unsigned d = 0; d < partitions.size(); ++d)
    for (const Axis *other : partitions[d])
      if (other != axis)
        result.addPartition(d, other);
  for (const Axis *other : partialSum)
    if (other != axis)
      result.addPartialSum(other);
  return result;
}

bool Distribution::operator==(const Distribution &other) const {
  if (partitions.size() != other.partitions.size())
    return false;
  for (unsigned d = 0; d < partitions.size(); ++d)
    if (!llvm::equal(partitions[d], other.partitions[d]))
      return false;
  // PartialSum order carries no meaning.
  if (partialSum.size() != other.partialSum.size())
    return false;
  return llvm::all_of(partialSum, [&](const Axis *axis) {
    return llvm::is_contained(other.partialSum, axis);
  });
}

//===----------------------------------------------------------------------===//
// TensorType
//===----------------------------------------------------------------------===//

Expr TensorType::getLocalDim(unsigned i) const {
  Expr extent = shape[i];
  bool replicable = false;
  // An alias runs on its target's ranks, so it divides by the target degree.
  for (const Axis *axis : distribution.getPartition(i))
    if (const Axis *ranks = axis->resolve()) {
      extent = extent / ranks->degree;
      replicable = replicable || ranks->mayReplicate(shape[i]);
    }
  // Four key/value heads over tp = 8 are one a rank, not half of one.
  if (replicable)
    extent = *makeFunction("max", {extent, 1});
  return extent;
}

Expr TensorType::getLocalNumElements() const {
  Expr count = 1;
  for (unsigned i = 0; i < shape.size(); ++i)
    count = count * getLocalDim(i);
  return count;
}

Expr TensorType::getNumElementsLogical() const {
  Expr count = 1;
  for (const Expr &extent : shape)
    count = count * extent;
  return count;
}

bool TensorType::operator==(const TensorType &other) const {
  if (elementType != other.elementType || shape.size() != other.shape.size())
    return false;
  for (unsigned i = 0; i < shape.size(); ++i)
    if (!shape[i].is_equal(other.shape[i]))
      return false;
  return distribution == other.distribution;
}

void TensorType::print(llvm::raw_ostream &os,
                       const ExprPrinter &printer) const {
  os << getElementTypeName(elementType) << '[';
  for (unsigned i = 0; i < shape.size(); ++i) {
    if (i)
      os << ", ";
    auto axes = distribution.getPartition(i);
    bool compound = !axes.empty() && !GiNaC::is_a<GiNaC::symbol>(shape[i]) &&
                    !GiNaC::is_a<GiNaC::numeric>(shape[i]);
    if (compound)
      os << '(';
    printer.print(os, shape[i]);
    if (compound)
      os << ')';
    if (axes.empty())
      continue;
    os << '/';
    if (axes.size() > 1)
      os << '(';
    llvm::interleave(
        axes, os, [&](const Axis *axis) { os << axis->name; }, "*");
    if (axes.size() > 1)
      os << ')';
  }
  os << ']';
  auto partial = distribution.getPartialSum();
  if (partial.empty())
    return;
  os << " @ ";
  if (partial.size() > 1)
    os << '(';
  llvm::interleave(
      partial, os, [&](const Axis *axis) { os << axis->name; }, ", ");
  if (partial.size() > 1)
    os << ')';
}
