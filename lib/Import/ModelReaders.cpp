//===- ModelReaders.cpp - Each model type's keys into a ModelSpec ---------===//
//
// One reader per family of model types. Each reads the keys that change the
// computation with the range they may take and the default the Hugging Face
// configuration class gives an absent one, refuses values whose effect the
// writer cannot express, and marks the keys that change nothing priced
// (token ids, initializers, RoPE bases and scaling, epsilons, loss weights;
// docs/models.md lists them). Whatever is left is refused by the reader's
// finish().
//
//===----------------------------------------------------------------------===//

#include "ConfigReader.h"
#include "ModelSpec.h"

#include "llvm/ADT/StringSwitch.h"

using namespace stg;

// Bounds on the sizes a config may give: far above any published model,
// low enough that the products the compiler forms stay exact.
static constexpr int64_t MaxHidden = 1 << 20;
static constexpr int64_t MaxInner = 1 << 22;
static constexpr int64_t MaxHeads = 1 << 14;
static constexpr int64_t MaxHeadDim = 1 << 14;
static constexpr int64_t MaxLayers = 1 << 14;
static constexpr int64_t MaxVocab = 1 << 24;
static constexpr int64_t MaxExperts = 1 << 14;
static constexpr int64_t MaxPositions = int64_t(1) << 32;

/// Keys of every model type that change nothing stagec prices.
static void ignoreCommonKeys(ConfigReader &reader) {
  reader.ignore({"_name_or_path", "model_type", "architectures", "auto_map",
                 "bos_token_id", "eos_token_id", "pad_token_id", "torch_dtype",
                 "transformers_version", "initializer_range", "rms_norm_eps",
                 "layer_norm_epsilon", "layer_norm_eps", "use_cache",
                 "rope_theta", "rope_scaling", "pretraining_tp",
                 "_attn_implementation_autoset",
                 "output_router_logits", "router_aux_loss_coef",
                 "aux_loss_alpha", "seq_aux", "original_max_position_embeddings",
                 "query_pre_attn_scalar", "cache_implementation",
                 "initial_context_length", "for_llm_compressor",
                 "routed_scaling_factor", "norm_topk_prob",
                 "n_group", "topk_group", "scoring_func", "ep_size",
                 "router_jitter_noise", "rope_local_base_freq",
                 "attn_temperature_tuning", "floor_scale", "attn_scale",
                 "max_window_layers"});
  const char *why = "dropout changes the training step's kernels, which "
                    "the importer does not write";
  reader.require("attention_dropout", {"0", "0.0"}, why);
  reader.require("embd_pdrop", {"0", "0.0"}, why);
  reader.require("resid_pdrop", {"0", "0.0"}, why);
}

/// The attention and MLP sizes every transformer type has.
static void readTransformerSizes(ConfigReader &reader, ModelSpec &spec,
                                 int64_t defaultHeadDim = 0,
                                 int64_t defaultVocab = 0) {
  spec.hidden = reader.size("hidden_size", 1, MaxHidden);
  spec.heads = reader.size("num_attention_heads", 1, MaxHeads);
  spec.kvHeads =
      reader.size("num_key_value_heads", 1, MaxHeads, spec.heads);
  spec.vocab = defaultVocab
                   ? reader.size("vocab_size", 1, MaxVocab, defaultVocab)
                   : reader.size("vocab_size", 1, MaxVocab);
  spec.layers = reader.size("num_hidden_layers", 1, MaxLayers);
  spec.maxPositions =
      reader.size("max_position_embeddings", 1, MaxPositions, 4096);
  if (reader.failed())
    return;
  if (spec.heads % spec.kvHeads != 0)
    reader.error("num_key_value_heads",
                 "num_key_value_heads = " + llvm::Twine(spec.kvHeads) +
                     " does not divide num_attention_heads = " +
                     llvm::Twine(spec.heads));
  if (reader.has("head_dim") || defaultHeadDim) {
    spec.headDim = reader.size("head_dim", 1, MaxHeadDim,
                               defaultHeadDim ? defaultHeadDim : 1);
  } else if (spec.hidden % spec.heads != 0) {
    reader.error("num_attention_heads",
                 "num_attention_heads = " + llvm::Twine(spec.heads) +
                     " does not divide hidden_size = " +
                     llvm::Twine(spec.hidden) + " and no head_dim is given");
  } else {
    reader.ignore({"head_dim"});
    spec.headDim = spec.hidden / spec.heads;
  }
}

