#include "ps/server.h"

#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include "common/logging.h"
#include "common/tunables.h"
#include "net/acceptor.h"
#include "net/handshake.h"
#include "net/io_loop.h"
#include "ps/frame.h"
#include "ps/shard_store.h"
#include "ringd/error.h"

namespace ringd::ps {

struct ParameterServer::Impl {
  explicit Impl(std::string server_name) : name(server_name), store(std::move(server_name)) {}

  void serve(net::Fd socket, net::HelloInfo hello, uint64_t id);
  void handle(Connection& connection, const Header& header, int* rank);
  // The acceptor's callbacks: the connection cap, then a thread for each admitted connection.
  std::string admit(const net::HelloInfo& hello);
  void start_connection(net::Fd socket, const net::HelloInfo& hello);
  // Joins the threads whose connection has ended.
  void reap_ended();
  std::string over_the_cap() const;  // the refusal's reason

  std::string name;  // "parameter server 10.0.0.2:7000"
  std::string address;
  uint16_t port = 0;
  std::chrono::milliseconds timeout{0};
  size_t max_connections = 0;
  ShardStore store;
  net::Fd stop_event;
  std::unique_ptr<net::IoLoop> loop;
  std::shared_ptr<net::Acceptor> acceptor;

  std::mutex mutex;
  bool stopping = false;             // guarded by mutex
  std::map<uint64_t, int> live;      // connection id -> socket, guarded by mutex
  std::condition_variable finished;  // a connection left `live`
  // Each connection's thread while it serves; a thread about to return moves itself to `ended`,
  // joined at the next admission (or by the destructor), so finished threads never pile up.
  std::map<uint64_t, std::thread> threads;  // guarded by mutex
  std::vector<std::thread> ended;           // guarded by mutex
  uint64_t next_id = 0;                     // guarded by mutex
};

namespace {

// How long the destructor lets connection threads finish (send their last reply) on their own.
constexpr std::chrono::milliseconds kShutdownGrace{1000};

std::string tensor_what(const char* kind, const ShardStore& store, const Header& header) {
  const std::string tensor =
      header.tensors_size() > 0 ? store.tensor_name(header.tensors(0)) : std::string("(none)");
  return std::string(kind) + " of '" + tensor + "' step " + std::to_string(header.step());
}

// A payload into the store in pieces, each a sign of life for pulls waiting on the step: eight
// workers pushing 400 MB each through one 1 Gbit/s port take longer than RINGD_TIMEOUT to finish,
// and a pull's limit is on silence, not on how long the others' transfers take.
void receive_into_store(Connection& connection, ShardStore& store, float* into, size_t bytes,
                        const std::string& what) {
  constexpr size_t kPieceBytes = 4 << 20;
  char* cursor = reinterpret_cast<char*>(into);
  while (bytes > 0) {
    const size_t piece = std::min(bytes, kPieceBytes);
    connection.receive_payload(cursor, piece, what);
    store.note_activity();
    cursor += piece;
    bytes -= piece;
  }
}

}  // namespace

void ParameterServer::Impl::handle(Connection& connection, const Header& header, int* rank) {
  if (header.type() != REGISTER && *rank < 0) {
    RINGD_THROW(kProtocol, name << ": " << connection.peer() << " sent message type "
                                << header.type() << " before REGISTER");
  }
  switch (header.type()) {
    case REGISTER: {
      if (*rank >= 0)
        RINGD_THROW(kProtocol, name << ": " << connection.peer() << " registered twice");
      store.register_worker(header.job(), connection.peer());
      *rank = header.job().worker_rank();
      Header reply;
      reply.set_type(REGISTERED);
      connection.send(reply, {}, "the REGISTERED reply");
      return;
    }
    case INIT:
    case PUSH: {
      const char* kind = header.type() == INIT ? "INIT" : "PUSH";
      if (header.tensors_size() != 1) {
        RINGD_THROW(kProtocol, name << ": " << kind << " from worker " << *rank << " names "
                                    << header.tensors_size() << " tensors (expected 1)");
      }
      const size_t index = header.tensors(0);
      const std::string what = tensor_what(kind, store, header);
      if (index >= store.tensor_count()) {
        RINGD_THROW(kMismatch, name << ": " << kind << " from worker " << *rank << " of tensor #"
                                    << index << ", but the job has " << store.tensor_count());
      }
      connection.expect_payload(store.count_of(index) * sizeof(float), what);
      const size_t bytes = store.count_of(index) * sizeof(float);
      if (header.type() == INIT) {
        float* into = store.begin_init(*rank, index);
        receive_into_store(connection, store, into, bytes, what);
        store.init_done(index);
        return;
      }
      float* slot = store.begin_push(*rank, index, header.step());
      if (slot) {
        receive_into_store(connection, store, slot, bytes, what);
        store.push_done(*rank, index, header.step(), header.learning_rate());
      } else {
        std::vector<float> gradient(store.count_of(index));
        receive_into_store(connection, store, gradient.data(), bytes, what);
        store.apply_async(index, gradient.data(), header.learning_rate());
      }
      return;
    }
    case PULL: {
      std::vector<const float*> values;
      std::vector<std::vector<float>> scratch;
      // While the step's other gradients arrive, WAITING notices keep this worker's wait for
      // the reply (bounded by silence) from running out.
      const std::string step_text = std::to_string(header.step());
      store.pull(header.step(), timeout, &values, &scratch, [&] {
        Header notice;
        notice.set_type(WAITING);
        notice.set_step(header.step());
        connection.send(notice, {}, "a WAITING notice for the pull after step " + step_text);
      });
      Header reply;
      reply.set_type(VALUES);
      reply.set_step(header.step());
      std::vector<PayloadPart> parts;
      for (size_t k = 0; k < store.owned().size(); ++k) {
        reply.add_tensors(static_cast<uint32_t>(store.owned()[k]));
        parts.push_back({values[k], store.count_of(store.owned()[k]) * sizeof(float)});
      }
      connection.send(reply, parts, "the VALUES reply for step " + std::to_string(header.step()));
      return;
    }
    default:
      RINGD_THROW(kProtocol, name << ": " << connection.peer() << " sent unexpected message type "
                                  << header.type());
  }
}

void ParameterServer::Impl::serve(net::Fd socket, net::HelloInfo hello, uint64_t id) {
  const std::string from = net::remote_address(socket.get());
  Connection connection(std::move(socket),
                        "worker " + std::to_string(hello.rank) + " (" + from + ")", timeout);
  int rank = -1;
  bool said_bye = false;
  try {
    for (;;) {
      Header header;
      bool closed = false;
      if (!connection.receive_header(&header, true, stop_event.get(), &closed,
                                     "the next request")) {
        if (closed && rank >= 0 && !said_bye) {
          RINGD_LOG(kWarn) << name << ": " << connection.peer() << " closed its connection without "
                           << "saying BYE";
          store.worker_lost(rank, connection.peer() + " closed its connection (died?)");
        }
        // Stopping: when the job failed, this worker hears why (an ERROR) before the close.
        if (!closed && rank >= 0) store.check();
        break;
      }
      if (header.type() == ERROR && rank >= 0) {  // the worker stops, and says why
        RINGD_LOG(kWarn) << name << ": " << connection.peer() << " stops: " << header.error();
        store.worker_lost(rank,
                          header.error().empty() ? connection.peer() + " gave up" : header.error());
        break;
      }
      if (header.type() == BYE) {
        said_bye = true;
        if (rank >= 0 && store.worker_left(rank)) {
          RINGD_LOG(kInfo) << name << ": every worker has finished";
        }
        break;
      }
      if (header.type() == REGISTER && header.job().worker_rank() != hello.rank) {
        RINGD_THROW(kProtocol, name << ": " << connection.peer() << " registers as worker "
                                    << header.job().worker_rank() << " but said rank " << hello.rank
                                    << " in its handshake");
      }
      handle(connection, header, &rank);
    }
  } catch (const Error& error) {
    RINGD_LOG(kWarn) << name << ": closing the connection of " << connection.peer() << ": "
                     << error.what();
    if (connection.open()) {
      try {
        connection.send(error_header(static_cast<int>(error.code()), error.what()), {},
                        "an ERROR reply");
      } catch (const Error&) {  // the worker is gone: nothing more to tell it
      }
    }
    if (rank >= 0) store.worker_lost(rank, std::string(error.what()));
  } catch (const std::exception& error) {
    RINGD_LOG(kError) << name << ": " << connection.peer() << ": " << error.what();
    if (rank >= 0) store.worker_lost(rank, error.what());
  }
  std::lock_guard<std::mutex> lock(mutex);
  live.erase(id);
  connection.close();
  const auto self = threads.find(id);
  if (self != threads.end()) {  // else the destructor holds this thread and joins it
    ended.push_back(std::move(self->second));
    threads.erase(self);
  }
  finished.notify_all();
}

std::string ParameterServer::Impl::over_the_cap() const {
  return name + " already serves " + std::to_string(live.size()) + " connections, at most " +
         std::to_string(max_connections) +
         " connections at once (one per worker): refusing this one; a job with more workers "
         "needs more servers";
}

std::string ParameterServer::Impl::admit(const net::HelloInfo& hello) {
  if (hello.kind != net::PeerKind::kPsWorker) return "this port serves a ringd parameter server";
  std::lock_guard<std::mutex> lock(mutex);
  return live.size() >= max_connections ? over_the_cap() : "";
}

void ParameterServer::Impl::reap_ended() {
  std::vector<std::thread> done;
  {
    std::lock_guard<std::mutex> lock(mutex);
    done.swap(ended);
  }
  for (std::thread& thread : done) thread.join();  // each is returning, or has returned
}

void ParameterServer::Impl::start_connection(net::Fd socket, const net::HelloInfo& hello) {
  reap_ended();
  std::string refusal;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (stopping) return;  // closes the socket
    if (live.size() >= max_connections) {
      refusal = over_the_cap();
    } else {
      const uint64_t id = next_id++;
      const int fd = socket.get();
      try {
        std::thread thread([this, id, hello, fd] { serve(net::Fd(fd), hello, id); });
        socket.release();  // the thread owns it now
        live[id] = fd;
        threads.emplace(id, std::move(thread));
        return;
      } catch (const std::system_error& error) {  // out of threads or memory: this one waits
        refusal = name + " cannot start a thread for this connection (" + error.what() +
                  "): refusing it; " + std::to_string(live.size()) + " connections are open";
      }
    }
  }
  const std::string peer =
      "worker " + std::to_string(hello.rank) + " (" + net::remote_address(socket.get()) + ")";
  RINGD_LOG(kWarn) << name << ": " << peer << ": " << refusal;
  Connection connection(std::move(socket), peer, timeout);
  connection.send_if_room(error_header(static_cast<int>(ErrorCode::kUnavailable), refusal));
}

