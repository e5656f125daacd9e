//===- Precision.cpp - The number formats GEMMs compute in ----------------===//

#include "stg/IR/Precision.h"

#include "llvm/ADT/StringSwitch.h"
#include "llvm/Support/ErrorHandling.h"

using namespace stg;

llvm::StringRef stg::getPrecisionName(Precision precision) {
  switch (precision) {
  case Precision::TF32:  return "tf32";
  case Precision::BF16:  return "bf16";
  case Precision::FP16:  return "fp16";
  case Precision::FP8:   return "fp8";
  case Precision::MXFP8: return "mxfp8";
  case Precision::MXFP6: return "mxfp6";
  case Precision::MXFP4: return "mxfp4";
  case Precision::NVFP4: return "nvfp4";
  }
  llvm_unreachable("unknown precision");
}

std::optional<Precision> stg::parsePrecision(llvm::StringRef name) {
  return llvm::StringSwitch<std::optional<Precision>>(name)
      .Case("tf32", Precision::TF32)
      .Case("bf16", Precision::BF16)
      .Case("fp16", Precision::FP16)
      .Case("fp8", Precision::FP8)
      .Case("mxfp8", Precision::MXFP8)
      .Case("mxfp6", Precision::MXFP6)
      .Case("mxfp4", Precision::MXFP4)
      .Case("nvfp4", Precision::NVFP4)
      .Default(std::nullopt);
}

bool stg::isRecipe(Precision precision) { return precision != Precision::TF32; }

std::string stg::getRecipeNames(llvm::StringRef last) {
  std::string names;
  for (unsigned i = 0; i < NumPrecisions; ++i) {
    Precision precision = Precision(i);
    if (!isRecipe(precision))
      continue;
    if (!names.empty())
      names += precision == Precision(NumPrecisions - 1) ? last.str() : ", ";
    names += getPrecisionName(precision).str();
  }
  return names;
}

std::optional<Precision> stg::parseRecipe(llvm::StringRef name) {
  std::optional<Precision> precision = parsePrecision(name);
  if (!precision || !isRecipe(*precision))
    return std::nullopt;
  return precision;
}

bool stg::isLowPrecision(Precision precision) {
  return getPrecisionBytes(precision) < 2;
}

double stg::getPrecisionBytes(Precision precision) {
  switch (precision) {
  case Precision::TF32:  return 4;
  case Precision::BF16:
  case Precision::FP16:  return 2;
  case Precision::FP8:   return 1;
  case Precision::MXFP8: return 1 + 1.0 / 32;
  case Precision::MXFP6: return 0.75 + 1.0 / 32;
  case Precision::MXFP4: return 0.5 + 1.0 / 32;
  case Precision::NVFP4: return 0.5 + 1.0 / 16;
  }
  llvm_unreachable("unknown precision");
}
