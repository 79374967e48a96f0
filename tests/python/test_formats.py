"""Every image format stoker decodes, against torchvision's default loader, PIL's
Image.open(path).convert("RGB") (Pillow 9.4): uint8, exactly.

1. Each format in each mode and variant (WebP, TIFF, BMP, GIF, and the PNG cases PIL converts its own way:
   palettes with tRNS, indices past the palette, 16-bit gray), decoded whole, equals PIL; regions (what a crop
   decodes: TIFF strips and tiles, BMP rows, lossless WebP crops) equal the whole decode's crop.
2. Through stoker.Loader, on real photos saved in each format: Resize/CenterCrop, and RandomResizedCrop + flip
   with stoker's draws applied by torchvision, equal torchvision on PIL's images.
3. Bad files (a truncated WebP, a TIFF with a codec libtiff lacks or a 2^31-pixel header, BMPs whose headers
   lie, a truncated GIF): refused with the reason (PIL refuses them too), counted by reason under
   on_corrupt="skip", raised with the file and the reason under "raise"; libtiff prints nothing.
4. The format table: folders list torchvision's IMG_EXTENSIONS (no .gif), shards take every decoded suffix.

Every file is generated here: by Pillow, or by the small writers below for what Pillow cannot write (tiled,
planar, 16-bit RGB and premultiplied TIFFs; BMP headers and bit fields; GIF frames off the canvas origin; an
animated WebP whose first frame is offset; 16-bit and out-of-palette PNGs).
"""
import io
import json
import os
import struct
import tarfile
import zlib

import numpy as np
import pytest
import torch
import torchvision.transforms as T
import torchvision.transforms.functional as F
from PIL import Image

import stoker
from stoker import _stoker
from stoker import datasets

TESTING = _stoker._testing


def encode(im, fmt, **kw):
    b = io.BytesIO()
    im.save(b, fmt, **kw)
    return b.getvalue()


def pil_rgb(data):
    return np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))


def assert_like_pil(data, regions=4, seed=0):
    """stoker's decode equals PIL's; `regions` random regions equal the whole decode's crop."""
    ours = stoker.decode_image(data)
    ref = pil_rgb(data)
    assert ours.shape == ref.shape
    np.testing.assert_array_equal(ours, ref)
    rng = np.random.default_rng(seed)
    h, w = ours.shape[:2]
    boxes = [(0, 0, 1, 1), (w - 1, h - 1, 1, 1), (0, 0, w, h)]
    for _ in range(regions):
        x, y = int(rng.integers(0, w)), int(rng.integers(0, h))
        boxes.append((x, y, int(rng.integers(1, w - x + 1)), int(rng.integers(1, h - y + 1))))
    for x, y, bw, bh in boxes:
        np.testing.assert_array_equal(TESTING.decode_region(data, x, y, bw, bh), ours[y:y + bh, x:x + bw],
                                      err_msg=f"region {(x, y, bw, bh)}")


# --- images ---------------------------------------------------------------------------------------------------

RNG = np.random.default_rng(7)
# Smooth enough for lossy codecs to behave like on photos, with noise so that every pixel differs.
_BASE = np.asarray(Image.fromarray(RNG.integers(0, 256, (9, 12, 4), dtype=np.uint8), "RGBA").resize((77, 61)))
_BASE = np.clip(_BASE.astype(int) + RNG.integers(-12, 13, _BASE.shape), 0, 255).astype(np.uint8)
RGBA = Image.fromarray(_BASE, "RGBA")
RGB = RGBA.convert("RGB")
MODES = {
    "RGB": RGB, "RGBA": RGBA, "L": RGBA.convert("L"), "LA": RGBA.convert("LA"), "1": RGBA.convert("1"),
    "P": RGB.quantize(60),
    "I;16": Image.fromarray(RNG.integers(0, 1400, (61, 77)).astype(np.uint16), "I;16"),
}


def _with_transparency(im, t):
    im = im.copy()
    im.info["transparency"] = t
    return im


MODES["P+trns"] = _with_transparency(MODES["P"], 5)
MODES["P+trns bytes"] = _with_transparency(MODES["P"], bytes(range(0, 240, 4)))


# --- writers for what Pillow cannot write ---------------------------------------------------------------------

def _chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def png_bytes(width, height, depth, color, rows, extra=b""):
    """A PNG of raw rows (each without its filter byte), filter 0."""
    raw = b"".join(b"\0" + r for r in rows)
    return (b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, depth, color, 0, 0, 0)) +
            extra + _chunk(b"IDAT", zlib.compress(raw)) + _chunk(b"IEND", b""))


def lzw_literal(data):
    """TIFF LZW of `data` as literal codes only (9 bits; a Clear before the table would widen)."""
    out, acc, n = bytearray(), 0, 0

    def put(code):
        nonlocal acc, n
        acc, n = (acc << 9) | code, n + 9
        while n >= 8:
            n -= 8
            out.append((acc >> n) & 0xFF)
            acc &= (1 << n) - 1

    for i, b in enumerate(data):
        if i % 200 == 0:
            put(256)
        put(b)
    put(257)
    if n:
        out.append((acc << (8 - n)) & 0xFF)
    return bytes(out)


def tiff_bytes(samples, photometric, *, bits=None, tile=None, rows_per_strip=None, planar=False, compression=1,
               extra=None, colormap=None, big_endian=False, predictor=None, sample_format=None, jpeg_subsampling=None,
               size=None, tags=()):
    """A one-page TIFF of `samples` (H x W x S, uint8 or uint16; bits < 8: values packed MSB first, one sample).
    compression: 1 none, 5 LZW (literal codes), 8 Deflate, 7 JPEG (each strip or tile a baseline JPEG of its own,
    photometric YCbCr, `jpeg_subsampling` (1, 1) or (2, 2)), or any number (the data left as it is)."""
    e = ">" if big_endian else "<"
    samples = samples if samples.ndim == 3 else samples[..., None]
    h, w, s = samples.shape
    bits = bits or samples.dtype.itemsize * 8
    uw, uh = tile if tile else (w, rows_per_strip or h)

    def unit_bytes(block):  # block: rows x cols x samples of one strip/tile (padded for tiles)
        if bits < 8:
            per = 8 // bits
            rows = []
            for r in block[..., 0]:
                r = np.concatenate([r, np.zeros((-len(r)) % per, r.dtype)]).reshape(-1, per)
                rows.append(bytes(sum(int(v) << (8 - bits * (k + 1)) for k, v in enumerate(p)) for p in r))
            raw = b"".join(rows)
        else:
            raw = block.astype(block.dtype.newbyteorder(e)).tobytes()
        if predictor == 2:
            a = np.frombuffer(raw, block.dtype.newbyteorder(e)).reshape(block.shape).astype(np.int64)
            a[:, 1:] -= a[:, :-1].copy()
            raw = (a % (1 << bits)).astype(block.dtype.newbyteorder(e)).tobytes()
        if compression == 8:
            return zlib.compress(raw)
        if compression == 5:
            return lzw_literal(raw)
        if compression == 7:
            return encode(Image.fromarray(block, "RGB"), "JPEG", quality=90,
                          subsampling=0 if jpeg_subsampling == (1, 1) else 2)
        return raw

    units = []
    planes = range(s) if planar else [None]
    for p in planes:
        for y in range(0, h, uh):
            for x in range(0, w, uw) if tile else [0]:
                block = samples[y:y + uh, x:x + uw] if tile else samples[y:y + uh]
                block = block if p is None else block[..., p:p + 1]
                if tile:  # tiles are whole, padded past the image
                    pad = np.zeros((uh, uw, block.shape[2]), samples.dtype)
                    pad[:block.shape[0], :block.shape[1]] = block
                    block = pad
                units.append(unit_bytes(block))
    entries = {256: (4, [size[0] if size else w]), 257: (4, [size[1] if size else h]), 258: (3, [bits] * s),
               259: (3, [compression]), 262: (3, [photometric]), 277: (3, [s]), 284: (3, [2 if planar else 1])}
    if tile:
        entries.update({322: (4, [uw]), 323: (4, [uh])})
    else:
        entries[278] = (4, [uh])
    if extra is not None:
        entries[338] = (3, list(extra))
    if colormap is not None:
        entries[320] = (3, list(colormap))
    if predictor:
        entries[317] = (3, [predictor])
    if sample_format:
        entries[339] = (3, [sample_format] * s)
    if jpeg_subsampling:
        entries[530] = (3, list(jpeg_subsampling))
    for tag, typ, values in tags:
        entries[tag] = (typ, values)
    data = bytearray((b"MM\0*" if big_endian else b"II*\0") + b"\0\0\0\0")
    offsets = []
    for u in units:
        offsets.append(len(data))
        data += u + (b"\0" if len(u) % 2 else b"")
    entries[324 if tile else 273] = (4, offsets)
    entries[325 if tile else 279] = (4, [len(u) for u in units])
    ifd_at = len(data)
    n = len(entries)
    tail_at = ifd_at + 2 + 12 * n + 4
    ifd, tail = bytearray(struct.pack(e + "H", n)), bytearray()
    for tag in sorted(entries):
        typ, values = entries[tag]
        fmt = {3: "H", 4: "I"}[typ]
        payload = struct.pack(e + fmt * len(values), *values)
        if len(payload) <= 4:
            ifd += struct.pack(e + "HHI", tag, typ, len(values)) + payload.ljust(4, b"\0")
        else:
            ifd += struct.pack(e + "HHII", tag, typ, len(values), tail_at + len(tail))
            tail += payload
    ifd += b"\0\0\0\0"
    data[4:8] = struct.pack(e + "I", ifd_at)
    return bytes(data + ifd + tail)


