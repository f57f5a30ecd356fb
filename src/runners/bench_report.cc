#include "runners/bench_report.h"

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

#include "ringd/collectives.h"
#include "ringd/config.h"

namespace ringd::runners {
namespace {

std::string printf_string(const char* format, ...) __attribute__((format(printf, 1, 2)));
std::string printf_string(const char* format, ...) {
  char buffer[512];
  va_list args;
  va_start(args, format);
  const int length = std::vsnprintf(buffer, sizeof buffer, format, args);
  va_end(args);
  return std::string(buffer, length < 0 ? 0 : std::min<size_t>(length, sizeof buffer - 1));
}

// nccl-tests' precision rule: fewer decimals as the time grows.
std::string format_time(double time_us) {
  if (time_us >= 10000.0) return printf_string("%8.0f", time_us);
  if (time_us >= 100.0) return printf_string("%8.1f", time_us);
  return printf_string("%8.2f", time_us);
}

}  // namespace

double bus_bandwidth_factor(Collective collective, int ranks) {
  const double n = ranks;
  switch (collective) {
    case Collective::kAllreduce: return ranks > 1 ? 2.0 * (n - 1) / n : 0.0;
    case Collective::kAllgather:
    case Collective::kReduceScatter: return ranks > 1 ? (n - 1) / n : 0.0;
    case Collective::kBroadcast: return 1.0;
  }
  return 1.0;
}

const char* redop_label(Collective collective, ReduceOp op) {
  return collective_reduces(collective) ? reduce_op_name(op) : "none";
}

BenchRow make_row(Collective collective, size_t bytes, size_t count, DataType dtype, ReduceOp op,
                  int root, int ranks, const std::string& transport, double time_us,
                  int64_t wrong) {
  BenchRow row;
  row.collective = collective;
  row.bytes = bytes;
  row.count = count;
  row.dtype = dtype;
  row.op = op;
  row.root = collective == Collective::kBroadcast ? root : -1;
  row.ranks = ranks;
  row.transport = transport;
  row.time_us = time_us;
  row.algbw_gbps = time_us > 0 ? static_cast<double>(bytes) / time_us / 1e3 : 0.0;
  row.busbw_gbps = row.algbw_gbps * bus_bandwidth_factor(collective, ranks);
  row.wrong = wrong;
  return row;
}

void add_hierarchy(BenchRow* row, int nodes, int local_devices, const std::string& hierarchy) {
  row->nodes = nodes;
  row->local_devices = local_devices;
  row->hierarchy = hierarchy;
  row->node_busbw_gbps = row->algbw_gbps * bus_bandwidth_factor(row->collective, nodes);
}

namespace {

// A run of one process measures no network: say so, and how to start more, before the table.
std::string one_process_note(const ReportHeader& h) {
  std::string note;
  if (h.nodes > 0) {
    note = "# NOTE: one node: nothing crosses a network; the figures are this node's " +
           std::to_string(h.local_devices) + " local devices alone (busbw counts them as ranks).\n";
  } else {
    note =
        "# NOTE: one rank: nothing crosses a network and busbw is 0 by definition; time is a local "
        "copy.\n";
  }
  return note +
         "#   For N ranks: mpirun -np N ringd bench ...   (or: --transport inproc --ranks N; or\n"
         "#   --rank R --size N --rendezvous HOST:PORT in each of N processes)\n";
}

}  // namespace

ReportHeader report_header(const BenchConfig& config, int ranks, const std::string& transport) {
  ReportHeader h;
  h.collective = config.collective;
  h.ranks = ranks;
  h.transport = transport;
  h.dtype = config.dtype;
  h.op = config.op;
  h.algorithm = allreduce_algorithm_name(config.algorithm);
  h.segment_bytes = config.segment_bytes;
  h.min_bytes = config.min_bytes;
  h.max_bytes = config.max_bytes;
  h.step_factor = config.step_factor;
  h.iters = config.iters;
  h.warmup = config.warmup;
  h.check = config.check;
  h.in_place = config.in_place;
  h.root = config.root;
  return h;
}

std::string format_header(const ReportHeader& h) {
  std::ostringstream os;
  os << "# ringd " << RINGD_VERSION << " bench " << collective_name(h.collective) << "\n";
  os << "# ranks: " << h.ranks << "  transport: " << h.transport
     << "  dtype: " << dtype_name(h.dtype) << "  op: " << redop_label(h.collective, h.op);
  if (h.collective == Collective::kAllreduce) os << "  algorithm: " << h.algorithm;
  if (h.collective == Collective::kBroadcast) os << "  root: " << h.root;
  os << "  segment_bytes: ";
  if (h.segment_bytes)
    os << h.segment_bytes;
  else
    os << "default";
  os << "\n";
  if (h.nodes > 0) {
    os << "# nodes: " << h.nodes << "  local devices: " << h.local_devices;
    if (!h.device_kind.empty()) os << " (" << h.device_kind << ")";
    os << "  hierarchy: " << h.hierarchy
       << "  (busbw: per device, over all ranks; nodebw: per node, across nodes)\n";
  }
  if (h.nodes > 0 ? h.nodes == 1 : h.ranks == 1) os << one_process_note(h);
  os << "# minBytes " << h.min_bytes << " maxBytes " << h.max_bytes << " step: " << h.step_factor
     << "(factor) warmup iters: " << h.warmup << " iters: " << h.iters
     << " validation: " << (h.check ? 1 : 0) << " in-place: " << (h.in_place ? 1 : 0) << "\n";
  os << "#\n";
  os << printf_string("# %10s  %12s  %8s  %6s  %6s  %7s  %7s  %7s  %6s", "size", "count", "type",
                      "redop", "root", "time", "algbw", "busbw", "#wrong");
  os << (h.nodes > 0 ? printf_string("  %7s\n", "nodebw") : "\n");
  os << printf_string("# %10s  %12s  %8s  %6s  %6s  %7s  %7s  %7s  %6s", "(B)", "(elements)", "",
                      "", "", "(us)", "(GB/s)", "(GB/s)", "");
  os << (h.nodes > 0 ? printf_string("  %7s\n", "(GB/s)") : "\n");
  return os.str();
}

std::string format_row(const BenchRow& row) {
  const std::string wrong = row.wrong < 0 ? "N/A" : std::to_string(row.wrong);
  const std::string line = printf_string(
      "%12zu  %12zu  %8s  %6s  %6d %s  %7.3f  %7.3f  %6s", row.bytes, row.count,
      dtype_name(row.dtype), redop_label(row.collective, row.op), row.root,
      format_time(row.time_us).c_str(), row.algbw_gbps, row.busbw_gbps, wrong.c_str());
  return line + (row.nodes > 0 ? printf_string("  %7.3f\n", row.node_busbw_gbps) : "\n");
}

std::string format_footer(const std::vector<BenchRow>& rows, bool checked) {
  int64_t wrong = 0;
  double busbw_sum = 0;
  for (const BenchRow& row : rows) {
    if (row.wrong > 0) wrong += row.wrong;
    busbw_sum += row.busbw_gbps;
  }
  const double average = rows.empty() ? 0.0 : busbw_sum / static_cast<double>(rows.size());
  std::ostringstream os;
  if (checked) {
    os << "# Out of bounds values : " << wrong << (wrong > 0 ? " FAILED" : " OK") << "\n";
  } else {
    os << "# Out of bounds values : not checked (--check verifies every element)\n";
  }
  os << "# Avg bus bandwidth : " << printf_string("%g", average) << "\n";
  os << "#\n";
  return os.str();
}

std::string format_json(const BenchRow& row) {
  nlohmann::ordered_json object;
  object["op"] = collective_name(row.collective);
  object["bytes"] = row.bytes;
  object["count"] = row.count;
  object["dtype"] = dtype_name(row.dtype);
  object["redop"] = redop_label(row.collective, row.op);
  object["ranks"] = row.ranks;
  object["transport"] = row.transport;
  object["time_us"] = row.time_us;
  object["algbw_GBps"] = row.algbw_gbps;
  object["busbw_GBps"] = row.busbw_gbps;
  if (row.wrong < 0) {
    object["wrong"] = nullptr;
  } else {
    object["wrong"] = row.wrong;
  }
  if (row.nodes > 0) {
    object["nodes"] = row.nodes;
    object["local_devices"] = row.local_devices;
    object["hierarchy"] = row.hierarchy;
    object["node_busbw_GBps"] = row.node_busbw_gbps;
  }
  return object.dump();
}

}  // namespace ringd::runners
