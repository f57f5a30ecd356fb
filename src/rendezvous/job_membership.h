// How a rank joins a job through its rendezvous store, so that two processes never both become
// rank r and ranks of two jobs never mix (issue 15, item 9).
//
//   "ringd/job"       "<job id> <size> <source>": created once, by the first rank to reach the
//                     store (an add(), so concurrent first ranks agree). The id is 32 hex digits:
//                     derived from what the launcher says the job is (job/topology.h's
//                     JobIdentity: RINGD_JOB_ID, torchrun's run id, mpirun's job, the
//                     StatefulSet, the secret), and every rank checks that the store holds the id
//                     its own launcher gave it; with no identity known, 16 random bytes, and the
//                     rank joins whatever job the store holds. Under mpirun's bootstrap store, rank
//                     0 creates it with an id it broadcast over MPI. <source> says where the id
//                     came from ("torchrun run 5c1f"), for messages; records of older versions
//                     have none.
//   "ringd/rank/<r>"  who holds rank r ("pid 4711 on host-a, tcp 10.0.0.7:4711"): each rank
//                     claims its number with add(); a second claim is refused and names the first.
//   "ringd/conflict"  the first refused claim, for every rank of the job to find.
//
// The id travels in every tcp HELLO of the job (net/handshake.h), and a rank refuses a
// HELLO of another job. The TCP store never lets a set replace a "ringd/" key.
#pragma once

#include <string>

#include "ringd/store.h"

namespace ringd::rendezvous {

// 32 random hex digits.
std::string new_job_id();

// Joins (or creates) the store's job record and returns its id. Throws kMismatch naming both
// jobs (ids and sources) when the job has another id than `expected_job_id` (when not ""), or
// another size than `size`.
std::string join_job(Store& store, int rank, int size, const std::string& expected_job_id,
                     const std::string& source = "");

// "pid 4711 on host-a, tcp 10.0.0.7:4711": how this process names itself in a claim.
std::string claimant(const std::string& listen_address);

// Claims rank `rank` for `who`: "" when this call got it, else the first claimant.
std::string claim_rank(Store& store, int rank, const std::string& who);

// Records `text` as the job's conflict (the first record stays); never throws.
void record_conflict(Store& store, const std::string& text) noexcept;

// The job's recorded conflict, or "" (does not wait).
std::string recorded_conflict(Store& store);

}  // namespace ringd::rendezvous
