#!/usr/bin/env bash
# The Python environment the package's tests run in: a virtual environment with the pinned
# scripts/python_requirements.txt (torch, numpy, pytest, nanobind), created on first use and
# reused; reinstalled only when that file changes. Prints the environment's python on stdout.
#
#   scripts/python_env.sh            install if needed, print .../bin/python
#
#   RINGD_PYTHON_VENV=build-tools/python-venv   where the environment lives
# Exits 2 when it cannot be installed (no python3-venv, PyPI unreachable), naming why.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"

venv=${RINGD_PYTHON_VENV:-build-tools/python-venv}
[[ $venv == /* ]] || venv=$repo/$venv
requirements=$repo/scripts/python_requirements.txt
say() { echo "python_env: $*" >&2; }

mkdir -p "$(dirname "$venv")"
exec 9>"$venv.lock"
flock 9  # two callers at once (ctest, a person) install once
wanted=$(sha256sum "$requirements" | cut -d' ' -f1)
if [[ ! -f $venv/stamp || $(cat "$venv/stamp") != "$wanted" ]]; then
  say "installing scripts/python_requirements.txt into $venv (once; torch is a large download)"
  rm -rf "$venv"
  python=$(command -v python3) || {
    say "ERROR: python3 not found (scripts/install_deps.sh installs it)"
    exit 2
  }
  log=$venv.log
  if ! "$python" -m venv "$venv" >"$log" 2>&1; then
    say "ERROR: '$python -m venv $venv' failed (Debian: apt-get install python3-venv): $(tail -n 3 "$log")"
    exit 2
  fi
  started=$SECONDS
  if ! "$venv/bin/pip" install --quiet --disable-pip-version-check --no-cache-dir \
    -r "$requirements" >>"$log" 2>&1; then
    say "ERROR: pip could not install scripts/python_requirements.txt (is PyPI reachable?); see $log: $(tail -n 3 "$log")"
    rm -rf "$venv"
    exit 2
  fi
  echo "$wanted" >"$venv/stamp"
  say "installed in $((SECONDS - started)) s"
fi
echo "$venv/bin/python"
