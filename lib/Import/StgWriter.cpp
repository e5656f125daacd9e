//===- StgWriter.cpp - A ModelSpec as an STG program ----------------------===//
//
// Writes the program a user would write by hand: the shipped `nn/` blocks
// where they fit (norms, vocabulary, RoPE, q/k-norm, MLA, Mamba, experts),
// blocks of its own for the attention and MLP variants the config asks
// for, one decoder block per kind of layer, a layer pattern where layers
// differ, and the config's numbers as `set` lines at the end, each with the
// key it came from. Names follow the family templates (D, NH, KVH, DH, F,
// V, L, E, K, FE, ...), so `--set S=8192 --set MB=2` works on an imported
// model as on a template.
//
//===----------------------------------------------------------------------===//

#include "ModelSpec.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"


using namespace stg;

/// The residual stream's layout in every nn/ block.
static const char *const Residual = "[B/(dp*ep), S/(sp*cp), D]";

namespace {

/// The program being written, section by section.
class Writer {
public:
  explicit Writer(const ModelSpec &spec) : spec(spec) {}
  std::string write(const std::string &identifier, const std::string &name,
                    const std::string &hfRepo, const std::string &configPath);

private:
  void writeImports();
  void writeDims();
  void writeSets();
  std::string writeAttention(const LayerSpec &layer);
  std::string writeMlp();
  std::string writeExperts();
  std::string writeDecoder(const LayerSpec &layer, bool dense);
  void writeLayerPattern();
  void writeMultiTokenPrediction();
  void writeMamba(const std::string &identifier);

  /// A dim the config sets, with its key for the `set` line.
  void size(const char *dim, int64_t value, const char *key,
            const char *meaning) {
    sizes.push_back({dim, value, key, meaning});
  }

  struct Size {
    const char *dim;
    int64_t value;
    const char *key;
    const char *meaning;
  };
  const ModelSpec &spec;
  std::string text;
  llvm::raw_string_ostream os{text};
  std::string blocks;
  llvm::raw_string_ostream blocksOs{blocks};
  std::vector<Size> sizes;
  llvm::StringSet<> decoders; ///< The decoder blocks written so far.
};

} // namespace

/// `  text;` folded after a comma so that no line passes 80 columns, the
/// rest indented by six.
static void writeStatement(llvm::raw_ostream &out, llvm::StringRef text) {
  std::string line = "  " + text.str() + ";";
  while (line.size() > 80) {
    size_t cut = llvm::StringRef(line).take_front(79).rfind(", ");
    if (cut == llvm::StringRef::npos || cut < 8)
      break;
    out << line.substr(0, cut + 1) << "\n";
    line = "      " + line.substr(cut + 2);
  }
  out << line << "\n";
}

static const char *getMaskName(MaskKind mask) {
  switch (mask) {
  case MaskKind::Causal:
    return "full";
  case MaskKind::Sliding:
    return "sliding";
  case MaskKind::Chunked:
    return "chunked";
  }
  return "full";
}

/// `7`, `50`, `0.5`: a config's number as STG reads it.
static std::string formatNumber(double value) {
  std::string text;
  llvm::raw_string_ostream(text) << llvm::format("%g", value);
  return text;
}

void Writer::writeImports() {
  os << "import \"nn/norm.stg\";\n";
  os << "import \"nn/vocab.stg\";\n";
  if (spec.mamba) {
    os << "import \"nn/mamba.stg\";\n";
    return;
  }
  os << (spec.mla ? "import \"nn/mla.stg\";\n"
                   : "import \"nn/attention.stg\";  // self_attention\n");
  if (spec.experts)
    os << "import \"nn/moe.stg\";\n";
  if (spec.sharedExperts)
    os << "import \"nn/shared_experts.stg\";\n";
  bool denseLayers =
      spec.leadingDense > 0 || !spec.experts ||
      llvm::any_of(spec.pattern, [](const LayerSpec &l) { return !l.moe; });
  if (denseLayers)
    os << "import \"nn/ffn.stg\";       // "
       << (spec.mlp == MlpKind::GeGLU ? "geglu_mlp" : "swiglu_mlp") << "\n";
}

