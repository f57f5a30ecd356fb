#include "ps/server_link.h"

#include "common/logging.h"
#include "net/handshake.h"
#include "ringd/error.h"

namespace ringd::ps {
namespace {

// The worker waits this much longer for a reply than the server waits for a step, so that when a
// step is stuck the server's diagnosis (which workers are missing) arrives before our timeout.
constexpr std::chrono::milliseconds kReplyGrace{5000};

std::string link_name(int server_index, const std::string& address) {
  return "parameter server " + std::to_string(server_index) + " (" + address + ")";
}

}  // namespace

ServerLink::ServerLink(int server_index, const std::string& address, const std::string& source,
                       const JobDescription& job, const std::vector<model::ParameterView>* params,
                       std::vector<size_t> owned, const std::string& secret,
                       std::chrono::milliseconds timeout)
    : name_(link_name(server_index, address)), params_(params), owned_(std::move(owned)) {
  const net::Endpoint endpoint = net::parse_endpoint(address, "parameter server address");
  net::HelloInfo hello;
  hello.kind = net::PeerKind::kPsWorker;
  hello.rank = job.worker_rank();
  hello.world_size = job.workers();
  const std::string self = "worker " + std::to_string(job.worker_rank());
  std::string last_error;
  int attempts = 0;
  net::Fd socket;
  try {
    socket = net::dial_with_retry(endpoint, net::data_socket_tuning(), secret, hello, -1, self,
                                  name_, net::Clock::now() + timeout, &last_error, &attempts);
  } catch (const Error& error) {
    if (error.code() != ErrorCode::kIo) throw;  // handshake errors name the server already
    // What connecting throws at once (a host that does not resolve) is the address's fault.
    RINGD_THROW(kInvalidArgument, self << ": cannot reach " << name_ << ", entry "
                                       << server_index + 1 << " of " << source << ": "
                                       << error.what() << " — check that address");
  }
  if (!socket.valid()) {
    RINGD_THROW(kTimeout, self << ": could not reach " << name_ << " within " << timeout.count()
                               << " ms (" << attempts << " attempts, last error: " << last_error
                               << ") — is `ringd ps` running there, and is the address right?");
  }
  connection_ = std::make_unique<Connection>(std::move(socket), name_, timeout + kReplyGrace);
  Header request;
  request.set_type(REGISTER);
  *request.mutable_job() = job;
  connection_->send(request, {}, "REGISTER");
  Header reply;
  connection_->receive_header(&reply, false, -1, nullptr, "REGISTER");
  if (reply.type() == ERROR) throw_server_error(reply, "REGISTER");
  if (reply.type() != REGISTERED) {
    RINGD_THROW(kProtocol, name_ << " answered REGISTER with message type " << reply.type());
  }
  thread_ = std::thread([this] { run(); });
}

ServerLink::~ServerLink() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void ServerLink::throw_server_error(const Header& header, const std::string& what) {
  connection_->close();
  throw_remote_error(
      name_, header.error_code(),
      header.error().empty() ? "refused " + what + " without a reason" : header.error());
}

void ServerLink::send_initial_values() {
  for (size_t index : owned_) {
    const model::ParameterView& view = (*params_)[index];
    Header header;
    header.set_type(INIT);
    header.add_tensors(static_cast<uint32_t>(index));
    connection_->send(header, {{view.value, view.count * sizeof(float)}},
                      "INIT of '" + view.name + "'");
  }
}

void ServerLink::rethrow_locked() {
  if (error_) std::rethrow_exception(error_);
}

void ServerLink::push(size_t index, int64_t step, double learning_rate) {
  std::lock_guard<std::mutex> lock(mutex_);
  rethrow_locked();
  queue_.push_back(Request{false, index, step, learning_rate});
  changed_.notify_all();
}

void ServerLink::pull(int64_t after_step) {
  std::lock_guard<std::mutex> lock(mutex_);
  rethrow_locked();
  queue_.push_back(Request{true, 0, after_step, 0});
  changed_.notify_all();
}

void ServerLink::wait_idle() {
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait(lock, [this] { return error_ || (queue_.empty() && !busy_); });
  rethrow_locked();
}

void ServerLink::say_bye() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (error_ || !connection_->open()) return;
  Header header;
  header.set_type(BYE);
  try {
    connection_->send(header, {}, "BYE");
  } catch (const Error& error) {
    RINGD_LOG(kWarn) << "could not say goodbye to " << name_ << ": " << error.what();
  }
}

void ServerLink::give_up(const std::string& why) {
  std::lock_guard<std::mutex> lock(mutex_);
  stopping_ = true;
  queue_.clear();
  changed_.notify_all();
  if (busy_ || error_ || !connection_->open()) return;
  connection_->send_if_room(error_header(static_cast<int>(ErrorCode::kPeerLost), why));
}

void ServerLink::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    changed_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty() || error_) return;  // stopping; after an error nothing more is sent
    const Request request = queue_.front();
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    std::exception_ptr error;
    try {
      execute(request);
    } catch (...) {
      error = std::current_exception();
    }
    lock.lock();
    busy_ = false;
    if (error && !error_) error_ = error;
    changed_.notify_all();
  }
}

void ServerLink::execute(const Request& request) {
  if (!request.is_pull) {
    const model::ParameterView& view = (*params_)[request.index];
    Header header;
    header.set_type(PUSH);
    header.set_step(request.step);
    header.set_learning_rate(request.learning_rate);
    header.add_tensors(static_cast<uint32_t>(request.index));
    connection_->send(header, {{view.grad, view.count * sizeof(float)}},
                      "the push of '" + view.name + "' for step " + std::to_string(request.step));
    return;
  }
  Header header;
  header.set_type(PULL);
  header.set_step(request.step);
  connection_->send(header, {}, "the pull after step " + std::to_string(request.step));
  receive_values(request.step);
}

void ServerLink::receive_values(int64_t after_step) {
  const std::string what = after_step < 0 ? std::string("the pull of the initial values")
                                          : "the pull after step " + std::to_string(after_step);
  Header reply;
  do {  // WAITING: the server is alive and still collecting the step (proto/ps.proto)
    connection_->receive_header(&reply, false, -1, nullptr, what);
  } while (reply.type() == WAITING && reply.payload_bytes() == 0);
  if (reply.type() == ERROR) throw_server_error(reply, what);
  bool same_tensors = reply.tensors_size() == static_cast<int>(owned_.size());
  uint64_t bytes = 0;
  for (size_t k = 0; same_tensors && k < owned_.size(); ++k) {
    same_tensors = reply.tensors(static_cast<int>(k)) == owned_[k];
    bytes += (*params_)[owned_[k]].count * sizeof(float);
  }
  if (reply.type() != VALUES || reply.step() != after_step || !same_tensors) {
    connection_->close();
    RINGD_THROW(kProtocol, name_ << " answered " << what << " with message type " << reply.type()
                                 << " for step " << reply.step() << " and " << reply.tensors_size()
                                 << " tensors (expected VALUES of its " << owned_.size()
                                 << " tensors) — servers and workers disagree "
                                 << "on the sharding?");
  }
  connection_->expect_payload(bytes, what);
  for (size_t index : owned_) {
    const model::ParameterView& view = (*params_)[index];
    connection_->receive_payload(view.value, view.count * sizeof(float),
                                 what + " ('" + view.name + "')");
  }
}

}  // namespace ringd::ps
