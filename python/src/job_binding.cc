// ringd.Job: a job opened from Python (include/ringd/job.h) and its engine's collectives on
// arrays, in place and without copies (tensors.h).
//
//   job = ringd.Job()                          # collective: every rank opens it
//   handle = job.allreduce("grad", x, "sum")   # x: a C-contiguous NumPy array, reduced in place
//   handle.wait()                              # returns x; Ctrl-C interrupts it
//
// Anything with DLPack (torch tensors, detached) is an array here; ringd.torch builds on that.
// Lifetimes: the engine writes into an array until its handle is done, so the job keeps every
// submitted array alive until then, even when the Python handle is gone. Waiting releases the GIL
// and wakes every 100 ms to let Python handle signals. Neither the engine's thread nor a callback
// ever takes the GIL, so a wait or a shutdown cannot deadlock with it.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "bindings.h"
#include "handle_binding.h"
#include "ringd/engine.h"
#include "ringd/error.h"
#include "ringd/job.h"
#include "ringd/types.h"
#include "tensors.h"
#include "tf_bridge.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace ringd::python {
namespace {

std::optional<Compression> parse_optional_compression(const std::optional<std::string>& text) {
  if (!text) return std::nullopt;
  return parse_compression(*text);
}

class PyJob {
 public:
  // The job serves ringd's TensorFlow ops too (tf_bridge.h): one job per process.
  explicit PyJob(std::unique_ptr<Job> job) : job_(std::move(job)), engine_(&job_->engine()) {
    tf_bridge_attach(engine_);
  }
  // Job's destructor would shut down too, but with the GIL held.
  ~PyJob() {
    try {
      shutdown("the ringd.Job object was destroyed", false);
    } catch (...) {  // a destructor does not throw; ~Job ends what is left
    }
  }
  PyJob(const PyJob&) = delete;
  PyJob& operator=(const PyJob&) = delete;

  const JobIdentity& identity() const { return job_->identity(); }

  PyHandle allreduce(std::string name, nb::handle array, const std::string& op,
                     const std::optional<std::string>& compression) {
    Submission s = submission(std::move(name), CollectiveKind::kAllreduce, array);
    s.op = parse_reduce_op(op);
    s.compression = parse_optional_compression(compression);
    return submit_one(std::move(s), array);
  }

  PyHandle broadcast(std::string name, nb::handle array, int root) {
    Submission s = submission(std::move(name), CollectiveKind::kBroadcast, array);
    s.root = root;
    return submit_one(std::move(s), array);
  }

  PyHandle allgather(std::string name, nb::handle array) {
    return submit_one(submission(std::move(name), CollectiveKind::kAllgather, array), array);
  }

  // All or nothing: every array is checked before any is submitted, and the engine runs the
  // members only once all of them are ready on every rank.
  std::vector<PyHandle> grouped_allreduce(const std::string& group,
                                          const std::vector<std::string>& names,
                                          const std::vector<nb::object>& arrays,
                                          const std::string& op,
                                          const std::optional<std::string>& compression) {
    if (names.size() != arrays.size()) {
      throw Error(ErrorCode::kInvalidArgument, "ringd: group '" + group + "' has " +
                                                   std::to_string(names.size()) + " names for " +
                                                   std::to_string(arrays.size()) + " arrays");
    }
    forget_finished();
    const ReduceOp reduce_op = parse_reduce_op(op);
    const std::optional<Compression> wire = parse_optional_compression(compression);
    std::vector<Submission> members;
    for (size_t i = 0; i < names.size(); ++i) {
      Submission s = submission(names[i], CollectiveKind::kAllreduce, arrays[i]);
      s.op = reduce_op;
      s.compression = wire;
      members.push_back(std::move(s));
    }
    std::vector<Handle> handles = job_->engine().submit_group(group, std::move(members));
    std::vector<PyHandle> out;
    for (size_t i = 0; i < handles.size(); ++i) {
      in_flight_.push_back({handles[i], arrays[i]});
      out.emplace_back(std::move(handles[i]), arrays[i], CollectiveKind::kAllreduce);
    }
    return out;
  }

  void set_epoch(int epoch) {
    if (epoch < 0) {
      throw Error(ErrorCode::kInvalidArgument,
                  "ringd: set_epoch(" + std::to_string(epoch) + "): epochs count from 0");
    }
    job_->engine().set_epoch(epoch);
  }

