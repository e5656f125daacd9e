//===- Printer.h - Textual form of the STG IR -------------------*- C++ -*-===//
//
// The printed IR is what `stage-opt` shows and what lit tests match, so it is
// deterministic (declaration order, stable names) and close to the source
// language:
//
//   dim DH = D/NH
//   axis sp = tp if sequence_parallel
//   model llama {
//     %x = embedding(%tokens, %embedding.table) : bf16[B/dp, S/(sp*cp), D]
//     %x_1 = repeat[count=L, name="layer"] iter_args(%layer.x = %x) {
//       ...
//       yield(%layer.decoder.out)
//     }
//   }
//
//===----------------------------------------------------------------------===//

#ifndef STG_IR_PRINTER_H
#define STG_IR_PRINTER_H

#include "llvm/Support/raw_ostream.h"

namespace stg {

class Module;
class Graph;
class Op;

struct PrintOptions {
  bool printLocations = false; ///< Append `loc(file:line:col)` to each op.
};

void printModule(llvm::raw_ostream &os, const Module &module,
                 const PrintOptions &options = {});
void printOp(llvm::raw_ostream &os, const Module &module, const Op &op,
             const PrintOptions &options = {}, unsigned indent = 0);

} // namespace stg

#endif // STG_IR_PRINTER_H
