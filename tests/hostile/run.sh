#!/usr/bin/env bash
# hostile/run.sh TABLE...: runs tables of hostile cases (issue 34): input an attacker or an unlucky user could give
# sluice (a spec, a planted link, a file, a full disk, a store's names) and what must come out (an exit code, an
# error matching a pattern, no secret, files as they were), under a bound on memory. The format is in README.md.
set -u
CLI=${SL_CLI:?SL_CLI names the sluice binary}
HDIR=$(cd "$(dirname "$0")" && pwd)
export CLI HDIR
# Sanitizers reserve terabytes of address space: no ulimit -v under them (the limit holds in the plain build).
vlimit_ok=1
[ -n "${SL_SANITIZE:-}" ] && vlimit_ok=0
failed=0 ran=0 skipped=0

have() { # NEED: true when this machine and build have it
  case $1 in
  root) [ "$(id -u)" = 0 ] ;;
  tmpfs) [ "$(id -u)" = 0 ] && { d=$(mktemp -d) && mount -t tmpfs -o size=64k tmpfs "$d" 2>/dev/null && umount "$d"; r=$?; rmdir "$d"; return $r; } ;;
  prov) [ "${SL_WITH_PROV:-1}" != 0 ] && [ "${SL_WITH_PROV:-1}" != OFF ] ;;
  nobody) [ "$(id -u)" = 0 ] && id nobody >/dev/null 2>&1 && command -v runuser >/dev/null ;;
  *) command -v "$1" >/dev/null ;;
  esac
}

run_case() {
  [ -n "$name" ] || return 0
  for n in "${needs[@]}"; do
    if ! have "$n"; then
      echo "SKIP $name (needs $n)"
      skipped=$((skipped + 1))
      return 0
    fi
  done
  ran=$((ran + 1))
  local T
  T=$(mktemp -d)
  local why=""
  (
    cd "$T" || exit 1
    export T
    for s in "${setup[@]}"; do eval "$s" || { echo "setup failed: $s" >&2; exit 1; }; done
    [ -z "$gen" ] || eval "$gen" > spec.json || { echo "gen failed: $gen" >&2; exit 1; }
    [ -z "$spec" ] || printf '%s\n' "$spec" > spec.json
  ) > "$T.setup" 2>&1 || why="setup: $(cat "$T.setup")"
  local c=${cmd:-'"$CLI" run spec.json'}
  if [ -z "$why" ]; then
    (
      cd "$T" && export T
      trap '' XFSZ # a file size limit is a failed write here, not a signal
      [ -n "$limit" ] && [ $vlimit_ok = 1 ] && ulimit -v "$limit"
      timeout -k 5 "$tmo" bash -c "$c"
    ) 2>&1 < /dev/null | cat > "$T.out" # through a pipe: a file size limit of the case does not cut its output
    local rc=${PIPESTATUS[0]}
    local out
    out=$(cat "$T.out")
    if [ $rc -ge 124 ] && [ $rc -ne "$want" ]; then
      why="exit $rc (124: timed out after ${tmo}s; >128: killed by signal $((rc - 128)))"
    elif [ $rc -ne "$want" ]; then
      why="exit $rc, wanted $want"
    fi
    for e in "${errors[@]}"; do
      [ -n "$why" ] && break
      printf '%s' "$out" | grep -Eq -- "$e" || why="output does not match /$e/"
    done
    for a in "${absents[@]}"; do
      [ -n "$why" ] && break
      ! printf '%s' "$out" | grep -Fq -- "$a" || why="output contains '$a'"
    done
    for k in "${checks[@]}"; do
      [ -n "$why" ] && break
      (cd "$T" && export T && eval "$k") > "$T.check" 2>&1 || why="check failed: $k: $(cat "$T.check")"
    done
    [ -z "$why" ] || why="$why
--- output of: $c
$(printf '%s' "$out" | head -c 3000)"
  fi
  if [ -n "$why" ]; then
    echo "FAIL $name: $why"
    failed=$((failed + 1))
  else
    echo "ok   $name"
  fi
  awk -v t="$T/" 'index($2, t) == 1 {print $2}' /proc/mounts | xargs -r umount 2>/dev/null # a case's tmpfs
  rm -rf "$T" "$T.setup" "$T.out" "$T.check"
}

reset() {
  name="" spec="" gen="" cmd="" limit="" tmo=120 want=1
  needs=() setup=() errors=() absents=() checks=()
}

for table in "$@"; do
  reset
  while IFS= read -r line || [ -n "$line" ]; do
    case $line in
    '#'*) continue ;;
    '') run_case; reset; continue ;;
    esac
    key=${line%% *}
    val=${line#* }
    [ "$val" = "$line" ] && val=""
    case $key in
    case) name=$val ;;
    needs) needs+=("$val") ;;
    setup) setup+=("$val") ;;
    spec) spec=$val ;;
    gen) gen=$val ;;
    cmd) cmd=$val ;;
    limit) limit=$val ;;
    timeout) tmo=$val ;;
    exit) want=$val ;;
    error) errors+=("$val") ;;
    absent) absents+=("$val") ;;
    check) checks+=("$val") ;;
    *) echo "FAIL $table: unknown key '$key' in case '$name'"; failed=$((failed + 1)) ;;
    esac
  done < "$table"
  run_case
done
echo "$ran cases run, $skipped skipped, $failed failed"
[ $failed -eq 0 ] && [ $ran -gt 0 ]
