/* The reference ringd is measured against: MPI_Allreduce (float sum) swept over sizes exactly as
 * `ringd bench allreduce` does it, with the same table and the same JSON keys.
 *
 *   mpirun -np 4 --mca mpi_yield_when_idle 1 mpi_allreduce_ref [-b 4K] [-e 64M] [-f 4]
 *          [--iters 20] [--warmup 5] [--check] [--json FILE]
 *
 * Per size: `warmup` untimed calls, a zero-byte-ish sync (MPI_Barrier), `iters` timed calls; time
 * is the mean per call of the slowest rank (MPI_MAX over ranks), algbw = bytes / time and
 * busbw = algbw x 2(n-1)/n, in GB/s (1e9 bytes/s), as in nccl-tests and ringd. Input and output
 * are separate buffers (not MPI_IN_PLACE), like ringd bench's default. With --check one more call
 * after the timed ones verifies every element against a closed form: rank r holds
 * in[i] = r + 1 + i % 8, so out[i] = n(n+1)/2 + n (i % 8), exact in float; `wrong` counts the
 * mismatching elements over all ranks (null without --check) and any makes the exit status 1.
 */
#include <errno.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  size_t min_bytes, max_bytes, step_factor;
  int iters, warmup, check;
  const char* json_path;
} Config;

static void die(int rank, const char* what) {
  if (rank == 0) fprintf(stderr, "mpi_allreduce_ref: %s\n", what);
  MPI_Abort(MPI_COMM_WORLD, 2);
}

/* "4096", "4K", "64M", "1G" (powers of 1024); 0 on a malformed value. */
static size_t parse_bytes(const char* text) {
  char* end = NULL;
  errno = 0;
  unsigned long long value = strtoull(text, &end, 10);
  if (errno != 0 || end == text || text[0] == '-') return 0;
  switch (*end) {
    case 'K':
    case 'k':
      value <<= 10;
      ++end;
      break;
    case 'M':
    case 'm':
      value <<= 20;
      ++end;
      break;
    case 'G':
    case 'g':
      value <<= 30;
      ++end;
      break;
    default: break;
  }
  return *end == '\0' ? (size_t)value : 0;
}

static Config parse_args(int argc, char** argv, int rank) {
  Config c = {4096, 64u << 20, 4, 20, 5, 0, NULL};
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    const char* v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--check") == 0) {
      c.check = 1;
      continue;
    }
    if (v == NULL)
      die(rank, "a flag is missing its value (flags: -b -e -f --iters --warmup --check --json)");
    if (strcmp(a, "-b") == 0 || strcmp(a, "--minbytes") == 0)
      c.min_bytes = parse_bytes(v);
    else if (strcmp(a, "-e") == 0 || strcmp(a, "--maxbytes") == 0)
      c.max_bytes = parse_bytes(v);
    else if (strcmp(a, "-f") == 0 || strcmp(a, "--stepfactor") == 0)
      c.step_factor = parse_bytes(v);
    else if (strcmp(a, "--iters") == 0)
      c.iters = atoi(v);
    else if (strcmp(a, "--warmup") == 0)
      c.warmup = atoi(v);
    else if (strcmp(a, "--json") == 0)
      c.json_path = v;
    else
      die(rank, "unknown flag (flags: -b -e -f --iters --warmup --check --json)");
    ++i;
  }
  if (c.min_bytes < 4 || c.max_bytes < c.min_bytes || c.step_factor < 2 || c.iters < 1 ||
      c.warmup < 0) {
    die(rank, "need 4 <= -b <= -e, -f >= 2, --iters >= 1, --warmup >= 0");
  }
  return c;
}

static void fill_input(float* in, size_t count, int rank) {
  for (size_t i = 0; i < count; ++i) in[i] = (float)(rank + 1 + (int)(i % 8));
}

