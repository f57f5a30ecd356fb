// The power-of-two fold that recursive doubling and halving-doubling share. With p the largest
// power of two <= n and rem = n - p, the first 2*rem ranks pair up: each even one hands its buffer
// to the odd one above it (which combines it) and sits out; the p remaining ranks, renumbered
// 0..p-1 ("virtual" ranks), run the power-of-two algorithm; then each odd rank of a folded pair
// hands the result back.
//
//   n = 6 (p = 4, rem = 2):   fold 0->1, 2->3;  virtual ranks {1,3,4,5} = v{0,1,2,3};  unfold 1->0,
//   3->2
#pragma once

#include "allreduce/plan.h"

namespace ringd::algo {

// Message indices of the fold within an operation's tag space (the algorithms use 1..62).
constexpr uint64_t kFoldIndex = 0;
constexpr uint64_t kUnfoldIndex = 63;

struct Fold {
  int p = 1;              // ranks that take part after the fold (a power of two)
  int rem = 0;            // n - p folded pairs
  int virtual_rank = -1;  // this rank's number among the p; -1: it sits out
  bool sits_out() const { return virtual_rank < 0; }
  int real_rank(int virtual_number) const {
    return virtual_number < rem ? virtual_number * 2 + 1 : virtual_number + rem;
  }
};

// Folds `data` (count x dtype): an even rank of a pair sends it and returns sits_out() (it then
// calls receive_unfolded); an odd one receives its partner's into `scratch` (count elements) and
// combines. Other ranks only get their virtual number.
Fold fold_in(const Operation& op, void* data, void* scratch, size_t count, DataType dtype,
             ReduceOp reduce_op);

// The sitting-out rank receives the final result into `data`.
void receive_unfolded(const Operation& op, void* data, size_t bytes);

// An odd rank of a folded pair hands the final result back (no-op for the others).
void send_unfolded(const Operation& op, const Fold& fold, const void* data, size_t bytes);

}  // namespace ringd::algo
