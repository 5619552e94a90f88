#!/usr/bin/env bash
# remote_s3.sh: s3:// URLs against an S3-compatible server the test starts on loopback: moto's server mode (PyPI,
# pinned in tests/integration/s3-requirements.txt, installed by `make s3-venv` into build/s3-venv) with
# INITIAL_NO_AUTH_ACTION_COUNT set, so that after the set-up's first requests it checks every request's SigV4
# signature against the IAM user's key. Keys named one by one and by a glob (ListObjectsV2, paged two keys at a
# time) give the local digests, signed by libcurl from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (and with
# AWS_SESSION_TOKEN); a wrong secret and no credentials are refused by the server, and no secret is printed.
set -u
S=${SL_CLI:?}
D=$(dirname "$0")
. "$D/remote_common.inc"
VENV=${SL_S3_VENV:-${SL_SRC:?}/build/s3-venv}
if [ ! -x "$VENV/bin/moto_server" ]; then
  [ "${SL_S3_REQUIRED:-0}" = 1 ] && { echo "FAIL: no moto server in $VENV (make s3-venv)"; exit 1; }
  echo "SKIP: no moto server in $VENV (make s3-venv installs it)"
  exit 77
fi
T=$(mktemp -d)
MOTO_PID=
cleanup() {
  [ -n "$MOTO_PID" ] && kill "$MOTO_PID" 2> /dev/null && wait "$MOTO_PID" 2> /dev/null
  rm -rf "$T"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }

"$S" gen imagenet --out "$T/tar" --format tar --n 30 --shards 3 --quiet > /dev/null || fail "gen tar"
"$S" gen imagenet --out "$T/tfr" --n 30 --shards 5 --quiet > /dev/null || fail "gen tfrecord"
for try in 1 2 3; do
  PORT=$(free_port)
  INITIAL_NO_AUTH_ACTION_COUNT=3 "$VENV/bin/moto_server" -H 127.0.0.1 -p "$PORT" > "$T/moto.log" 2>&1 &
  MOTO_PID=$!
  for i in $(seq 150); do
    curl -s -o /dev/null "http://127.0.0.1:$PORT/moto-api/" 2> /dev/null && break
    kill -0 "$MOTO_PID" 2> /dev/null || break
    sleep 0.2
  done
  kill -0 "$MOTO_PID" 2> /dev/null && break
  wait "$MOTO_PID" 2> /dev/null
  MOTO_PID=
done
[ -n "$MOTO_PID" ] || fail "moto did not start: $(tail -5 "$T/moto.log")"
EP=http://127.0.0.1:$PORT
creds=$("$VENV/bin/python" "$D/remote_s3_setup.py" "$EP" data "$T/tar" "$T/tfr" 2> "$T/setup.err") ||
  fail "set-up: $(grep -v "^ " "$T/setup.err" | tail -3)"
read -r KEY SECRET TKEY TSECRET TOKEN <<< "$creds"
[ -n "$TOKEN" ] || fail "set-up printed no credentials: $creds"

TAR='{"op": "tar"}, {"op": "map", "fn": "select", "args": {"keep": ["jpg", "cls", "__key__"]}}'
echo "{\"name\": \"t\", \"ops\": [{\"op\": \"files\", \"glob\": \"$T/tar/*.tar\"}, $TAR]}" > "$T/tar_local.json"
echo "{\"name\": \"t\", \"ops\": [{\"op\": \"files\", \"glob\": \"$T/tfr/*.tfrecord\"}, {\"op\": \"tfrecord\"}]}" > "$T/tfr_local.json"
echo "{\"name\": \"t\", \"ops\": [{\"op\": \"files\", \"list\": [\"s3://data/tar/train-{00000..00002}-of-00003.tar\"]}, $TAR]}" > "$T/tar_s3.json"
echo "{\"name\": \"t\", \"ops\": [{\"op\": \"files\", \"glob\": \"s3://data/tfr/train-*.tfrecord\"}, {\"op\": \"tfrecord\"}]}" > "$T/tfr_s3.json"
dtar=$(digest "$T/tar_local.json") && dtfr=$(digest "$T/tfr_local.json") || fail "local runs"

export S3_ENDPOINT_URL=$EP AWS_REGION=us-east-1 SLUICE_REMOTE_BLOCK=65536 SLUICE_REMOTE_RETRIES=1
unset AWS_ENDPOINT_URL AWS_SESSION_TOKEN AWS_DEFAULT_REGION
d=$(AWS_ACCESS_KEY_ID=$KEY AWS_SECRET_ACCESS_KEY=$SECRET digest "$T/tar_s3.json") || fail "tar from S3"
[ "$d" = "$dtar" ] || fail "tar from S3: $d, locally $dtar"
# the glob lists the prefix two keys a page (three pages for five shards), and reads them in order
d=$(AWS_ACCESS_KEY_ID=$KEY AWS_SECRET_ACCESS_KEY=$SECRET SLUICE_S3_LIST_PAGE=2 digest "$T/tfr_s3.json") ||
  fail "tfrecord glob from S3"
[ "$d" = "$dtfr" ] || fail "tfrecord glob from S3: $d, locally $dtfr"
# the endpoint under its other name, and session credentials (AWS_SESSION_TOKEN, signed as x-amz-security-token)
d=$(unset S3_ENDPOINT_URL; export AWS_ENDPOINT_URL=$EP AWS_ACCESS_KEY_ID=$TKEY AWS_SECRET_ACCESS_KEY=$TSECRET \
  AWS_SESSION_TOKEN=$TOKEN; digest "$T/tar_s3.json") || fail "tar from S3 with session credentials"
[ "$d" = "$dtar" ] || fail "tar from S3 with session credentials: $d, locally $dtar"

# a wrong secret: the server refuses the signature; the message names the object, not the secret
out=$(AWS_ACCESS_KEY_ID=$KEY AWS_SECRET_ACCESS_KEY=WRONGSECRETXYZ timeout 60 "$S" run "$T/tar_s3.json" --quiet 2>&1) &&
  fail "a wrong secret was accepted"
echo "$out" | grep -q "data/tar/train-00000-of-00003.tar: HTTP 403" || fail "wrong secret: $out"
echo "$out" | grep -q "SignatureDoesNotMatch" || fail "wrong secret, not refused for its signature: $out"
echo "$out$(AWS_ACCESS_KEY_ID=$KEY AWS_SECRET_ACCESS_KEY=$SECRET "$S" run "$T/tar_s3.json" --quiet 2>&1)" |
  grep -q -e "$SECRET" -e WRONGSECRETXYZ && fail "a secret was printed"
# no credentials: an anonymous (unsigned) request, refused by a server that checks signatures
out=$(env -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY timeout 60 "$S" run "$T/tar_s3.json" --quiet 2>&1) &&
  fail "an anonymous request was accepted"
echo "$out" | grep -q "GET s3://data/tar/train-00000-of-00003.tar: HTTP 403" || fail "anonymous: $out"
echo "remote_s3: all checks passed"