  void set_dgc_options(double sparsity, const std::vector<double>& warmup, float momentum,
                       float clip_norm, double sample_fraction, size_t min_sparse_elements) {
    DgcOptions options;
    options.sparsity = sparsity;
    options.warmup = warmup;
    options.momentum = momentum;
    options.clip_norm = clip_norm;
    options.sample_fraction = sample_fraction;
    options.min_sparse_elements = min_sparse_elements;
    job_->engine().set_dgc_options(options);
  }

  void shutdown(const std::string& reason, bool failed) {
    {
      nb::gil_scoped_release release;
      tf_bridge_detach(engine_);
      job_->shutdown(reason, failed);
      tf_bridge_forget_all();
    }
    forget_finished();  // all of them: a stopped engine has failed its pending handles
  }

 private:
  struct InFlight {
    Handle handle;
    nb::object array;  // released (with the GIL held) once the handle is done
  };

  static Submission submission(std::string name, CollectiveKind kind, nb::handle array) {
    Submission s;
    s.tensor = tensor_from_array(array, name).tensor;
    s.name = std::move(name);
    s.kind = kind;
    return s;
  }

  PyHandle submit_one(Submission s, nb::handle array) {
    forget_finished();
    const CollectiveKind kind = s.kind;
    Handle handle = job_->engine().submit(std::move(s));
    in_flight_.push_back({handle, nb::borrow(array)});
    return PyHandle(std::move(handle), nb::borrow(array), kind);
  }

  void forget_finished() {
    std::erase_if(in_flight_, [](const InFlight& entry) { return entry.handle.done(); });
  }

  // Destroyed after job_ (declared before it), so no array goes while the engine may write it.
  std::vector<InFlight> in_flight_;
  std::unique_ptr<Job> job_;
  Engine* engine_;  // job_'s, kept to detach it from the TensorFlow ops (engine() throws once shut
                    // down)
};

// timeout_s=, seconds (0: RINGD_TIMEOUT), as a duration; `what` names the caller in the error.
std::chrono::milliseconds timeout_option(const char* what, double timeout_s) {
  if (!std::isfinite(timeout_s) || timeout_s < 0) {
    throw Error(ErrorCode::kInvalidArgument,
                std::string(what) + ": timeout_s=" + std::to_string(timeout_s) +
                    " is not a duration; pass seconds >= 0 (0: RINGD_TIMEOUT)");
  }
  return std::chrono::milliseconds(static_cast<int64_t>(std::ceil(timeout_s * 1000.0)));
}

JobOptions job_options(int rank, int size, std::string rendezvous, std::string transport,
                       double timeout_s, std::string interface) {
  JobOptions options;
  options.rank = rank;
  options.size = size;
  options.rendezvous = std::move(rendezvous);
  options.transport = std::move(transport);
  options.interface = std::move(interface);
  options.timeout = timeout_option("ringd.Job", timeout_s);
  return options;
}

std::string job_repr(const PyJob& job) {
  const JobIdentity& id = job.identity();
  return "ringd.Job(rank=" + std::to_string(id.rank) + ", size=" + std::to_string(id.size) +
         ", local_rank=" + std::to_string(id.local_rank) +
         ", local_size=" + std::to_string(id.local_size) + ", transport='" + id.transport +
         "', source='" + id.source + "')";
}

}  // namespace

