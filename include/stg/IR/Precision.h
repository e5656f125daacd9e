//===- Precision.h - The number formats GEMMs compute in --------*- C++ -*-===//
//
// A precision is what a kernel's tensor cores compute in: the `precision`
// pass writes one on each op from the run's recipe (`--precision fp8`), the
// cost model reads it for the bytes a low-precision operand takes, and the
// device model for the peak that applies. It is not an element type: a
// tensor between ops stays bf16; an FP8 GEMM reads quantized copies of its
// operands, as Transformer Engine runs it.
//
//   tf32   fp32 GEMMs on tensor cores
//   bf16, fp16
//   fp8    E4M3/E5M2 with a scale per tensor (Hopper and later)
//   mxfp8  FP8 with an E8M0 scale per 32 elements (OCP MX; Blackwell, MI355X)
//   mxfp6, mxfp4  OCP MX 6- and 4-bit formats, the same scales (Blackwell,
//          MI355X; gpt-oss ships its experts in mxfp4)
//   nvfp4  E2M1 with an FP8 scale per 16 elements and one per tensor
//          (Blackwell)
//
//===----------------------------------------------------------------------===//

#ifndef STG_IR_PRECISION_H
#define STG_IR_PRECISION_H

#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <optional>
#include <string>

namespace stg {

enum class Precision : uint8_t { TF32, BF16, FP16, FP8, MXFP8, MXFP6, MXFP4, NVFP4 };
constexpr unsigned NumPrecisions = unsigned(Precision::NVFP4) + 1;

llvm::StringRef getPrecisionName(Precision precision);
std::optional<Precision> parsePrecision(llvm::StringRef name);

/// True for what `--precision` takes: every format but tf32.
bool isRecipe(Precision precision);
/// The recipes' names for messages, in order, the last two joined by
/// `last`: "bf16, fp16, ..., mxfp4, nvfp4" or "... mxfp4 or nvfp4".
std::string getRecipeNames(llvm::StringRef last = ", ");
/// The recipe `name` names, or nothing (a format that is no recipe, such
/// as tf32, included).
std::optional<Precision> parseRecipe(llvm::StringRef name);
/// True for the formats narrower than 16 bits (a recipe that quantizes).
bool isLowPrecision(Precision precision);

/// Bytes an element takes in `precision`, its block scales included
/// (mxfp8: 1 + 1/32; nvfp4: 1/2 + 1/16).
double getPrecisionBytes(Precision precision);

} // namespace stg

#endif // STG_IR_PRECISION_H