void Writer::writeDims() {
  os << "dim MB = 1;          // micro-batch per replica (sequences)\n"
     << "dim B = MB * dp * ep; // the micro-batch of all replicas\n"
     << llvm::left_justify(
            ("dim S = " + llvm::Twine(std::min<int64_t>(4096, spec.maxPositions)) +
             ";")
                .str(),
            20)
     << "// sequence length (a config does not say; --set S=...)\n";
  for (const Size &size : sizes)
    os << llvm::left_justify(("dim " + llvm::Twine(size.dim) + ";").str(), 20)
       << "// " << size.meaning << "\n";
  if (spec.mtpLayers)
    os << "dim MTP = 0;        // multi-token prediction depth (the config's "
          "is\n                    // num_nextn_predict_layers; published "
          "counts leave it out)\n";
  if (spec.experts) {
    os << "dim CAP = 100;      // capacity factor in percent (100 = 1.0)\n"
       << "dim C = ceil(CAP * B * S * K / (100 * E * dp * ep * sp * cp)) *\n"
          "        dp * ep * sp * cp;  // slots per expert (nn/moe.stg)\n";
  }
}

void Writer::writeSets() {
  os << "\n// The config's numbers (its keys beside them).\n";
  for (const Size &size : sizes)
    os << llvm::left_justify(("set " + llvm::Twine(size.dim) + " = " +
                              llvm::Twine(size.value) + ";")
                                 .str(),
                             20)
       << "// " << size.key << "\n";
}

/// `self_attention[mask=sliding, window=WIN, qk_norm=true]`: the call of
/// nn/attention.stg's block with the attributes that differ from its
/// defaults (or MLA's block).
std::string Writer::writeAttention(const LayerSpec &layer) {
  if (spec.mla)
    return spec.queryLatent ? "mla" : "mla_direct_q";
  std::vector<std::string> attrs;
  if (layer.mask == MaskKind::Sliding)
    attrs.insert(attrs.end(), {"mask=sliding", "window=WIN"});
  else if (layer.mask == MaskKind::Chunked)
    attrs.insert(attrs.end(), {"mask=chunked", "window=CHUNK"});
  if (!layer.rope)
    attrs.push_back("rope=false");
  if (spec.qkNorm)
    attrs.push_back("qk_norm=true");
  // Llama 4 normalises q and k on its RoPE layers only.
  if (spec.qkL2Norm && layer.rope)
    attrs.push_back("qk_l2_norm=true");
  if (spec.qkvBias)
    attrs.push_back("qkv_bias=true");
  if (spec.outputBias)
    attrs.push_back("out_bias=true");
  if (spec.sinks)
    attrs.push_back("sinks=true");
  if (spec.softcap > 0)
    attrs.push_back("softcap=" + formatNumber(spec.softcap));
  return attrs.empty() ? "self_attention"
                       : "self_attention[" + llvm::join(attrs, ", ") + "]";
}

/// The dense MLP: nn/ffn.stg's.
std::string Writer::writeMlp() {
  return spec.mlp == MlpKind::GeGLU ? "geglu_mlp" : "swiglu_mlp";
}

/// nn/moe.stg's experts, with the variants the config asks for.
std::string Writer::writeExperts() {
  std::vector<std::string> attrs;
  if (spec.routerBias || spec.expertBias)
    attrs.push_back("router_bias=true");
  if (spec.expertBias)
    attrs.push_back("expert_bias=true");
  if (spec.mlp == MlpKind::ClampedSwiGLU)
    attrs.insert(attrs.end(),
                 {"clamped=true", "limit=" + formatNumber(spec.clampLimit)});
  return attrs.empty() ? "moe" : "moe[" + llvm::join(attrs, ", ") + "]";
}