/// A per-layer list (`layer_types`, `no_rope_layers`) has one entry a layer.
static void checkPerLayerList(ConfigReader &reader, llvm::StringRef key,
                              size_t entries, const ModelSpec &spec) {
  if (entries != 0 && int64_t(entries) != spec.layers)
    reader.error(key, key + " has " + llvm::Twine(entries) + " entries for " +
                          llvm::Twine(spec.layers) + " layers");
}

/// `hidden_act` (or `key`) must name the gate the writer's MLP uses.
static void requireActivation(ConfigReader &reader, llvm::StringRef key,
                              llvm::ArrayRef<llvm::StringRef> names) {
  reader.require(key, names,
                 "another activation changes the MLP, and the importer "
                 "writes this model type's own");
}

/// What Llama-like decoders (Llama, Qwen, GPT-OSS, Llama 4) share: the
/// transformer sizes, untied embeddings by default and a SiLU gate.
static void readSiluDecoder(ConfigReader &reader, ModelSpec &spec,
                            int64_t defaultHeadDim) {
  readTransformerSizes(reader, spec, defaultHeadDim);
  spec.tiedEmbeddings = reader.flag("tie_word_embeddings", false);
  requireActivation(reader, "hidden_act", {"silu"});
}

/// A sliding window that reaches past the longest context is no window.
static int64_t readWindow(ConfigReader &reader, const ModelSpec &spec,
                          std::optional<int64_t> fallback) {
  std::optional<int64_t> window =
      reader.has("sliding_window")
          ? reader.optionalSize("sliding_window", 1, MaxPositions)
          : fallback;
  reader.ignore({"sliding_window"});
  if (!window || *window >= spec.maxPositions)
    return 0;
  return *window;
}

/// Layers whose index is a multiple-of-`step` pattern, as HF's
/// `(i + 1) % step == 0` and a list of exceptions give them.
static std::vector<LayerSpec> makeMoEPattern(int64_t layers, int64_t step,
                                             const std::vector<int64_t> &dense) {
  std::vector<LayerSpec> pattern(layers);
  for (int64_t i = 0; i < layers; ++i)
    pattern[i].moe = step > 0 && (i + 1) % step == 0 &&
                     !llvm::is_contained(dense, i);
  return pattern;
}

/// Llama, Mistral, Qwen 2 and 3, Phi-3: the dense decoder.
static void readDenseDecoder(ConfigReader &reader, ModelSpec &spec) {
  const std::string &type = spec.modelType;
  bool qwen = type == "qwen2" || type == "qwen3" || type == "qwen2_moe" ||
              type == "qwen3_moe";
  readSiluDecoder(reader, spec,
                  type == "qwen3" || type == "qwen3_moe" ? 128 : 0);
  spec.ffn = reader.size("intermediate_size", 1, MaxInner);
  // Qwen 2's query, key and value projections always have biases.
  spec.qkvBias = type == "qwen2" || type == "qwen2_moe" ||
                 reader.flag("attention_bias", false);
  spec.outputBias = type != "qwen2" && type != "qwen2_moe" && spec.qkvBias;
  spec.mlpBias = reader.flag("mlp_bias", false);
  if (spec.mlpBias)
    reader.error("mlp_bias", "MLP biases are not imported yet; write the "
                             "model in STG (docs/models.md)");
  spec.qkNorm = type == "qwen3" || type == "qwen3_moe";
  if (qwen) {
    if (reader.flag("use_sliding_window", false))
      reader.error("use_sliding_window",
                   "Qwen's sliding window on the layers past "
                   "max_window_layers is not imported; set it to false or "
                   "write the model in STG");
    reader.ignore({"sliding_window"});
  } else {
    spec.window =
        readWindow(reader, spec, type == "mistral" ? std::optional<int64_t>(4096)
                                                   : std::nullopt);
  }
  if (type == "phi3")
    reader.ignore({"partial_rotary_factor"}); // RoPE's share of a head.
  spec.pattern.push_back({spec.window ? MaskKind::Sliding : MaskKind::Causal});
}