static long long count_wrong(const float* out, size_t count, int ranks) {
  const float base = (float)ranks * (float)(ranks + 1) / 2.0f;
  long long wrong = 0;
  for (size_t i = 0; i < count; ++i) {
    if (out[i] != base + (float)ranks * (float)(i % 8)) ++wrong;
  }
  return wrong;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  const Config config = parse_args(argc, argv, rank);

  float* in = NULL;
  float* out = NULL;
  if (posix_memalign((void**)&in, 64, config.max_bytes) != 0 ||
      posix_memalign((void**)&out, 64, config.max_bytes) != 0) {
    die(rank, "cannot allocate the buffers");
  }
  FILE* json = NULL;
  if (rank == 0) {
    if (config.json_path != NULL && (json = fopen(config.json_path, "a")) == NULL) {
      die(rank, "cannot open the --json file");
    }
    printf("# mpi_allreduce_ref (Open MPI %d.%d) allreduce\n", OMPI_MAJOR_VERSION,
           OMPI_MINOR_VERSION);
    printf("# ranks: %d  transport: openmpi  dtype: float  op: sum\n", ranks);
    printf(
        "# minBytes %zu maxBytes %zu step: %zu(factor) warmup iters: %d iters: %d "
        "validation: %d\n#\n",
        config.min_bytes, config.max_bytes, config.step_factor, config.warmup, config.iters,
        config.check);
    printf("# %10s  %12s  %8s  %6s  %6s  %9s  %7s  %7s  %6s\n", "size", "count", "type", "redop",
           "root", "time", "algbw", "busbw", "#wrong");
    printf("# %10s  %12s  %8s  %6s  %6s  %9s  %7s  %7s  %6s\n", "(B)", "(elements)", "", "", "",
           "(us)", "(GB/s)", "(GB/s)", "");
    fflush(stdout);
  }

  long long wrong_total = 0;
  for (size_t bytes = config.min_bytes; bytes <= config.max_bytes; bytes *= config.step_factor) {
    const size_t count = bytes / sizeof(float);
    fill_input(in, count, rank);
    for (int i = 0; i < config.warmup; ++i) {
      MPI_Allreduce(in, out, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    const double start = MPI_Wtime();
    for (int i = 0; i < config.iters; ++i) {
      MPI_Allreduce(in, out, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    }
    double time_us = (MPI_Wtime() - start) * 1e6 / config.iters;
    MPI_Allreduce(MPI_IN_PLACE, &time_us, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);

    long long wrong = -1;
    if (config.check) {
      memset(out, 0xff, count * sizeof(float)); /* NaN sentinel */
      MPI_Allreduce(in, out, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      wrong = count_wrong(out, count, ranks);
      MPI_Allreduce(MPI_IN_PLACE, &wrong, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
      wrong_total += wrong;
    }
    if (rank == 0) {
      const size_t real_bytes = count * sizeof(float);
      const double algbw = (double)real_bytes / time_us / 1e3;
      const double busbw = algbw * 2.0 * (ranks - 1) / ranks;
      char wrong_text[32];
      if (wrong < 0)
        snprintf(wrong_text, sizeof wrong_text, "N/A");
      else
        snprintf(wrong_text, sizeof wrong_text, "%lld", wrong);
      printf("  %10zu  %12zu  %8s  %6s  %6d  %9.1f  %7.3f  %7.3f  %6s\n", real_bytes, count,
             "float", "sum", -1, time_us, algbw, busbw, wrong_text);
      fflush(stdout);
      if (json != NULL) {
        fprintf(json,
                "{\"op\":\"allreduce\",\"bytes\":%zu,\"count\":%zu,\"dtype\":\"float\","
                "\"redop\":\"sum\",\"ranks\":%d,\"transport\":\"openmpi\",\"time_us\":%.3f,"
                "\"algbw_GBps\":%.6g,\"busbw_GBps\":%.6g,\"wrong\":%s}\n",
                real_bytes, count, ranks, time_us, algbw, busbw, wrong < 0 ? "null" : wrong_text);
        fflush(json);
      }
    }
    if (bytes > config.max_bytes / config.step_factor) break; /* next step would overflow */
  }
  if (rank == 0) {
    printf("# Out of bounds values : %lld %s\n", wrong_total, wrong_total > 0 ? "FAILED" : "OK");
    if (json != NULL) fclose(json);
  }
  free(in);
  free(out);
  MPI_Finalize();
  return wrong_total > 0 ? 1 : 0;
}