std::string Writer::writeDecoder(const LayerSpec &layer, bool dense) {
  bool moe = layer.moe && !dense;
  std::string attention = writeAttention(layer);
  std::string name = "decoder";
  if (dense && spec.leadingDense)
    name = "dense_decoder";
  else if (spec.pattern.size() > 1) {
    if (llvm::any_of(spec.pattern, [&](const LayerSpec &l) {
          return l.mask != layer.mask || l.rope != layer.rope;
        }))
      name += std::string("_") + getMaskName(layer.mask) +
              (layer.rope ? "" : "_nope");
    if (llvm::any_of(spec.pattern,
                     [&](const LayerSpec &l) { return l.moe != layer.moe; }))
      name += moe ? "_moe" : "_dense";
  }
  if (!decoders.insert(name).second)
    return name;
  std::string mlp = moe ? writeExperts() : writeMlp();
  auto &out = blocksOs;
  out << "block " << name << "(x: " << Residual << ") -> " << Residual
      << " {\n";
  auto wrap = [&](const std::string &call) {
    return spec.sandwichNorms ? "rms_norm(" + call + ")" : call;
  };
  writeStatement(out, "x1 = add(x, " + wrap(attention + "(rms_norm(x))") + ")");
  if (moe && spec.sharedExperts) {
    out << "  h = rms_norm(x1);\n";
    if (spec.sharedExpertGate) {
      out << "  param w_shared_gate: [D/fsdp, 1];   // a sigmoid gate on the "
             "shared expert\n"
          << "  gate: [B/(dp*ep), S/(sp*cp), 1] = "
             "sigmoid(einsum[bsd,de->bse](h, w_shared_gate));\n";
      writeStatement(out, "return add(x1, add(" + mlp +
                              "(h), mul(shared_experts(h), gate)))");
    } else {
      writeStatement(out,
                     "return add(x1, add(" + mlp + "(h), shared_experts(h)))");
    }
    out << "}\n\n";
    return name;
  }
  writeStatement(out, "return add(x1, " + wrap(mlp + "(rms_norm(x1))") + ")");
  out << "}\n\n";
  return name;
}

/// `layer % 6 == 5 || layer % 6 == 2`.
static std::string describeResidues(const std::vector<unsigned> &residues,
                                    unsigned period) {
  std::string text;
  for (unsigned residue : residues)
    text += (text.empty() ? "" : " || ") + ("layer % " + llvm::Twine(period) +
                                            " == " + llvm::Twine(residue))
                                               .str();
  return text;
}

void Writer::writeLayerPattern() {
  unsigned period = findLayerPeriod(spec.pattern);
  std::vector<LayerSpec> kinds;
  std::vector<std::vector<unsigned>> residues;
  for (unsigned i = 0; i < period; ++i) {
    size_t kind = llvm::find(kinds, spec.pattern[i]) - kinds.begin();
    if (kind == kinds.size()) {
      kinds.push_back(spec.pattern[i]);
      residues.emplace_back();
    }
    residues[kind].push_back(i);
  }
  std::vector<std::string> decoders;
  for (const LayerSpec &kind : kinds)
    decoders.push_back(writeDecoder(kind, false));
  if (kinds.size() == 1) {
    os << "  repeat L { x = " << decoders[0] << "(x); }\n";
    return;
  }
  // The kind with the most layers of the period goes under `else`.
  size_t common = 0;
  for (size_t i = 1; i < kinds.size(); ++i)
    if (residues[i].size() > residues[common].size())
      common = i;
  os << "  repeat L {\n";
  bool first = true;
  for (size_t i = 0; i < kinds.size(); ++i) {
    if (i == common)
      continue;
    os << (first ? "    if " : "    else if ")
       << describeResidues(residues[i], period) << " { x = " << decoders[i]
       << "(x); }\n";
    first = false;
  }
  os << "    else { x = " << decoders[common] << "(x); }\n  }\n";
}

