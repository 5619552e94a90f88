#!/usr/bin/env python3
"""Writes the small TFRecord / tf.Example fixtures in tests/data/ with an implementation independent of sluice's:
pure-Python CRC-32C (bitwise, from the Castagnoli polynomial) and hand-encoded protobuf. Run once; the outputs are
committed so the C tests compare against bytes sluice did not write."""
import gzip, struct, os

def crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF

def mask(c: int) -> int:
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF

def varint(n: int) -> bytes:
    out = bytearray()
    n &= (1 << 64) - 1
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)

def field(num: int, wire: int, payload: bytes) -> bytes:
    key = varint((num << 3) | wire)
    return key + (varint(len(payload)) + payload if wire == 2 else payload)

def feature_bytes(vals):
    return field(1, 2, b"".join(field(1, 2, v) for v in vals))

def feature_int64(vals):
    packed = b"".join(varint(v) for v in vals)
    return field(3, 2, field(1, 2, packed))

def feature_float(vals):
    packed = b"".join(struct.pack("<f", v) for v in vals)
    return field(2, 2, field(1, 2, packed))

def example(feats: dict) -> bytes:
    entries = b"".join(field(1, 2, field(1, 2, k.encode()) + field(2, 2, v)) for k, v in feats.items())
    return field(1, 2, entries)

def record(data: bytes) -> bytes:
    n = struct.pack("<Q", len(data))
    return n + struct.pack("<I", mask(crc32c(n))) + data + struct.pack("<I", mask(crc32c(data)))

if __name__ == "__main__":  # importable: tests/hostile/mkdata.py builds hostile files from the same encoders
    here = os.path.dirname(os.path.abspath(__file__))
    assert crc32c(b"123456789") == 0xE3069283
    recs = []
    for i in range(5):
        recs.append(example({
            "label": feature_int64([i * 10 - 3]),
            "name": feature_bytes([("item-%d" % i).encode()]),
            "score": feature_float([i + 0.5, -1.25]),
            "tags": feature_bytes([b"a", b"bc"][: (i % 2) + 1]),
        }))
    blob = b"".join(record(r) for r in recs)
    open(os.path.join(here, "independent.tfrecord"), "wb").write(blob)
    open(os.path.join(here, "independent.tfrecord.gz"), "wb").write(gzip.compress(blob, mtime=0))
