#!/usr/bin/env bash
# tests/integration/include_rules.sh: the dependency rules of docs/conventions.md, checked on every #include "..."
# line of src/. Layer order: core, io, fns, ops, gen, trace, plan, prov/store, prov/analytics, dist, report, cli.
# A file may include the public headers ("sluice.h", "sluice/x.h"), headers of its own folder, and the _int.h
# headers of folders before it, written relative to src/ ("ops/engine_int.h"); src/cli/ only the public headers and
# its own. Each broken rule is printed as file:line: the include, and the rule.
set -uo pipefail
SRC=${SL_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
cd "$SRC/src" || exit 1

# The rank of a folder (path under src/ without the file name); -1: not a layer.
rank() {
  case "$1" in
    core) echo 0 ;; io) echo 1 ;; fns) echo 2 ;; ops) echo 3 ;; gen) echo 4 ;; trace) echo 5 ;; plan) echo 6 ;;
    prov/store | prov) echo 7 ;; prov/analytics) echo 8 ;; dist) echo 9 ;; report) echo 10 ;; cli) echo 11 ;;
    *) echo -1 ;;
  esac
}

broken=0
report() { # file line include rule
  echo "$1:$2: #include \"$3\": $4"
  broken=$((broken + 1))
}

while IFS= read -r f; do
  dir=$(dirname "$f")
  r=$(rank "$dir")
  if [ "$r" -lt 0 ]; then
    echo "$f: in folder src/$dir, which is not a layer of docs/conventions.md"
    broken=$((broken + 1))
    continue
  fi
  while IFS=: read -r line inc; do
    inc=$(sed -E 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"([^"]*)".*/\1/' <<<"$inc")
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
    idir=$(dirname "$inc")
    [ -e "$inc" ] || report "src/$f" "$line" "$inc" "no such header under src/"
    if [ "$dir" = cli ] && [ "$idir" != cli ]; then
      report "src/$f" "$line" "$inc" "src/cli/ uses the public API only (\"sluice.h\")"
      continue
    fi
    ir=$(rank "$idir")
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
