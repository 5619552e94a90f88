#!/usr/bin/env bash
# Installs the Debian packages given as arguments when they are missing (as root), or prints the command to run.
# `make deps` is the only target that calls it (demo, test and bench call `make deps`; `make build` does not).
set -euo pipefail
missing=()
for p in "$@"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" = 0 ]; then
  echo "deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  echo "deps: sluice needs Debian packages that are not installed: ${missing[*]}" >&2
  echo "deps: installing them needs root; as root run (or re-run this make target as root):" >&2
  echo "  apt-get install -y ${missing[*]}" >&2
  exit 1
fi
