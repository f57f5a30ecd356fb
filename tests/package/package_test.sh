#!/usr/bin/env bash
# The library layer as a user meets it (issue 14): `cmake --install` of this build into a fresh
# prefix installs libringd.so, the public headers and the CMake package; a program outside the
# tree (tests/package/consumer/) configures with nothing but find_package(ringd), builds, links
# the shared library (not a copy of the core) and runs; asking for a version the package does not
# have fails. Bounded: a few seconds of cmake and one small compile.
#
#   package_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=${1:?BUILD_DIR}
source=${2:?SOURCE_DIR}
work=$(mktemp -d /tmp/ringd-package-XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" >"$work/install.log" || fail "cmake --install: $(tail -5 "$work/install.log")"
library=$(find "$prefix" -name 'libringd.so' | head -1)
[[ -n $library ]] || fail "no libringd.so under $prefix: $(cat "$work/install.log")"
for file in include/ringd/engine.h include/ringd/collectives.h include/ringd/config.h bin/ringd; do
  [[ -e $prefix/$file ]] || fail "$file was not installed"
done
config=$(find "$prefix" -name ringdConfig.cmake | head -1)
[[ -n $config ]] || fail "no ringdConfig.cmake under $prefix"
echo "ok   installed: ${library#"$prefix"/}, include/ringd ($(ls "$prefix/include/ringd" | wc -l) headers), ${config#"$prefix"/}"

generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
if ! cmake -S "$source/tests/package/consumer" -B "$work/consumer" "${generator[@]}" \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release >"$work/configure.log" 2>&1; then
  fail "the consumer does not configure with find_package(ringd):
$(cat "$work/configure.log")"
fi
cmake --build "$work/consumer" >"$work/build.log" 2>&1 || fail "the consumer does not build:
$(tail -30 "$work/build.log")"
# Into a variable first: under pipefail, `ldd | grep -q` fails when grep exits at the first match
# and ldd, still writing, dies of SIGPIPE.
linked=$(ldd "$work/consumer/consumer")
grep -q "libringd.so" <<<"$linked" || fail "the consumer does not link libringd.so:
$linked"
"$work/consumer/consumer" || fail "the consumer failed"

mkdir -p "$work/too-new"
sed 's/find_package(ringd 0.1 REQUIRED)/find_package(ringd 9.0 REQUIRED)/' \
  "$source/tests/package/consumer/CMakeLists.txt" >"$work/too-new/CMakeLists.txt"
cp "$source/tests/package/consumer/consumer.cc" "$work/too-new/"
if cmake -S "$work/too-new" -B "$work/too-new/build" -DCMAKE_PREFIX_PATH="$prefix" \
  >"$work/too-new.log" 2>&1; then
  fail "find_package(ringd 9.0) succeeded against ringd $(grep -o 'PACKAGE_VERSION "[^"]*"' \
    "$(dirname "$config")/ringdConfigVersion.cmake" | head -1)"
fi
grep -q "ringd" "$work/too-new.log" || fail "the version error does not name ringd"
echo "ok   find_package(ringd 9.0) is refused"
