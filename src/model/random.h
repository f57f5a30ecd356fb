// The one random number generator of training: SplitMix64 (Steele, Lea, Flood 2014), written out
// so that parameter initialisation and data order are the same on every platform and standard
// library (std::uniform_*_distribution and std::shuffle are implementation-defined).
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>

namespace ringd::model {

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}

  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }

  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

  // Uniform in [0, bound) (bound > 0); Lemire's multiply-shift, with rejection for exactness.
  uint64_t below(uint64_t bound) {
    for (;;) {
      const unsigned __int128 product = static_cast<unsigned __int128>(next()) * bound;
      const uint64_t low = static_cast<uint64_t>(product);
      if (low >= bound || low >= (-bound) % bound) return static_cast<uint64_t>(product >> 64);
    }
  }

  // Fisher-Yates.
  template <typename T>
  void shuffle(T* items, size_t count) {
    for (size_t i = count; i > 1; --i) std::swap(items[i - 1], items[below(i)]);
  }

 private:
  uint64_t state_;
};

// An independent stream for (seed, purpose, index): e.g. epoch e's data order is
// SplitMix64(derive_seed(seed, kDataOrder, e)).
inline uint64_t derive_seed(uint64_t seed, uint64_t purpose, uint64_t index) {
  SplitMix64 mix(seed ^ (purpose * 0xd1b54a32d192ed03ULL));
  mix.next();
  SplitMix64 again(mix.next() ^ (index * 0x8cb92ba72f3d8dd7ULL));
  return again.next();
}

}  // namespace ringd::model
