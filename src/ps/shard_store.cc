#include "ps/shard_store.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "common/logging.h"
#include "ps/shard_map.h"
#include "ringd/error.h"

namespace ringd::ps {
namespace {

std::string step_text(int64_t step) {
  return step == -1 ? std::string("the initial values") : "step " + std::to_string(step);
}

// "" when `theirs` describes the same job as `ours` (worker_rank aside), else what differs.
std::string job_difference(const JobDescription& ours, const JobDescription& theirs) {
  auto field = [](const char* name, auto a, auto b) {
    std::ostringstream os;
    os << name << " " << b << " (the first worker said " << a << ")";
    return os.str();
  };
  if (ours.workers() != theirs.workers()) return field("workers", ours.workers(), theirs.workers());
  if (ours.servers() != theirs.servers()) return field("servers", ours.servers(), theirs.servers());
  if (ours.server_index() != theirs.server_index()) {
    return field("server index", ours.server_index(), theirs.server_index()) +
           " — do all workers list the servers in the same order?";
  }
  if (ours.sharding() != theirs.sharding()) {
    return field("sharding", shard_policy_name(static_cast<ShardPolicy>(ours.sharding())),
                 shard_policy_name(static_cast<ShardPolicy>(theirs.sharding())));
  }
  if (ours.asynchronous() != theirs.asynchronous()) {
    return field("asynchronous", ours.asynchronous(), theirs.asynchronous());
  }
  if (ours.momentum() != theirs.momentum()) {
    return field("momentum", ours.momentum(), theirs.momentum());
  }
  if (ours.weight_decay() != theirs.weight_decay()) {
    return field("weight decay", ours.weight_decay(), theirs.weight_decay());
  }
  if (ours.tensors_size() != theirs.tensors_size()) {
    return field("tensor count", ours.tensors_size(), theirs.tensors_size());
  }
  for (int i = 0; i < ours.tensors_size(); ++i) {
    const TensorInfo& a = ours.tensors(i);
    const TensorInfo& b = theirs.tensors(i);
    if (a.name() != b.name() || a.count() != b.count()) {
      return "tensor " + std::to_string(i) + " '" + b.name() + "' of " + std::to_string(b.count()) +
             " elements (the first worker said '" + a.name() + "' of " + std::to_string(a.count()) +
             ")";
    }
  }
  return "";
}

}  // namespace

ShardStore::ShardStore(std::string name) : name_(std::move(name)) {}

void ShardStore::register_worker(const JobDescription& job, const std::string& from) {
  std::lock_guard<std::mutex> lock(mutex_);
  // `from` is the connection's name ("worker 2 (10.0.0.5:41234)") or just an address.
  const std::string who = from.rfind("worker ", 0) == 0
                              ? from
                              : "worker " + std::to_string(job.worker_rank()) + " (" + from + ")";
  if (failed_) throw_failure();
  if (job.workers() < 1 || job.worker_rank() < 0 || job.worker_rank() >= job.workers() ||
      job.servers() < 1 || job.server_index() < 0 || job.server_index() >= job.servers() ||
      job.sharding() > static_cast<uint32_t>(ShardPolicy::kGreedyBySize)) {
    RINGD_THROW(kInvalidArgument, name_ << ": " << who << " sent an impossible job (worker "
                                        << job.worker_rank() << " of " << job.workers()
                                        << ", server " << job.server_index() << " of "
                                        << job.servers() << ", sharding " << job.sharding() << ")");
  }
  if (!have_job_) {
    job_ = job;
    job_.set_worker_rank(0);
    std::vector<size_t> counts;
    for (const TensorInfo& tensor : job.tensors()) counts.push_back(tensor.count());
    const std::vector<int> server_of =
        assign_shards(counts, job.servers(), static_cast<ShardPolicy>(job.sharding()));
    owned_ = tensors_of(server_of, job.server_index());
    slot_of_.assign(counts.size(), -1);
    model::SgdOptions options;
    options.momentum = job.momentum();
    options.weight_decay = job.weight_decay();
    sgd_ = std::make_unique<model::Sgd>(options);
    const size_t workers = static_cast<size_t>(job.workers());
    tensors_.resize(owned_.size());
    for (size_t k = 0; k < owned_.size(); ++k) {
      Tensor& tensor = tensors_[k];
      tensor.index = owned_[k];
      tensor.name = job.tensors(static_cast<int>(owned_[k])).name();
      tensor.value.assign(counts[owned_[k]], 0.0f);
      if (!job.asynchronous()) {
        tensor.slots.assign(workers, std::vector<float>(counts[owned_[k]]));
        tensor.sum.assign(counts[owned_[k]], 0.0f);
      }
      tensor.claimed.assign(workers, 0);
      tensor.arrived.assign(workers, 0);
      tensor.lock = std::make_unique<std::mutex>();
      slot_of_[owned_[k]] = static_cast<int>(k);
      sgd_->add_parameter(owned_[k], counts[owned_[k]]);
    }
    registered_.assign(workers, 0);
    left_.assign(workers, 0);
    have_job_ = true;
    size_t elements = 0;
    for (size_t index : owned_) elements += counts[index];
    RINGD_LOG(kInfo) << name_ << ": server " << job.server_index() << " of " << job.servers()
                     << " for " << job.workers() << " workers ("
                     << (job.asynchronous() ? "asynchronous" : "synchronous") << ", "
                     << shard_policy_name(static_cast<ShardPolicy>(job.sharding()))
                     << "): " << owned_.size() << " of " << counts.size() << " tensors, "
                     << elements << " elements";
  } else {
    const std::string difference = job_difference(job_, job);
    if (!difference.empty()) {
      RINGD_THROW(kMismatch, name_ << ": " << who << " describes another job than the first "
                                   << "worker: " << difference);
    }
  }
  if (registered_[static_cast<size_t>(job.worker_rank())]) {
    RINGD_THROW(kMismatch, name_ << ": " << who << " registered twice (two workers with rank "
                                 << job.worker_rank() << "?)");
  }
  registered_[static_cast<size_t>(job.worker_rank())] = 1;
  ++registered_count_;
  last_activity_ = std::chrono::steady_clock::now();
}

bool ShardStore::worker_left(int rank) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!left_[static_cast<size_t>(rank)]) {
    left_[static_cast<size_t>(rank)] = 1;
    ++left_count_;
  }
  const bool done = left_count_ == job_.workers();
  last_activity_ = std::chrono::steady_clock::now();
  changed_.notify_all();
  return done;
}

