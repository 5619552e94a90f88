#!/usr/bin/env bash
# tests/integration/include_rules.sh: the dependency rules of docs/conventions.md, checked on every #include "..."
# line of src/. Layer order: core, io, fns, gen, ops, trace, plan, prov/store, prov/corpus, prov/analytics, dist,
# report, cli.
# A file may include the public headers ("sluice.h", "sluice/x.h"), headers of its own folder, and the _int.h
# headers of folders before it, written relative to src/ ("ops/engine_int.h"); src/cli/ only the public headers and
# its own. Each broken rule is printed as file:line: the include, and the rule.
set -uo pipefail
SRC=${SL_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
cd "$SRC/src" || exit 1

# The rank of each folder (path under src/ without the file name); a folder not listed is not a layer.
declare -A RANK=([core]=0 [io]=1 [fns]=2 [gen]=3 [ops]=4 [trace]=5 [plan]=6 [prov]=7 [prov/store]=7
  [prov/corpus]=8 [prov/analytics]=9 [dist]=10 [report]=11 [cli]=12)

broken=0
report() { # file line include rule
  echo "$1:$2: #include \"$3\": $4"
  broken=$((broken + 1))
}

while IFS= read -r f; do
  dir=${f%/*}
  r=${RANK[$dir]:--1}
  if [ "$r" -lt 0 ]; then
    echo "$f: in folder src/$dir, which is not a layer of docs/conventions.md"
    broken=$((broken + 1))
    continue
  fi
  while IFS=: read -r line inc; do
    inc=${inc#*\"}
    inc=${inc%%\"*}
    case "$inc" in
      sluice.h | sluice/*.h) continue ;; # the public API: everyone
      ../* | */../* | ./*)
        report "src/$f" "$line" "$inc" "write includes relative to src/ (\"ops/engine_int.h\"), without ../"
        continue ;;
      example.pb-c.h)
        [ "$dir" = io ] || report "src/$f" "$line" "$inc" "the generated protobuf header belongs to src/io/ only"
        continue ;;
    esac
    if [[ "$inc" != */* ]]; then # a bare name: a file of the same folder
      [ -e "$dir/$inc" ] || report "src/$f" "$line" "$inc" "a bare name must be a header of the file's own folder (src/$dir/)"
      continue
    fi
    idir=${inc%/*}
    [ -e "$inc" ] || report "src/$f" "$line" "$inc" "no such header under src/"
    if [ "$dir" = cli ] && [ "$idir" != cli ]; then
      report "src/$f" "$line" "$inc" "src/cli/ uses the public API only (\"sluice.h\")"
      continue
    fi
    ir=${RANK[$idir]:--1}
    if [ "$ir" -lt 0 ]; then
      report "src/$f" "$line" "$inc" "src/$idir/ is not a layer"
    elif [ "$idir" != "$dir" ] && [[ "$inc" != *_int.h ]]; then
      report "src/$f" "$line" "$inc" "another folder's header must be an internal header ending in _int.h"
    elif [ "$ir" -gt "$r" ]; then
      report "src/$f" "$line" "$inc" "src/$dir/ may not include src/$idir/ (a later layer)"
    fi
  done < <(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f")
done < <(find . -name '*.[ch]' -not -path './*/proto/*' | sed 's|^\./||' | sort)

if [ "$broken" -gt 0 ]; then
  echo "include_rules: $broken include(s) break the dependency rules (docs/conventions.md)"
  exit 1
fi
echo "include_rules: every #include of src/ follows the layer order"
