//===- HFImport.cpp - Hugging Face config.json to STG text ----------------===//
//
// The entry point: reads the JSON, finds the text model (a multimodal
// config keeps it under `text_config`), names the model, has the model
// type's reader fill a ModelSpec with every key checked, and writes it.
//
//===----------------------------------------------------------------------===//

#include "stg/Import/HFImport.h"

#include "ConfigReader.h"
#include "ModelSpec.h"

#include "stg/Import/ConfigJSON.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"

using namespace stg;

/// Text model types the readers know, and the multimodal wrappers whose
/// `text_config` holds one (with the type it has when it names none).
static const char *const TextModelTypes[] = {
    "deepseek_v2", "deepseek_v3", "gemma2",  "gemma3_text", "gpt_oss",
    "kimi_k2",     "llama",       "llama4_text", "mamba",   "mistral",
    "mixtral",     "phi3",        "qwen2",   "qwen2_moe",   "qwen3",
    "qwen3_moe"};
static const std::pair<const char *, const char *> MultimodalTypes[] = {
    {"gemma3", "gemma3_text"}, {"llama4", "llama4_text"}};

bool stg::isModelConfigPath(llvm::StringRef path) {
  return path.endswith_insensitive(".json");
}

std::vector<llvm::StringRef> stg::getImportableModelTypes() {
  std::vector<llvm::StringRef> types(std::begin(TextModelTypes),
                                     std::end(TextModelTypes));
  for (const auto &[wrapper, text] : MultimodalTypes)
    types.push_back(wrapper);
  llvm::sort(types);
  return types;
}

/// `Meta-Llama-3.1-8B` -> `Meta_Llama_3_1_8B`: an STG identifier that is
/// also a safe file name, and no keyword (a folder named `import`).
static std::string makeIdentifier(llvm::StringRef name) {
  static const char *const Keywords[] = {
      "import", "dim",    "axis", "option", "set",    "block", "model",
      "param",  "state",  "repeat", "as",   "return", "if",    "else",
      "true",   "false",  "override"};
  std::string identifier;
  for (char c : name)
    identifier += llvm::isAlnum(c) || c == '_' ? c : '_';
  if (identifier.empty() || llvm::isDigit(identifier.front()) ||
      llvm::is_contained(Keywords, identifier))
    identifier = "m_" + identifier;
  return identifier;
}

/// A name as the Hub spells one (letters, digits, `-`, `_`, `.`), so that it
/// can stand in the program's comments and strings as it is.
static bool isHubName(llvm::StringRef name) {
  return !name.empty() && !name.startswith(".") &&
         llvm::all_of(name, [](char c) {
           return llvm::isAlnum(c) || c == '-' || c == '_' || c == '.';
         });
}

/// The model's name: `_name_or_path`'s last part, else the config's folder;
/// any other character than a Hub name's becomes `_`.
static std::string getModelName(const JSONNode &config, llvm::StringRef path,
                                std::string &hfRepo) {
  std::string name;
  if (const JSONMember *member = config.find("_name_or_path"))
    if (member->value.kind == JSONNode::Kind::String) {
      llvm::StringRef named = member->value.text;
      // `org/name` is a Hub repository; a local path is not.
      auto [org, repo] = named.split('/');
      if (isHubName(org) && isHubName(repo))
        hfRepo = named.str();
      name = llvm::sys::path::filename(named.rtrim("/")).str();
    }
  if (name.empty()) {
    llvm::SmallString<256> absolute(path);
    llvm::sys::fs::make_absolute(absolute);
    name = llvm::sys::path::filename(llvm::sys::path::parent_path(absolute))
               .str();
  }
  for (char &c : name)
    if (!llvm::isAlnum(c) && c != '-' && c != '_' && c != '.')
      c = '_';
  return name.empty() || name == "/" ? "model" : name;
}

static std::optional<ImportedModel>
importConfig(std::unique_ptr<JSONNode> config, llvm::StringRef path,
             DiagnosticEngine &diags) {
  if (!config)
    return std::nullopt;

  ImportedModel result;
  result.name = getModelName(*config, path, result.hfRepo);
  result.identifier = makeIdentifier(result.name);

  ConfigReader outer(*config, "Hugging Face", diags);
  std::string type = outer.text("model_type");
  if (outer.failed())
    return std::nullopt;
  if (type.empty()) {
    diags.error(config->loc, "the config names no 'model_type'; the importer "
                             "reads " +
                                 llvm::join(getImportableModelTypes(), ", "));
    return std::nullopt;
  }
  const JSONNode *textModel = config.get();
  std::optional<ConfigReader> wrapper;
  for (const auto &[wrapperType, textType] : MultimodalTypes) {
    if (type != wrapperType)
      continue;
    // The vision tower and the projector are not imported: stagec models
    // the language model (docs/models.md).
    wrapper.emplace(*config, type, diags);
    wrapper->ignore({"_name_or_path", "model_type", "architectures",
                     "vision_config", "boi_token_index", "eoi_token_index",
                     "image_token_index", "mm_tokens_per_image", "torch_dtype",
                     "transformers_version", "initializer_range",
                     "eos_token_id", "bos_token_id", "pad_token_id",
                     "tie_word_embeddings", "vision_feature_layer",
                     "vision_feature_select_strategy", "projector_hidden_act",
                     "multimodal_projector_bias"});
    textModel = wrapper->child("text_config");
    if (!textModel) {
      if (!wrapper->failed())
        wrapper->error("text_config", "a " + type +
                                          " config holds its language model "
                                          "under 'text_config', which is "
                                          "missing");
      return std::nullopt;
    }
    type = textType;
    if (const JSONMember *inner = textModel->find("model_type")) {
      if (inner->value.kind != JSONNode::Kind::String ||
          inner->value.text != textType) {
        diags.error(inner->value.loc, "text_config's model_type must be '" +
                                          llvm::Twine(textType) + "'");
        return std::nullopt;
      }
    }
  }
  if (!llvm::is_contained(TextModelTypes, type)) {
    diags.error(config->find("model_type")->value.loc,
                "model_type '" + type +
                    "' is not one the importer reads; it reads " +
                    llvm::join(getImportableModelTypes(), ", ") +
                    " (docs/models.md); write other models in STG");
    return std::nullopt;
  }

  ConfigReader reader(*textModel, type, diags);
  ModelSpec spec = readModelSpec(reader, type);
  bool ok = reader.finish();
  if (wrapper && !wrapper->finish())
    ok = false;
  if (!ok)
    return std::nullopt;
  if (!spec.mamba && spec.pattern.empty()) {
    reader.error("num_hidden_layers", "the config leaves no decoder layers");
    return std::nullopt;
  }
  if (!spec.mamba && findLayerPeriod(spec.pattern) == 0) {
    reader.error(spec.patternKey,
                 "the layers' kinds repeat with no period of 64 layers or "
                 "less, which an STG layer pattern needs; write the model "
                 "in STG with runs of layers");
    return std::nullopt;
  }
  result.modelType = type;
  result.source = writeModelSource(spec, result.identifier, result.name,
                                   result.hfRepo, path.str());
  return result;
}

std::optional<ImportedModel>
stg::importModelConfigText(llvm::StringRef text, llvm::StringRef path,
                           DiagnosticEngine &diags) {
  return importConfig(parseConfigJSON(text, path, diags), path, diags);
}

std::optional<ImportedModel> stg::importModelConfig(llvm::StringRef path,
                                                    DiagnosticEngine &diags) {
  return importConfig(readConfigJSON(path, diags), path, diags);
}
