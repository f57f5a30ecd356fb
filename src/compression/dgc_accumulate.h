// Deep gradient compression's accumulation of one element (momentum correction; see
// dgc_compressor.h): u = m u + s g, then v += u. Every path that accumulates (the dense step, the
// fused sparse pass of topk_select.cc and the sample that pass estimates its threshold from) goes
// through this one definition, so they all give the same bits: two roundings each, no FMA (the
// build enables none), the same on every machine, so replicas on mixed nodes stay identical.
#pragma once

namespace ringd::compression {

inline void accumulate_element(float gradient, float momentum, float scale, float& velocity,
                               float& accumulated) {
  velocity = momentum * velocity + scale * gradient;
  accumulated += velocity;
}

}  // namespace ringd::compression