void ShardStore::worker_lost(int rank, const std::string& why) {
  fail("worker " + std::to_string(rank) + " was lost: " + why);
}

void ShardStore::fail(const std::string& why) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (failed_) return;
  failed_ = true;
  failure_code_ = static_cast<int>(ErrorCode::kPeerLost);
  failure_ = name_ + ": " + why;
  changed_.notify_all();
}

void ShardStore::check() const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (failed_) throw_failure();
}

void ShardStore::throw_failure() const {
  throw Error(static_cast<ErrorCode>(failure_code_), failure_);
}

bool ShardStore::asynchronous() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return job_.asynchronous();
}

int ShardStore::server_index() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return job_.server_index();
}

std::string ShardStore::tensor_name(size_t index) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (index >= static_cast<size_t>(job_.tensors_size())) return "#" + std::to_string(index);
  return job_.tensors(static_cast<int>(index)).name();
}

size_t ShardStore::count_of(size_t index) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return job_.tensors(static_cast<int>(index)).count();
}

size_t ShardStore::tensor_count() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return static_cast<size_t>(job_.tensors_size());
}

int64_t ShardStore::applied_step(size_t index) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const int slot = index < slot_of_.size() ? slot_of_[index] : -1;
  return slot < 0 ? kNoStep : tensors_[static_cast<size_t>(slot)].applied;
}

ShardStore::Tensor& ShardStore::owned_tensor(size_t index, const char* what) {
  if (!have_job_) RINGD_THROW(kProtocol, name_ << ": " << what << " before REGISTER");
  if (index >= slot_of_.size() || slot_of_[index] < 0) {
    const std::string tensor = index < static_cast<size_t>(job_.tensors_size())
                                   ? "tensor " + std::to_string(index) + " '" +
                                         job_.tensors(static_cast<int>(index)).name() + "'"
                                   : "tensor #" + std::to_string(index) + " (the job has " +
                                         std::to_string(job_.tensors_size()) + ")";
    RINGD_THROW(kMismatch, name_ << " (server " << job_.server_index() << "): " << what << " of "
                                 << tensor << ", which this server does not hold");
  }
  return tensors_[static_cast<size_t>(slot_of_[index])];
}

