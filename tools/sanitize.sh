#!/usr/bin/env bash
# Builds the C reader otel_diary.receiver._otlpscan with AddressSanitizer and
# UndefinedBehaviorSanitizer into build/sanitize/, then runs the tests that compare it with
# the pure-Python reader and protobuf through that build (tests/support/sanitized.py loads
# it in place of the installed one). Any invalid read or write, and any undefined
# behaviour, ends the run with the sanitizer's report and a non-zero status.
#
#   tools/sanitize.sh PYTHON SOURCE.c... [-- PYTEST ARGUMENTS]
set -euo pipefail
cd "$(dirname "$0")/.."

python=$1
shift
sources=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
    sources+=("$1")
    shift
done
[ $# -gt 0 ] && shift  # the "--"
[ ${#sources[@]} -gt 0 ] || { echo "sanitize: no C sources given" >&2; exit 2; }

cc=${CC:-gcc}
command -v "$cc" >/dev/null || { echo "sanitize: no C compiler ($cc) on PATH" >&2; exit 1; }
runtime() {  # the full path of a sanitizer runtime, or nothing
    local path
    path=$("$cc" -print-file-name="$1")
    [ "$path" != "$1" ] && [ -e "$path" ] && realpath "$path"
}
asan=$(runtime libasan.so) || true
ubsan=$(runtime libubsan.so) || true
if [ -z "$asan" ] || [ -z "$ubsan" ]; then
    cat >&2 <<MSG
sanitize: $cc has no AddressSanitizer or UndefinedBehaviorSanitizer runtime
  ($cc -print-file-name=libasan.so / libubsan.so found none).
  On Debian or Ubuntu: apt-get install libasan8 libubsan1 (with gcc 12; the package
  versions follow gcc's), or set CC to a compiler that has them.
MSG
    exit 1
fi

out=build/sanitize
mkdir -p "$out"
include=$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
# Loaded by path (tests/support/sanitized.py), so the file name needs no ABI suffix.
# Warnings are errors in the reader's own code; Python's headers (-isystem) are not judged.
"$cc" -shared -fPIC -O1 -g -fno-omit-frame-pointer -Wall -Wextra -Werror \
    -fsanitize=address,undefined -fno-sanitize-recover=all \
    -isystem "$include" "${sources[@]}" -o "$out/_otlpscan.so"

# PYTHONMALLOC=malloc: every Python object comes from malloc, which AddressSanitizer
# guards, so a read past the end of a small object is caught (Python's own small-object
# allocator would hide it; a bytes object's terminating NUL is still inside it). CPython leaves much allocated at exit on purpose:
# leak reports would be about it, not about the reader.
export OTLPSCAN_BUILD=$PWD/$out/_otlpscan.so
export LD_PRELOAD=$asan${LD_PRELOAD:+:$LD_PRELOAD}
export PYTHONMALLOC=malloc
export ASAN_OPTIONS=detect_leaks=0:halt_on_error=1:abort_on_error=0:exitcode=86${ASAN_OPTIONS:+:$ASAN_OPTIONS}
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:exitcode=87${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}
# --capture=sys: the sanitizers write their report to file descriptor 2 and end the process,
# which pytest's default capture (of the descriptors) would swallow.
exec "$python" -m pytest -p tests.support.sanitized -p no:cacheprovider --capture=sys -q "$@"
