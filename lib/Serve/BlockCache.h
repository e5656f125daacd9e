//===- BlockCache.h - A trace's prompt blocks a replica keeps ---*- C++ -*-===//
//
// With a trace that names its prompts' blocks (PromptBlocks: Mooncake's
// hash_ids), an attention replica keeps every block a prefill computed, as
// vLLM's automatic prefix caching keeps a finished sequence's full blocks
// under their content's hash: a later prompt reads its leading blocks that
// are there instead of prefilling them. A block that a running sequence
// reads stays; the others are evicted for room, the least recently read
// first and, of blocks read together, the deepest in its prompt first (so
// a prefix loses its tail before its head, as vLLM frees a sequence's
// blocks in reverse). A replica's host memory keeps the blocks its device
// evicted (KV offload) in a second BlockCache whose blocks nothing pins.
//
//===----------------------------------------------------------------------===//

#ifndef STG_LIB_SERVE_BLOCKCACHE_H
#define STG_LIB_SERVE_BLOCKCACHE_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLFunctionalExtras.h"

#include <cstdint>
#include <optional>
#include <set>

namespace stg {

class BlockCache {
public:
  /// How many of `ids`, from the first, it holds.
  size_t countHeld(llvm::ArrayRef<uint64_t> ids) const;

  /// A sequence reads `ids`, all held (countHeld): they stay until it
  /// releases them, and were read at `stamp`.
  void read(llvm::ArrayRef<uint64_t> ids, uint64_t stamp);
  /// The sequence that read `ids` is done with them.
  void release(llvm::ArrayRef<uint64_t> ids);

  /// A sequence computed the blocks `ids`, the first at `depth` in its
  /// prompt, and reads them from now on as it reads those it was admitted
  /// with: those not held become the cache's, `getBytes(depth)` each.
  /// Returns the bytes of those it held already, whose sequence's copies
  /// are freed.
  double add(llvm::ArrayRef<uint64_t> ids, uint64_t depth,
             llvm::function_ref<double(uint64_t)> getBytes, uint64_t stamp);

  /// Holds block `id` (at `depth` in its prompt, of `bytes`) that nothing
  /// reads, as read at `stamp`: a block offloaded to host memory. Returns
  /// the bytes of the copy it held before, if any.
  double keep(uint64_t id, uint64_t depth, double bytes, uint64_t stamp);

  /// The bytes of the blocks nothing reads, but those of `keep`.
  double getEvictableBytes(llvm::ArrayRef<uint64_t> keep) const;
  struct Evicted {
    uint64_t id, depth, lastRead;
    double bytes;
  };
  /// Evicts the block to go first of those nothing reads and returns it;
  /// nothing when there is none.
  std::optional<Evicted> evictOldest();

private:
  struct Block {
    uint64_t lastRead = 0;
    uint64_t depth = 0;
    double bytes = 0;
    uint32_t readers = 0;
  };
  /// Orders the blocks nothing reads by when they go: least recently read,
  /// then deepest, then by id for a total order.
  struct Victim {
    uint64_t lastRead, depth, id;
    bool operator<(const Victim &other) const {
      if (lastRead != other.lastRead)
        return lastRead < other.lastRead;
      if (depth != other.depth)
        return depth > other.depth;
      return id < other.id;
    }
  };
  Victim getVictim(uint64_t id, const Block &block) const {
    return {block.lastRead, block.depth, id};
  }
  /// A block nothing reads joins the victims, or one that a sequence now
  /// reads (or whose stamp changes) leaves them.
  void listVictim(uint64_t id, const Block &block) {
    victims.insert(getVictim(id, block));
    victimBytes += block.bytes;
  }
  void unlistVictim(uint64_t id, const Block &block) {
    victims.erase(getVictim(id, block));
    victimBytes -= block.bytes;
  }

  /// Ids are at most MaxBlockId, clear of DenseMap's two reserved keys.
  llvm::DenseMap<uint64_t, Block> blocks;
  std::set<Victim> victims; ///< The blocks nothing reads.
  double victimBytes = 0;
};

} // namespace stg

#endif // STG_LIB_SERVE_BLOCKCACHE_H