/// Mixtral, Qwen 2/3 MoE: the dense decoder with experts.
static void readMoEDecoder(ConfigReader &reader, ModelSpec &spec) {
  readDenseDecoder(reader, spec);
  const std::string &type = spec.modelType;
  bool mixtral = type == "mixtral";
  spec.experts = reader.size(mixtral ? "num_local_experts" : "num_experts", 1,
                             MaxExperts);
  spec.topK = reader.size("num_experts_per_tok", 1, MaxExperts);
  if (!reader.failed() && spec.topK > spec.experts)
    reader.error("num_experts_per_tok", "more experts per token than the " +
                                            llvm::Twine(spec.experts) +
                                            " experts");
  spec.expertFfn = mixtral ? spec.ffn
                           : reader.size("moe_intermediate_size", 1, MaxInner);
  if (type == "qwen2_moe") {
    spec.sharedExperts = 1;
    spec.sharedFfn =
        reader.size("shared_expert_intermediate_size", 1, MaxInner);
    spec.sharedExpertGate = true;
  }
  MaskKind mask = spec.pattern.front().mask;
  if (mixtral) {
    spec.pattern = {{mask, true, true}};
    return;
  }
  int64_t step = reader.size("decoder_sparse_step", 1, MaxLayers, 1);
  std::vector<int64_t> dense =
      reader.sizes("mlp_only_layers", 0, spec.layers - 1);
  spec.pattern = makeMoEPattern(spec.layers, step, dense);
  spec.patternKey = dense.empty() ? "decoder_sparse_step" : "mlp_only_layers";
}

/// Which layers have a sliding window: `layer_types` where the config has
/// it, else `isLocal(i)` (the model type's default); none without a window.
static std::vector<bool>
readLocalLayers(ConfigReader &reader, const ModelSpec &spec,
                llvm::function_ref<bool(int64_t)> isLocal) {
  std::vector<std::string> types =
      reader.words("layer_types", {"sliding_attention", "full_attention"});
  checkPerLayerList(reader, "layer_types", types.size(), spec);
  std::vector<bool> local(spec.layers);
  for (int64_t i = 0; i < spec.layers; ++i)
    local[i] = spec.window &&
               (types.empty() ? isLocal(i)
                              : types[i % types.size()] == "sliding_attention");
  return local;
}

/// Gemma 2 and 3: GeGLU, norms around both halves, local and global layers.
static void readGemma(ConfigReader &reader, ModelSpec &spec) {
  bool gemma3 = spec.modelType == "gemma3_text";
  // Gemma3TextConfig's vocabulary, which published multimodal configs
  // leave to the default.
  readTransformerSizes(reader, spec, 256, gemma3 ? 262208 : 0);
  spec.ffn = reader.size("intermediate_size", 1, MaxInner);
  spec.tiedEmbeddings = reader.flag("tie_word_embeddings", true);
  spec.mlp = MlpKind::GeGLU;
  requireActivation(reader, "hidden_activation",
                    {"gelu_pytorch_tanh", "gelu"});
  requireActivation(reader, "hidden_act", {"gelu_pytorch_tanh", "gelu"});
  spec.qkvBias = spec.outputBias = reader.flag("attention_bias", false);
  spec.sandwichNorms = true;
  spec.qkNorm = gemma3;
  spec.softcap = reader.number("attn_logit_softcapping", 0, 1e6,
                               gemma3 ? 0 : 50, /*nullValue=*/0);
  spec.logitSoftcap = reader.number("final_logit_softcapping", 0, 1e6,
                                    gemma3 ? 0 : 30, /*nullValue=*/0);
  spec.window = readWindow(reader, spec, 4096);
  if (reader.has("sliding_window_size") &&
      reader.optionalSize("sliding_window_size", 1, MaxPositions) !=
          std::optional<int64_t>(spec.window ? spec.window : -1))
    reader.error("sliding_window_size",
                 "sliding_window_size differs from sliding_window");
  reader.ignore({"sliding_window_size"});
  // Gemma 2 alternates local and global layers from a local one; Gemma 3
  // has `sliding_window_pattern` - 1 local layers before each global one.
  int64_t period =
      gemma3 ? reader.size("sliding_window_pattern", 1, 64, 6) : 2;
  std::vector<bool> local = readLocalLayers(reader, spec, [&](int64_t i) {
    return gemma3 ? (i + 1) % period != 0 : i % 2 == 0;
  });
  std::vector<LayerSpec> layers(spec.layers);
  for (int64_t i = 0; i < spec.layers; ++i)
    layers[i].mask = local[i] ? MaskKind::Sliding : MaskKind::Causal;
  spec.pattern = std::move(layers);
  spec.patternKey = reader.has("layer_types") ? "layer_types"
                                              : "sliding_window_pattern";
}

