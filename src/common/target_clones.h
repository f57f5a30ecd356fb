// RINGD_AVX2_CLONES before a function compiles it twice, for AVX2 and for the baseline, and lets
// the dynamic loader pick one for the CPU (an ifunc). Under ThreadSanitizer the instrumented
// resolver runs before TSan's runtime exists and crashes the process as it loads (scripts/
// sanitize.sh tsan), so there the function is compiled once, for the baseline.
#pragma once

#if defined(__SANITIZE_THREAD__)
#define RINGD_AVX2_CLONES
#else
#define RINGD_AVX2_CLONES __attribute__((target_clones("avx2", "default")))
#endif
