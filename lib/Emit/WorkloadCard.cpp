//===- WorkloadCard.cpp - CCL-Bench's description of a trace set ----------===//
//
// Written with yaml-cpp's emitter in the template's order and nesting, so
// that CCL-Bench's tools (which read `workload.*`, `Model-executor.*` and
// `metric_source.traces`) find every field where they look.
//
//===----------------------------------------------------------------------===//

#include "stg/Emit/WorkloadCard.h"

#include "stg/IR/Graph.h"
#include "stg/IR/ParamCount.h"
#include "stg/Perf/DeviceModel.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Path.h"

#include <yaml-cpp/yaml.h>

#include <optional>

using namespace stg;

static std::optional<long long> getCount(const Module &module,
                                         const Expr &count) {
  std::optional<Expr> value = module.bindDims(count);
  return value ? getIntegerValue(*value) : std::nullopt;
}

/// `value`, or null when there is none.
static YAML::Node orNull(std::optional<long long> value) {
  return value ? YAML::Node(*value) : YAML::Node(YAML::NodeType::Null);
}

/// CCL-Bench names accelerators `vendor_model` (`nvidia_a100`, `tpu_v4`):
/// the built-in devices get their vendor; a device file's name is kept, in
/// lower case.
static std::string getAcceleratorModel(llvm::StringRef name) {
  std::string model = name.lower();
  for (char &c : model)
    if (!llvm::isAlnum(c))
      c = '_';
  if (!lookupBuiltinDevice(name))
    return model;
  return (llvm::StringRef(model).startswith("mi") ? "amd_" : "nvidia_") + model;
}

/// The trace type of `metric_source.traces`.
static llvm::StringRef getTraceType(llvm::StringRef format) {
  if (format == "json")
    return "chakra_json";
  return format; // chakra, dot
}

static bool hasExperts(const Module &module) {
  bool experts = false;
  if (const Graph *model = module.getModel())
    model->walk([&](Op &op) {
      experts |=
          op.getKind() == OpKind::Dispatch || op.getKind() == OpKind::Route;
    });
  return experts;
}

