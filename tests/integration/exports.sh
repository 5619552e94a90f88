#!/usr/bin/env bash
# tests/integration/exports.sh: libsluice.so exports the public API and nothing else. Every defined dynamic function
# symbol must be an sl_* name declared in include/ (no sl__ internals, no protobuf-c sluice__tf__*, no helpers of
# the libraries we link), and every function the public headers declare must be exported (a declaration without
# SL_EXTERN is hidden by -fvisibility=hidden and would not link from a program using the shared library).
set -euo pipefail
SRC=${SL_SRC:?} BIN=${SL_BIN:?}
lib=$(ls "$BIN"/libsluice.so.*.*.* 2>/dev/null | head -1 || true)
[ -n "$lib" ] || { echo "exports: no libsluice.so in $BIN"; exit 1; }
command -v nm >/dev/null || { echo "exports: nm not found"; exit 77; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT

# Defined, dynamic, functions (T/W/i); data symbols (D/B/R) are listed too: a public header declares none.
nm -D --defined-only "$lib" | awk '$2 ~ /^[TtWwiDdBbRrVv]$/ {print $3}' | sed 's/@.*//' | sort -u > "$T/exported"
# Declared: the identifier before the first '(' of each file-level declaration that is not a typedef/static/macro.
# Without provenance (SL_WITH_PROV=OFF) the provenance declarations have no definitions: leave them out.
headers=("$SRC"/include/sluice/*.h)
[ "${SL_WITH_PROV:-1}" = 0 ] && headers=($(ls "$SRC"/include/sluice/*.h | grep -v '/prov[^/]*\.h$'))
cat "${headers[@]}" | sed 's|/\*.*\*/||g' | grep -E '^(SL_EXTERN )?[A-Za-z_][A-Za-z_0-9 \*]* \**sl_[a-z0-9_]+\(' \
  | grep -vE '^(static|typedef|#)' | sed -E 's/^[^(]*[ \*](sl_[a-z0-9_]+)\(.*/\1/' | sort -u \
  | { if [ "${SL_WITH_PROV:-1}" = 0 ]; then grep -v '^sl_report_prov'; else cat; fi; } > "$T/declared"

status=0
bad=$(grep -vE '^sl_[a-z0-9]' "$T/exported" || true)
if [ -n "$bad" ]; then
  echo "exports: libsluice.so exports $(echo "$bad" | wc -l) symbol(s) that are not sl_* public API:"
  echo "$bad" | head -40 | sed 's/^/  /'
  [ "$(echo "$bad" | wc -l)" -gt 40 ] && echo "  ..."
  status=1
fi
extra=$(comm -23 <(grep -E '^sl_[a-z0-9]' "$T/exported") "$T/declared" || true)
if [ -n "$extra" ]; then
  echo "exports: exported sl_* symbols that no public header declares (make them static or sl__):"
  echo "$extra" | sed 's/^/  /'
  status=1
fi
missing=$(comm -13 "$T/exported" "$T/declared" || true)
if [ -n "$missing" ]; then
  echo "exports: declared in include/ but not exported (SL_EXTERN missing, or not implemented):"
  echo "$missing" | head -40 | sed 's/^/  /'
  status=1
fi
[ $status = 0 ] && echo "exports: $(wc -l < "$T/exported") symbols, all declared sl_* functions"
exit $status
