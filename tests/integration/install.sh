#!/usr/bin/env bash
# tests/integration/install.sh: `cmake --install` (what `make install PREFIX=DIR` runs) into a scratch prefix, then
# a small C program built against it only through pkg-config, twice: `--cflags --libs` (libsluice.so) and `--static`
# (libsluice.a plus its private dependencies); both must build and run, and the installed CLI must run.
set -euo pipefail
SRC=${SL_SRC:?} BIN=${SL_BIN:?}
command -v pkg-config >/dev/null || { echo "install: pkg-config not found"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "install: $*"; exit 1; }

cmake --install "$BIN" --prefix "$T/prefix" >"$T/install.log" 2>&1 || { cat "$T/install.log"; fail "cmake --install failed"; }
P=$T/prefix
[ -x "$P/bin/sluice" ] || fail "no $P/bin/sluice"
[ -f "$P/include/sluice.h" ] || fail "no $P/include/sluice.h"
pc=$(find "$P" -name sluice.pc | head -1)
[ -n "$pc" ] || fail "no sluice.pc under $P"
libdir=$(dirname "$(dirname "$pc")")
ls "$libdir"/libsluice.a "$libdir"/libsluice.so >/dev/null || fail "libsluice.a/.so not in $libdir"
export PKG_CONFIG_PATH=$(dirname "$pc")

# A program that uses the public API only: a pipeline built from JSON, run to the end.
cat > "$T/prog.c" <<'C'
#include <sluice.h>
#include <stdio.h>
#include <string.h>
int main(void) {
  const char *spec = "{\"name\": \"p\", \"ops\": [{\"op\": \"range\", \"stop\": 10}, {\"op\": \"batch\", \"size\": 4}]}";
  sl_pipeline *p = NULL;
  if (sl_pipeline_from_json(&p, spec, strlen(spec), "prog")) {
    fprintf(stderr, "%s\n", sl_error_last());
    return 1;
  }
  sl_iter *it = NULL;
  if (sl_pipeline_iter(&it, p)) return 1;
  sl_elem e;
  sl_elem_init(&e);
  int n = 0;
  while (sl_iter_next(&e, it) == 0) {
    n++;
    sl_elem_clear(&e);
  }
  sl_iter_free(it);
  sl_pipeline_free(p);
  printf("sluice %s: %d batches\n", sl_version(), n);
  return n == 3 ? 0 : 1;
}
C
# A sanitized build's library needs the sanitizer's runtime in the program too.
san=()
[ -n "${SL_SANITIZE:-}" ] && san=(-fsanitize="$SL_SANITIZE")
CC=${CC:-cc}

$CC "${san[@]}" -std=c11 -Wall -Werror $(pkg-config --cflags sluice) "$T/prog.c" -o "$T/prog_shared" \
  $(pkg-config --libs sluice) || fail "linking with pkg-config --cflags --libs sluice failed"
LD_LIBRARY_PATH="$libdir" "$T/prog_shared" || fail "the program linked with libsluice.so did not run"
readelf -d "$T/prog_shared" | grep -q 'libsluice.so' || fail "prog_shared does not use libsluice.so"

# --static: the archive itself (-l:libsluice.a, as a linker picks the .so when both are there) and Libs.private.
static_libs=$(pkg-config --static --libs sluice | sed 's/-lsluice\b/-l:libsluice.a/')
$CC "${san[@]}" -std=c11 -Wall -Werror $(pkg-config --cflags sluice) "$T/prog.c" -o "$T/prog_static" $static_libs \
  || fail "linking with pkg-config --static --libs sluice failed"
"$T/prog_static" || fail "the statically linked program did not run"
readelf -d "$T/prog_static" | grep -q 'libsluice.so' && fail "prog_static still needs libsluice.so"

"$P/bin/sluice" --version | grep -q "sluice " || fail "the installed sluice --version"
echo "install: $P: CLI, headers, sluice.pc; a program linked both ways runs"