/// DeepSeek-V3's multi-token prediction (`num_nextn_predict_layers`): the
/// module of templates/deepseek.stg after the last layer, MTP depths of it,
/// 0 unless set, since published counts leave it out.
void Writer::writeMultiTokenPrediction() {
  std::string decoder = writeDecoder(spec.pattern.back(), false);
  blocksOs << "// A multi-token prediction module (DeepSeek-V3 report, section "
              "2.2):\n// the hidden state and the next token's embedding, "
              "normalised,\n// joined, projected to D, then one layer.\n"
           << "block mtp_module(h: " << Residual << ", e: " << Residual
           << ")\n    -> " << Residual << " {\n"
           << "  param w_proj: [2 * D, D];\n"
           << "  joined = concat[2](rms_norm(h), rms_norm(e));\n"
           << "  p: " << Residual
           << " = einsum[bse,ed->bsd](joined, w_proj);\n"
           << "  return " << decoder << "(p);\n}\n\n";
  os << "  h = x;\n"
     << "  repeat MTP as mtp {   // num_nextn_predict_layers = "
     << spec.mtpLayers << ": --set MTP=" << spec.mtpLayers << "\n"
     << "    h = mtp_module(h, embed(tokens, embedding));\n"
     << "    mtp_loss = lm_loss(lm_head(rms_norm(h), "
     << (spec.tiedEmbeddings ? "embedding" : "head") << "), labels);\n  }\n";
}

void Writer::writeMamba(const std::string &identifier) {
  size("D", spec.hidden, "hidden_size", "hidden size (d_model)");
  size("DI", spec.innerSize, "intermediate_size", "inner size");
  size("N", spec.stateSize, "state_size", "SSM state size");
  size("R", spec.dtRank, "time_step_rank", "dt rank");
  size("DC", spec.convKernel, "conv_kernel", "convolution width");
  size("V", spec.vocab, "vocab_size", "vocabulary (padded)");
  size("L", spec.layers, "num_hidden_layers", "Mamba blocks");
  writeDims();
  os << "\nmodel " << identifier << " {\n"
     << "  tokens: i32[B/(dp*ep), S/cp] = input();\n"
     << "  labels: i32[B/(dp*ep), S/cp] = input();\n"
     << "  param embedding: [V/tp, D/fsdp];\n";
  if (!spec.tiedEmbeddings)
    os << "  param head: [V/tp, D/fsdp];\n";
  os << "  x: " << Residual << " = embed(tokens, embedding);\n"
     << "  repeat L { x = add(x, mamba_mixer(rms_norm(x))); }\n"
     << "  loss = lm_loss(lm_head(rms_norm(x), "
     << (spec.tiedEmbeddings ? "embedding" : "head") << "), labels);\n}\n";
}

