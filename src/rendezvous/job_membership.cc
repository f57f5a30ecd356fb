#include "rendezvous/job_membership.h"

#include <unistd.h>

#include <chrono>

#include "net/socket.h"
#include "ringd/error.h"

namespace ringd::rendezvous {
namespace {
constexpr char kJobKey[] = "ringd/job";
constexpr char kConflictKey[] = "ringd/conflict";

std::string rank_key(int rank) { return "ringd/rank/" + std::to_string(rank); }
}  // namespace

std::string new_job_id() { return net::random_hex(16); }

std::string join_job(Store& store, int rank, int size, const std::string& expected_job_id,
                     const std::string& source) {
  const std::string proposed_id = expected_job_id.empty() ? new_job_id() : expected_job_id;
  const std::string our_source = source.empty() ? "" : " (" + source + ")";
  std::vector<uint8_t> existing;
  std::string record = proposed_id + " " + std::to_string(size);
  if (!source.empty()) record += " " + source;
  if (store.add(kJobKey, to_bytes(record), &existing)) return proposed_id;
  record = to_string(existing);
  const size_t space = record.find(' ');
  if (space == std::string::npos) {
    RINGD_THROW(kProtocol, "rank " << rank << ": the rendezvous store's job record '" << record
                                   << "' is malformed — is another program using this store?");
  }
  const std::string job_id = record.substr(0, space);
  const size_t size_end = record.find(' ', space + 1);
  const std::string job_size = record.substr(space + 1, size_end - space - 1);
  const std::string their_source =
      size_end == std::string::npos ? "" : " (" + record.substr(size_end + 1) + ")";
  if (!expected_job_id.empty() && job_id != expected_job_id) {
    RINGD_THROW(kMismatch, "rank " << rank << ": this rank belongs to job " << expected_job_id
                                   << our_source << " but the rendezvous store serves job "
                                   << job_id << their_source
                                   << " — two jobs share one rendezvous address; give each its "
                                      "own --rendezvous (or RINGD_RENDEZVOUS_PORT), or the same "
                                      "RINGD_JOB_ID to every rank of one job");
  }
  if (job_size != std::to_string(size)) {
    RINGD_THROW(kMismatch, "rank " << rank << ": job " << job_id << their_source
                                   << " on this rendezvous store has " << job_size
                                   << " ranks, this rank was started with " << size
                                   << " — another job uses the same --rendezvous, or the ranks "
                                      "were given different --size");
  }
  return job_id;
}

std::string claimant(const std::string& listen_address) {
  char host[256] = {};
  if (::gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  return "pid " + std::to_string(::getpid()) + " on " + (host[0] ? host : "an unnamed host") +
         ", tcp " + listen_address;
}

std::string claim_rank(Store& store, int rank, const std::string& who) {
  std::vector<uint8_t> existing;
  if (store.add(rank_key(rank), to_bytes(who), &existing)) return "";
  return to_string(existing);
}

void record_conflict(Store& store, const std::string& text) noexcept {
  try {
    store.add(kConflictKey, to_bytes(text), nullptr);
  } catch (const std::exception&) {
  }
}

std::string recorded_conflict(Store& store) {
  try {
    return to_string(store.get(kConflictKey, std::chrono::milliseconds(0)));
  } catch (const Error& e) {
    if (e.code() == ErrorCode::kTimeout) return "";
    throw;
  }
}

}  // namespace ringd::rendezvous