/// DeepSeek V2 and V3 (and Kimi K2): MLA, leading dense layers, shared and
/// routed experts.
static void readDeepSeek(ConfigReader &reader, ModelSpec &spec) {
  spec.mla = true;
  spec.hidden = reader.size("hidden_size", 1, MaxHidden);
  spec.heads = reader.size("num_attention_heads", 1, MaxHeads);
  reader.ignore({"num_key_value_heads"}); // MLA: every head has its own.
  spec.vocab = reader.size("vocab_size", 1, MaxVocab);
  spec.layers = reader.size("num_hidden_layers", 1, MaxLayers);
  spec.maxPositions =
      reader.size("max_position_embeddings", 1, MaxPositions, 4096);
  spec.queryLatent = reader.optionalSize("q_lora_rank", 1, MaxHidden).value_or(0);
  spec.kvLatent = reader.size("kv_lora_rank", 1, MaxHidden);
  spec.nopeHeadDim = reader.size("qk_nope_head_dim", 1, MaxHeadDim);
  spec.ropeHeadDim = reader.size("qk_rope_head_dim", 1, MaxHeadDim);
  spec.valueHeadDim = reader.size("v_head_dim", 1, MaxHeadDim);
  spec.headDim = spec.nopeHeadDim + spec.ropeHeadDim;
  spec.kvHeads = spec.heads;
  spec.ffn = reader.size("intermediate_size", 1, MaxInner);
  spec.tiedEmbeddings = reader.flag("tie_word_embeddings", false);
  requireActivation(reader, "hidden_act", {"silu"});
  reader.require("attention_bias", {"false"},
                 "MLA's projections have no biases in the importer");
  spec.experts = reader.size("n_routed_experts", 1, MaxExperts);
  spec.topK = reader.size("num_experts_per_tok", 1, MaxExperts);
  spec.expertFfn = reader.size("moe_intermediate_size", 1, MaxInner);
  spec.sharedExperts = reader.optionalSize("n_shared_experts", 1, MaxExperts)
                           .value_or(0);
  spec.sharedFfn = spec.expertFfn;
  // At least one layer has experts: a model with none is a dense one.
  spec.leadingDense =
      reader.size("first_k_dense_replace", 0, spec.layers - 1, 0);
  int64_t frequency = reader.size("moe_layer_freq", 1, MaxLayers, 1);
  // DeepSeek-V3's router (and Kimi K2's) adds a learned per-expert bias to
  // its scores for the choice: aux-loss-free balancing, `noaux_tc`.
  spec.routerBias =
      reader.word("topk_method", {"greedy", "group_limited_greedy", "noaux_tc"},
                  spec.modelType == "deepseek_v2" ? "greedy" : "noaux_tc") ==
      "noaux_tc";
  spec.mtpLayers = reader.size("num_nextn_predict_layers", 0, 16, 0);
  std::vector<LayerSpec> layers(spec.layers - spec.leadingDense);
  for (size_t i = 0; i < layers.size(); ++i)
    layers[i].moe = (int64_t(i) + spec.leadingDense) % frequency == 0;
  spec.pattern = std::move(layers);
  spec.patternKey = "moe_layer_freq";
}

