#!/usr/bin/env bash
# Is a change to the engine within noise? The fusion engine's step of one build against another:
# a 4 KB and a 64 MB allreduce (one-tensor profiles) and the fused ResNet-50 step, each
# `ringd bench replay --compute-ms 0` on 4 ranks over ringd's tcp transport on loopback under
# mpirun, the two binaries interleaved round by round (issue 35: "measured side by side").
#
#   bench/compare_revisions.sh OLD_REV [--new BINARY] [--rounds R] [--ranks N] [--out DIR]
#
#   OLD_REV        a git revision; its ringd is built once (the same configuration as
#                  scripts/build.sh's, CUDA off) in a worktree under $TMPDIR, kept for later runs
#   --new BINARY   the other ringd (default: build/bin/ringd of this tree)
#   --rounds R     interleaved rounds (default 5); each round runs OLD then NEW, every profile
#   --ranks N      ranks (default 4)
#   --out DIR      results: DIR/{old,new}-{4k,64m,resnet50}.jsonl and the logs (default
#                  /tmp/ringd-compare-revisions)
#
# Prints, per profile, both medians of the rounds' mean step, every round, and new/old. The host's
# speed drifts (a round's ResNet-50 step moves by 20% here): read the rounds, not only the ratio,
# and repeat with the order of the binaries reversed (RINGD_COMPARE_NEW_FIRST=1) before calling a
# difference real.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
repo=$PWD

usage() { sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'; }
[[ $# -ge 1 && $1 != -* ]] || { usage >&2; exit 2; }
old_rev=$1
shift
new=$repo/build/bin/ringd
rounds=5
ranks=4
out=/tmp/ringd-compare-revisions
while [[ $# -gt 0 ]]; do
  case $1 in
    --new) new=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --ranks) ranks=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "compare_revisions: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
done
[[ -x $new ]] || { echo "compare_revisions: $new is not built (scripts/build.sh)" >&2; exit 1; }
commit=$(git rev-parse --verify "$old_rev^{commit}") ||
  { echo "compare_revisions: '$old_rev' is not a revision of this repository" >&2; exit 1; }
command -v mpirun >/dev/null || { echo "compare_revisions: needs mpirun (Open MPI)" >&2; exit 1; }

tree=${TMPDIR:-/tmp}/ringd-rev-${commit:0:12}
old=$tree/build/bin/ringd
if [[ ! -x $old ]]; then
  [[ -d $tree ]] || git worktree add --detach --force "$tree" "$commit" >/dev/null
  echo "compare_revisions: building ringd of ${commit:0:12} in $tree (once)" >&2
  (cd "$tree" && RINGD_BUILD_DIR=build RINGD_BUILD_TARGETS=ringd scripts/build.sh \
    -DRINGD_WITH_CUDA=OFF -DRINGD_BUILD_TESTS=OFF -DRINGD_BUILD_PYTHON=OFF >/dev/null)
fi

rm -rf "$out"
mkdir -p "$out"
printf 't\t1024\n' >"$out/4k.tsv"
printf 't\t16777216\n' >"$out/64m.tsv"
mpirun_flags=(--oversubscribe --mca mpi_yield_when_idle 1 --mca btl 'self,tcp'
              --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo)
[[ $(id -u) == 0 ]] && mpirun_flags=(--allow-run-as-root "${mpirun_flags[@]}")
order=(old new)
[[ ${RINGD_COMPARE_NEW_FIRST:-0} == 1 ]] && order=(new old)
for round in $(seq 1 "$rounds"); do
  for which in "${order[@]}"; do
    binary=$old
    [[ $which == new ]] && binary=$new
    for spec in "4k:$out/4k.tsv:300" "64m:$out/64m.tsv:5" "resnet50:resnet50:6"; do
      IFS=: read -r label profile steps <<<"$spec"
      mpirun "${mpirun_flags[@]}" -np "$ranks" "$binary" bench replay --transport tcp \
        --profile "$profile" --steps "$steps" --warmup-steps 2 --compute-ms 0 --check \
        --json "$out/$which-$label.jsonl" >"$out/$which-$label-$round.log" 2>&1 ||
        { echo "compare_revisions: $which $label failed:" >&2; tail -5 "$out/$which-$label-$round.log" >&2; exit 1; }
    done
  done
  echo "compare_revisions: round $round of $rounds done" >&2
done
python3 - "$out" "${commit:0:12}" "$new" <<'PY'
import json, pathlib, statistics, sys
out, commit, new = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3]
print(f"old: ringd of {commit}; new: {new}")
print("| engine step | old median (rounds) | new median (rounds) | new/old | wrong values |")
print("|---|---|---|---:|---:|")
for label, title in (("4k", "4 KB allreduce"), ("64m", "64 MB allreduce"),
                     ("resnet50", "ResNet-50 fused step")):
    medians, rounds, wrong = {}, {}, 0
    for which in ("old", "new"):
        runs = [json.loads(line) for line in (out / f"{which}-{label}.jsonl").read_text().splitlines()]
        steps = [run["mean_step_ms"] for run in runs]
        medians[which], rounds[which] = statistics.median(steps), steps
        wrong += sum(max(run["wrong"], 0) for run in runs)
    show = lambda which: f"{medians[which]:.3f} ms ({', '.join(f'{s:.3f}' for s in rounds[which])})"
    print(f"| {title} | {show('old')} | {show('new')} | {medians['new'] / medians['old']:.3f} | {wrong} |")
PY
