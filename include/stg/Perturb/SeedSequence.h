//===- SeedSequence.h - std::seed_seq's numbers, faster ---------*- C++ -*-===//
//
// Every (rule, rank) of a variant draws from its own std::mt19937_64 seeded
// by a std::seed_seq (docs/perturbation.md), so that draws do not depend on
// threads; a what-if estimate of a thousand variants of a thousand ranks
// starts a million streams. libstdc++'s seed_seq::generate takes about
// 10 us for the engine's 624 words, almost all of it in divisions (`k mod
// n` three times per step). This is the same algorithm, specified by the
// C++ standard ([rand.util.seedseq]), with the indices stepped instead:
// the same words, several times faster. It meets the SeedSequence
// requirements the engines' constructors use.
//
//===----------------------------------------------------------------------===//

#ifndef STG_PERTURB_SEEDSEQUENCE_H
#define STG_PERTURB_SEEDSEQUENCE_H

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <vector>

namespace stg {

class SeedSequence {
public:
  using result_type = uint32_t;

  SeedSequence(std::initializer_list<uint32_t> values) : values(values) {}

  size_t size() const { return values.size(); }
  template <typename OutputIt> void param(OutputIt out) const {
    std::copy(values.begin(), values.end(), out);
  }

  /// Fills [begin, end) with 32-bit words exactly as std::seed_seq would
  /// for the same values.
  template <typename RandomIt> void generate(RandomIt begin, RandomIt end) {
    size_t n = std::distance(begin, end);
    if (n == 0)
      return;
    words.assign(n, 0x8b8b8b8bu);
    size_t s = values.size();
    size_t t = n >= 623 ? 11 : n >= 68 ? 7 : n >= 39 ? 5 : n >= 7 ? 3
                                                                  : (n - 1) / 2;
    size_t p = (n - t) / 2, q = p + t, m = std::max(s + 1, n);
    auto mix = [](uint32_t x) { return x ^ (x >> 27); };
    // kn = k mod n, and the indices (k + p), (k + q), (k - 1) mod n, each
    // stepped by one with a wrap.
    size_t kn = 0, kp = p % n, kq = q % n, km1 = n - 1;
    auto step = [&] {
      kn = kn + 1 == n ? 0 : kn + 1;
      kp = kp + 1 == n ? 0 : kp + 1;
      kq = kq + 1 == n ? 0 : kq + 1;
      km1 = km1 + 1 == n ? 0 : km1 + 1;
    };
    for (size_t k = 0; k < m; ++k, step()) {
      uint32_t r1 = 1664525u * mix(words[kn] ^ words[kp] ^ words[km1]);
      uint32_t r2 = r1 + uint32_t(k == 0   ? s
                                  : k <= s ? kn + values[k - 1]
                                           : kn);
      words[kp] += r1;
      words[kq] += r2;
      words[kn] = r2;
    }
    for (size_t k = m; k < m + n; ++k, step()) {
      uint32_t r3 = 1566083941u * mix(words[kn] + words[kp] + words[km1]);
      uint32_t r4 = r3 - uint32_t(kn);
      words[kp] ^= r3;
      words[kq] ^= r4;
      words[kn] = r4;
    }
    std::copy(words.begin(), words.end(), begin);
  }

private:
  std::vector<uint32_t> values;
  std::vector<uint32_t> words;
};

} // namespace stg

#endif // STG_PERTURB_SEEDSEQUENCE_H
