//===- WorkloadCard.h - CCL-Bench's description of a trace set --*- C++ -*-===//
//
// `DIR/workload_card.yaml` describes a trace set in CCL-Bench's schema
// (ccl-bench-paper.txt, appendix B, and the project's
// workload_card_template.yaml), so that it can be submitted or compared as
// it is: the model (phase, MoE or not, family, precision, parameters and
// embedding parameters, layers, heads, head size), the data (batch,
// sequence length), the hardware (accelerator, counts, network topology and
// bandwidths), the parallel plan (dp_replicate, dp_shard, tp, pp, cp, ep,
// pp_mb) and the generator. What stagec cannot know (a driver version, a
// dataset, a contributor) is null, and so is the hardware without a system
// (`--system` or `--device`). docs/chakra-output.md lists every field.
//
//===----------------------------------------------------------------------===//

#ifndef STG_EMIT_WORKLOADCARD_H
#define STG_EMIT_WORKLOADCARD_H

#include "stg/IR/Module.h"
#include "stg/Instantiate/Program.h"
#include "stg/Perf/System.h"

#include "llvm/Support/raw_ostream.h"

#include <string>

namespace stg {

struct WorkloadCardInputs {
  std::string input;       ///< The model file; its stem is the family.
  std::string mode;        ///< `train`, `prefill` or `decode`.
  std::string traceFormat; ///< `chakra`, `json` or `dot`.
  std::string toolVersion;
};

/// Writes the card of the trace set of `programs`; `system` is null when
/// the run has none.
void writeWorkloadCard(llvm::raw_ostream &os, const Module &module,
                       const ProgramSet &programs,
                       const WorkloadCardInputs &inputs,
                       const SystemSpec *system);

} // namespace stg

#endif // STG_EMIT_WORKLOADCARD_H
