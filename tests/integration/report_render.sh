#!/usr/bin/env bash
# tests/integration/report_render.sh: `sluice report` and `sluice prov report` as a user runs them: --help, the
# pages for a trace (alone, and with a trace of the tuned spec) and for a small generated store (with and without
# a model), parsed as XML and checked against `sluice analyze --json`; bad input with clear messages; then a trace
# page and a store page rendered by headless Chromium to PNGs that must have the window's size, not be blank and
# show the charts' colours. Exits 77 (ctest: skipped) only when Chromium is not installed; `make deps` installs it.
# SL_REPORT_RENDER=0 (set for sanitizer builds) leaves the rendering out.
set -euo pipefail
CLI=${SL_CLI:?SL_CLI is the sluice binary}
T=$(mktemp -d "${TMPDIR:-/tmp}/sluice-report-it-XXXXXX")
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$CLI" report --help | grep -q "usage: sluice report" || fail "report --help"
"$CLI" prov report --help | grep -q "usage: sluice prov report" || fail "prov report --help"
"$CLI" --help | grep -q "report" || fail "report missing from sluice --help"
"$CLI" prov --help | grep -q "report" || fail "report missing from sluice prov --help"

# ---- a trace, the tuned spec sluice optimize writes from it, a trace of that ----
cat > "$T/spin.json" <<'J'
{"name": "spin <&> 4", "ops": [
  {"op": "range", "stop": 1000000},
  {"op": "map", "fn": "spin", "args": {"us": 20}},
  {"op": "map", "fn": "spin", "args": {"us": 250}},
  {"op": "map", "fn": "spin", "args": {"us": 20}},
  {"op": "batch", "size": 2}
]}
J
"$CLI" trace "$T/spin.json" --seconds 60 --take 64 -o "$T/t.json" 2>/dev/null
"$CLI" optimize "$T/spin.json" --trace "$T/t.json" --measure 0 -o "$T/tuned.json" >/dev/null
"$CLI" trace "$T/tuned.json" --seconds 60 --take 64 -o "$T/tt.json" 2>/dev/null
"$CLI" report "$T/t.json" -o "$T/report.html" 2>"$T/err" || { cat "$T/err"; fail "report"; }
grep -q "wrote $T/report.html" "$T/err" || fail "report: no 'wrote' line"
"$CLI" report "$T/t.json" --spec "$T/spin.json" --tuned "$T/tt.json" -o "$T/tuned.html" 2>/dev/null || fail "report --tuned trace"
"$CLI" report "$T/t.json" --tuned "$T/tuned.json" > "$T/stdout.html" || fail "report --tuned spec to stdout"
"$CLI" analyze "$T/t.json" --json > "$T/a.json"

# Well-formed (XML), self-contained, every op present, the analyzer's bottleneck marked, the tuned run measured.
python3 - "$T" <<'PY' || fail "report structure"
import json, sys, xml.etree.ElementTree as ET
d = sys.argv[1]
a = json.load(open(f"{d}/a.json"))
for name in ("report.html", "tuned.html", "stdout.html"):
    text = open(f"{d}/{name}", encoding="utf-8").read()
    root = ET.fromstring(text)                      # raises on malformed markup
    assert root.tag == "html", name
    for bad in ("<script", "http:", "https:", "src="):
        assert bad not in text, (name, bad)
    paths = [g.get("data-path") for g in root.iter("g") if g.get("data-path")]
    assert paths == [o["path"] for o in a["ops"]], (name, paths)
    marked = [g.get("data-path") for g in root.iter("g") if "bottleneck" in (g.get("class") or "")]
    assert marked == [a["bottleneck"]], (name, marked)
    assert "spin &lt;&amp;&gt; 4" in text, name
    assert ("id=\"measured\"" in text) == (name == "tuned.html"), name
    assert ("Changes in the tuned spec" in text) == (name != "report.html"), name
PY

