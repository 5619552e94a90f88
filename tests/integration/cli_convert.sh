#!/usr/bin/env bash
# cli_convert.sh: `sluice convert` writes an image folder and a WebDataset tar shard as TFRecord shards of tf.Example
# that read back (tfrecord + parse_example) to the same images and labels, and an interrupted or failing convert
# leaves no file under a final name (nor a temporary one).
set -u
: "${SL_CLI:?}" "${SL_SRC:?}"
S=$SL_CLI
T=$(mktemp -d "${TMPDIR:-/tmp}/sluice-convert-it-XXXXXX")
trap 'rm -rf "$T"' EXIT
cd "$T"
fail() { echo "FAIL: $*"; exit 1; }
digest() { "$S" run "$1" --json --quiet --digest | python3 -c 'import json,sys; print(json.load(sys.stdin)["digest"])'; }

C=$SL_SRC/tests/fuzz/corpus
mkdir -p data/cat data/dog
cp "$C/image/rgb8.png" data/cat/a.png
cp "$C/image/lossless_alpha.webp" data/cat/b.webp
cp "$C/jpeg/rgb420.jpg" data/dog/c.jpg
cp "$C/jpeg/gray.jpg" data/dog/d.jpg
cat > folder.json <<'J'
{"ops": [{"op": "image_folder", "root": "data"}]}
J
out=$("$S" convert folder.json --out tfr --shards 3 --quiet) || fail "convert: $out"
echo "$out" | grep -q "4 elements into 3 TFRecord files" || fail "summary: $out"
[ "$(ls tfr | wc -l)" -eq 3 ] || fail "files: $(ls -a tfr)"
ls -a tfr | grep -q tmp && fail "a temporary file is left: $(ls -a tfr)"

# Read back: the same decoded images (digest of the image component alone) and the same labels.
cat > back.json <<'J'
{"ops": [{"op": "files", "glob": "tfr/*.tfrecord"}, {"op": "interleave", "cycle_length": 1, "source": [{"op": "tfrecord"}]},
 {"op": "map", "fn": "parse_example", "args": {"features": {"image/encoded": {"dtype": "bytes"},
  "image/class/label": {"dtype": "int64"}}}},
 {"op": "map", "fn": "decode_image", "args": {"channels": 3}}, {"op": "map", "fn": "select", "args": {"keep": ["image"]}}]}
J
cat > direct.json <<'J'
{"ops": [{"op": "image_folder", "root": "data"}, {"op": "map", "fn": "decode_image", "args": {"channels": 3}},
 {"op": "map", "fn": "select", "args": {"keep": ["image"]}}]}
J
a=$(digest back.json) && b=$(digest direct.json) || fail "digest runs"
[ -n "$a" ] && [ "$a" = "$b" ] || fail "read-back images differ: $a vs $b"
sed 's/"keep": \["image"\]/"keep": ["image", "image\/class\/label"]/' back.json > backl.json
labels=$("$S" head backl.json -n 9 --json | python3 -c '
import json, sys
d = json.load(sys.stdin)
print(sorted(c["values"][0] for e in d["elements"] for c in e["components"] if c["name"] == "image/class/label"))')
[ "$labels" = "[0, 0, 1, 1]" ] || fail "labels read back: $labels"

# A WebDataset shard: jpg -> image/encoded (with image/format), cls parsed to the label.
python3 - "$C/jpeg/rgb420.jpg" <<'P' || fail "writing the shard"
import io, sys, tarfile
jpg = open(sys.argv[1], "rb").read()
with tarfile.open("s.tar", "w") as tf:
    for i in range(3):
        for ext, data in (("jpg", jpg), ("cls", b"%d\n" % (i + 4))):
            ti = tarfile.TarInfo("k%d.%s" % (i, ext)); ti.size = len(data); tf.addfile(ti, io.BytesIO(data))
P
cat > tar.json <<'J'
{"ops": [{"op": "files", "list": ["s.tar"]}, {"op": "tar"}, {"op": "map", "fn": "parse_int", "args": {"output": "label"}},
 {"op": "map", "fn": "select", "args": {"keep": ["jpg", "label", "__key__"]}}]}
J
out=$("$S" convert tar.json --out tart --quiet) || fail "convert tar: $out"
cat > tarback.json <<'J'
{"ops": [{"op": "files", "glob": "tart/*.tfrecord"}, {"op": "tfrecord"},
 {"op": "map", "fn": "parse_example", "args": {"features": {"image/encoded": {"dtype": "bytes"},
  "image/class/label": {"dtype": "int64"}, "image/format": {"dtype": "bytes"}, "image/key": {"dtype": "bytes"}}}}]}
J
h=$("$S" head tarback.json -n 5) || fail "head tar read-back: $h"
echo "$h" | grep -q 'image/format  *bytes  *\[\]  *"jpg"' || fail "format: $h"
echo "$h" | grep -q 'image/key  *bytes  *\[\]  *"k2"' || fail "key: $h"
[ "$(echo "$h" | grep -c 'image/class/label  *int64  *\[\]  *[456]$')" -eq 3 ] || fail "labels: $h"

# A failing convert (decoded pixels are refused) and an interrupted one leave nothing under the output folder.
cat > pixels.json <<'J'
{"ops": [{"op": "image_folder", "root": "data"}, {"op": "map", "fn": "decode_image"}]}
J
out=$("$S" convert pixels.json --out bad --quiet 2>&1) && fail "pixels converted: $out"
echo "$out" | grep -q "component 'image' is uint8" || fail "pixels error: $out"
[ -z "$(ls -A bad)" ] || fail "a failed convert left: $(ls -a bad)"
cat > slow.json <<'J'
{"ops": [{"op": "image_folder", "root": "data"}, {"op": "repeat", "count": 1000}, {"op": "map", "fn": "sleep_io", "args": {"us": 20000}}]}
J
"$S" convert slow.json --out int --shards 2 --quiet > int.log 2>&1 &
pid=$!
for _ in $(seq 1 100); do [ -n "$(ls -A int 2>/dev/null)" ] && break; sleep 0.05; done
sleep 0.2
kill -INT $pid
wait $pid
rc=$?
[ $rc -eq 130 ] || fail "interrupted convert exit $rc: $(cat int.log)"
grep -q "interrupted after" int.log || fail "no interruption message: $(cat int.log)"
[ -z "$(ls -A int)" ] || fail "an interrupted convert left: $(ls -a int)"
echo "ok"