ParameterServer::ParameterServer(const ServerOptions& options) {
  net::Fd listener = net::listen_on(options.host, options.port, net::data_socket_tuning());
  const uint16_t port = net::local_port(listener.get());
  std::string host = options.advertise_host;
  if (host.empty()) {
    host = options.host == "0.0.0.0" || options.host.empty()
               ? net::default_host_address(tunables().interface)
               : options.host;
  }
  impl_ = std::make_unique<Impl>("parameter server " + host + ":" + std::to_string(port));
  impl_->port = port;
  impl_->address = host + ":" + std::to_string(port);
  impl_->timeout = options.timeout.count() > 0 ? options.timeout : tunables().timeout;
  impl_->stop_event = net::Fd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!impl_->stop_event.valid()) {
    RINGD_THROW(kIo, impl_->name << ": eventfd failed: " << net::errno_text(errno));
  }
  impl_->loop = std::make_unique<net::IoLoop>(impl_->name);
  impl_->max_connections = std::max<size_t>(1, options.max_connections);
  Impl& server = *impl_;
  net::Acceptor::Callbacks callbacks;
  callbacks.admit = [&server](const net::HelloInfo& hello) { return server.admit(hello); };
  callbacks.on_admitted = [&server](net::Fd socket, const net::HelloInfo& hello) {
    server.start_connection(std::move(socket), hello);
  };
  impl_->acceptor = std::make_shared<net::Acceptor>(*impl_->loop, std::move(listener),
                                                    net::resolve_secret(options.secret), -1,
                                                    impl_->name, std::move(callbacks));
  impl_->acceptor->start(impl_->acceptor);
  RINGD_LOG(kInfo) << impl_->name << ": serving";
}

