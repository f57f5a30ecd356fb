#!/usr/bin/env bash
# Prints the Debian/Ubuntu packages, as NAME=VERSION, that hold the shared libraries a binary loads:
# what a runtime image must install so that the binary built in another image starts there.
# The Dockerfile's build stage runs it on the ringd it just built, and the runtime stage installs
# exactly that list, so a library added to the build (OpenBLAS, zlib, ...) cannot be forgotten in
# the image. Run on this machine by tests/k8s/runtime_packages_test.py.
#
#   scripts/runtime_packages.sh BINARY
#
# Exits 1, naming the library, when a library is missing (ldd: "not found") or belongs to no
# package (copied in by hand): a runtime image could not get it from apt either.
set -euo pipefail

die() {
  echo "runtime_packages: ERROR: $*" >&2
  exit 1
}

(($# == 1)) || die "usage: $0 BINARY"
binary=$1
[[ -f $binary && -x $binary ]] || die "$binary is not an executable file"
command -v ldd >/dev/null 2>&1 || die "ldd not found (libc-bin)"
command -v dpkg-query >/dev/null 2>&1 || die "dpkg-query not found: Debian/Ubuntu only"

ldd_output=$(ldd "$binary") || die "ldd $binary failed: $ldd_output"
if missing=$(grep 'not found' <<<"$ldd_output"); then
  die "$binary needs libraries this machine does not have:
$missing"
fi

# "libfoo.so.1 => /usr/lib/x86_64-linux-gnu/libfoo.so.1 (0x...)": the resolved paths. The vdso
# has no file and the dynamic loader is listed by its own path (and owned by libc6).
mapfile -t libraries < <(awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' \
  <<<"$ldd_output" | sort -u)

declare -A packages=()
for library in "${libraries[@]}"; do
  # dpkg records the path the package shipped; /lib is a symlink to /usr/lib on merged-/usr
  # systems and /usr/local/cuda to /usr/local/cuda-X.Y, so try the path as given, then resolved,
  # then with the other /usr prefix.
  resolved=$(readlink -f "$library")
  owner=""
  for candidate in "$library" "$resolved" "${resolved#/usr}" "/usr$resolved"; do
    owner=$(dpkg-query -S "$candidate" 2>/dev/null | head -n 1 | cut -d: -f1) && [[ -n $owner ]] && break
  done
  [[ -n $owner ]] || die "$library (needed by $binary) belongs to no installed package"
  packages[$owner]=1
done

for package in $(printf '%s\n' "${!packages[@]}" | sort); do
  version=$(dpkg-query -W -f='${Version}' "$package")
  echo "$package=$version"
done
