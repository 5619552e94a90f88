#!/usr/bin/env bash
# cli_convert.sh: `sluice convert` writes an image folder and a WebDataset tar shard as TFRecord shards of tf.Example
# that read back (tfrecord + parse_example) to the same images and labels; TFRecord -> tar (--to tar) -> TFRecord
# gives the same --digest, through shards that Python's tarfile lists as WebDataset samples; an interrupted or
# failing convert (either format) leaves no file under a final name (nor a temporary one). And `sluice gen imagenet
# --format tfrecord|folder|tar` writes the same images and labels in each layout: the --digest of each layout's
# images and labels, read by its own reader and named alike, is the same; no temporary is left.
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

# TFRecord -> tar -> TFRecord: the same elements.
"$S" gen imagenet --out g --n 24 --shards 2 --classes 5 --quiet --threads 1 > /dev/null || fail "gen"
feats='"features": {"image/encoded": {"dtype": "bytes"}, "image/class/label": {"dtype": "int64"}}'
echo '{"ops": [{"op": "files", "glob": "g/*.tfrecord"}, {"op": "tfrecord"},
 {"op": "map", "fn": "parse_example", "args": {'"$feats"'}}]}' > g.json
out=$("$S" convert g.json --to tar --out gt --shards 3 --quiet) || fail "convert --to tar: $out"
echo "$out" | grep -q "24 elements into 3 tar files" || fail "tar summary: $out"
[ "$(ls -A gt | wc -l)" -eq 3 ] || fail "tar files: $(ls -a gt)"
python3 - gt <<'P2' || fail "the tar shards as tarfile lists them"
import os, sys, tarfile
n = 0
for shard in sorted(os.listdir(sys.argv[1])):
    with tarfile.open(os.path.join(sys.argv[1], shard)) as tf:
        ms = tf.getmembers()
        assert [m.name.split(".", 1)[1] for m in ms] == ["jpg", "cls"] * (len(ms) // 2), [m.name for m in ms]
        for jpg, cls in zip(ms[::2], ms[1::2]):
            assert jpg.name[:-4] == cls.name[:-4] and tf.extractfile(jpg).read(3) == b"\xff\xd8\xff"
            assert 0 <= int(tf.extractfile(cls).read()) < 5
            n += 1
assert n == 24, n
P2
echo '{"ops": [{"op": "files", "glob": "gt/*.tar"}, {"op": "tar"},
 {"op": "map", "fn": "parse_int", "args": {"component": "cls", "output": "label"}},
 {"op": "map", "fn": "select", "args": {"keep": ["jpg", "label"]}}]}' > gt.json
out=$("$S" convert gt.json --to tfrecord --out gtt --shards 2 --quiet) || fail "convert back: $out"
echo '{"ops": [{"op": "files", "glob": "gtt/*.tfrecord"}, {"op": "tfrecord"},
 {"op": "map", "fn": "parse_example", "args": {'"$feats"'}}]}' > gtt.json
a=$(digest g.json) && b=$(digest gtt.json) || fail "round-trip digests"
[ -n "$a" ] && [ "$a" = "$b" ] || fail "TFRecord -> tar -> TFRecord changed the elements: $a vs $b"
# a component a member cannot hold is an error naming the element and the component
echo '{"ops": [{"op": "files", "glob": "g/*.tfrecord"}, {"op": "tfrecord"},
 {"op": "map", "fn": "parse_example", "args": {"features": {"image/encoded": {"dtype": "bytes", "shape": [1]},
  "image/class/label": {"dtype": "int64"}, "image/height": {"dtype": "int64"}, "image/width": {"dtype": "int64"}}}}]}' > g2.json
out=$("$S" convert g2.json --to tar --out bad2 --quiet 2>&1) || fail "shape [1] tensors: $out"
echo '{"ops": [{"op": "range", "stop": 3}, {"op": "batch", "size": 3}]}' > vec.json
out=$("$S" convert vec.json --to tar --out bad3 --quiet 2>&1) && fail "a vector became a member: $out"
echo "$out" | grep -q "element 0: component '.*' holds 3 values" || fail "vector error: $out"
[ -z "$(ls -A bad3)" ] || fail "a failed tar convert left: $(ls -a bad3)"

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
# gen's three layouts of the same images
for f in tfrecord folder tar; do
  out=$("$S" gen imagenet --format $f --out g$f --n 30 --shards 3 --classes 4 --seed 3 --threads 2 --quiet) ||
    fail "gen --format $f: $out"
  echo "$out" | grep -q "classes: 4 of 4 have an image" || fail "$f summary: $out"
  [ -z "$(find g$f -name '.*' -not -name .)" ] || fail "$f: a hidden file is left: $(find g$f -name '.*')"