# ---- a small store ----
DB="$T/p.db"
"$CLI" prov gen "$DB" --pipelines 5 --days 30 --seed 4 >/dev/null
"$CLI" prov train "$DB" -o "$T/m.json" --trees 10 >/dev/null
"$CLI" prov report "$DB" --model "$T/m.json" -o "$T/prov.html" 2>/dev/null || fail "prov report --model"
"$CLI" prov report "$DB" --top 3 > "$T/prov-nomodel.html" || fail "prov report to stdout"
"$CLI" prov stats "$DB" --json > "$T/s.json"
python3 - "$T" <<'PY' || fail "prov report structure"
import json, sys, xml.etree.ElementTree as ET
d = sys.argv[1]
s = json.load(open(f"{d}/s.json"))
for name, model in (("prov.html", True), ("prov-nomodel.html", False)):
    text = open(f"{d}/{name}", encoding="utf-8").read()
    root = ET.fromstring(text)
    assert "<script" not in text and "http:" not in text
    push = [e.text for e in root.iter() if e.get("id") == "push-rate"]
    assert push == ["%.1f%%" % (100 * s["push_rate"])], push
    for c in s["compute_by_component"]:
        assert ">%s</text>" % c["component"] in text, c
    assert ("curve cadence" in text) == model, name
    assert ('id="no-model"' in text) != model, name
    wasted = [g for g in root.iter("g") if g.get("class") == "bar waste"]
    assert len(wasted) == (min(s["pipelines"], 20) if model else min(s["pipelines"], 3)), len(wasted)
PY

# ---- bad input: clear messages, no crash ----
expect_fail() { # expect_fail WANT-RC MESSAGE CMD...
  local want=$1 msg=$2 rc=0
  shift 2
  "$@" >/dev/null 2>"$T/err" || rc=$?
  [ "$rc" = "$want" ] || fail "$* exited $rc, wanted $want"
  grep -q -- "$msg" "$T/err" || { cat "$T/err"; fail "$*: no '$msg'"; }
}
expect_fail 1 "cannot open the trace" "$CLI" report "$T/missing.json" -o "$T/x.html"
head -c 300 "$T/t.json" > "$T/cut.json"
expect_fail 1 "malformed JSON" "$CLI" report "$T/cut.json" -o "$T/x.html"
sed 's/"us": 250/"us": 100/' "$T/spin.json" > "$T/other.json"
expect_fail 1 "different pipeline" "$CLI" report "$T/t.json" --tuned "$T/other.json"
expect_fail 2 "a TRACE file is required" "$CLI" report
expect_fail 2 "unknown option" "$CLI" report "$T/t.json" --frobnicate
python3 -c 'import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute("CREATE TABLE t (x)"); c.commit()' "$T/other.db"
expect_fail 1 "not an ML Metadata database" "$CLI" prov report "$T/other.db" -o "$T/x.html"
printf 'not a database, just text padding out a page of nothing much at all......' > "$T/junk.db"
expect_fail 1 "not an SQLite database" "$CLI" prov report "$T/junk.db"
expect_fail 1 "prov report" "$CLI" prov report "$DB" --model "$T/missing-model.json"
expect_fail 2 "--top must be positive" "$CLI" prov report "$DB" --top 0
[ ! -e "$T/x.html" ] || fail "a page was written for bad input"

# ---- rendering in headless Chromium (once: the sanitizer builds set SL_REPORT_RENDER=0) ----
if [ "${SL_REPORT_RENDER:-1}" = 0 ]; then
  echo "report_render: pages checked; rendering is left to the plain build (SL_REPORT_RENDER=0)"
  exit 0
fi
# $SL_CHROMIUM names another browser binary (Chromium or Chrome).
CHROMIUM=$(command -v "${SL_CHROMIUM:-chromium}" || { [ -z "${SL_CHROMIUM:-}" ] && command -v chromium-browser; } || true)
if [ -z "$CHROMIUM" ]; then
  echo "SKIP: chromium is not installed (make deps installs it); the pages were checked, not rendered"
  exit 77