def bmp_bytes(width, height, bits, rows, *, compression=0, palette=b"", header_size=40, masks=b"", colors=0,
              top_down=False, offset=None):
    """A BMP of stored rows (each padded to 4 bytes here), bottom row first unless top_down."""
    if header_size == 12:
        info = struct.pack("<HHHH", width, height, 1, bits)
    else:
        info = struct.pack("<iiHHIIiiII", width, -height if top_down else height, 1, bits, compression, 0, 2835,
                           2835, colors, 0)
        info += masks.ljust(header_size - 40, b"\0") if header_size > 40 else b""
    after = masks if header_size == 40 else b""
    stride = ((width * bits + 31) >> 3) & ~3
    pixels = b"".join(r.ljust(stride, b"\0") for r in rows)
    start = 14 + header_size + len(after) + len(palette)
    head = b"BM" + struct.pack("<IHHI", start + len(pixels), 0, 0, start if offset is None else offset)
    return head + struct.pack("<I", header_size) + info + after + palette + pixels


def rle_bmp(width, height, bits, ops, *, rle4=False, palette=b"", colors=0, top_down=False, pad_to=None):
    """An RLE8 (or RLE4) BMP of `ops`, PIL's BmpRleDecoder's vocabulary: ("run", n, byte), ("abs", values) (padded
    to a 16-bit word as written), ("eol",), ("delta", right, up), ("eob",); or raw bytes."""
    data = bytearray()
    for op in ops:
        if isinstance(op, (bytes, bytearray)):
            data += op
        elif op[0] == "run":
            data += bytes([op[1], op[2]])
        elif op[0] == "abs":
            vals = op[1]
            payload = bytes((vals[i] << 4) | (vals[i + 1] if i + 1 < len(vals) else 0)
                            for i in range(0, len(vals), 2)) if rle4 else bytes(vals)
            data += bytes([0, len(vals)]) + payload + (b"\0" if len(payload) % 2 else b"")
        elif op[0] == "eol":
            data += b"\0\0"
        elif op[0] == "delta":
            data += bytes([0, 2, op[1], op[2]])
        else:
            data += b"\0\1"
    info = struct.pack("<iiHHIIiiII", width, -height if top_down else height, 1, bits, 2 if rle4 else 1, len(data),
                       2835, 2835, colors, 0)
    start = 14 + 40 + len(palette) + (pad_to or 0)
    head = b"BM" + struct.pack("<IHHI", start + len(data), 0, 0, start)
    return head + struct.pack("<I", 40) + info + palette + bytes(pad_to or 0) + bytes(data)


def gif_bytes(screen, palette, frames, background=0):
    """A GIF: `frames` of (x, y, w, h, indices, local palette or None, transparent index or None, interlaced),
    their LZW as literal codes (8-bit code size; a Clear before the table would widen)."""
    def table(colors):
        n = max(1, (len(colors) - 1).bit_length())
        return n, b"".join(bytes(c) for c in colors) + b"\0" * (3 * ((1 << n) - len(colors)))

    out = b"GIF89a" + struct.pack("<HH", *screen)
    if palette:
        n, t = table(palette)
        out += bytes([0x80 | (n - 1), background, 0]) + t
    else:
        out += bytes([0, background, 0])
    for x, y, w, h, idx, local, trns, interlaced in frames:
        if trns is not None:
            out += b"\x21\xf9\x04" + bytes([1, 0, 0, trns, 0])
        flags, t = 0, b""
        if local:
            n, t = table(local)
            flags = 0x80 | (n - 1)
        rows = [idx[r * w:(r + 1) * w] for r in range(h)]
        if interlaced:
            flags |= 0x40
            rows = [rows[r] for start, step in ((0, 8), (4, 8), (2, 4), (1, 2)) for r in range(start, h, step)]
        codes, acc, nbits, lzw = [], 0, 0, bytearray()
        for i, v in enumerate(v for r in rows for v in r):
            if i % 250 == 0:
                codes.append(256)
            codes.append(v)
        codes.append(257)
        for c in codes:
            acc |= c << nbits
            nbits += 9
            while nbits >= 8:
                lzw.append(acc & 0xFF)
                acc >>= 8
                nbits -= 8
        if nbits:
            lzw.append(acc)
        blocks = b"".join(bytes([len(lzw[i:i + 255])]) + lzw[i:i + 255] for i in range(0, len(lzw), 255))
        out += b"," + struct.pack("<HHHHB", x, y, w, h, flags) + t + b"\x08" + blocks + b"\0"
    return out + b";"


