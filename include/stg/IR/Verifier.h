//===- Verifier.h - Structural checks of the STG IR -------------*- C++ -*-===//
//
// The invariants every pass must preserve: SSA (each operand defined before
// use, in the same graph or an enclosing one), unique value names, operand
// and result counts and attributes that match the op's schema, well-formed
// types (no axis used twice in one distribution), and `repeat` bodies whose
// arguments and `yield` match the op's operands and results. Violations are
// reported as errors at the offending op's location.
//
//===----------------------------------------------------------------------===//

#ifndef STG_IR_VERIFIER_H
#define STG_IR_VERIFIER_H

#include "stg/Support/Diagnostics.h"
#include "stg/Support/LogicalResult.h"

namespace stg {

class Module;

LogicalResult verifyModule(const Module &module, DiagnosticEngine &diags);

} // namespace stg

#endif // STG_IR_VERIFIER_H
