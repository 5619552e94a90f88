#!/usr/bin/env bash
# tests/wheel/test_wheel.sh WHEEL_DIR WORK PYTHON CONSTRAINTS (make test-wheel): the manylinux wheel `make wheel` made,
# installed into a fresh plain venv, runs README.md's Python quick start with the system's copies of the libraries it
# carries (and libpq, and MPI) hidden from the loader: in a mount namespace of its own, each such file has an empty
# file bind-mounted over it, so a load that reached for one would fail. A control proves the hiding: the same CLI
# before auditwheel (the wheel pip built) cannot start there. The loader's log (LD_DEBUG=libs) of the quick start
# shows every library the wheel carries loaded from the wheel. Needs root (unshare -m, mount --bind).
set -euo pipefail

if [[ ${1:-} == --inside ]]; then
  # ---- inside the namespace: hide, then run. $2: the work dir; the rest: files to hide.
  work=$2
  shift 2
  mount --make-rprivate / # nothing here reaches the machine's mounts
  : >"$work/empty"
  for f in "$@"; do mount --bind "$work/empty" "$f"; done
  # the control: the CLI of the wheel before auditwheel links the system's libraries, hidden here
  if out=$("$work/unrepaired/sluice/_bin/sluice" --version 2>&1); then
    echo "test_wheel: FAIL: the unrepaired CLI started with the system's libraries hidden: $out" >&2
    exit 1
  fi
  grep -q "error while loading shared libraries" <<<"$out" || { echo "test_wheel: FAIL: control: $out" >&2; exit 1; }
  echo "test_wheel: control: the unrepaired CLI cannot start: ${out##*: error while loading shared libraries: }"
  # README.md's quick start as written, from a directory holding the repository's examples/ and the venv the
  # wheel route made
  cd "$work/qs"
  # under the loader's log (LD_DEBUG_OUTPUT: one file per process): the CLI's run and the extension's
  LD_DEBUG=libs LD_DEBUG_OUTPUT="$work/ld/ld" bash -e "$work/readme.sh"
  LD_DEBUG=libs LD_DEBUG_OUTPUT="$work/ld/ld" venv/bin/python "$work/readme.py"
  # libpq stays optional: with it hidden, opening a PostgreSQL store says what is missing
  venv/bin/python - <<'EOF'
import sluice, sluice._sluice as c
try:
    c.prov_check("postgresql://sluice@127.0.0.1:1/none")
    raise SystemExit("test_wheel: FAIL: a PostgreSQL store opened without libpq")
except sluice.StoreError as e:
    assert "need libpq" in str(e) and "libpq5" in str(e), str(e)
    print("test_wheel: without libpq:", str(e)[:160], "...")
EOF
  # MPI too: --workers says the build has none
  if out=$(venv/bin/sluice run examples/imagenet.json --workers 2 --take 1 2>&1); then
    echo "test_wheel: FAIL: --workers ran without MPI" >&2
    exit 1
  fi
  grep -q "needs MPI" <<<"$out" || { echo "test_wheel: FAIL: --workers without MPI: $out" >&2; exit 1; }
  echo "test_wheel: without MPI: ${out:0:160}"
  exit 0
fi