float* ShardStore::begin_init(int rank, size_t index) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (failed_) throw_failure();
  Tensor& tensor = owned_tensor(index, "INIT");
  if (rank != 0) {
    RINGD_THROW(kProtocol, name_ << ": worker " << rank << " sent initial values of '"
                                 << tensor.name << "'; only worker 0 does");
  }
  if (tensor.init_started) {
    RINGD_THROW(kMismatch, name_ << ": initial values of '" << tensor.name
                                 << "' arrived twice (a restarted worker 0? restart the servers "
                                 << "too)");
  }
  tensor.init_started = true;
  return tensor.value.data();
}

void ShardStore::init_done(size_t index) {
  std::lock_guard<std::mutex> lock(mutex_);
  owned_tensor(index, "INIT").initialized = true;
  last_activity_ = std::chrono::steady_clock::now();
  changed_.notify_all();
}

float* ShardStore::begin_push(int rank, size_t index, int64_t step) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (failed_) throw_failure();
  Tensor& tensor = owned_tensor(index, "PUSH");
  if (!tensor.initialized) {
    RINGD_THROW(kProtocol, name_ << ": worker " << rank << " pushed '" << tensor.name
                                 << "' before its initial values arrived");
  }
  const size_t worker = static_cast<size_t>(rank);
  if (job_.asynchronous()) return nullptr;  // the caller receives into its own buffer
  if (tensor.pending == kNoStep) {
    // The first push of a step (the first one at all may be any step: a resumed job).
    if (tensor.applied != kNoStep && step != tensor.applied + 1) {
      RINGD_THROW(kMismatch, name_ << ": worker " << rank << " pushed '" << tensor.name
                                   << "' for step " << step << ", but step " << tensor.applied
                                   << " was the last applied (workers out of step?)");
    }
    tensor.pending = step;
  } else if (step != tensor.pending) {
    RINGD_THROW(kMismatch, name_ << ": worker " << rank << " pushed '" << tensor.name
                                 << "' for step " << step << " while step " << tensor.pending
                                 << " is being gathered (workers out of step?)");
  }
  if (tensor.claimed[worker]) {
    RINGD_THROW(kMismatch, name_ << ": worker " << rank << " pushed '" << tensor.name
                                 << "' twice for step " << step);
  }
  tensor.claimed[worker] = 1;
  return tensor.slots[worker].data();
}

void ShardStore::push_done(int rank, size_t index, int64_t step, double learning_rate) {
  std::unique_lock<std::mutex> lock(mutex_);
  Tensor& tensor = owned_tensor(index, "PUSH");
  const size_t worker = static_cast<size_t>(rank);
  last_activity_ = std::chrono::steady_clock::now();
  if (job_.asynchronous()) return;  // applied by apply_async
  tensor.arrived[worker] = 1;
  if (tensor.arrived_count == 0) {
    tensor.learning_rate = learning_rate;
  } else if (learning_rate != tensor.learning_rate) {
    RINGD_THROW(kMismatch, name_ << ": worker " << rank << " pushed '" << tensor.name
                                 << "' for step " << step << " with learning rate " << learning_rate
                                 << ", others with " << tensor.learning_rate);
  }
  if (++tensor.arrived_count < job_.workers()) return;
  // Every worker's gradient is in: the mean in rank order, then the optimizer.
  const size_t count = tensor.value.size();
  float* sum = tensor.sum.data();
  std::memcpy(sum, tensor.slots[0].data(), count * sizeof(float));
  for (size_t w = 1; w < tensor.slots.size(); ++w) {
    const float* slot = tensor.slots[w].data();
    for (size_t j = 0; j < count; ++j) sum[j] += slot[j];
  }
  const float inverse = 1.0f / static_cast<float>(job_.workers());
  for (size_t j = 0; j < count; ++j) sum[j] *= inverse;
  sgd_->apply(tensor.index, tensor.value.data(), sum, count, tensor.learning_rate);
  tensor.applied = step;
  tensor.pending = kNoStep;
  tensor.arrived_count = 0;
  std::fill(tensor.claimed.begin(), tensor.claimed.end(), 0);
  std::fill(tensor.arrived.begin(), tensor.arrived.end(), 0);
  changed_.notify_all();
}

void ShardStore::apply_async(size_t index, const float* grad, double learning_rate) {
  Tensor* tensor = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    tensor = &owned_tensor(index, "PUSH");
    last_activity_ = std::chrono::steady_clock::now();
  }
  std::lock_guard<std::mutex> tensor_lock(*tensor->lock);
  sgd_->apply(tensor->index, tensor->value.data(), grad, tensor->value.size(), learning_rate);
}

