#!/usr/bin/env python3
"""Damaged inputs made from good images, each with the outcome stoker must give.

Truncations at every structural boundary of a JPEG (after each marker
segment, inside the scan, one byte short of the end) and of a PNG (after each
chunk), flipped bytes in headers (SOF size, marker codes, table ids, PNG CRC)
and in entropy-coded data, wrong extensions, zero-length and text files,
huge declared dimensions (JPEG SOF, PNG IHDR, .npy shape), truncated .npy, and damaged tar shards (a member past the end of the file,
a cut header, no end-of-archive blocks, a garbage header, a bad size field).

    python3 scripts/make_corruption_corpus.py GOOD_JPEG... --out DIR
writes DIR/<name> files and DIR/manifest.json: [{"file", "expect"}], expect
being "good", a reason code ("corrupt", "unsupported", "resource_exhausted"),
"any" (flipped entropy-coded bytes: libjpeg may decode them to wrong
pixels; either outcome is fine, a crash is not), or "open_error" (a tar that
must fail to open, naming the shard and offset).
"""
import argparse
import io
import json
import os
import struct
import zlib

import numpy as np
from PIL import Image


def jpeg_segments(data):
    """(marker, start, end) of each segment before the scan; the scan start."""
    segs, pos = [], 2
    while pos + 4 <= len(data):
        if data[pos] != 0xFF:
            break
        marker = data[pos + 1]
        length = struct.unpack(">H", data[pos + 2:pos + 4])[0]
        segs.append((marker, pos, pos + 2 + length))
        pos += 2 + length
        if marker == 0xDA:  # SOS: entropy-coded data follows
            break
    return segs, pos


def png_chunks(data):
    chunks, pos = [], 8
    while pos + 12 <= len(data):
        n = struct.unpack(">I", data[pos:pos + 4])[0]
        chunks.append((data[pos + 4:pos + 8], pos, pos + 12 + n))
        pos += 12 + n
    return chunks


def make(good_files, out):
    os.makedirs(out, exist_ok=True)
    items = []

    def put(name, data, expect):
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
        items.append({"file": os.path.join(out, name), "expect": expect})

    for k, src in enumerate(good_files):
        data = open(src, "rb").read()
        p = f"j{k}"
        put(f"{p}_good.jpg", data, "good")
        segs, scan = jpeg_segments(data)
        put(f"{p}_cut_soi.jpg", data[:2], "unsupported")  # too short to be recognised
        for i, (marker, _, end) in enumerate(segs):
            put(f"{p}_cut_after_{i}_{marker:02x}.jpg", data[:end], "corrupt")
        for frac in (0.1, 0.5, 0.9):
            put(f"{p}_cut_scan_{int(frac * 100)}.jpg", data[:scan + int((len(data) - scan) * frac)], "corrupt")
        put(f"{p}_cut_eoi.jpg", data[:-2], "corrupt")
        sof = next(s for s in segs if s[0] in (0xC0, 0xC1, 0xC2))
        b = bytearray(data)
        b[sof[1] + 5:sof[1] + 9] = b"\x00\x00\x00\x00"  # height = width = 0
        put(f"{p}_sof_zero.jpg", bytes(b), "corrupt")
        b = bytearray(data)
        b[sof[1] + 5:sof[1] + 9] = struct.pack(">HH", 65000, 65000)  # 4.2 gigapixels
        put(f"{p}_sof_huge.jpg", bytes(b), "resource_exhausted")
        b = bytearray(data)
        b[sof[1] + 1] = 0xCF  # an undefined SOF type (arithmetic lossless, unsupported)
        put(f"{p}_sof_type.jpg", bytes(b), "corrupt")
        dqt = next(s for s in segs if s[0] == 0xDB)
        b = bytearray(data)
        b[dqt[1] + 4] = 0x07  # quantisation table id 7 (max is 3)
        put(f"{p}_dqt_id.jpg", bytes(b), "corrupt")
        rng = np.random.default_rng(k)
        for j in range(3):
            b = bytearray(data)
            for off in rng.integers(scan, len(data) - 2, size=8):
                b[off] ^= int(rng.integers(1, 256))
            put(f"{p}_entropy_flip_{j}.jpg", bytes(b), "any")
        img = Image.open(io.BytesIO(data)).convert("RGB")
        png = io.BytesIO()
        img.save(png, "PNG")
        png = png.getvalue()
        put(f"{p}_png_named.jpg", png, "good")  # wrong extension: stoker sniffs the bytes
        put(f"{p}_jpg_named.png", data, "good")
        for i, (ctype, _, end) in enumerate(png_chunks(png)[:-1]):
            put(f"{p}_png_cut_{i}_{ctype.decode()}.png", png[:end], "corrupt")
        b = bytearray(png)
        b[29] ^= 0xFF  # IHDR CRC
        put(f"{p}_png_crc.png", bytes(b), "corrupt")
        b = bytearray(png)
        b[16:24] = struct.pack(">II", 100000, 100000)
        b[29:33] = struct.pack(">I", zlib.crc32(bytes(b[12:29])))
        put(f"{p}_png_huge.png", bytes(b), "resource_exhausted")
    put("empty.jpg", b"", "corrupt")
    put("text.jpg", b"this is a text file with a .jpg name\n", "unsupported")
    npy = _npy(np.zeros((16, 16, 3), np.uint8))
    put("good.npy", npy, "good")
    put("npy_cut.npy", npy[:-10], "corrupt")
    # A valid header declaring 99,999,999,999 x 9 x 3 bytes over 768 bytes of data.
    put("npy_huge.npy", _npy_header("|u1", "(99999999999, 9, 3)") + bytes(768), "resource_exhausted")
    put("npy_float.npy", _npy(np.zeros((4, 4, 3), np.float32)), "unsupported")
    # Damaged tar shards: each must fail to open with an error naming the shard.
    import tarfile
    good_tar = io.BytesIO()
    with tarfile.open(fileobj=good_tar, mode="w") as t:
        for k, src in enumerate(good_files):
            for name, payload in ((f"s{k}.jpg", open(src, "rb").read()), (f"s{k}.cls", str(k).encode())):
                info = tarfile.TarInfo(name)
                info.size = len(payload)
                t.addfile(info, io.BytesIO(payload))
    tar = good_tar.getvalue()
    first = 512 + (len(open(good_files[0], "rb").read()) + 511) // 512 * 512  # second member's header
    tars = {
        "tar_member_past_eof.tar": tar[:first // 2],
        "tar_cut_at_header.tar": tar[:first + 100],
        "tar_no_end_blocks.tar": tar.rstrip(b"\0"),  # the end-of-archive blocks (and padding) removed
        "tar_garbage_header.tar": tar[:first] + bytes(range(256)) * 2 + tar[first + 512:],
        "tar_bad_size_field.tar": tar[:124] + b"zzzzzzzzzzz\0" + tar[136:],
    }
    for name, data in tars.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
        items.append({"file": os.path.join(out, name), "expect": "open_error"})
    with open(os.path.join(out, "manifest.json"), "w") as f:
        json.dump(items, f, indent=1)
    return items


def _npy(a):
    b = io.BytesIO()
    np.save(b, a)
    return b.getvalue()


def _npy_header(descr, shape):
    """A format 1.0 header as NumPy writes it (padded so the data is 64-aligned)."""
    d = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}"
    d += " " * ((64 - (10 + len(d) + 1) % 64) % 64) + "\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(d)) + d.encode()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("good", nargs="+")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    items = make(a.good, a.out)
    print(f"make_corruption_corpus: {len(items)} files under {a.out}")