ParameterServer::~ParameterServer() {
  impl_->loop->stop();
  impl_->acceptor->close();
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    impl_->stopping = true;
  }
  // First the polite way: the eventfd wakes threads waiting for a worker's next request, and a
  // failed store wakes pulls, which then send their ERROR reply (after a lost worker, the reason
  // the other workers get). Only a thread still inside a transfer after the grace period has its
  // socket shut down under it: shutting every socket at once would cut those replies off, and the
  // other workers would see a bare "connection closed" instead of why.
  const uint64_t one = 1;
  [[maybe_unused]] const ssize_t written = ::write(impl_->stop_event.get(), &one, sizeof(one));
  impl_->store.fail("the server is shutting down");
  std::map<uint64_t, std::thread> threads;
  {
    std::unique_lock<std::mutex> lock(impl_->mutex);
    impl_->finished.wait_for(lock, kShutdownGrace, [this] { return impl_->live.empty(); });
    for (const auto& [id, fd] : impl_->live) ::shutdown(fd, SHUT_RDWR);
    threads.swap(impl_->threads);
  }
  for (auto& [id, thread] : threads) thread.join();
  impl_->reap_ended();
}

uint16_t ParameterServer::port() const { return impl_->port; }
std::string ParameterServer::address() const { return impl_->address; }
void ParameterServer::wait_until_done(std::chrono::milliseconds idle_limit) {
  impl_->store.wait_until_done(idle_limit);
}

}  // namespace ringd::ps