void stg::writeWorkloadCard(llvm::raw_ostream &os, const Module &module,
                            const ProgramSet &programs,
                            const WorkloadCardInputs &inputs,
                            const SystemSpec *system) {
  const Mesh &mesh = programs.mesh;
  // The plan as given (a folded dualpipe's unfolded).
  auto degree = [&](llvm::StringRef axis) -> long long {
    return programs.getGivenDegree(mesh.findAxis(axis));
  };
  bool training = inputs.mode == "train";
  bool decode = inputs.mode == "decode";
  // A template is named by its file; an imported config (`config.json`)
  // by its model.
  std::string family =
      llvm::StringRef(inputs.input).endswith_insensitive(".json")
          ? module.getModel()->getName().str()
          : llvm::sys::path::stem(inputs.input).str();
  // `option hf_repo`, which the importer writes where the config names
  // its Hub repository.
  std::string hfUrl;
  if (const Option *repo = module.lookupOption("hf_repo"))
    if (const auto *text = std::get_if<std::string>(&repo->value))
      hfUrl = "https://huggingface.co/" + *text;
  std::optional<long long> batch = module.getDimValue("B");
  std::optional<long long> length = module.getDimValue("S");
  std::optional<long long> context = module.getDimValue("CTX");
  const Option *sharded = module.lookupOption("weight_sharded");
  bool fsdp = sharded && sharded->isBool() && std::get<bool>(sharded->value);

  YAML::Emitter out;
  out.SetNullFormat(YAML::LowerNull);
  out << YAML::BeginMap;
  out << YAML::Key << "version" << YAML::Value << 1;
  std::string description = family +
                            (training ? " training step"
                             : decode ? " decode step"
                                      : " prefill step") +
                            " on " + std::to_string(mesh.getNumRanks()) +
                            " GPUs (" + mesh.describe() + ")";
  if (system)
    description += " of " + system->name;
  description += ", compiled by stagec from " + inputs.input;
  out << YAML::Key << "description" << YAML::Value << description;
  out << YAML::Key << "hf_url";
  if (hfUrl.empty())
    out << YAML::Value << YAML::Null;
  else
    out << YAML::Value << hfUrl;
  for (const char *unknown : {"trace_url", "contributor", "contact"})
    out << YAML::Key << unknown << YAML::Value << YAML::Null;
  out << YAML::Key << "generator" << YAML::Value << "stagec";
  out << YAML::Key << "generator_version" << YAML::Value << inputs.toolVersion;

  out << YAML::Key << "workload" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "model" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "phase" << YAML::Value
      << (training ? "training" : "inference");
  out << YAML::Key << "moe" << YAML::Value << hasExperts(module);
  out << YAML::Key << "granularity" << YAML::Value
      << (training ? "model_fwd_bwd_pass" : "model_fwd");
  out << YAML::Key << "model_family" << YAML::Value << family;
  // A low-precision recipe names the run (fp8); else the element type.
  std::optional<Precision> recipe = module.getPrecisionRecipe();
  out << YAML::Key << "precision" << YAML::Value
      << (recipe && isLowPrecision(*recipe)
              ? getPrecisionName(*recipe)
              : getElementTypeName(module.getDefaultElementType()))
             .str();
  out << YAML::Key << "epochs" << YAML::Value << YAML::Null;
  out << YAML::Key << "iteration" << YAML::Value << 1; // One step per set.
  out << YAML::Key << "model_arch" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "num_params" << YAML::Value
      << orNull(getCount(module, countParameters(module)));
  out << YAML::Key << "num_params_embedding" << YAML::Value
      << orNull(getCount(module, countEmbeddingParameters(module)));
  out << YAML::Key << "num_layers" << YAML::Value
      << (long long)programs.numLayers;
  out << YAML::Key << "num_heads" << YAML::Value
      << orNull(module.getDimValue("NH"));
  out << YAML::Key << "head_dim" << YAML::Value << orNull(module.getDimValue("DH"));
  out << YAML::EndMap << YAML::EndMap; // model_arch, model

  out << YAML::Key << "data" << YAML::Value << YAML::BeginMap;
  std::optional<long long> sequences;
  if (batch)
    sequences = *batch * (long long)programs.numMicrobatches;
  out << YAML::Key << "batch_size" << YAML::Value << orNull(sequences);
  // A decode step attends over its cache; its S is the one new token.
  std::optional<long long> sequenceLength = decode ? context : length;
  out << YAML::Key << "seq_len" << YAML::Value << orNull(sequenceLength);
  if (!training) {
    out << YAML::Key << "input_len" << YAML::Value << orNull(sequenceLength);
    out << YAML::Key << "output_len" << YAML::Value << 1;
  }
  out << YAML::Key << "dataset" << YAML::Value << YAML::Null;
  out << YAML::EndMap;

  out << YAML::Key << "hardware" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "network_topo" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "topology" << YAML::Value;
  if (system)
    out << (getTopologyName(system->scaleUp.topology) + " scale-up, " +
            getTopologyName(system->scaleOut.topology) + " scale-out")
               .str();
  else
    out << YAML::Null;
  // Gbit/s per GPU, scale-out first, as the template lists them.
  out << YAML::Key << "bandwidth_gbps" << YAML::Value;
  if (system)
    out << YAML::Flow << YAML::BeginSeq << system->scaleOut.bandwidth * 8 / 1e9
        << system->scaleUp.bandwidth * 8 / 1e9 << YAML::EndSeq;
  else
    out << YAML::Null;
  out << YAML::EndMap;
  out << YAML::Key << "xpu_spec" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "type" << YAML::Value;
  if (system)
    out << "GPU";
  else
    out << YAML::Null;
  out << YAML::Key << "model" << YAML::Value;
  if (system)
    out << getAcceleratorModel(system->device.name);
  else
    out << YAML::Null;
  out << YAML::Key << "total_count" << YAML::Value
      << (long long)mesh.getNumRanks();
  out << YAML::Key << "count_per_node" << YAML::Value;
  if (system)
    out << (long long)system->gpusPerNode;
  else
    out << YAML::Null;
  out << YAML::EndMap;
  out << YAML::Key << "driver_version" << YAML::Value << YAML::Null;
  out << YAML::EndMap << YAML::EndMap; // hardware, workload

  out << YAML::Key << "Model-executor" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "framework" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "name" << YAML::Value << "stagec";
  out << YAML::Key << "version" << YAML::Value << inputs.toolVersion;
  out << YAML::Key << "compiler_tool_selection" << YAML::Value << YAML::Null;
  out << YAML::EndMap;
  out << YAML::Key << "model_plan_parallelization" << YAML::Value
      << YAML::BeginMap;
  // FSDP shards the weights over dp (dp_shard); else dp replicates them.
  out << YAML::Key << "dp_replicate" << YAML::Value
      << (fsdp ? 1 : degree("dp"));
  out << YAML::Key << "dp_shard" << YAML::Value << (fsdp ? degree("dp") : 1);
  for (const char *axis : {"tp", "pp", "cp", "ep"})
    out << YAML::Key << axis << YAML::Value << degree(axis);
  // The template's pp_mb is the micro-batch size (sequences per replica);
  // how many micro-batches a step runs is stagec's own field.
  out << YAML::Key << "pp_mb" << YAML::Value << orNull(module.getDimValue("MB"));
  out << YAML::Key << "microbatches" << YAML::Value
      << (long long)programs.getGivenMicrobatches();
  out << YAML::EndMap;
  out << YAML::Key << "communication_library" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "name" << YAML::Value << YAML::Null;
  out << YAML::Key << "version" << YAML::Value << YAML::Null;
  out << YAML::EndMap;
  out << YAML::Key << "protocol_selection" << YAML::Value << YAML::Null;
  out << YAML::EndMap; // Model-executor

  out << YAML::Key << "metric_source" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "traces" << YAML::Value << YAML::Flow << YAML::BeginSeq
      << getTraceType(inputs.traceFormat).str() << YAML::EndSeq;
  out << YAML::Key << "metrics_specific_trace" << YAML::Value << YAML::Null;
  out << YAML::EndMap;
  out << YAML::EndMap;
  os << out.c_str() << "\n";
}