/// GPT-OSS: sinks, alternating banded and full layers, biased experts with
/// a clamped SwiGLU.
static void readGptOss(ConfigReader &reader, ModelSpec &spec) {
  readSiluDecoder(reader, spec, 64);
  spec.qkvBias = spec.outputBias = reader.flag("attention_bias", true);
  spec.sinks = true;
  spec.experts = reader.size("num_local_experts", 1, MaxExperts);
  spec.topK = reader.size("num_experts_per_tok", 1, MaxExperts, 4);
  if (reader.has("experts_per_token") &&
      reader.size("experts_per_token", 1, MaxExperts) != spec.topK)
    reader.error("experts_per_token",
                 "experts_per_token differs from num_experts_per_tok");
  reader.ignore({"experts_per_token"});
  spec.expertFfn = reader.size("intermediate_size", 1, MaxInner);
  spec.expertBias = true;
  spec.mlp = MlpKind::ClampedSwiGLU;
  spec.clampLimit = reader.number("swiglu_limit", 0.001, 1e6, 7.0);
  spec.window = readWindow(reader, spec, 128);
  std::vector<bool> local =
      readLocalLayers(reader, spec, [](int64_t i) { return i % 2 == 0; });
  std::vector<LayerSpec> layers(spec.layers);
  for (int64_t i = 0; i < spec.layers; ++i)
    layers[i] = {local[i] ? MaskKind::Sliding : MaskKind::Causal, true, true};
  spec.pattern = std::move(layers);
  spec.patternKey = "layer_types";
}

/// Llama 4: chunked attention with NoPE layers between, MoE with a shared
/// expert on every `interleave_moe_layer_step`-th layer.
static void readLlama4(ConfigReader &reader, ModelSpec &spec) {
  readSiluDecoder(reader, spec, 128);
  spec.qkvBias = spec.outputBias = reader.flag("attention_bias", false);
  spec.expertFfn = reader.size("intermediate_size", 1, MaxInner);
  spec.ffn = reader.size("intermediate_size_mlp", 1, MaxInner);
  spec.experts = reader.size("num_local_experts", 1, MaxExperts);
  spec.topK = reader.size("num_experts_per_tok", 1, MaxExperts, 1);
  spec.sharedExperts = 1;
  spec.sharedFfn = spec.expertFfn;
  spec.qkL2Norm = reader.flag("use_qk_norm", true);
  spec.chunk = reader.optionalSize("attention_chunk_size", 1, MaxPositions)
                   .value_or(0);
  int64_t step = reader.size("interleave_moe_layer_step", 1, MaxLayers, 1);
  std::vector<int64_t> moeLayers =
      reader.sizes("moe_layers", 0, spec.layers - 1);
  std::vector<int64_t> noRope = reader.sizes("no_rope_layers", 0, 1);
  int64_t interval = reader.size("no_rope_layer_interval", 1, 64, 4);
  checkPerLayerList(reader, "no_rope_layers", noRope.size(), spec);
  std::vector<LayerSpec> layers(spec.layers);
  for (int64_t i = 0; i < spec.layers; ++i) {
    // HF's no_rope_layers holds 1 where a layer uses RoPE.
    bool rope = noRope.empty() ? (i + 1) % interval != 0
                               : noRope[i % noRope.size()] != 0;
    bool moe = moeLayers.empty() ? (i + 1) % step == 0
                                 : llvm::is_contained(moeLayers, i);
    layers[i] = {rope && spec.chunk ? MaskKind::Chunked : MaskKind::Causal,
                 rope, moe};
  }
  spec.pattern = std::move(layers);
  spec.patternKey = moeLayers.empty() ? "no_rope_layers" : "moe_layers";
}