fi
# render PAGE PNG HEIGHT: a 1280 px wide window, as a laptop shows it. `timeout` kills Chromium's whole process
# group if it hangs.
render() {
  mkdir -p "$T/home"
  HOME="$T/home" timeout -k 5 60 "$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage \
    --disable-background-networking --disable-component-update --disable-sync --no-first-run \
    --user-data-dir="$T/profile" --hide-scrollbars --force-device-scale-factor=1 --window-size="1280,$3" \
    --screenshot="$2" "file://$1" >"$T/chromium.log" 2>&1 || { tail -5 "$T/chromium.log" >&2; fail "chromium on $1"; }
}
# checkpng PNG WIDTH HEIGHT RGB...: the size from IHDR; decoded from the top until every RGB (a colour the page
# fills a shape with) has been seen, which must happen, and in those rows more than 3% of pixels not white and at
# least 16 colours (not blank).
checkpng() {
  python3 - "$@" <<'PY'
import struct, sys, zlib
path, w, h = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
want = {bytes.fromhex(c) for c in sys.argv[4:]}
data = open(path, "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
pos, idat, ihdr = 8, b"", None
while pos < len(data):
    n, kind = struct.unpack(">I4s", data[pos:pos + 8])
    body = data[pos + 8:pos + 8 + n]
    if kind == b"IHDR": ihdr = struct.unpack(">IIBBBBB", body)
    if kind == b"IDAT": idat += body
    pos += 12 + n
W, H, depth, ctype, _, _, interlace = ihdr
assert (W, H) == (w, h), f"{path}: {W}x{H}, wanted {w}x{h}"
assert depth == 8 and ctype in (2, 6) and interlace == 0, ihdr
bpp = 3 if ctype == 2 else 4
raw, stride = zlib.decompress(idat), W * bpp
lo, hi = int.from_bytes(b"\x7f" * stride, "big"), int.from_bytes(b"\x80" * stride, "big")
prev, colours, inked, seen, y = bytes(stride), set(), 0, 0, 0
while y < H and not (want <= colours and y >= 200):
    f, cur = raw[y * (stride + 1)], raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)]
    if f == 0:
        line = cur
    elif f == 2:  # Up: bytewise (cur + prev) mod 256 for the whole row at once
        a, b = int.from_bytes(cur, "big"), int.from_bytes(prev, "big")
        line = (((a & lo) + (b & lo)) ^ ((a ^ b) & hi)).to_bytes(stride, "big")
    else:
        out = bytearray(cur)
        for i in range(stride):
            a = out[i - bpp] if i >= bpp else 0
            if f == 1:
                out[i] = (out[i] + a) & 255
            elif f == 3:
                out[i] = (out[i] + ((a + prev[i]) >> 1)) & 255
            else:  # Paeth, with p - a = b - c, p - b = a - c, p - c = a + b - 2c
                b, c = prev[i], prev[i - bpp] if i >= bpp else 0
                pa, pb = abs(b - c), abs(a - c)
                pc = abs(a + b - 2 * c)
                out[i] = (out[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        line = bytes(out)
    for x in range(0, stride, bpp * 2):  # every other pixel is plenty
        px = line[x:x + 3]
        colours.add(px)
        inked += px != b"\xff\xff\xff"
    seen += W // 2
    prev, y = line, y + 1
missing = [c.hex() for c in want - colours]
assert not missing, f"{path}: colours {missing} not drawn"
assert inked / seen > 0.03, f"{path}: only {inked / seen:.1%} of the pixels in rows 0-{y} are not white"
assert len(colours) >= 16, f"{path}: {len(colours)} colours in rows 0-{y}"
print(f"{path}: {W}x{H}; rows 0-{y}: {inked / seen:.0%} not white, {len(colours)} colours")
PY
}
render "$T/tuned.html" "$T/tuned.png" 1600
checkpng "$T/tuned.png" 1280 1600 bd0026 6b8fc7 2f855a || fail "trace report rendering" # bottleneck, bars, measured
render "$T/prov.html" "$T/prov.png" 2000
checkpng "$T/prov.png" 1280 2000 6b8fc7 e0533d 2f855a || fail "prov report rendering" # bars, waste, fresh points
echo "report_render: ok"