wheels=$1 work=$2 py=$3 constraints=$4
t0=$(date +%s)
[[ $(id -u) == 0 ]] || { echo "test_wheel: needs root (a mount namespace: unshare -m, mount --bind)" >&2; exit 1; }
shopt -s nullglob
whl=("$wheels"/sluice-*manylinux*.whl)
raw=("$wheels"/linux/sluice-*.whl)
((${#whl[@]} == 1 && ${#raw[@]} == 1)) || { echo "test_wheel: no wheel in $wheels (run make wheel)" >&2; exit 1; }
root=$(cd "$(dirname "$0")/../.." && pwd)
rm -rf "$work" && mkdir -p "$work/qs/examples" "$work/ld" "$work/bin"
work=$(cd "$work" && pwd)
constraints=$(realpath "$constraints")
cp "$root/examples/imagenet.json" "$work/qs/examples/"

# README.md's quick start: its sh block and first python block (as tests/python/test_install.py reads them), and
# the wheel route's block, whose install replaces the sh block's first line; read here, as the namespace hides
# libraries that tools such as sed link
"$py" - "$root/README.md" "$work" <<'EOF'
import re, sys
text = open(sys.argv[1]).read()
part = text[text.index("**Python.**"):text.index("Other entry points:")]
sh = re.search(r"```sh\n(.*?)```", part, re.S).group(1).splitlines(True)
assert "pip install ./python" in sh[0], sh[0]  # the source route's install: the wheel's is what replaces it
open(sys.argv[2] + "/readme.sh", "w").write("".join(sh[1:]))
py = re.search(r"```python\n(.*?)```", part, re.S).group(1)
open(sys.argv[2] + "/readme.py", "w").write(
    py + "assert images.dtype.name == 'float32' and images.shape[1:] == (224, 224, 3), images.shape\n"
    "assert labels.shape == images.shape[:1]\nprint('test_wheel: quick start: batches of', images.shape)\n")
wheel = part[part.index("The wheel route"):]
open(sys.argv[2] + "/readme_wheel.sh", "w").write(re.search(r"```sh\n(.*?)```", wheel, re.S).group(1))
EOF

# the wheel installed as the wheel route says, into a plain venv (no system site-packages), with the test's
# interpreter as its python3 and numpy at the pinned version
cp "${whl[0]}" "$work/qs/"
ln -s "$(realpath "$py")" "$work/bin/python3"
(cd "$work/qs" && PATH=$work/bin:$PATH PIP_CONSTRAINT=$constraints bash -e "$work/readme_wheel.sh")
venv=$work/qs/venv
"$venv/bin/python" -m zipfile -e "${raw[0]}" "$work/unrepaired"
chmod +x "$work/unrepaired/sluice/_bin/sluice"
pkg=$("$venv/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['platlib'])")
carried=("$pkg"/sluice.libs/*)
((${#carried[@]})) || { echo "test_wheel: FAIL: the wheel carries no libraries (sluice.libs/)" >&2; exit 1; }

# What to hide: the system's copy of each library the wheel carries (its name without auditwheel's hash), libpq and
# MPI; not a library the interpreter itself links (it could not start without it; the wheel's copy of such a one
# is still loaded under its own name, which the loader's log below shows).
own=$(ldd "$(realpath "$py")" | awk '$3 ~ /^\// {print $3}' | xargs -r realpath | sort -u)
declare -A real=() # the file name of every library the loader's cache knows -> its path
while read -r f; do
  f=$(realpath "$f")
  real[$(basename "$f")]=$f
done < <(ldconfig -p | awk '/=>/ {print $NF}')
hide=() kept=()
add() { # add NAME: the system's file of that name (a soname or the file itself), unless the interpreter links it
  local f=${real[$1]:-}
  [[ -n $f ]] || f=$(ldconfig -p | awk -v n="$1" '$1 == n && !f {f = $NF} END {print f}' | xargs -r realpath)
  [[ -n $f ]] || return 0
  if grep -qxF "$f" <<<"$own"; then kept+=("$1"); else hide+=("$f"); fi
}
for f in "${carried[@]}"; do
  n=$(basename "$f" | sed -E 's/-[0-9a-f]{8}\././') # auditwheel's hash goes before the first dot after the name (liblber-2-HASH.5.so.0)
  if [[ -z ${real[$n]:-} ]]; then
    echo "test_wheel: FAIL: the wheel's $(basename "$f") has no system copy to hide" >&2
    exit 1
  fi
  add "$n"
done
for n in libpq.so.5 libmpi.so.40; do add "$n"; done
mapfile -t hide < <(printf '%s\n' "${hide[@]}" | sort -u)
echo "test_wheel: the wheel carries ${#carried[@]} libraries; ${#hide[@]} system files hidden" \
  "${kept[*]:+(not hidden, the interpreter links them: ${kept[*]})}"

unshare -m bash "$0" --inside "$work" "${hide[@]}"

# the loader's log of the quick start: each carried library loaded from the wheel, nothing hidden loaded
"$py" - "$work/ld" "$pkg/sluice.libs" "${hide[@]}" <<'EOF'
import glob, os, re, sys
logdir, libs, hidden = sys.argv[1], sys.argv[2], set(sys.argv[3:])
inits = set()
for f in glob.glob(logdir + "/*"):
    inits |= {os.path.realpath(m) for m in re.findall(r"calling init: (\S+)", open(f).read())}
carried = {os.path.realpath(p) for p in glob.glob(libs + "/*")}
missing = carried - inits
bad = inits & hidden
system = sorted({os.path.basename(p) for p in inits if not p.startswith(os.path.dirname(libs))
                 and os.path.basename(p).startswith(("lib", "ld-"))})
print(f"test_wheel: loader: {len(carried & inits)} of {len(carried)} carried libraries loaded from the wheel; "
      f"from the system: {', '.join(system)}")
if missing:
    sys.exit("test_wheel: FAIL: never loaded from the wheel: " + ", ".join(sorted(map(os.path.basename, missing))))
if bad:
    sys.exit("test_wheel: FAIL: hidden files loaded: " + ", ".join(sorted(bad)))
EOF

# with libpq visible (where it is installed), the wheel loads it: the store's error is the connection's
if ldconfig -p | grep -q 'libpq\.so\.5 '; then
  "$venv/bin/python" - <<'EOF'
import sluice, sluice._sluice as c
try:
    c.prov_check("postgresql://sluice@127.0.0.1:1/none")
except sluice.StoreError as e:
    assert "cannot connect" in str(e), str(e)
    print("test_wheel: with libpq:", str(e)[:120], "...")
EOF
fi
# the extension's types (sluice/_sluice.pyi, PEP 561): mypy's stubtest against the installed module, and mypy on
# the quick start as a user's typed code would see it
PIP_CONSTRAINT=$constraints "$venv/bin/python" -m pip install -q mypy
(cd "$work" && "$venv/bin/python" -m mypy.stubtest sluice._sluice && "$venv/bin/python" -m mypy readme.py)
echo "test_wheel: ok in $(($(date +%s) - t0)) s"
