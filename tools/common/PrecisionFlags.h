//===- PrecisionFlags.h - `--dtype`, `--precision` and weights --*- C++ -*-===//
//
// The flags that say what a run computes in, read the same way by stagec
// and stage-search: `--dtype`, the element type tensors are stored in,
// `--precision`, the recipe (which ops run in FP8 or FP4), and inference's
// `--weight-precision` (docs/cost-model.md, "Precision").
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

/// `--weight-precision` and `--weight-precision-scope`, inference's
/// weight-only quantization, as stagec and stage-search --serve take them;
/// applyWeightPrecisionFlags reads them.
struct WeightPrecisionFlags {
  std::string format, scope;
};
inline void addWeightPrecisionOptions(CLI::App &app,
                                      WeightPrecisionFlags &flags,
                                      const std::string &group) {
  app.add_option("--weight-precision", flags.format,
                 "prefill, decode and serve: the linear layers' weights "
                 "served in this format (fp8, mxfp8, mxfp6, mxfp4, nvfp4) and "
                 "dequantized in GEMMs that compute in the recipe's precision "
                 "(W4A16: mxfp4 weights under bf16); bf16: as the model "
                 "declares them, not its checkpoint's format")
      ->check(
          CLI::IsMember({"bf16", "fp8", "mxfp8", "mxfp6", "mxfp4", "nvfp4"}))
      ->group(group);
  app.add_option("--weight-precision-scope", flags.scope,
                 "with --weight-precision: all linear layers (default) or "
                 "the experts only (gpt-oss's MXFP4 checkpoint)")
      ->check(CLI::IsMember({"all", "experts"}))
      ->group(group);
}

/// `flags` into `options`, whose mode is set; an error message if the
/// scope comes without a format or the run trains.
inline std::optional<std::string>
applyWeightPrecisionFlags(const WeightPrecisionFlags &flags,
                          CompileOptions &options) {
  if (!flags.scope.empty() && flags.format.empty())
    return std::string("--weight-precision-scope needs --weight-precision");
  if (flags.format.empty())
    return std::nullopt;
  if (options.mode == "train")
    return std::string("--weight-precision quantizes the weights a served "
                       "model reads; --mode prefill, decode or serve "
                       "(training: --precision)");
  options.weightPrecision = parsePrecision(flags.format);
  options.weightPrecisionExpertsOnly = flags.scope == "experts";
  return std::nullopt;
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