/// Mamba (1): the selective-scan stack.
static void readMamba(ConfigReader &reader, ModelSpec &spec) {
  spec.mamba = true;
  spec.hidden = reader.size("hidden_size", 1, MaxHidden);
  spec.innerSize =
      reader.size("intermediate_size", 1, MaxInner, 2 * spec.hidden);
  if (reader.has("expand") && !reader.failed() &&
      reader.size("expand", 1, 64) * spec.hidden != spec.innerSize)
    reader.error("expand", "expand * hidden_size differs from "
                           "intermediate_size");
  reader.ignore({"expand"});
  spec.stateSize = reader.size("state_size", 1, 1 << 12, 16);
  spec.convKernel = reader.size("conv_kernel", 1, 64, 4);
  spec.layers = reader.has("num_hidden_layers")
                    ? reader.size("num_hidden_layers", 1, MaxLayers)
                    : reader.size("n_layer", 1, MaxLayers);
  reader.ignore({"n_layer"});
  int64_t vocab = reader.size("vocab_size", 1, MaxVocab);
  int64_t multiple = reader.size("pad_vocab_size_multiple", 1, 1 << 16, 1);
  spec.vocab = (vocab + multiple - 1) / multiple * multiple;
  // "auto" is HF's default: ceil(hidden_size / 16).
  const JSONMember *rank = reader.getObject().find("time_step_rank");
  if (rank && rank->value.kind == JSONNode::Kind::String) {
    reader.require("time_step_rank", {"auto"}, "a rank is a number or auto");
    spec.dtRank = (spec.hidden + 15) / 16;
  } else {
    spec.dtRank =
        reader.size("time_step_rank", 1, MaxHidden, (spec.hidden + 15) / 16);
  }
  spec.tiedEmbeddings = reader.flag("tie_word_embeddings", true);
  spec.convBias = reader.flag("use_conv_bias", true);
  spec.projBias = reader.flag("use_bias", false);
  if (spec.projBias || !spec.convBias)
    reader.error(spec.projBias ? "use_bias" : "use_conv_bias",
                 "nn/mamba.stg has the convolution's bias and no projection "
                 "biases; write this model in STG");
  requireActivation(reader, "hidden_act", {"silu"});
  reader.require("rms_norm", {"true"}, "nn/norm.stg's RMSNorm is written");
  reader.ignore({"time_step_floor", "time_step_init_scheme", "time_step_max",
                 "time_step_min", "time_step_scale", "rescale_prenorm_residual",
                 "residual_in_fp32", "fused_add_norm", "max_position_embeddings"});
  spec.maxPositions = 1 << 20;
  spec.pattern.push_back({});
}

/// The published checkpoint's format, from quantization_config: FP8 with
/// dynamic activation scales (W8A8) or MXFP4 experts with the attention,
/// the router, the embedding and the head left whole (gpt-oss). Serving
/// runs it so unless told otherwise (docs/models.md); training ignores it.
/// Other methods (AWQ, GPTQ, bitsandbytes, ...) are not read: their
/// models serve as bf16 unless --weight-precision says otherwise.
static void readCheckpointFormat(ConfigReader &reader, ModelSpec &spec) {
  const JSONNode *config = reader.child("quantization_config");
  const JSONMember *method = config ? config->find("quant_method") : nullptr;
  if (!method || method->value.kind != JSONNode::Kind::String)
    return;
  if (method->value.text == "fp8") {
    const JSONMember *scheme = config->find("activation_scheme");
    if (!scheme || scheme->value.text == "dynamic")
      spec.checkpointFormat = "fp8";
  } else if (method->value.text == "mxfp4" && spec.experts > 0) {
    spec.checkpointFormat = "mxfp4";
  }
}

ModelSpec stg::readModelSpec(ConfigReader &reader,
                             const std::string &modelType) {
  ModelSpec spec;
  spec.modelType = modelType;
  ignoreCommonKeys(reader);
  if (modelType == "llama" || modelType == "mistral" || modelType == "qwen2" ||
      modelType == "qwen3" || modelType == "phi3")
    readDenseDecoder(reader, spec);
  else if (modelType == "mixtral" || modelType == "qwen2_moe" ||
           modelType == "qwen3_moe")
    readMoEDecoder(reader, spec);
  else if (modelType == "gemma2" || modelType == "gemma3_text")
    readGemma(reader, spec);
  else if (modelType == "deepseek_v2" || modelType == "deepseek_v3" ||
           modelType == "kimi_k2")
    readDeepSeek(reader, spec);
  else if (modelType == "gpt_oss")
    readGptOss(reader, spec);
  else if (modelType == "llama4_text")
    readLlama4(reader, spec);
  else if (modelType == "mamba")
    readMamba(reader, spec);
  readCheckpointFormat(reader, spec);
  return spec;
}

unsigned stg::findLayerPeriod(const std::vector<LayerSpec> &layers) {
  for (unsigned period = 1; period <= 64; ++period) {
    bool repeats = true;
    for (size_t i = period; i < layers.size() && repeats; ++i)
      repeats = layers[i] == layers[i - period];
    if (repeats)
      return period;
  }
  return 0;
}
