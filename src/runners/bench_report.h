// The bench's output, laid out like nccl-tests so existing scripts and eyes can read it:
//
//   # <header: ranks, transport, dtype, op, algorithm, sweep>
//   #       size         count      type   redop    root     time    algbw    busbw  #wrong
//   #        (B)    (elements)                               (us)   (GB/s)   (GB/s)
//           4096          1024     float     sum      -1    52.31    0.078    0.117       0
//   # Out of bounds values : 0 OK
//   # Avg bus bandwidth : 0.117
//
// and, with --json FILE, one JSON object per size with exactly the keys
// op bytes count dtype redop ranks transport time_us algbw_GBps busbw_GBps wrong.
//
// Hierarchical runs (N nodes x L devices, ringd/hierarchy.h) add to the header the nodes, devices
// per node and hierarchy, to each row a column `nodebw`, and to each JSON object the keys nodes
// local_devices hierarchy node_busbw_GBps. There `ranks` is N x L (every device counts, as in
// nccl-tests), so busbw is per device and comparable with a flat run of N x L ranks; nodebw is
// algbw times the factor for N ranks: what each node's link carries each way in the step across
// nodes, the figure to hold against the line rate.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ringd/types.h"
#include "runners/bench_config.h"

namespace ringd::runners {

// busbw = algbw * factor, the bandwidth each link needs (nccl-tests' definition):
// allreduce 2(n-1)/n, allgather and reducescatter (n-1)/n, broadcast 1.
double bus_bandwidth_factor(Collective collective, int ranks);

struct BenchRow {
  Collective collective = Collective::kAllreduce;
  size_t bytes = 0;  // allgather/reducescatter: the whole (gathered / scattered) buffer
  size_t count = 0;  // elements in `bytes`
  DataType dtype = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  int root = -1;  // broadcast only; -1 elsewhere
  int ranks = 1;
  std::string transport;
  double time_us = 0;  // mean per iteration, slowest rank
  double algbw_gbps = 0;
  double busbw_gbps = 0;
  int64_t wrong = -1;  // mismatching elements over all ranks; -1 = not checked
  // Hierarchical runs only (nodes == 0 otherwise): ranks == nodes * local_devices.
  int nodes = 0;
  int local_devices = 0;
  std::string hierarchy;
  double node_busbw_gbps = 0;
};

// Fills in the bandwidths from bytes, time and ranks.
BenchRow make_row(Collective collective, size_t bytes, size_t count, DataType dtype, ReduceOp op,
                  int root, int ranks, const std::string& transport, double time_us, int64_t wrong);

// Marks `row` (made with ranks = nodes x local_devices) as hierarchical and fills in nodebw.
void add_hierarchy(BenchRow* row, int nodes, int local_devices, const std::string& hierarchy);

struct ReportHeader {
  Collective collective = Collective::kAllreduce;
  int ranks = 1;
  std::string transport;
  DataType dtype = DataType::kFloat32;
  ReduceOp op = ReduceOp::kSum;
  std::string algorithm;  // allreduce only
  size_t segment_bytes = 0;
  size_t min_bytes = 0;
  size_t max_bytes = 0;
  size_t step_factor = 0;
  int iters = 0;
  int warmup = 0;
  bool check = false;
  bool in_place = false;
  int root = -1;
  int nodes = 0;  // hierarchical runs only, as in BenchRow
  int local_devices = 0;
  std::string device_kind;  // the local group's kind(): "cpu", "nccl"
  std::string hierarchy;
};

// The header of a sweep of `config` on `ranks` ranks over `transport`: the flat run's; a
// hierarchical run sets its node and device fields and in_place.
ReportHeader report_header(const BenchConfig& config, int ranks, const std::string& transport);

std::string format_header(const ReportHeader& header);  // ends with the two column-title lines
std::string format_row(const BenchRow& row);            // one line, with '\n'
// `checked`: --check was on (else the wrong-value line says nothing was checked).
std::string format_footer(const std::vector<BenchRow>& rows, bool checked);
std::string format_json(const BenchRow& row);  // one line, no '\n'

// The redop column: the op's name for allreduce/reducescatter, "none" otherwise.
const char* redop_label(Collective collective, ReduceOp op);

}  // namespace ringd::runners
