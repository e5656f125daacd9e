//===- ModelSpec.h - What a config says, before it is STG text --*- C++ -*-===//
//
// The importer works in two halves: ModelReaders.cpp reads each model type's
// keys into a ModelSpec (sizes, and per layer which attention and which MLP),
// and StgWriter.cpp writes any ModelSpec as STG. Model types that differ only
// in their keys share the writer, so a feature (q/k-norm, sinks, a window)
// is written one way whichever config asks for it.
//
//===----------------------------------------------------------------------===//

#ifndef STG_LIB_IMPORT_MODELSPEC_H
#define STG_LIB_IMPORT_MODELSPEC_H

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace stg {

class ConfigReader;

enum class MaskKind { Causal, Sliding, Chunked };
enum class MlpKind { SwiGLU, GeGLU, ClampedSwiGLU };

/// What varies between the layers of one model.
struct LayerSpec {
  MaskKind mask = MaskKind::Causal;
  bool rope = true;
  bool moe = false;

  bool operator==(const LayerSpec &other) const {
    return mask == other.mask && rope == other.rope && moe == other.moe;
  }
};

struct ModelSpec {
  std::string modelType;
  bool mamba = false; ///< A Mamba stack; the fields below but sizes unused.

  // Sizes (the family templates' dim names).
  int64_t hidden = 0;        ///< D
  int64_t heads = 0;         ///< NH
  int64_t kvHeads = 0;       ///< KVH
  int64_t headDim = 0;       ///< DH
  int64_t ffn = 0;           ///< F: the dense MLP's inner size
  int64_t vocab = 0;         ///< V
  int64_t layers = 0;        ///< layers in all, leading dense ones included
  int64_t maxPositions = 0;  ///< the longest context the model takes
  int64_t window = 0;        ///< WIN: the sliding window, 0 for none
  int64_t chunk = 0;         ///< CHUNK: chunked attention's chunk
  bool tiedEmbeddings = false;

  // Attention.
  bool mla = false;
  int64_t queryLatent = 0;   ///< QL; 0: queries projected directly
  int64_t kvLatent = 0;      ///< KVL
  int64_t ropeHeadDim = 0;   ///< DHR
  int64_t nopeHeadDim = 0;   ///< DHN
  int64_t valueHeadDim = 0;  ///< DHV
  bool qkvBias = false;
  bool outputBias = false;
  bool qkNorm = false;       ///< RMSNorm with a scale on each q/k head
  bool qkL2Norm = false;     ///< L2 norm without a scale (Llama 4)
  bool sinks = false;
  double softcap = 0;        ///< attention logits' soft cap, 0 for none
  double logitSoftcap = 0;   ///< the LM head's, 0 for none
  bool sandwichNorms = false; ///< norms after the attention and MLP too

  // MLP and experts.
  MlpKind mlp = MlpKind::SwiGLU;
  bool mlpBias = false;
  double clampLimit = 0;     ///< ClampedSwiGLU's limit
  int64_t experts = 0;       ///< E; 0: a dense model
  int64_t topK = 0;          ///< K
  int64_t expertFfn = 0;     ///< FE
  int64_t sharedExperts = 0; ///< NSE
  int64_t sharedFfn = 0;     ///< FS: one shared expert's inner size
  bool sharedExpertGate = false; ///< a sigmoid gate on the shared output
  bool expertBias = false;   ///< biases in the experts and the router
  bool routerBias = false;   ///< a per-expert score bias (DeepSeek-V3)
  int64_t leadingDense = 0;  ///< first layers with a dense MLP
  int64_t mtpLayers = 0;     ///< multi-token prediction modules available

  // The published checkpoint (quantization_config): "fp8" for FP8 weights
  // and activations (DeepSeek's block-scaled checkpoint), "mxfp4" for MXFP4
  // weights of the experts alone (gpt-oss); empty for 16-bit weights.
  std::string checkpointFormat;

  // Mamba.
  int64_t innerSize = 0, stateSize = 0, dtRank = 0, convKernel = 0;
  bool convBias = true, projBias = false;

  /// One entry per layer after the leading dense ones (the repeat's), or
  /// a single entry when all are alike.
  std::vector<LayerSpec> pattern;
  /// The config key the pattern came from, for errors.
  std::string patternKey;
};

/// Reads the keys of a text model's config object into a spec; errors go
/// through the reader.
ModelSpec readModelSpec(ConfigReader &reader, const std::string &modelType);

/// The shortest period of `layers` (at most 64); 0 when there is none.
unsigned findLayerPeriod(const std::vector<LayerSpec> &layers);

/// The STG program of `spec`, its model named `identifier`.
std::string writeModelSource(const ModelSpec &spec,
                             const std::string &identifier,
                             const std::string &name,
                             const std::string &hfRepo,
                             const std::string &configPath);

} // namespace stg

#endif // STG_LIB_IMPORT_MODELSPEC_H
