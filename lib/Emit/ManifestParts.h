//===- ManifestParts.h - What the manifest and the report share -*- C++ -*-===//
//
// The descriptions Manifest.cpp writes as JSON and Report.cpp prints as
// text, so that both say the same.
//
//===----------------------------------------------------------------------===//

#ifndef STG_LIB_EMIT_MANIFESTPARTS_H
#define STG_LIB_EMIT_MANIFESTPARTS_H

#include "stg/IR/Module.h"
#include "stg/Instantiate/Program.h"

#include "llvm/ADT/ArrayRef.h"

#include <optional>
#include <string>

namespace stg {

/// The model's parameter count (or that of one token, `active`), if its
/// dims are bound.
std::optional<long long> getParameterCount(const Module &module,
                                           bool active = false);
/// `0..4` for layers 0-3, `0..2, 4..6` for interleaved chunks (half-open).
std::string describeLayers(llvm::ArrayRef<unsigned> layers);
/// `F0 F1 B0 F2 B1 ...` (W0: a weight-gradient step): a stage's schedule
/// steps, with the model chunk after a dot when stages hold several, and
/// `&` joining a step to the one it overlaps (`F7.0&B3.1`).
std::string describeSchedule(const StageProgram &program,
                             unsigned numVirtualStages);
/// The collective kinds, in the order the metrics list them.
llvm::ArrayRef<CollectiveKind> getCollectiveKinds();
/// The `bw_*` key of a collective kind, as CCL-Bench names it.
const char *getBandwidthKey(CollectiveKind kind);

} // namespace stg

#endif // STG_LIB_EMIT_MANIFESTPARTS_H