bool ShardStore::pull_ready(int64_t after_step) const {
  for (const Tensor& tensor : tensors_) {
    if (!tensor.initialized) return false;
    if (after_step >= 0 && !job_.asynchronous() &&
        (tensor.applied == kNoStep || tensor.applied < after_step)) {
      return false;
    }
  }
  return true;
}

std::string ShardStore::missing_text(int64_t after_step) const {
  for (const Tensor& tensor : tensors_) {
    if (!tensor.initialized) {
      return "'" + tensor.name + "' has no initial values yet (has worker 0 started?)";
    }
    if (after_step >= 0 && (tensor.applied == kNoStep || tensor.applied < after_step)) {
      std::string missing;
      for (size_t w = 0; w < tensor.arrived.size(); ++w) {
        if (!tensor.arrived[w]) missing += (missing.empty() ? "" : ", ") + std::to_string(w);
      }
      return "'" + tensor.name + "' still lacks the step " + std::to_string(after_step) +
             " gradients of worker(s) " + missing;
    }
  }
  return "";
}

void ShardStore::note_activity() {
  std::lock_guard<std::mutex> lock(mutex_);
  last_activity_ = std::chrono::steady_clock::now();
}

void ShardStore::pull(int64_t after_step, std::chrono::milliseconds timeout,
                      std::vector<const float*>* out, std::vector<std::vector<float>>* scratch,
                      const std::function<void()>& waiting) {
  using Clock = std::chrono::steady_clock;
  std::unique_lock<std::mutex> lock(mutex_);
  if (!have_job_) RINGD_THROW(kProtocol, name_ << ": PULL before REGISTER");
  last_activity_ = Clock::now();
  // The limit is on silence: over a shared link the step's other gradients can take longer than
  // the timeout to arrive, and every arriving byte (note_activity) says the job is alive.
  const auto beat = std::min<Clock::duration>(timeout / 3, std::chrono::seconds(1));
  auto next_beat = Clock::now() + beat;
  while (!failed_ && !pull_ready(after_step)) {
    const auto deadline = last_activity_ + timeout;
    const auto wake = waiting ? std::min(deadline, next_beat) : deadline;
    if (changed_.wait_until(lock, wake) == std::cv_status::no_timeout || pull_ready(after_step) ||
        failed_) {
      continue;
    }
    const auto now = Clock::now();
    if (now >= last_activity_ + timeout) {
      RINGD_THROW(kTimeout, name_ << " (server " << job_.server_index() << "): nothing arrived for "
                                  << timeout.count() << " ms while waiting for "
                                  << step_text(after_step) << ": " << missing_text(after_step));
    }
    if (waiting && now >= next_beat) {
      lock.unlock();
      waiting();
      lock.lock();
      next_beat = Clock::now() + beat;
    }
  }
  // A step that is complete is served even when the job failed since (a worker died after
  // pushing it): its values are right, and the failure shows at the next step.
  if (!pull_ready(after_step)) throw_failure();
  out->clear();
  if (!job_.asynchronous()) {
    for (const Tensor& tensor : tensors_) out->push_back(tensor.value.data());
    return;
  }
  lock.unlock();
  scratch->resize(tensors_.size());
  for (size_t k = 0; k < tensors_.size(); ++k) {
    std::lock_guard<std::mutex> tensor_lock(*tensors_[k].lock);
    (*scratch)[k] = tensors_[k].value;
    out->push_back((*scratch)[k].data());
  }
}

void ShardStore::wait_until_done(std::chrono::milliseconds idle_limit) {
  std::unique_lock<std::mutex> lock(mutex_);
  auto done = [this] { return failed_ || (have_job_ && left_count_ == job_.workers()); };
  while (!done()) {
    if (idle_limit.count() <= 0) {
      changed_.wait(lock);
      continue;
    }
    const auto idle_until = last_activity_ + idle_limit;
    if (std::chrono::steady_clock::now() >= idle_until) {
      std::string waiting;
      for (size_t w = 0; w < left_.size(); ++w) {
        if (!left_[w]) {
          waiting += std::string(waiting.empty() ? "" : ", ") + std::to_string(w) +
                     (registered_[w] ? "" : " (never registered)");
        }
      }
      RINGD_THROW(kTimeout, name_ << ": no worker was heard from for " << idle_limit.count()
                                  << " ms while waiting for the job to end; still waiting for "
                                  << (have_job_ ? "worker(s) " + waiting
                                                : std::string("any worker to register")));
    }
    changed_.wait_until(lock, idle_until);
  }
  if (failed_) throw_failure();
}

}  // namespace ringd::ps
