//===- ContextCache.h - Conversations' contexts a replica keeps -*- C++ -*-===//
//
// Between two turns of a conversation its context (the prompts and outputs
// so far, in whole KV blocks) stays in the cache of the attention replica
// that ran the turn, as vLLM's, SGLang's and TensorRT-LLM's prefix caches
// keep a finished sequence's blocks until their room is needed: the next
// turn reads them instead of prefilling them, unless the replica needed the
// room first and evicted the least recently cached.
//
//===----------------------------------------------------------------------===//

#ifndef STG_LIB_SERVE_CONTEXTCACHE_H
#define STG_LIB_SERVE_CONTEXTCACHE_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLExtras.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace stg {

class ContextCache {
public:
  struct Entry {
    uint32_t conversation = 0;
    uint64_t tokens = 0; ///< Reusable: whole blocks.
    double bytes = 0;    ///< What the entry holds of the replica's cache.
  };

  const Entry *find(uint32_t conversation) const {
    auto it = llvm::find_if(entries, [&](const Entry &entry) {
      return entry.conversation == conversation;
    });
    return it == entries.end() ? nullptr : &*it;
  }

  /// Removes the conversation's entry and returns it (a turn admitted here
  /// now holds its blocks).
  std::optional<Entry> take(uint32_t conversation) {
    const Entry *entry = find(conversation);
    if (!entry)
      return std::nullopt;
    Entry taken = *entry;
    entries.erase(entries.begin() + (entry - entries.data()));
    return taken;
  }

  /// Least recently cached first.
  llvm::ArrayRef<Entry> getEntries() const { return entries; }

  /// Adds an entry as the most recently cached.
  void insert(const Entry &entry) { entries.push_back(entry); }

  /// The bytes of all entries but `keep`'s.
  double getEvictableBytes(std::optional<uint32_t> keep) const {
    double bytes = 0;
    for (const Entry &entry : entries)
      if (entry.conversation != keep)
        bytes += entry.bytes;
    return bytes;
  }

  /// Removes the least recently cached entry but `keep`'s and returns it;
  /// nothing when there is none.
  std::optional<Entry> evictOldest(std::optional<uint32_t> keep) {
    for (size_t index = 0; index < entries.size(); ++index)
      if (entries[index].conversation != keep) {
        Entry evicted = entries[index];
        entries.erase(entries.begin() + index);
        return evicted;
      }
    return std::nullopt;
  }

private:
  std::vector<Entry> entries; ///< Least recently cached first.
};

} // namespace stg

#endif // STG_LIB_SERVE_CONTEXTCACHE_H
