//===- PrecisionFlags.h - `--dtype` and `--precision` -----------*- C++ -*-===//
//
// The two flags that say what a run computes in, read the same way by
// stagec and stage-search: `--dtype`, the element type tensors are stored
// in, and `--precision`, the recipe (which ops run in FP8 or FP4; see
// docs/cost-model.md, "Precision").
//
//===----------------------------------------------------------------------===//

#ifndef STG_TOOLS_COMMON_PRECISIONFLAGS_H
#define STG_TOOLS_COMMON_PRECISIONFLAGS_H

#include "stg/Driver/Compile.h"
#include "stg/IR/Precision.h"

#include "CLI/CLI.hpp"

#include "llvm/ADT/StringRef.h"

#include <optional>
#include <string>

namespace stg {

/// A list flag's check that each value names a recipe (stage-search's
/// `--precision bf16,fp8`).
inline CLI::Validator recipeName() {
  return CLI::Validator(
      [](std::string &input) -> std::string {
        if (parseRecipe(input))
          return "";
        return "expects a recipe (" + getRecipeNames() + "), found '" + input +
               "'";
      },
      "RECIPE");
}

/// Reads `--dtype` (the element type of tensors) and `--precision` (the
/// recipe) into `options`; an error message if either is not one. FP8 is a
/// recipe, not an element type: an FP8 run keeps its tensors in bf16, so
/// `--dtype fp8` is refused with the flag to use. The fp16 recipe keeps
/// its tensors in fp16 unless `--dtype` says otherwise.
inline std::optional<std::string> applyPrecisionFlags(llvm::StringRef dtype,
                                                      llvm::StringRef precision,
                                                      CompileOptions &options) {
  if (dtype == "fp8")
    return std::string("--dtype fp8: an FP8 run keeps its tensors in bf16 and "
                       "runs its GEMMs in FP8; use --precision fp8");
  if (!dtype.empty() && !(options.elementType = parseElementType(dtype)))
    return ("--dtype " + dtype + ": not an element type (bf16, fp16, fp32)")
        .str();
  if (precision.empty())
    return std::nullopt;
  options.precision = parseRecipe(precision);
  if (!options.precision)
    return ("--precision " + precision + ": not a recipe (" + getRecipeNames() +
            ")")
        .str();
  if (*options.precision == Precision::FP16 && dtype.empty())
    options.elementType = ElementType::FP16;
  return std::nullopt;
}

} // namespace stg

#endif // STG_TOOLS_COMMON_PRECISIONFLAGS_H