def webp_offset_animation(canvas, first, second):
    """An animated WebP (VP8X + ANIM + two ANMF): `first` = (x, y, image) at an even offset, `second` covers the
    canvas. The frames' bitstreams are Pillow's lossless VP8L chunks."""
    def anmf(x, y, im):
        still = encode(im, "WEBP", lossless=True)
        assert still[12:16] == b"VP8L"
        body = b"".join(v.to_bytes(3, "little") for v in (x // 2, y // 2, im.width - 1, im.height - 1, 100))
        return _riff_chunk(b"ANMF", body + b"\0" + still[12:])

    vp8x = _riff_chunk(b"VP8X", bytes([0x02, 0, 0, 0]) + (canvas[0] - 1).to_bytes(3, "little") +
                       (canvas[1] - 1).to_bytes(3, "little"))
    anim = _riff_chunk(b"ANIM", b"\0\0\0\0\0\0")
    body = b"WEBP" + vp8x + anim + anmf(*first) + anmf(0, 0, second)
    return b"RIFF" + struct.pack("<I", len(body)) + body


def _riff_chunk(kind, data):
    return kind + struct.pack("<I", len(data)) + data + (b"\0" if len(data) % 2 else b"")


# --- 1. each format and variant against PIL -------------------------------------------------------------------

def _pillow_cases():
    cases = {}
    for mode in ("RGB", "RGBA", "L", "LA", "P", "P+trns", "1"):
        cases[f"webp-lossless-{mode}"] = lambda m=mode: encode(MODES[m], "WEBP", lossless=True)
        cases[f"webp-lossy-{mode}"] = lambda m=mode: encode(MODES[m], "WEBP", quality=75)
    cases["webp-lossless-exact-RGBA"] = lambda: encode(RGBA, "WEBP", lossless=True, exact=True)
    cases["webp-animated"] = lambda: encode(RGB, "WEBP", save_all=True, lossless=True,
                                            append_images=[RGB.rotate(90), MODES["L"]], duration=50)
    cases["webp-animated-lossy-RGBA"] = lambda: encode(RGBA, "WEBP", save_all=True, quality=60,
                                                       append_images=[RGBA.rotate(45)], duration=50)
    for mode in ("RGB", "RGBA", "L", "LA", "P", "P+trns", "1", "I;16"):
        for comp in ("raw", "tiff_lzw", "tiff_adobe_deflate", "packbits"):
            cases[f"tiff-{comp}-{mode}"] = lambda m=mode, c=comp: encode(MODES[m], "TIFF", compression=c)
    for mode in ("RGB", "L"):
        cases[f"tiff-jpeg-{mode}"] = lambda m=mode: encode(MODES[m], "TIFF", compression="jpeg", quality=85)
    cases["tiff-lzw-strips"] = lambda: encode(RGB, "TIFF", compression="tiff_lzw", strip_size=700)
    cases["tiff-jpeg-strips"] = lambda: encode(RGB, "TIFF", compression="jpeg", strip_size=2000)
    cases["tiff-CMYK"] = lambda: encode(RGB.convert("CMYK"), "TIFF")
    cases["tiff-RGBX"] = lambda: encode(RGBA.convert("RGBX"), "TIFF", compression="tiff_lzw")
    cases["tiff-I;16B"] = lambda: encode(Image.frombytes("I;16B", (77, 61), MODES["I;16"].tobytes("raw", "I;16B")),
                                         "TIFF")
    cases["tiff-PA"] = lambda: encode(MODES["P"].convert("PA"), "TIFF")
    cases["tiff-multipage"] = lambda: encode(RGB, "TIFF", save_all=True, compression="tiff_lzw",
                                             append_images=[MODES["L"], RGB.rotate(90)])
    for mode in ("RGB", "RGBA", "L", "P", "1"):
        cases[f"bmp-{mode}"] = lambda m=mode: encode(MODES[m], "BMP")
    for mode in ("RGB", "RGBA", "L", "LA", "P", "P+trns", "1"):
        cases[f"gif-{mode}"] = lambda m=mode: encode(MODES[m], "GIF")
    cases["gif-not-interlaced"] = lambda: encode(MODES["P"], "GIF", interlace=False)
    cases["gif-animated"] = lambda: encode(MODES["P"], "GIF", save_all=True, duration=40,
                                           append_images=[RGB.rotate(90).quantize(30), MODES["L"]])
    cases["gif-animated-transparency"] = lambda: encode(MODES["P+trns"], "GIF", save_all=True, disposal=2,
                                                        append_images=[MODES["P"].rotate(30)])
    for mode in ("P+trns", "P+trns bytes", "I;16", "LA", "1"):
        cases[f"png-{mode}"] = lambda m=mode: encode(MODES[m], "PNG")
    cases["png-P-4bit+trns"] = lambda: encode(_with_transparency(RGB.quantize(12), 2), "PNG", bits=4)
    return cases


@pytest.mark.parametrize("name,make", sorted(_pillow_cases().items()), ids=sorted(_pillow_cases()))
def test_pillow_written_files_equal_pil(name, make):
    assert_like_pil(make())


def _crafted_tiffs():
    rgb8 = np.asarray(RGB)
    rgb16 = (rgb8.astype(np.uint16) * 257 + RNG.integers(0, 256, rgb8.shape)).astype(np.uint16)
    gray8 = np.asarray(MODES["L"])
    rgba8 = _BASE.copy()
    # Premultiplied alpha as stored: colour <= alpha.
    premul8 = rgba8.copy()
    premul8[..., :3] = (rgba8[..., :3].astype(int) * rgba8[..., 3:] // 255).astype(np.uint8)
    premul8[::7, ::5, 3] = 0
    premul16 = premul8.astype(np.uint16) * 257
    gray4 = (gray8 >> 4).astype(np.uint8)
    cmap = [int(v) for v in RNG.integers(0, 65536, 3 * 16)]
    cmap8 = [int(v) for v in RNG.integers(0, 65536, 3 * 256)]
    wide = RNG.integers(-400, 700, gray8.shape)
    floats = (RNG.standard_normal(gray8.shape) * 200 + 100).astype(np.float32)
    floats[0, :6] = [np.nan, np.inf, -np.inf, 0.5, 254.9, -0.5]
    return {
        "tiled-none": lambda: tiff_bytes(rgb8, 2, tile=(32, 16)),
        "tiled-deflate": lambda: tiff_bytes(rgb8, 2, tile=(16, 16), compression=8),
        "tiled-lzw": lambda: tiff_bytes(rgb8, 2, tile=(32, 32), compression=5),
        "tiled-deflate-predictor": lambda: tiff_bytes(rgb8, 2, tile=(16, 32), compression=8, predictor=2),
        "tiled-jpeg-420": lambda: tiff_bytes(rgb8, 6, tile=(32, 32), compression=7, jpeg_subsampling=(2, 2)),
        "tiled-jpeg-444": lambda: tiff_bytes(rgb8, 6, tile=(16, 16), compression=7, jpeg_subsampling=(1, 1)),
        "strips-jpeg-420": lambda: tiff_bytes(rgb8, 6, rows_per_strip=16, compression=7, jpeg_subsampling=(2, 2)),
        "strips-lzw-gray": lambda: tiff_bytes(gray8, 1, rows_per_strip=5, compression=5),
        "strips-deflate-predictor-16": lambda: tiff_bytes(rgb16, 2, rows_per_strip=7, compression=8, predictor=2),
        "planar-strips": lambda: tiff_bytes(rgb8, 2, rows_per_strip=9, planar=True, compression=8),
        "planar-rgba": lambda: tiff_bytes(rgba8, 2, rows_per_strip=11, planar=True, extra=[2]),
        "rgb16": lambda: tiff_bytes(rgb16, 2, rows_per_strip=10),
        "rgb16-big-endian": lambda: tiff_bytes(rgb16, 2, rows_per_strip=10, big_endian=True),
        "rgba8-unassociated": lambda: tiff_bytes(rgba8, 2, extra=[2]),
        "rgba8-premultiplied": lambda: tiff_bytes(premul8, 2, extra=[1], compression=5),
        "rgba16-premultiplied": lambda: tiff_bytes(premul16, 2, extra=[1]),
        "rgba8-no-extrasamples": lambda: tiff_bytes(rgba8, 2),
        "cmyk16": lambda: tiff_bytes(rgb16[..., [0, 1, 2, 0]], 5),
        "gray-min-is-white-8": lambda: tiff_bytes(gray8, 0),
        "gray-min-is-white-4": lambda: tiff_bytes(gray4, 0, bits=4),
        "gray-min-is-white-1": lambda: tiff_bytes(gray8 >> 7, 0, bits=1, tile=(16, 16)),
        "gray-min-is-white-16": lambda: tiff_bytes(np.asarray(MODES["I;16"]).astype(np.uint16), 0),
        "gray-2bit": lambda: tiff_bytes(gray8 >> 6, 1, bits=2, rows_per_strip=3, compression=8),
        "gray-4bit-tiled": lambda: tiff_bytes(gray4, 1, bits=4, tile=(16, 16), compression=5),
        "gray-alpha": lambda: tiff_bytes(rgba8[..., [0, 3]], 1, extra=[2]),
        "palette-4bit": lambda: tiff_bytes(gray4, 3, bits=4, colormap=cmap),
        "palette-8bit-tiled": lambda: tiff_bytes(gray8, 3, colormap=cmap8, tile=(32, 16), compression=8),
        "gray-int16": lambda: tiff_bytes(wide.astype(np.int16), 1, sample_format=2, compression=8),
        "gray-int32": lambda: tiff_bytes(wide.astype(np.int32) * 3, 1, sample_format=2),
        "gray-uint32": lambda: tiff_bytes(wide.astype(np.uint32) * 70000, 1, rows_per_strip=6),
        "gray-float32": lambda: tiff_bytes(floats, 1, sample_format=3, tile=(16, 16)),
        "gray-float32-min-is-white": lambda: tiff_bytes(floats, 0, sample_format=3),
    }


@pytest.mark.parametrize("name", sorted(_crafted_tiffs()))
def test_tiff_layouts_and_variants_equal_pil(name):
    assert_like_pil(_crafted_tiffs()[name](), regions=12)


@pytest.mark.parametrize("layout", [dict(tile=(16, 16)), dict(rows_per_strip=7)], ids=["tiles", "strips"])
def test_planar_16_bit_tiff_is_decoded_where_pil_is_wrong(layout):
    """The one deliberate difference: PIL 9.4's own unpacker (uncompressed files) reads each plane of a planar
    16-bit TIFF as 8-bit samples (every row shows its left half, each pixel twice); stoker gives the samples' high
    bytes, as PIL does when the file is compressed (libtiff) or contiguous. (If a later Pillow fixes this, the
    second assertion fails and the case joins the others.)"""
    rgb16 = (np.asarray(RGB).astype(np.uint16) * 257 + RNG.integers(0, 256, (61, 77, 3))).astype(np.uint16)
    high = (rgb16 >> 8).astype(np.uint8)
    data = tiff_bytes(rgb16, 2, planar=True, **layout)
    np.testing.assert_array_equal(stoker.decode_image(data), high)
    assert not np.array_equal(pil_rgb(data), high)
    for compressed in (tiff_bytes(rgb16, 2, planar=True, compression=8, **layout),
                       tiff_bytes(rgb16, 2, planar=False, **layout)):
        np.testing.assert_array_equal(pil_rgb(compressed), high)
        assert_like_pil(compressed)


def test_tiled_tiff_region_reads_only_its_tiles():
    """A region's tiles decode even when every other tile is garbage: the others are never read."""
    rgb8 = np.asarray(RGB)
    good = tiff_bytes(rgb8, 2, tile=(16, 16), compression=8)
    bad = bytearray(good)
    # Tile (0, 0)'s deflate data; break the first tile's stream only (the region avoids it).
    first = good.index(zlib.compress(rgb8[:16, :16].tobytes()))
    bad[first:first + 8] = b"\xff" * 8
    bad = bytes(bad)
    with pytest.raises(stoker.SampleError, match="TIFF"):
        stoker.decode_image(bad)
    np.testing.assert_array_equal(TESTING.decode_region(bad, 20, 20, 30, 30), pil_rgb(good)[20:50, 20:50])


def test_striped_tiff_region_reads_only_its_strips():
    """The same for strips: the first and last strips broken, a region between them decodes."""
    rgb8 = np.asarray(RGB)
    good = tiff_bytes(rgb8, 2, rows_per_strip=8, compression=8)
    bad = bytearray(good)
    for rows in (rgb8[:8], rgb8[56:]):
        at = good.index(zlib.compress(rows.tobytes()))
        bad[at:at + 8] = b"\xff" * 8
    bad = bytes(bad)
    with pytest.raises(stoker.SampleError, match="TIFF"):
        stoker.decode_image(bad)
    np.testing.assert_array_equal(TESTING.decode_region(bad, 5, 8, 60, 48), pil_rgb(good)[8:56, 5:65])


def test_loader_reads_only_the_tiles_its_crops_cover(tmp_path):
    """Through stoker.Loader: a 16-bit tiled TIFF whose every tile outside the centre is garbage gives
    CenterCrop's pixels (on_corrupt="raise": nothing failed), equal to PIL's on the intact file."""
    rgb16 = (np.asarray(RGB.resize((256, 256))).astype(np.uint16) * 257 + 99).astype(np.uint16)
    good = tiff_bytes(rgb16, 2, tile=(32, 32), compression=8, predictor=2)
    bad = bytearray(good)
    ty = tx = 0
    for ty in range(8):
        for tx in range(8):
            if ty in (3, 4) and tx in (3, 4):
                continue  # the tiles under CenterCrop(64): rows and columns 96..159
            block = rgb16[ty * 32:(ty + 1) * 32, tx * 32:(tx + 1) * 32].astype("<u2").astype(np.int64)
            block[:, 1:] -= block[:, :-1].copy()
            at = good.index(zlib.compress((block % 65536).astype("<u2").tobytes()))
            bad[at + 2:at + 10] = b"\xff" * 8
    (tmp_path / "bad.tif").write_bytes(bytes(bad))
    (tmp_path / "list.csv").write_text("image\nbad.tif\n")
    with pytest.raises(stoker.SampleError):
        stoker.decode_image(bytes(bad))
    loader = stoker.Loader(str(tmp_path / "list.csv"), batch_size=1, transforms=[stoker.CenterCrop(64)], dtype="uint8",
                           layout="NHWC", on_corrupt="raise")
    x, _ = next(iter(loader))
    np.testing.assert_array_equal(x[0].numpy(), pil_rgb(good)[96:160, 96:160])
    assert loader.stats()["corrupt"] == 0


def _crafted_bmps():
    rgb = np.asarray(RGB)[:13, :11]
    h, w = rgb.shape[:2]
    idx = (np.arange(h * w).reshape(h, w) * 7 % 16).astype(np.uint8)
    pal4 = b"".join(bytes([b, g, r, 0]) for r, g, b in RNG.integers(0, 256, (16, 3)))
    pal3 = b"".join(bytes([b, g, r]) for r, g, b in RNG.integers(0, 256, (256, 3)))
    rows24 = [rgb[y, :, ::-1].tobytes() for y in range(h)]
    bottom_up = rows24[::-1]
    v555 = ((rgb[..., 0].astype(np.uint16) >> 3) << 10) | ((rgb[..., 1].astype(np.uint16) >> 3) << 5) | (
        rgb[..., 2].astype(np.uint16) >> 3)
    v565 = ((rgb[..., 0].astype(np.uint16) >> 3) << 11) | ((rgb[..., 1].astype(np.uint16) >> 2) << 5) | (
        rgb[..., 2].astype(np.uint16) >> 3)
    rows555 = [v555[y].astype("<u2").tobytes() for y in range(h)][::-1]
    rows565 = [v565[y].astype("<u2").tobytes() for y in range(h)][::-1]
    alpha = RNG.integers(0, 256, (h, w, 1), dtype=np.uint8)
    bgra = np.concatenate([rgb[..., ::-1], alpha], -1)
    xbgr = np.concatenate([alpha, rgb[..., ::-1]], -1)
    rgba = np.concatenate([rgb, alpha], -1)

    def rows(a):
        return [a[y].tobytes() for y in range(h)][::-1]

    def pack4(a):
        return [bytes((a[y, x] << 4) | (a[y, x + 1] if x + 1 < w else 0) for x in range(0, w, 2)) for y in range(h)]

    return {
        "4bit-palette": lambda: bmp_bytes(w, h, 4, pack4(idx)[::-1], palette=pal4),
        "8bit-short-palette": lambda: bmp_bytes(w, h, 8, rows(idx * 9 % 200), palette=pal4, colors=16),
        "8bit-two-colour-black-white": lambda: bmp_bytes(w, h, 8, rows(idx % 2), colors=2,
                                                         palette=b"\0\0\0\0\xff\xff\xff\0"),
        "24bit-top-down": lambda: bmp_bytes(w, h, 24, rows24, top_down=True),
        "24bit-bitfields": lambda: bmp_bytes(w, h, 24, bottom_up, compression=3,
                                             masks=struct.pack("<III", 0xFF0000, 0xFF00, 0xFF)),
        "16bit-555": lambda: bmp_bytes(w, h, 16, rows555),
        "16bit-555-bitfields": lambda: bmp_bytes(w, h, 16, rows555, compression=3,
                                                 masks=struct.pack("<III", 0x7C00, 0x3E0, 0x1F)),
        "16bit-565-v5": lambda: bmp_bytes(w, h, 16, rows565, compression=3, header_size=124,
                                          masks=struct.pack("<IIII", 0xF800, 0x7E0, 0x1F, 0)),
        "32bit-bgrx": lambda: bmp_bytes(w, h, 32, rows(bgra)),
        "32bit-bgra-v4": lambda: bmp_bytes(w, h, 32, rows(bgra), compression=3, header_size=108,
                                           masks=struct.pack("<IIII", 0xFF0000, 0xFF00, 0xFF, 0xFF000000)),
        "32bit-xbgr-bitfields": lambda: bmp_bytes(w, h, 32, rows(xbgr), compression=3,
                                                  masks=struct.pack("<III", 0xFF000000, 0xFF0000, 0xFF00)),
        "32bit-rgba-v5": lambda: bmp_bytes(w, h, 32, rows(rgba), compression=3, header_size=124,
                                           masks=struct.pack("<IIII", 0xFF, 0xFF00, 0xFF0000, 0xFF000000)),
        "32bit-zero-masks-v5": lambda: bmp_bytes(w, h, 32, rows(bgra), compression=3, header_size=124),
        "os2-v1-24bit": lambda: bmp_bytes(w, h, 24, bottom_up, header_size=12),
        "os2-v1-8bit": lambda: bmp_bytes(w, h, 8, rows(idx * 13), header_size=12, palette=pal3),
        "os2-v2-24bit": lambda: bmp_bytes(w, h, 24, bottom_up, header_size=64),
        "offset-zero": lambda: bmp_bytes(w, h, 24, bottom_up, offset=0),
        "offset-before-palette": lambda: bmp_bytes(w, h, 4, pack4(idx)[::-1], palette=pal4, offset=54),
    }


@pytest.mark.parametrize("name", sorted(_crafted_bmps()))
def test_bmp_variants_equal_pil(name):
    assert_like_pil(_crafted_bmps()[name](), regions=8)


def _rle_bmps():
    pal = b"".join(bytes([b, g, r, 0]) for r, g, b in RNG.integers(0, 256, (256, 3)))
    gray = b"".join(bytes([i, i, i, 0]) for i in range(256))
    w, h = 13, 6
    row = [("run", 4, 17), ("abs", [3, 250, 9]), ("run", 3, 200), ("abs", [1, 2, 3, 4]), ("eol",)]
    rle4_row = [("run", 5, 0x3A), ("abs", [1, 2, 3, 4, 5]), ("run", 4, 0xF0), ("eol",)]
    return {
        "rle8": lambda: rle_bmp(w, h, 8, row * h + [("eob",)], palette=pal),
        "rle8-top-down": lambda: rle_bmp(w, h, 8, row * h + [("eob",)], palette=pal, top_down=True),
        "rle8-gray-palette": lambda: rle_bmp(w, h, 8, row * h + [("eob",)], palette=gray),
        # A run past the row's end is clipped; an absolute run is not (it spills into the next row).
        "rle8-long-runs": lambda: rle_bmp(w, h, 8, [("run", 40, 7), ("abs", list(range(20, 40))), ("run", 9, 99),
                                                    ("eol",)] * h, palette=pal),
        # Pillow 9.4 reads a delta's two bytes, drops them and takes the next two as (right, up): here the delta
        # (4, 2) is followed by the bytes (3, 1) that Pillow moves by.
        "rle8-delta": lambda: rle_bmp(w, h, 8, [("run", 3, 5), ("delta", 4, 2), bytes([3, 1]), ("run", 2, 6), ("eol",)]
                                      + row * h, palette=pal),
        # Word alignment follows the offset in the file: at an odd data offset, the first row's absolute run of 3
        # ends on an even offset and takes no padding byte; every later row's does.
        "rle8-odd-offset": lambda: rle_bmp(w, h, 8, [bytes([4, 17, 0, 3, 9, 8, 7]) + b"\0" * (y > 0) +
                                                     bytes([6, 5, 0, 0]) for y in range(h)], palette=pal, pad_to=1),
        "rle8-4bit-file": lambda: rle_bmp(w, h, 4, row * h, palette=pal[:64], colors=16),
        "rle4": lambda: rle_bmp(w, h, 4, rle4_row * h + [("eob",)], rle4=True, palette=pal[:64]),
        "rle4-odd-absolute": lambda: rle_bmp(w, h, 4, [("abs", [1, 2, 3]), ("run", 11, 0x45), ("eol",)] * h,
                                             rle4=True, palette=pal[:64]),
        "rle4-8bit-file": lambda: rle_bmp(w, h, 8, rle4_row * h, rle4=True, palette=pal),
    }


@pytest.mark.parametrize("name", sorted(_rle_bmps()))
def test_rle_bmp_equals_pil(name):
    """RLE8/RLE4 BMPs, which PIL opens (BmpRleDecoder), quirks included."""
    data = _rle_bmps()[name]()
    assert Image.open(io.BytesIO(data)).tile[0][0] == "bmp_rle"
    assert_like_pil(data, regions=8)


def _crafted_gifs():
    pal = [tuple(int(v) for v in c) for c in RNG.integers(0, 256, (16, 3))]
    idx = [int(v) for v in RNG.integers(0, 16, 23 * 17)]
    wide = [int(v) for v in RNG.integers(0, 256, 23 * 17)]
    return {
        "interlaced": lambda: gif_bytes((23, 17), pal, [(0, 0, 23, 17, idx, None, None, True)]),
        "offset-frame": lambda: gif_bytes((40, 30), pal, [(5, 7, 23, 17, idx, None, None, False)]),
        "offset-frame-transparent": lambda: gif_bytes((40, 30), pal, [(5, 7, 23, 17, idx, None, 9, False)]),
        "frame-past-the-screen": lambda: gif_bytes((20, 10), pal, [(6, 2, 23, 17, idx, None, None, False)]),
        "indices-past-the-palette": lambda: gif_bytes((23, 17), pal[:4], [(0, 0, 23, 17, wide, None, None, False)]),
        "no-palette": lambda: gif_bytes((23, 17), None, [(0, 0, 23, 17, wide, None, None, False)]),
        "local-palette": lambda: gif_bytes((23, 17), pal, [(0, 0, 23, 17, idx, pal[::-1][:8], None, False)]),
        "second-frame-ignored": lambda: gif_bytes((23, 17), pal, [(0, 0, 23, 17, idx, None, None, False),
                                                                  (0, 0, 23, 17, idx[::-1], None, None, False)]),
    }


@pytest.mark.parametrize("name", sorted(_crafted_gifs()))
def test_gif_first_frame_equals_pil(name):
    assert_like_pil(_crafted_gifs()[name](), regions=8)


def test_animated_webp_with_an_offset_first_frame_equals_pil():
    data = webp_offset_animation((60, 50), (10, 6, RGBA.resize((30, 20))), RGB.resize((60, 50)))
    assert Image.open(io.BytesIO(data)).n_frames == 2
    assert_like_pil(data, regions=8)


def _crafted_pngs():
    gray16 = np.asarray(MODES["I;16"]).astype(">u2")[:9, :13]
    rgb16 = RNG.integers(0, 65536, (9, 13, 3)).astype(">u2")
    la16 = RNG.integers(0, 65536, (9, 13, 2)).astype(">u2")
    plte = _chunk(b"PLTE", bytes(range(12)))  # 4 entries; indices up to 200 follow PIL's gray ramp
    idx = RNG.integers(0, 200, (9, 13), dtype=np.uint8)
    return {
        "gray16": lambda: png_bytes(13, 9, 16, 0, [r.tobytes() for r in gray16]),
        "gray16+trns": lambda: png_bytes(13, 9, 16, 0, [r.tobytes() for r in gray16],
                                         _chunk(b"tRNS", struct.pack(">H", int(gray16[0, 0])))),
        "rgb16": lambda: png_bytes(13, 9, 16, 2, [r.tobytes() for r in rgb16]),
        "gray-alpha16": lambda: png_bytes(13, 9, 16, 4, [r.tobytes() for r in la16]),
        "gray2": lambda: png_bytes(13, 9, 2, 0, [bytes(RNG.integers(0, 256, 4, dtype=np.uint8)) for _ in range(9)]),
        "palette-past-plte": lambda: png_bytes(13, 9, 8, 3, [r.tobytes() for r in idx], plte),
        "palette-past-plte+trns": lambda: png_bytes(13, 9, 8, 3, [r.tobytes() for r in idx],
                                                    plte + _chunk(b"tRNS", b"\x00\x80")),
    }


@pytest.mark.parametrize("name", sorted(_crafted_pngs()))
def test_png_conversions_equal_pil(name):
    assert_like_pil(_crafted_pngs()[name]())


def test_palette_png_with_transparency_was_refused_and_now_equals_pil():
    """The bug: a palette PNG with tRNS expanded to RGBA inside libpng and was counted corrupt
    ("unexpected row size after conversion to RGB")."""
    data = encode(MODES["P+trns"], "PNG")
    assert b"tRNS" in data
    np.testing.assert_array_equal(stoker.decode_image(data), pil_rgb(data))


def test_sixteen_bit_gray_is_clipped_as_pil_does():
    """PIL's I;16 (and 16-bit gray PNG, mode "I") to RGB clips at 255: neither the high byte nor a scaling."""
    values = np.array([[0, 1, 200, 255, 256, 1000, 65535]], np.uint16)
    for fmt in ("PNG", "TIFF"):
        data = encode(Image.fromarray(values, "I;16"), fmt)
        np.testing.assert_array_equal(stoker.decode_image(data)[0, :, 0], [0, 1, 200, 255, 255, 255, 255])
        np.testing.assert_array_equal(stoker.decode_image(data), pil_rgb(data))


@pytest.mark.parametrize("orientation", range(0, 10))
@pytest.mark.parametrize("layout", [dict(rows_per_strip=8), dict(tile=(16, 16), compression=8)],
                         ids=["strips", "tiles"])
def test_tiff_orientation_is_applied_as_pil_applies_it(orientation, layout):
    """PIL's TIFF plugin applies the Orientation tag when it loads (TiffImageFile.load_end), so torchvision's loader
    gets the image turned: so does stoker, size included, for every value (0 and 9: ignored by both)."""
    data = tiff_bytes(np.asarray(RGB), 2, tags=[(274, 3, [orientation])], **layout)
    h, w = stoker.decode_image(data).shape[:2]
    assert (h, w) == ((77, 61) if orientation in (5, 6, 7, 8) else (61, 77))
    assert_like_pil(data, regions=10)


def test_exif_orientation_is_not_applied():
    """torchvision's loader does not call exif_transpose, and PIL applies no EXIF orientation on load (only TIFF's
    own tag, above): neither does stoker."""
    exif = Image.Exif()
    exif[0x0112] = 6
    for fmt, kw in (("WEBP", dict(lossless=True)), ("PNG", {}), ("JPEG", dict(quality=95))):
        data = encode(RGB, fmt, exif=exif.tobytes(), **kw)
        assert stoker.decode_image(data).shape == (61, 77, 3)
        assert_like_pil(data)


# --- 2. through stoker.Loader against torchvision --------------------------------------------------------------

SAVERS = [
    ("webp", dict(format="WEBP", lossless=True)),
    ("webp", dict(format="WEBP", quality=80)),
    ("tif", dict(format="TIFF", compression="tiff_lzw")),
    ("tif", dict(format="TIFF", compression="jpeg", quality=85, strip_size=1 << 14)),
    ("tiff", None),  # tiled, Deflate (tiff_bytes)
    ("bmp", dict(format="BMP")),
    ("gif", dict(format="GIF")),
    ("png", "P+trns"),
]


@pytest.fixture(scope="module")
def format_files(photo_files, tmp_path_factory):
    """The photos saved in each of SAVERS in turn, under class folders: [(path, label)]."""
    out = tmp_path_factory.mktemp("formats")
    items = []
    for i, src in enumerate(photo_files):
        ext, how = SAVERS[i % len(SAVERS)]
        label = i % 3
        (out / f"c{label}").mkdir(exist_ok=True)
        path = out / f"c{label}" / f"{i:03d}.{ext}"
        im = Image.open(src).convert("RGB")
        if how is None:
            path.write_bytes(tiff_bytes(np.asarray(im), 2, tile=(64, 48), compression=8))
        elif how == "P+trns":
            im.quantize(100).save(path, transparency=3)
        else:
            im.save(path, **how)
        items.append((str(path), label))
    return items


def _list_file(tmp_path, items):
    path = tmp_path / "formats.csv"
    path.write_text("path,label\n" + "".join(f"{p},{label}\n" for p, label in items))
    return str(path)


@pytest.mark.parametrize("dtype", ["uint8", "float32"])
def test_loader_resize_center_crop_equal_torchvision(format_files, tmp_path, dtype):
    mean, std = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
    st = [stoker.Resize(72), stoker.CenterCrop(64)] + ([stoker.Normalize(mean, std)] if dtype == "float32" else [])
    n = len(format_files)
    loader = stoker.Loader(_list_file(tmp_path, format_files), batch_size=n, transforms=st, dtype=dtype,
                           on_corrupt="raise", threads=2)
    x, y = next(iter(loader))
    for i, (path, label) in enumerate(format_files):
        ref = F.center_crop(F.resize(Image.open(path).convert("RGB"), 72), [64, 64])
        assert int(y[i]) == label
        if dtype == "uint8":
            assert torch.equal(x[i], F.pil_to_tensor(ref)), path
        else:
            assert (x[i] - F.normalize(F.to_tensor(ref), mean, std)).abs().max().item() <= 1e-6, path


def test_loader_random_resized_crop_equals_torchvision_with_same_draws(format_files, tmp_path):
    """The region decode path: each crop's box as stoker drew it, applied by torchvision to PIL's image."""
    transforms = [stoker.RandomResizedCrop(48), stoker.RandomHorizontalFlip()]
    seed, n = 4, len(format_files)
    loader = stoker.Loader(_list_file(tmp_path, format_files), batch_size=n, seed=seed, transforms=transforms,
                           dtype="uint8", on_corrupt="raise")
    loader.set_epoch(2)
    x, _ = next(iter(loader))
    for i, (path, _) in enumerate(format_files):
        img = Image.open(path).convert("RGB")
        plan = TESTING.plan(transforms, seed, 2, i, img.width, img.height)
        rx, ry, rw, rh = plan["decode_region"]
        ref = F.resized_crop(img, ry, rx, rh, rw, [48, 48], T.InterpolationMode.BILINEAR)
        if plan["mirror"]:
            ref = F.hflip(ref)
        assert torch.equal(x[i], F.pil_to_tensor(ref)), path


def test_image_folder_lists_what_torchvision_lists(format_files):
    """stoker's folder listing is torchvision's ImageFolder's, record for record: .webp .tif .tiff .bmp are
    listed and decoded, .gif is not listed (not in IMG_EXTENSIONS)."""
    import torchvision
    root = os.path.dirname(os.path.dirname(format_files[0][0]))
    theirs = torchvision.datasets.ImageFolder(root)
    loader = stoker.Loader(root, batch_size=len(theirs), transforms=[stoker.Resize((20, 20))], dtype="uint8",
                           on_corrupt="raise")
    x, y = next(iter(loader))
    assert len(x) == len(theirs.samples) < len(format_files)
    assert not any(p.endswith(".gif") for p, _ in theirs.samples)
    for i, (path, label) in enumerate(theirs.samples):
        assert int(y[i]) == label
        assert torch.equal(x[i], F.pil_to_tensor(F.resize(theirs.loader(path), [20, 20]))), path
    assert loader.stats()["corrupt"] == 0


def test_shard_members_of_every_format_are_samples(tmp_path):
    """Members .webp .tif .tiff .bmp .gif hold a sample's image, as .jpg .png .npy do."""
    shard = tmp_path / "s-0.tar"
    files = {"a.webp": encode(RGB, "WEBP", lossless=True), "b.tif": encode(RGB, "TIFF", compression="tiff_lzw"),
             "c.tiff": tiff_bytes(np.asarray(RGB), 2, tile=(16, 16)), "d.bmp": encode(RGB, "BMP"),
             "e.gif": encode(MODES["P"], "GIF")}
    with tarfile.open(shard, "w") as t:
        for k, (name, data) in enumerate(files.items()):
            for member, payload in ((name, data), (name.split(".")[0] + ".cls", str(k).encode())):
                info = tarfile.TarInfo(member)
                info.size = len(payload)
                t.addfile(info, io.BytesIO(payload))
    loader = stoker.Loader(str(shard), batch_size=len(files), transforms=[stoker.CenterCrop(16)], dtype="uint8",
                           on_corrupt="raise", layout="NHWC")
    x, y = next(iter(loader))
    assert sorted(int(v) for v in y) == list(range(len(files)))
    for img, label in zip(x, y):
        data = list(files.values())[int(label)]
        ref = pil_rgb(data)
        top, left = (ref.shape[0] - 16) // 2, (ref.shape[1] - 16) // 2
        np.testing.assert_array_equal(img.numpy(), ref[top:top + 16, left:left + 16])


# --- 3. bad files ----------------------------------------------------------------------------------------------

def _patched(data, at, value):
    return data[:at] + value + data[at + len(value):]


def _bad_files():
    webp = encode(RGB, "WEBP", quality=80)
    gif = encode(MODES["P"], "GIF")
    tif = tiff_bytes(np.asarray(RGB), 2, rows_per_strip=8)
    rows = [bytes(33)] * 4
    return {
        # name: (bytes, code, reason in the message)
        "truncated.webp": (webp[:len(webp) // 2], "corrupt", "WebP: truncated"),
        "jpeg2000-codec.tif": (tiff_bytes(np.asarray(RGB), 2, compression=34712), "unsupported",
                               "compression 34712"),
        "two-to-the-31-pixels.tif": (tiff_bytes(np.zeros((1, 1, 3), np.uint8), 2, size=(65536, 32768)),
                                     "resource_exhausted", "65536x32768 pixels exceeds max_image_pixels"),
        "truncated-strips.tif": (tif[:len(tif) // 3] + tif[-200:], "corrupt", "TIFF: "),
        "float64-samples.tif": (tiff_bytes(np.zeros((4, 4, 1), np.float64), 1, sample_format=3), "unsupported",
                                "sample format 3"),
        "pixels-past-the-end.bmp": (bmp_bytes(11, 4, 24, rows)[:-40], "corrupt", "BMP: truncated"),
        "offset-past-the-end.bmp": (bmp_bytes(11, 4, 24, rows, offset=1 << 20), "corrupt", "BMP: truncated"),
        "lying-size.bmp": (_patched(bmp_bytes(11, 4, 24, rows), 18, struct.pack("<i", 0x7FFFFFF0)),
                           "resource_exhausted", "max_image_pixels"),
        "rle8-ends-early.bmp": (rle_bmp(11, 4, 8, [("run", 11, 1), ("eol",)] * 3 + [("eob",)], palette=bytes(1024)),
                                "corrupt", "BMP: the RLE8 data ends after 33 of the image's 44 pixels"),
        # Without end-of-line codes the column never returns to 0: every run after the first row's is clipped away.
        "rle8-no-eol.bmp": (rle_bmp(11, 4, 8, [("run", 11, i) for i in range(4)], palette=bytes(1024)), "corrupt",
                            "not enough image data"),
        "rle4-truncated.bmp": (rle_bmp(11, 4, 4, [("run", 11, 1), ("eol",)] * 4, rle4=True, palette=bytes(64))[:-3],
                               "corrupt", "not enough image data"),
        "rle8-24bit.bmp": (bmp_bytes(11, 4, 24, rows, compression=1), "unsupported", "RLE8 compression of 24-bit"),
        "rle8-black-white.bmp": (rle_bmp(11, 4, 1, [("run", 11, 1), ("eol",)] * 4, palette=b"\0\0\0\0\xff\xff\xff\0",
                                         colors=2), "unsupported", "black-and-white palette"),
        "v2-header.bmp": (bmp_bytes(11, 4, 24, rows, header_size=52), "unsupported", "info header of 52 bytes"),
        "palette-of-300.bmp": (bmp_bytes(11, 4, 8, rows, palette=bytes(4 * 300), colors=300), "unsupported",
                               "a palette of 300 colours"),
        "truncated.gif": (gif[:len(gif) // 2], "corrupt", "GIF: "),
    }


@pytest.mark.parametrize("name", sorted(_bad_files()))
def test_bad_files_are_refused_with_the_reason_as_pil_refuses_them(name):
    data, _, reason = _bad_files()[name]
    with pytest.raises(Exception):
        Image.open(io.BytesIO(data)).convert("RGB")
    with pytest.raises(stoker.SampleError, match=reason.replace("(", r"\(")):
        stoker.decode_image(data)


def test_libtiff_messages_stay_off_stderr(capfd):
    for name in ("truncated-strips.tif", "jpeg2000-codec.tif"):
        with pytest.raises(stoker.SampleError):
            stoker.decode_image(_bad_files()[name][0])
    bad = bytearray(tiff_bytes(np.asarray(RGB), 2, compression=5, rows_per_strip=4))
    bad[200:260] = b"\xff" * 60  # a broken LZW stream in a strip
    with pytest.raises(stoker.SampleError, match="TIFF: "):
        stoker.decode_image(bytes(bad))
    out, err = capfd.readouterr()
    assert err == "" and out == ""


def test_bad_files_counted_under_skip_and_raised_under_raise(tmp_path):
    good = encode(RGB, "WEBP", lossless=True)
    bad = _bad_files()
    items = []
    for k, name in enumerate(sorted(bad)):
        for path, data in ((tmp_path / f"good{k}.webp", good), (tmp_path / name, bad[name][0])):
            path.write_bytes(data)
            items.append((str(path), len(items)))
    lst = _list_file(tmp_path, items)
    loader = stoker.Loader(lst, batch_size=4, transforms=[stoker.Resize((8, 8))], dtype="uint8", on_corrupt="skip")
    delivered = {int(v) for _, y in loader for v in y}
    assert delivered == set(range(0, len(items), 2)), "the good files, none of the bad"
    s = loader.stats()
    expected = {}
    for data, code, _ in bad.values():
        expected[code] = expected.get(code, 0) + 1
    assert s["corrupt"] == len(bad)
    assert s["corrupt_by_reason"] == expected
    text = "\n".join(s["corrupt_examples"])
    for name, (_, _, reason) in bad.items():
        assert name in text and reason in text, (name, text)
    loader = stoker.Loader(lst, batch_size=1, transforms=[stoker.Resize((8, 8))], dtype="uint8", on_corrupt="raise",
                           threads=1)
    it = iter(loader)
    next(it)  # good0, then the first bad file
    with pytest.raises(stoker.SampleError, match=sorted(bad)[0] + ".*" + bad[sorted(bad)[0]][2]):
        next(it)


# --- 4. the format table ---------------------------------------------------------------------------------------

def test_format_table_drives_folders_and_shards():
    table = {f["name"]: f for f in TESTING.formats()}
    for name in ("JPEG", "PNG", ".npy", "WebP", "TIFF", "BMP", "GIF"):
        assert table[name]["decoded"] and table[name]["sample_member"], name
    folder = {"." + s for f in table.values() if f["in_folders"] for s in f["suffixes"]}
    assert folder == set(datasets.IMG_EXTENSIONS)
    assert ".gif" not in folder
    assert table["TIFF"]["suffixes"] == ["tif", "tiff"] and table["TIFF"]["region"]
    with pytest.raises(stoker.SampleError, match="not a JPEG, PNG, .npy, WebP, TIFF, BMP or GIF image"):
        stoker.decode_image(b"P6\n1 1\n255\n\0\0\0")  # a .ppm: listed in folders, not decoded


# --- 5. every path an image takes: caches, pack, inspect/verify, the doctor, unlabelled lists ----------------------

def _all_formats_list(format_files, tmp_path):
    """A list file of every saved photo (GIFs included: a list names them, a folder does not)."""
    return _list_file(tmp_path, format_files)


@pytest.mark.parametrize("cache", ["ram", "decoded", "auto"])
def test_caches_give_the_uncached_batches(format_files, tmp_path, cache):
    """cache="ram" (encoded bytes, the JPEG rewrite leaving other formats as they are), "decoded" (pixels) and
    "auto": three epochs each equal cache="mmap"'s, uint8 exact; every record is stored, and later epochs read from
    the cache (decoded stores a record after the first batch is out: test_cache.py)."""
    lst = _all_formats_list(format_files, tmp_path)
    st = [stoker.RandomResizedCrop(40), stoker.RandomHorizontalFlip()]

    def epochs(c):
        loader = stoker.Loader(lst, batch_size=4, shuffle=True, seed=3, transforms=st, dtype="uint8",
                               on_corrupt="raise", cache=c, cache_max_side=4096, prefetch=2, threads=2, progress=False)
        out = []
        for e in range(3):
            loader.set_epoch(e)
            out.append([(x.clone(), y.clone()) for x, y in loader])
        return out, loader.stats()

    ref, _ = epochs("mmap")
    got, stats = epochs(cache)
    for a, b in zip(ref, got):
        for (xa, ya), (xb, yb) in zip(a, b):
            assert torch.equal(ya, yb) and torch.equal(xa, xb)
    assert stats["corrupt"] == 0
    if cache == "auto":
        assert stats["cache_mode"] in ("ram", "decoded", "mmap") and stats["cache_auto"]
    else:
        assert stats["cache_mode"] == cache
    if stats["cache_mode"] != "mmap":
        assert stats["cache_records"] == len(format_files) and stats["cache_hits"] >= len(format_files), stats


def _members(path):
    with tarfile.open(path) as t:
        return {m.name: t.extractfile(m).read() for m in t.getmembers() if m.isfile()}


def _cli():
    build = os.environ.get("STOKER_BUILD", os.path.join(os.path.dirname(__file__), "..", "..", "build"))
    cli = os.path.join(build, "tools", "stoker")
    if not os.path.exists(cli):
        pytest.skip("the stoker CLI is not built")
    return cli


def _run_cli(*args, check=True):
    import subprocess
    out = subprocess.run([_cli(), *map(str, args)], capture_output=True, text=True, timeout=600)
    if check:
        assert out.returncode == 0, out.stderr + out.stdout
    return out


def test_pack_keeps_or_reencodes_every_format(format_files, tmp_path):
    """stoker pack on a list of every format: --keep and --lossless copy each file's bytes under its own suffix
    (.webp .tif .tiff .bmp .gif .png; only JPEGs are rewritten by --lossless); the default re-encodes to JPEG with
    the same options as for JPEG sources (quality, subsampling, restart markers: the pixels equal PIL's encode of
    PIL's decode at those options); --raw stores PIL's pixels; --max-side resizes them as torchvision does.
    Loading the kept shards gives the list's batches."""
    lst = _all_formats_list(format_files, tmp_path)
    by_path = dict(format_files)
    n = len(format_files)
    for how in ("--keep", "--lossless"):
        out = _run_cli("pack", lst, tmp_path / f"k{how[2:]}-%02d.tar", how, "--shard-count", "1").stdout
        assert f"{n} records in, {n} written, 0 skipped" in out, out
        m = _members(tmp_path / f"k{how[2:]}-00.tar")
        suffixes = set()
        for k in (k for k in m if k.endswith(".json")):
            meta = json.loads(m[k])
            key = k[:-len(".json")]
            image = next(name for name in m if name.startswith(key + ".") and name not in (key + ".json", key + ".cls"))
            suffix = image[len(key) + 1:]
            suffixes.add(suffix)
            # The format's first suffix: a .tiff file's member is .tif.
            assert suffix == {"tiff": "tif"}.get(meta["path"].rsplit(".", 1)[1], meta["path"].rsplit(".", 1)[1])
            assert m[image] == open(meta["path"], "rb").read(), (how, image)
            assert int(m[key + ".cls"]) == by_path[meta["path"]]
        assert suffixes == {"webp", "tif", "bmp", "gif", "png"}, suffixes
        shards = str(tmp_path / f"k{how[2:]}-00.tar")
        st = [stoker.Resize((24, 24))]
        a = stoker.Loader(lst, batch_size=n, transforms=st, dtype="uint8", on_corrupt="raise")
        b = stoker.Loader(shards, batch_size=n, transforms=st, dtype="uint8", on_corrupt="raise")
        pairs_a = sorted((int(y), x.numpy().tobytes()) for xs, ys in a for x, y in zip(xs, ys))
        pairs_b = sorted((int(y), x.numpy().tobytes()) for xs, ys in b for x, y in zip(xs, ys))
        assert pairs_a == pairs_b

    out = _run_cli("pack", lst, tmp_path / "q-%02d.tar", "--quality", "88", "--subsampling", "420",
                   "--shard-count", "1").stdout
    assert f"{n} records in, {n} written, 0 skipped" in out, out
    m = _members(tmp_path / "q-00.tar")
    jpegs = [k for k in m if k.endswith(".jpg")]
    assert len(jpegs) == n and not any(k.endswith((".webp", ".tif", ".tiff", ".bmp", ".gif", ".png")) for k in m)
    for k in jpegs:
        meta = json.loads(m[k[:-4] + ".json"])
        assert b"\xff\xdd" in m[k], "restart markers, as for JPEG sources"
        ref = encode(Image.open(meta["path"]).convert("RGB"), "JPEG", quality=88, subsampling=2)
        np.testing.assert_array_equal(pil_rgb(m[k]), pil_rgb(ref), err_msg=meta["path"])

    _run_cli("pack", lst, tmp_path / "r-%02d.tar", "--raw", "--shard-count", "1")
    _run_cli("pack", lst, tmp_path / "s-%02d.tar", "--raw", "--max-side", "64", "--shard-count", "1")
    for name, side in (("r-00.tar", None), ("s-00.tar", 64)):
        m = _members(tmp_path / name)
        for k in (k for k in m if k.endswith(".npy")):
            meta = json.loads(m[k[:-4] + ".json"])
            img = Image.open(meta["path"]).convert("RGB")
            ref = np.asarray(img if side is None else F.resize(img, side))
            np.testing.assert_array_equal(np.load(io.BytesIO(m[k])), ref, err_msg=meta["path"])


def test_inspect_and_verify_every_format(format_files, tmp_path):
    lst = _all_formats_list(format_files, tmp_path)
    _run_cli("pack", lst, tmp_path / "k-%02d.tar", "--keep", "--shard-count", "1")
    out = _run_cli("inspect", tmp_path / "k-00.tar").stdout
    assert f"records: {len(format_files)}" in out
    for suffix in (".webp", ".tif", ".bmp", ".gif", ".png"):
        assert suffix in out.split("members by suffix")[1], out
    assert _run_cli("verify", tmp_path / "k-00.tar").returncode == 0
    bad = tmp_path / "bad.tar"
    webp = encode(RGB, "WEBP", quality=80)
    with tarfile.open(bad, "w") as t:
        for name, data in (("a.tif", encode(RGB, "TIFF", compression="tiff_lzw")), ("b.webp", webp[:len(webp) // 2]),
                           ("c.bmp", _rle_bmps()["rle8"]())):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
    out = _run_cli("verify", bad, check=False)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "BAD record 1 'bad.tar:b'" in out.stdout and "WebP: truncated" in out.stdout, out.stdout
    assert "'bad.tar:a'" not in out.stdout and "'bad.tar:c'" not in out.stdout


def test_doctor_probes_a_dataloader_over_other_formats(format_files, tmp_path):
    """stoker doctor on a torch DataLoader over an ImageFolder of WebP/TIFF/BMP/PNG files: its probe runs stoker on
    those files (a measured "stoker.Loader" suggestion, no probe failing on them)."""
    import subprocess
    import sys
    root = os.path.dirname(os.path.dirname(format_files[0][0]))
    scenarios = os.path.join(os.path.dirname(os.path.abspath(__file__)), "doctor_scenarios.py")
    report, js = str(tmp_path / "d.html"), str(tmp_path / "d.json")
    env = dict(os.environ, PYTHONPATH=os.environ.get("STOKER_PYTHONPATH", os.path.join(
        os.path.dirname(__file__), "..", "..", "python")))
    p = subprocess.run([_cli(), "doctor", "-q", "--report", report, "--json", js, "--", sys.executable, scenarios,
                        "dataloader", root, "--seconds", "4"], env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    with open(js) as f:
        r = json.load(f)
    assert r["verdict"].startswith("input-bound"), p.stdout
    found = [s for s in r.get("suggestions", []) if "stoker.Loader" in s["action"]]
    assert found and 0 < found[0]["predicted_lo"] <= found[0]["predicted_rate"], p.stdout
    assert not any("not measured" in n or "unsupported" in n or "corrupt" in n for n in r.get("notes", [])), r["notes"]


def test_list_of_images_alone_is_an_unlabelled_set(format_files, tmp_path):
    """A list file whose header is `image` alone: every format loads, labels are -1 (the label field's default, as
    for a shard sample without .cls), and fields=[stoker.Image()] gives batches without a label."""
    lst = tmp_path / "ssl.csv"
    lst.write_text("image\n" + "".join(f"{p}\n" for p, _ in format_files))
    n = len(format_files)
    loader = stoker.Loader(str(lst), batch_size=n, transforms=[stoker.Resize((20, 20))], dtype="uint8",
                           on_corrupt="raise")
    x, y = next(iter(loader))
    assert y.tolist() == [-1] * n
    for i, (path, _) in enumerate(format_files):
        assert torch.equal(x[i], F.pil_to_tensor(F.resize(Image.open(path).convert("RGB"), [20, 20]))), path
    only = stoker.Loader(str(lst), batch_size=n, transforms=[stoker.Resize((20, 20))], dtype="uint8",
                         fields=[stoker.Image()], on_corrupt="raise")
    batch = next(iter(only))
    assert list(batch) == ["image"] and torch.equal(batch["image"], x)
    (tmp_path / "bad.csv").write_text("image\na.jpg,3\n")
    with pytest.raises(ValueError, match="bad.csv:2: expected 1 cells"):
        stoker.Loader(str(tmp_path / "bad.csv"), batch_size=1)
