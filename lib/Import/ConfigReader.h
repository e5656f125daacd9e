//===- ConfigReader.h - Reading a config's keys, each checked ---*- C++ -*-===//
//
// The importer reads a config through this class so that no key slips by:
// each read checks the value's kind and range where it is read and reports
// a located error, a key that is neither read nor known to change nothing
// is an error at finish(), and an absent key takes the default the Hugging
// Face configuration class gives it (the importer passes that default).
// After an error the reads return their fallback so that one run reports
// every bad key, not only the first.
//
//===----------------------------------------------------------------------===//

#ifndef STG_LIB_IMPORT_CONFIGREADER_H
#define STG_LIB_IMPORT_CONFIGREADER_H

#include "stg/Import/ConfigJSON.h"

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringSet.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace stg {

class ConfigReader {
public:
  ConfigReader(const JSONNode &object, std::string modelType,
               DiagnosticEngine &diags)
      : object(object), modelType(std::move(modelType)), diags(diags) {}

  const JSONNode &getObject() const { return object; }
  bool failed() const { return numErrors != 0; }
  /// Where a key is, or the object's brace when it is absent.
  SourceLoc locate(llvm::StringRef key) const;
  /// Reports at `key` (its value, or the object when absent).
  void error(llvm::StringRef key, const llvm::Twine &message);

  bool has(llvm::StringRef key) const;
  /// A whole number in [low, high]; an error when absent.
  int64_t size(llvm::StringRef key, int64_t low, int64_t high);
  /// The same with HF's default for an absent key.
  int64_t size(llvm::StringRef key, int64_t low, int64_t high,
               int64_t fallback);
  /// A whole number in [low, high], or nothing when absent or null.
  std::optional<int64_t> optionalSize(llvm::StringRef key, int64_t low,
                                      int64_t high);
  /// A finite number in [low, high], `fallback` when absent; null reads as
  /// `nullValue` (0 for "off" where HF's code reads it so).
  double number(llvm::StringRef key, double low, double high, double fallback,
                std::optional<double> nullValue = std::nullopt);
  bool flag(llvm::StringRef key, bool fallback);
  /// One of `allowed`, `fallback` when absent.
  std::string word(llvm::StringRef key, llvm::ArrayRef<llvm::StringRef> allowed,
                   llvm::StringRef fallback);
  /// A string, "" when absent; no check on its value.
  std::string text(llvm::StringRef key);
  /// An array of strings, each one of `allowed`.
  std::vector<std::string> words(llvm::StringRef key,
                                 llvm::ArrayRef<llvm::StringRef> allowed);
  /// An array of whole numbers in [low, high] (empty when absent or null).
  std::vector<int64_t> sizes(llvm::StringRef key, int64_t low, int64_t high);
  /// A nested object, marked read; null when absent.
  const JSONNode *child(llvm::StringRef key);
  /// Marks keys that change nothing the compiler prices (docs/models.md
  /// lists them with the reason).
  void ignore(llvm::ArrayRef<llvm::StringRef> keys);
  /// A key whose value must be `expected` (a number's spelling or a word):
  /// any other value changes the computation in a way not imported.
  void require(llvm::StringRef key, llvm::ArrayRef<llvm::StringRef> expected,
               const llvm::Twine &why);

  /// Reports every key neither read nor ignored; true if there was none
  /// and no read failed.
  bool finish();

private:
  const JSONNode *get(llvm::StringRef key);

  const JSONNode &object;
  std::string modelType;
  DiagnosticEngine &diags;
  llvm::StringSet<> used;
  unsigned numErrors = 0;
};

} // namespace stg

#endif // STG_LIB_IMPORT_CONFIGREADER_H
