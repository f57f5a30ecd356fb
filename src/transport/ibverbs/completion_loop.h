// The one thread per ibverbs context that turns completions into Channel calls, without spinning:
//
//   poll(2) on { completion channel fd, async event fd, wake eventfd }   (sleeps; no CPU)
//     completion event -> ibv_get_cq_event, ibv_req_notify_cq (re-arm), then ibv_poll_cq until
//                         empty (a completion that raced the re-arm is still found), dispatch:
//                         receive with immediate -> channel[peer].on_receive(imm, byte_len)
//                         send completion        -> channel[peer].on_send_done(cookie)
//                         failed completion      -> channel[peer].on_failure(kPeerLost ...)
//     async event      -> a QP's fatal error fails its channel; port/device errors fail all
//     eventfd          -> stop
//
// Ranks may outnumber cores, so nothing here busy-polls; the cost is one wakeup per batch of
// completions. Events are acknowledged in batches and all of them before the CQ is destroyed.
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "transport/ibverbs/channel.h"
#include "transport/ibverbs/verbs_device.h"

namespace ringd::ibverbs {

class CompletionLoop {
 public:
  // `channels[peer]` (null for this rank) receive the completions; `peer_of_qpn` maps a queue
  // pair number to its peer for asynchronous events.
  CompletionLoop(VerbsDevice& device, std::vector<std::shared_ptr<Channel>> channels,
                 std::unordered_map<uint32_t, int> peer_of_qpn);
  ~CompletionLoop();  // stop()
  CompletionLoop(const CompletionLoop&) = delete;
  CompletionLoop& operator=(const CompletionLoop&) = delete;

  void start();
  void stop();  // joins the thread; idempotent

 private:
  void run();
  bool on_completion_event();  // false after a fatal error: the thread ends
  bool drain();                // false after a fatal CQ error
  void dispatch(const ibv_wc& wc);
  void on_async_event();
  void fail_all(const Error& error);
  Channel* channel_for(uint64_t wr_id) const;

  VerbsDevice& device_;
  const int rank_;
  std::vector<std::shared_ptr<Channel>> channels_;
  std::unordered_map<uint32_t, int> peer_of_qpn_;
  int wake_fd_ = -1;
  std::atomic<bool> stopping_{false};
  unsigned unacked_events_ = 0;  // the loop thread's, then stop()'s after the join
  std::thread thread_;
};

}  // namespace ringd::ibverbs
