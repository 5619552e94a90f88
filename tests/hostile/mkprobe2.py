#!/usr/bin/env python3
"""hostile/mkprobe2.py KIND OUT [ARGS]: inputs for probe2_state.table (issue 47), made with Python's own encoders:
  targz OUT LEVEL FLIP   a .tar.gz of 6 samples (s00.txt .. s05.txt, 1,000 bytes each) at gzip LEVEL, with one
                         byte flipped: FLIP "none", "mid" (the middle of the file), "crc" (the trailer's CRC-32),
                         "len" (the trailer's length)
  png OUT TEXTS CRC      an 8x8 RGB PNG with TEXTS tEXt chunks before its IDAT; CRC "bad-idat" gives the IDAT a
                         wrong CRC over intact data, "bad-text" the first tEXt, "ok" none
"""
import gzip, io, struct, sys, tarfile, zlib


def targz(out, level, flip):
    b = io.BytesIO()
    with tarfile.open(fileobj=b, mode="w") as t:
        for i in range(6):
            data = (b"x%d" % i) * 500
            ti = tarfile.TarInfo("s%02d.txt" % i)
            ti.size = len(data)
            t.addfile(ti, io.BytesIO(data))
    g = bytearray(gzip.compress(b.getvalue(), compresslevel=int(level), mtime=0))
    at = {"none": None, "mid": len(g) // 2, "crc": len(g) - 6, "len": len(g) - 2}[flip]
    if at is not None:
        g[at] ^= 1
    open(out, "wb").write(g)


def chunk(kind, data, bad=False):
    crc = zlib.crc32(kind + data) ^ (1 if bad else 0)
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)


def png(out, texts, crc):
    w = h = 8
    raw = b"".join(b"\0" + bytes(c for x in range(w) for c in (x * 30, y * 30, 128)) for y in range(h))
    s = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
    for i in range(int(texts)):
        s += chunk(b"tEXt", b"k%d\0v%d" % (i, i), bad=(crc == "bad-text" and i == 0))
    s += chunk(b"IDAT", zlib.compress(raw), bad=(crc == "bad-idat")) + chunk(b"IEND", b"")
    open(out, "wb").write(s)


if __name__ == "__main__":
    {"targz": targz, "png": png}[sys.argv[1]](*sys.argv[2:])