std::string Writer::write(const std::string &identifier,
                          const std::string &name, const std::string &hfRepo,
                          const std::string &configPath) {
  // The path goes into a comment: no line break may end it early.
  std::string shownPath = configPath;
  for (char &c : shownPath)
    if (c == '\n' || c == '\r')
      c = '?';
  os << "// " << name << " (" << spec.modelType
     << "), imported by stagec from " << shownPath << ".\n"
     << "// An ordinary STG program (docs/models.md): edit it, or change its\n"
     << "// numbers with --set NAME=VALUE.\n";
  writeImports();
  os << "\naxis dp, tp, cp, ep, pp;\n"
     << "option sequence_parallel = true;\n"
     << "option weight_sharded    = false;\n";
  if (!hfRepo.empty())
    os << "option hf_repo = \"" << hfRepo << "\";\n";
  // The published checkpoint, which serving runs as it is (docs/models.md).
  if (!spec.checkpointFormat.empty())
    os << "option checkpoint_format = \"" << spec.checkpointFormat << "\";\n";
  // MLA decodes absorbed (nn/mla.stg); stagec sets it for a decode step.
  if (spec.mla)
    os << "option decode = false;\n";
  os << "axis sp   = tp if sequence_parallel;\n"
     << "axis fsdp = dp if weight_sharded;\n\n";
  if (spec.mamba) {
    writeMamba(identifier);
    writeSets();
    return text;
  }

  size("D", spec.hidden, "hidden_size", "hidden size");
  size("NH", spec.heads, "num_attention_heads", "attention heads");
  if (spec.mla) {
    if (spec.queryLatent)
      size("QL", spec.queryLatent, "q_lora_rank", "query latent rank");
    size("KVL", spec.kvLatent, "kv_lora_rank", "key/value latent rank");
    size("DHN", spec.nopeHeadDim, "qk_nope_head_dim",
         "per-head query/key size without position");
    size("DHR", spec.ropeHeadDim, "qk_rope_head_dim",
         "per-head query/key size with RoPE");
    size("DHV", spec.valueHeadDim, "v_head_dim", "per-head value size");
  } else {
    size("KVH", spec.kvHeads, "num_key_value_heads", "key/value heads");
    size("DH", spec.headDim, "head_dim", "head size");
  }
  bool denseLayers =
      spec.leadingDense > 0 || !spec.experts ||
      llvm::any_of(spec.pattern, [](const LayerSpec &l) { return !l.moe; });
  if (denseLayers)
    size("F", spec.ffn,
         spec.modelType == "llama4_text" ? "intermediate_size_mlp"
                                         : "intermediate_size",
         "dense MLP inner size");
  if (spec.experts) {
    size("E", spec.experts,
         spec.modelType == "mixtral" || spec.modelType == "gpt_oss" ||
                 spec.modelType == "llama4_text"
             ? "num_local_experts"
         : spec.mla ? "n_routed_experts"
                    : "num_experts",
         "routed experts");
    size("K", spec.topK, "num_experts_per_tok", "routed experts per token");
    size("FE", spec.expertFfn,
         spec.mla || spec.modelType == "qwen3_moe" ||
                 spec.modelType == "qwen2_moe"
             ? "moe_intermediate_size"
             : "intermediate_size",
         "an expert's inner size");
  }
  if (spec.sharedExperts) {
    size("NSE", spec.sharedExperts,
         spec.mla ? "n_shared_experts" : "(one shared expert)",
         "shared experts");
    size("FS", spec.sharedFfn,
         spec.modelType == "qwen2_moe" ? "shared_expert_intermediate_size"
         : spec.mla                    ? "moe_intermediate_size"
                                       : "intermediate_size",
         "a shared expert's inner size");
  }
  if (spec.window)
    size("WIN", spec.window, "sliding_window", "sliding window");
  if (spec.chunk)
    size("CHUNK", spec.chunk, "attention_chunk_size", "attention chunk");
  size("V", spec.vocab, "vocab_size", "vocabulary");
  if (spec.leadingDense)
    size("LD", spec.leadingDense, "first_k_dense_replace",
         "leading dense layers");
  size("L", spec.layers - spec.leadingDense,
       spec.leadingDense ? "num_hidden_layers - first_k_dense_replace"
                         : "num_hidden_layers",
       spec.leadingDense ? "layers after the dense ones" : "decoder layers");
  writeDims();

  // The model first into its own text: it decides which blocks exist.
  std::string modelText;
  {
    std::swap(text, modelText);
    os << "\nmodel " << identifier << " {\n"
       << "  tokens: i32[B/(dp*ep), S/cp] = input();\n"
       << "  labels: i32[B/(dp*ep), S/cp] = input();\n"
       << "  param embedding: [V/tp, D/fsdp];"
       << (spec.tiedEmbeddings ? "   // tied to the LM head" : "") << "\n";
    if (!spec.tiedEmbeddings)
      os << "  param head: [V/tp, D/fsdp];\n";
    os << "  x: " << Residual << " = embed(tokens, embedding);\n";
    if (spec.leadingDense)
      os << "  repeat LD as dense { x = "
         << writeDecoder(spec.pattern.front(), true) << "(x); }\n";
    writeLayerPattern();
    std::string logits = std::string("lm_head(rms_norm(x), ") +
                         (spec.tiedEmbeddings ? "embedding" : "head") + ")";
    if (spec.logitSoftcap > 0)
      // cap * tanh(logits / cap): a divide, a tanh and a multiply.
      logits = "elementwise[flops=6](" + logits + ")";
    os << "  loss = lm_loss(" << logits << ", labels);\n";
    if (spec.mtpLayers)
      writeMultiTokenPrediction();
    os << "}\n";
    std::swap(text, modelText);
  }
  os << "\n" << blocks << modelText.substr(1);
  writeSets();
  return text;
}

std::string stg::writeModelSource(const ModelSpec &spec,
                                  const std::string &identifier,
                                  const std::string &name,
                                  const std::string &hfRepo,
                                  const std::string &configPath) {
  return Writer(spec).write(identifier, name, hfRepo, configPath);
}
