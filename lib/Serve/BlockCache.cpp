//===- BlockCache.cpp - A trace's prompt blocks a replica keeps -----------===//

#include "BlockCache.h"

#include <algorithm>
#include <cassert>

using namespace stg;

size_t BlockCache::countHeld(llvm::ArrayRef<uint64_t> ids) const {
  size_t held = 0;
  while (held < ids.size() && blocks.count(ids[held]))
    ++held;
  return held;
}

void BlockCache::read(llvm::ArrayRef<uint64_t> ids, uint64_t stamp) {
  for (uint64_t id : ids) {
    Block &block = blocks.find(id)->second;
    if (!block.readers++)
      unlistVictim(id, block);
    block.lastRead = stamp;
  }
}

void BlockCache::release(llvm::ArrayRef<uint64_t> ids) {
  for (uint64_t id : ids) {
    Block &block = blocks.find(id)->second;
    assert(block.readers && "a block released more often than read");
    if (!--block.readers)
      listVictim(id, block);
  }
  if (victims.empty())
    victimBytes = 0; // What is left is rounding.
}

double BlockCache::add(llvm::ArrayRef<uint64_t> ids, uint64_t depth,
                       llvm::function_ref<double(uint64_t)> getBytes,
                       uint64_t stamp) {
  double held = 0;
  for (uint64_t id : ids) {
    auto [it, inserted] = blocks.try_emplace(id);
    Block &block = it->second;
    if (inserted) {
      block.depth = depth;
      block.bytes = getBytes(depth);
    } else {
      held += getBytes(depth);
      if (!block.readers)
        unlistVictim(id, block);
    }
    ++block.readers;
    block.lastRead = stamp;
    ++depth;
  }
  return held;
}

double BlockCache::keep(uint64_t id, uint64_t depth, double bytes,
                        uint64_t stamp) {
  auto [it, inserted] = blocks.try_emplace(id);
  Block &block = it->second;
  assert(!block.readers && "a kept block is read by nothing");
  double previous = 0;
  if (!inserted) {
    unlistVictim(id, block);
    previous = block.bytes;
  }
  block.depth = depth;
  block.bytes = bytes;
  block.lastRead = stamp;
  listVictim(id, block);
  return previous;
}

double BlockCache::getEvictableBytes(llvm::ArrayRef<uint64_t> keep) const {
  double bytes = victimBytes;
  for (uint64_t id : keep) {
    auto it = blocks.find(id);
    if (it != blocks.end() && !it->second.readers)
      bytes -= it->second.bytes;
  }
  return std::max(0.0, bytes);
}

std::optional<BlockCache::Evicted> BlockCache::evictOldest() {
  if (victims.empty())
    return std::nullopt;
  Victim victim = *victims.begin();
  victims.erase(victims.begin());
  auto it = blocks.find(victim.id);
  Evicted evicted{victim.id, victim.depth, victim.lastRead, it->second.bytes};
  blocks.erase(it);
  victimBytes = victims.empty() ? 0 : victimBytes - evicted.bytes;
  return evicted;
}
