#!/usr/bin/env bash
# dockerd's OCI runtime for the e2e cluster (dockerd --add-runtime clamp=THIS): runc, except that a
# container asking for a negative oom_score_adj gets 0. The kubelet gives every pod sandbox -998,
# and this VM refuses lowering a score (runc then fails with "can't get final child's PID from
# pipe"). Test infrastructure only; a real node needs none of it.
set -euo pipefail
args=("$@")
bundle=
for ((i = 0; i < ${#args[@]}; i++)); do
  case ${args[i]} in
    --bundle | -b) bundle=${args[i + 1]:-} ;;
    --bundle=*) bundle=${args[i]#--bundle=} ;;
  esac
done
if [[ -n $bundle && -f $bundle/config.json ]] &&
  jq -e '(.process.oomScoreAdj // 0) < 0' "$bundle/config.json" >/dev/null; then
  jq '.process.oomScoreAdj = 0' "$bundle/config.json" >"$bundle/config.json.clamp"
  mv "$bundle/config.json.clamp" "$bundle/config.json"
fi
exec runc "$@"
