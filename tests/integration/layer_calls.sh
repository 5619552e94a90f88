#!/usr/bin/env bash
# tests/integration/layer_calls.sh: the layer order of docs/conventions.md, checked on the calls the compiled objects
# make (include_rules.sh sees only #include lines; a call declared in a lower layer's header but defined above it,
# e.g. core calling into fns, shows only here). Each of libsluice's object files may reference sl_/sl__ functions
# defined in its own folder or in folders before it; each reference up the order is printed.
set -uo pipefail
BIN=${SL_BIN:?}
OBJ=$BIN/src/CMakeFiles/sluice_obj.dir
[ -d "$OBJ" ] || { echo "layer_calls: no object directory $OBJ"; exit 1; }
command -v nm >/dev/null || { echo "layer_calls: nm not found"; exit 77; }
cd "$OBJ"
mapfile -t objs < <(find . -name '*.o' | sed 's|^\./||' | sort)
# One nm for the definitions, one for the references, joined in awk: "file: calls sym, defined in dir".
out=$( { nm -A --defined-only -g "${objs[@]}" | awk '$2 ~ /^[TDBR]$/ && $3 ~ /^sl_/ {print "D", $1, $3}'
         nm -A -u "${objs[@]}" | awk '$3 ~ /^sl_/ {print "U", $1, $3}'; } | awk '
  BEGIN { n = split("core io fns gen ops trace plan prov prov/store prov/corpus prov/analytics dist report cli", L, " ")
          split("0 1 2 3 4 5 6 7 7 8 9 10 11 12", R, " "); for (i = 1; i <= n; i++) rank[L[i]] = R[i] }
  function dir(f) { sub(/:.*/, "", f); sub(/\/[^\/]*$/, "", f); return f }
  $1 == "D" { def[$3] = dir($2); next }
  { refs[++m] = dir($2) "\t" $2 "\t" $3 }
  END { for (k = 1; k <= m; k++) { split(refs[k], a, "\t"); d = def[a[3]]
          if (d != "" && (a[1] in rank) && rank[d] > rank[a[1]]) {
            f = a[2]; sub(/:.*/, "", f); sub(/\.o$/, "", f)
            print "src/" f ": calls " a[3] ", defined in src/" d "/: src/" a[1] "/ may not depend on a later layer" } } }')
broken=0
[ -n "$out" ] && { echo "$out"; broken=$(echo "$out" | wc -l); }
if [ "$broken" -gt 0 ]; then
  echo "layer_calls: $broken call(s) up the layer order (docs/conventions.md)"
  exit 1
fi
echo "layer_calls: ${#objs[@]} objects, no call up the layer order"