void bind_job(nb::module_& module) {
  bind_handle(module);
  nb::class_<PyJob>(module, "Job",
                    "A ringd job: where this process sits and its connection to the others. "
                    "Opening it is collective: every rank of the job opens one.")
      .def(
          "__init__",
          [](PyJob* self, int rank, int size, std::string rendezvous, std::string transport,
             double timeout_s, std::string interface) {
            const JobOptions options =
                job_options(rank, size, std::move(rendezvous), std::move(transport), timeout_s,
                            std::move(interface));
            // Ctrl-C interrupts the wait for the peers (Job::open): KeyboardInterrupt at once.
            std::unique_ptr<Job> job;
            {
              nb::gil_scoped_release release;
              job = Job::open(options, python_signal_raised);
            }
            if (!job) throw nb::python_error();
            new (self) PyJob(std::move(job));
          },
          "rank"_a = -1, "size"_a = -1, "rendezvous"_a = "", "transport"_a = "",
          "timeout_s"_a = 0.0, nb::kw_only(), "interface"_a = "")
      .def_prop_ro("rank", [](const PyJob& job) { return job.identity().rank; })
      .def_prop_ro("size", [](const PyJob& job) { return job.identity().size; })
      .def_prop_ro("local_rank", [](const PyJob& job) { return job.identity().local_rank; })
      .def_prop_ro("local_size", [](const PyJob& job) { return job.identity().local_size; })
      .def_prop_ro("cross_rank", [](const PyJob& job) { return job.identity().cross_rank; })
      .def_prop_ro("cross_size", [](const PyJob& job) { return job.identity().cross_size; })
      .def_prop_ro("transport", [](const PyJob& job) { return job.identity().transport; })
      .def_prop_ro("source", [](const PyJob& job) { return job.identity().source; })
      .def("allreduce", &PyJob::allreduce, "name"_a, "array"_a, "op"_a,
           "compression"_a = nb::none(),
           "Starts reducing `array` in place across the ranks (op: sum, avg, min, max, prod); "
           "returns a Handle. Do not touch the array until the handle is done. compression "
           "(none, fp16, bf16, dgc; None: RINGD_COMPRESSION) is how float32 travels.")
      .def("broadcast", &PyJob::broadcast, "name"_a, "array"_a, "root"_a,
           "Starts overwriting `array` in place with rank `root`'s; returns a Handle.")
      .def("allgather", &PyJob::allgather, "name"_a, "array"_a,
           "Starts gathering every rank's `array` along the first dimension (which may differ "
           "per rank); the result is the Handle's output(), `array` is left as it is.")
      .def("grouped_allreduce", &PyJob::grouped_allreduce, "group"_a, "names"_a, "arrays"_a, "op"_a,
           "compression"_a = nb::none(),
           "allreduce of several arrays as one group: none of them runs before all of them are "
           "ready on every rank; returns one Handle per array.")
      .def("set_epoch", &PyJob::set_epoch, "epoch"_a,
           "The epoch (from 0) DGC's sparsity warm-up reads; every rank sets the same one before "
           "that epoch's first tensor.")
      .def("set_dgc_options", &PyJob::set_dgc_options, "sparsity"_a, "warmup"_a, "momentum"_a,
           "clip_norm"_a, "sample_fraction"_a, "min_sparse_elements"_a,
           "The settings of compression='dgc' tensors (include/ringd/dgc.h). Every rank must "
           "give the same ones (not checked here); fixed once a DGC tensor has run.")
      .def("shutdown", &PyJob::shutdown, "reason"_a = "", "failed"_a = false,
           "Stops the engine (on every rank, in effect) and closes the connection. Idempotent. "
           "`reason` (why this rank stops) reaches the other ranks' errors for the tensors they "
           "still wait on; `failed`: it stops because of its own error.")
      .def("__repr__", &job_repr);

  nb::class_<ElasticJob>(module, "ElasticJob",
                         "An elastic job (docs/elastic.md): form() joins the next generation of "
                         "its processes and returns it as a Job; ringd.torch.elastic drives it.")
      .def(
          "__init__",
          [](ElasticJob* self, std::string rendezvous, int min_ranks, int max_ranks,
             double timeout_s, std::string interface) {
            ElasticJobOptions options;
            options.rendezvous = std::move(rendezvous);
            options.min_ranks = min_ranks;
            options.max_ranks = max_ranks;
            options.timeout = timeout_option("ringd.ElasticJob", timeout_s);
            options.interface = std::move(interface);
            nb::gil_scoped_release release;
            new (self) ElasticJob(options);
          },
          "rendezvous"_a, "min_ranks"_a, "max_ranks"_a, "timeout_s"_a = 0.0, nb::kw_only(),
          "interface"_a = "")
      .def(
          "form",
          [](ElasticJob& self, int64_t step) {
            std::unique_ptr<Job> job;
            {
              nb::gil_scoped_release release;
              job = self.form(step);
            }
            return new PyJob(std::move(job));
          },
          "step"_a, nb::rv_policy::take_ownership,
          "Joins the next generation (step: how far this process's state is, -1: none) and "
          "returns its Job. Rank 0 holds the newest step.")
      .def(
          "end",
          [](ElasticJob& self, const std::string& reason) {
            nb::gil_scoped_release release;
            return self.end(reason);
          },
          "reason"_a, "Ends the generation formed last; returns the first reason recorded.")
      .def(
          "finish",
          [](ElasticJob& self, const std::string& reason) {
            nb::gil_scoped_release release;
            self.finish(reason);
          },
          "reason"_a, "Ends the job: a process that arrives later is told it finished.")
      .def(
          "newcomer_waiting",
          [](ElasticJob& self) {
            nb::gil_scoped_release release;
            return self.newcomer_waiting();
          },
          "Whether a process waits to join (the ranks must agree before ending the generation).")
      .def_prop_ro("generation", &ElasticJob::generation);
}

}  // namespace ringd::python
