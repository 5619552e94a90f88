#!/usr/bin/env python3
"""hostile/mkdata.py KIND OUT [ARGS]: writes one hostile input file for the hostile tables, with the independent
encoders of tests/data/gen_fixtures.py (pure-Python CRC-32C and protobuf):
  huge-length OUT N [gz]   a TFRecord whose first header claims N bytes (its length CRC valid), then 16 bytes
  zero-record OUT MB       a GZIP TFRecord of one record of MB MiB of zeros whose header claims 2^39 bytes
  jpeg-bomb OUT W H        a TFRecord of one tf.Example whose image/encoded is a real JPEG with its frame header
                           rewritten to W x H pixels
"""
import gzip, os, struct, sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data"))
from gen_fixtures import crc32c, example, feature_bytes, mask, record  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def header(n):
    h = struct.pack("<Q", n)
    return h + struct.pack("<I", mask(crc32c(h)))


def jpeg_resized(w, h):
    data = bytearray(open(os.path.join(HERE, "..", "fuzz", "corpus", "jpeg", "rgb420.jpg"), "rb").read())
    i = 2
    while i < len(data):  # walk the markers to the frame header (SOF0..SOF2)
        marker, seglen = data[i + 1], struct.unpack(">H", data[i + 2:i + 4])[0]
        if marker in (0xC0, 0xC1, 0xC2):
            data[i + 5:i + 9] = struct.pack(">HH", h, w)
            return bytes(data)
        i += 2 + seglen
    raise SystemExit("no frame header in the corpus JPEG")


def main():
    kind, out = sys.argv[1], sys.argv[2]
    if kind == "huge-length":
        blob = header(int(sys.argv[3])) + b"\0" * 16
        if len(sys.argv) > 4 and sys.argv[4] == "gz":
            blob = gzip.compress(blob, mtime=0)
    elif kind == "zero-record":
        z = gzip.GzipFile(fileobj=open(out, "wb"), mode="wb", mtime=0)
        z.write(header(1 << 39))
        chunk = b"\0" * (1 << 20)
        for _ in range(int(sys.argv[3])):
            z.write(chunk)
        z.close()
        return
    elif kind == "jpeg-bomb":
        jpg = jpeg_resized(int(sys.argv[3]), int(sys.argv[4]))
        blob = record(example({"image/encoded": feature_bytes([jpg])}))
    else:
        raise SystemExit(__doc__)
    open(out, "wb").write(blob)


if __name__ == "__main__":
    main()