done
[ "$(ls gfolder)" = "$(printf '0\n1\n2\n3')" ] || fail "class folders: $(ls gfolder)"
[ "$(find gfolder -name '*.jpg' | wc -l)" -eq 30 ] || fail "folder images: $(find gfolder | head)"
[ "$(ls gtar)" = "$(printf 'train-00000-of-00003.tar\ntrain-00001-of-00003.tar\ntrain-00002-of-00003.tar')" ] ||
  fail "tar shards: $(ls gtar)"

# The same (image, label) pairs: each layout's encoded bytes decoded to "image" (the decoded pixels are the bytes'
# function, and decode_image's output is named alike), its label parsed into a component named "image/class/label".
tail='{"op": "map", "fn": "decode_image", "args": {"component": "IMG", "output": "image", "channels": 3}},
 {"op": "map", "fn": "select", "args": {"keep": ["image", "LABEL"]}}'
echo '{"ops": [{"op": "files", "glob": "gtfrecord/*.tfrecord"}, {"op": "tfrecord"},
 {"op": "map", "fn": "parse_example", "args": {"features": {"image/encoded": {"dtype": "bytes"},
  "image/class/label": {"dtype": "int64"}}}}, '"${tail/IMG/image/encoded}"']}' | sed 's|LABEL|image/class/label|' > lt.json
echo '{"ops": [{"op": "files", "glob": "gtar/*.tar"}, {"op": "tar"},
 {"op": "map", "fn": "parse_int", "args": {"component": "cls", "output": "image/class/label"}}, '"${tail/IMG/jpg}"']}' |
  sed 's|LABEL|image/class/label|' > lw.json
# image_folder's label is "label": the TFRecord side is compared on its images alone, and the labels below
echo '{"ops": [{"op": "image_folder", "root": "gfolder"}, '"${tail/IMG/image/encoded}"']}' | sed 's|"LABEL"|"label"|' > lf.json
a=$(digest lt.json) && b=$(digest lw.json) || fail "digests"
[ -n "$a" ] && [ "$a" = "$b" ] || fail "tfrecord and tar layouts differ: $a vs $b"
sed 's|, "image/class/label"\]|]|' lt.json > lti.json
sed 's|, "label"\]|]|' lf.json > lfi.json
a=$(digest lti.json) && b=$(digest lfi.json) || fail "image digests"
[ -n "$a" ] && [ "$a" = "$b" ] || fail "tfrecord and folder images differ: $a vs $b"
# labels: the folder's, in its order, are the TFRecord labels sorted (ImageFolder's order: by class)
lt=$("$S" head lt.json -n 30 --json | python3 -c '
import json, sys
print(sorted(c["values"][0] for e in json.load(sys.stdin)["elements"] for c in e["components"] if c["name"] == "image/class/label"))')
lf=$("$S" head lf.json -n 30 --json | python3 -c '
import json, sys
print([c["values"][0] for e in json.load(sys.stdin)["elements"] for c in e["components"] if c["name"] == "label"])')
[ "$lt" = "$lf" ] || fail "labels: tfrecord $lt, folder $lf"

# stop FORMAT DIR SIGNAL CODE WORD: a convert stopped by SIGNAL mid-shard exits CODE, says "WORD after N elements"
# and leaves DIR empty.
stop() {
  "$S" convert slow.json --to "$1" --out "$2" --shards 2 --quiet > "$2.log" 2>&1 &
  local pid=$! rc
  for _ in $(seq 1 100); do [ -n "$(ls -A "$2" 2>/dev/null)" ] && break; sleep 0.05; done
  sleep 0.3
  kill -"$3" $pid
  wait $pid
  rc=$?
  [ $rc -eq "$4" ] || fail "$5 convert --to $1 exit $rc: $(cat "$2.log")"
  grep -q "$5 after [1-9]" "$2.log" || fail "no '$5' message: $(cat "$2.log")"
  [ -z "$(ls -A "$2")" ] || fail "a $5 convert --to $1 left: $(ls -a "$2")"
}
stop tfrecord int INT 130 interrupted
stop tar intt TERM 143 terminated
# --prefix with glob characters: the sweep of dead converts' temporaries takes its own prefix's, not those another
# prefix the glob would match (a dead writer's temporaries of --prefix abc stay beside a convert with --prefix 'a*').
mkdir -p globbed
: > 'globbed/.abc-00000-of-00001.tfrecord.tmp-999999999-00ab'
: > 'globbed/.a*-00000-of-00002.tfrecord.tmp-999999998-01'
out=$("$S" convert folder.json --out globbed --prefix 'a*' --quiet) || fail "convert --prefix 'a*': $out"
[ -e 'globbed/.abc-00000-of-00001.tfrecord.tmp-999999999-00ab' ] || fail "--prefix 'a*' swept abc's temporary"
[ ! -e 'globbed/.a*-00000-of-00002.tfrecord.tmp-999999998-01' ] || fail "--prefix 'a*' left its own dead temporary"
[ -e 'globbed/a*-00000-of-00001.tfrecord' ] || fail "--prefix 'a*' wrote: $(ls -a globbed)"
echo "ok"
