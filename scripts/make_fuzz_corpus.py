#!/usr/bin/env python3
"""Seed corpora for the fuzz targets, one folder per target (fuzz/<name>_fuzz.cc
reads OUT_DIR/<name>): small tars (stoker, GNU, pax, ustar layouts), index
sidecars, small JPEG/PNG/.npy images, BMP/GIF/TIFF/WebP files in their modes
and layouts, masks and boxes, volumes (.npy,
NIfTI-1/2, gzipped), COCO instances files, S3 listings, loader states and
mixtures.

    python3 scripts/make_fuzz_corpus.py OUT_DIR
"""
import gzip
import io
import json
import os
import struct
import sys
import tarfile
import zlib

import numpy as np
from PIL import Image

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python"))


FUZZ_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fuzz")


def targets():
    """Every fuzz target's name: fuzz/<name>_fuzz.cc (as fuzz/CMakeLists.txt and the Makefile find them)."""
    return sorted(f[:-len("_fuzz.cc")] for f in os.listdir(FUZZ_DIR) if f.endswith("_fuzz.cc"))


def write_all(folder, seeds):
    os.makedirs(folder, exist_ok=True)
    for name, data in seeds.items():
        with open(os.path.join(folder, name), "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)


def nifti(arr, version=1, big=False, sform=True):
    """A single-file NIfTI-1/2 of `arr` (i, j, k[, t]) written field by field (offsets as
    src/decode/volume_format.cc's layouts: nibabel's header dtypes), voxels in Fortran order."""
    arr = np.asarray(arr)
    codes = {"uint8": 2, "int16": 4, "int32": 8, "float32": 16, "float64": 64, "int8": 256, "uint16": 512,
             "uint32": 768}
    e = ">" if big else "<"
    dims = [arr.ndim] + list(arr.shape) + [1] * (7 - arr.ndim)
    affine = [[2.0, 0, 0, -10.0], [0, 1.5, 0, 4.0], [0, 0, 3.0, 0.5]]
    if version == 1:
        h = bytearray(352)  # the header and the 4 extension bytes
        struct.pack_into(e + "i", h, 0, 348)
        struct.pack_into(e + "8h", h, 40, *dims)
        struct.pack_into(e + "hh", h, 70, codes[arr.dtype.name], arr.dtype.itemsize * 8)
        struct.pack_into(e + "8f", h, 76, 1.0, 2.0, 1.5, 3.0, 1, 1, 1, 1)
        struct.pack_into(e + "fff", h, 108, 352.0, 0.0, 0.0)
        if sform:
            struct.pack_into(e + "hh", h, 252, 0, 2)
            struct.pack_into(e + "12f", h, 280, *sum(affine, []))
        else:
            struct.pack_into(e + "hh", h, 252, 1, 0)
            struct.pack_into(e + "6f", h, 256, 0.0, 0.0, 0.0, -10.0, 4.0, 0.5)
        h[344:348] = b"n+1\0"
    else:
        h = bytearray(544)
        struct.pack_into(e + "i", h, 0, 540)
        h[4:12] = b"n+2\0\r\n\x1a\n"
        struct.pack_into(e + "hh", h, 12, codes[arr.dtype.name], arr.dtype.itemsize * 8)
        struct.pack_into(e + "8q", h, 16, *dims)
        struct.pack_into(e + "8d", h, 104, 1.0, 2.0, 1.5, 3.0, 1, 1, 1, 1)
        struct.pack_into(e + "qdd", h, 168, 544, 0.0, 0.0)
        struct.pack_into(e + "ii", h, 344, 0, 2)
        struct.pack_into(e + "12d", h, 400, *sum(affine, []))
    return bytes(h) + arr.astype(arr.dtype.newbyteorder(e)).tobytes(order="F")


def npy(arr):
    b = io.BytesIO()
    np.save(b, arr, allow_pickle=False)
    return b.getvalue()


def volumes(rng):
    """Small volumes of the formats and types stoker reads: name -> uncompressed bytes."""
    v = {}
    v["npy_u8"] = npy(rng.integers(0, 255, (3, 4, 5), dtype=np.uint8))
    v["npy_f32_c2"] = npy(rng.standard_normal((2, 4, 3, 5)).astype(np.float32))
    v["npy_i16_be"] = npy(rng.integers(-900, 900, (5, 3, 4)).astype(">i2"))
    v["nii1_u8"] = nifti(rng.integers(0, 255, (4, 3, 5), dtype=np.uint8))
    v["nii1_i16_be_qform"] = nifti(rng.integers(-900, 900, (3, 4, 2)).astype(np.int16), big=True, sform=False)
    v["nii1_f32_4d"] = nifti(rng.standard_normal((3, 3, 2, 2)).astype(np.float32))
    v["nii2_f64"] = nifti(rng.standard_normal((2, 3, 4)), version=2)
    v["nii2_u16"] = nifti(rng.integers(0, 60000, (5, 2, 3)).astype(np.uint16), version=2)
    return v


def tiled_tiff(arr, tile, deflate):
    """A tiled RGB TIFF (Pillow writes strips only): uncompressed or Deflate tiles."""
    h, w, _ = arr.shape
    tiles = []
    for y in range(0, h, tile):
        for x in range(0, w, tile):
            t = np.zeros((tile, tile, 3), np.uint8)
            t[:min(tile, h - y), :min(tile, w - x)] = arr[y:y + tile, x:x + tile]
            tiles.append(zlib.compress(t.tobytes()) if deflate else t.tobytes())
    data = bytearray(b"II*\0\0\0\0\0")
    offsets = []
    for t in tiles:
        offsets.append(len(data))
        data += t
    tags = {256: (4, [w]), 257: (4, [h]), 258: (3, [8, 8, 8]), 259: (3, [8 if deflate else 1]), 262: (3, [2]),
            277: (3, [3]), 284: (3, [1]), 322: (4, [tile]), 323: (4, [tile]), 324: (4, offsets),
            325: (4, [len(t) for t in tiles])}
    ifd_at = len(data)
    tail_at = ifd_at + 2 + 12 * len(tags) + 4
    ifd, tail = struct.pack("<H", len(tags)), b""
    for tag in sorted(tags):
        typ, values = tags[tag]
        payload = struct.pack("<" + {3: "H", 4: "I"}[typ] * len(values), *values)
        if len(payload) <= 4:
            ifd += struct.pack("<HHI", tag, typ, len(values)) + payload.ljust(4, b"\0")
        else:
            ifd += struct.pack("<HHII", tag, typ, len(values), tail_at + len(tail))
            tail += payload
    data[4:8] = struct.pack("<I", ifd_at)
    return bytes(data) + ifd + b"\0\0\0\0" + tail


def format_seeds(rng):
    """Seeds of the per-format image targets: {target: {name: bytes}}."""
    arr = rng.integers(0, 256, (19, 27, 4), dtype=np.uint8)
    rgba = Image.fromarray(arr, "RGBA")
    modes = {"RGB": rgba.convert("RGB"), "RGBA": rgba, "L": rgba.convert("L"), "LA": rgba.convert("LA"),
             "P": rgba.convert("RGB").quantize(20), "1": rgba.convert("1"),
             "I16": Image.fromarray(arr[..., 0].astype(np.uint16) * 300, "I;16")}

    def enc(im, fmt, **kw):
        b = io.BytesIO()
        im.save(b, fmt, **kw)
        return b.getvalue()

    seeds = {"bmp": {}, "gif": {}, "tiff": {}, "webp": {}}
    for m in ("RGB", "RGBA", "L", "P", "1"):
        seeds["bmp"][m] = enc(modes[m], "BMP")
    # 16-bit 5-6-5 with a V5 header, top-down; an OS/2 1.x header.
    px = arr[..., :2].tobytes()
    rows = b"".join(px[y * 54:(y + 1) * 54].ljust(56, b"\0") for y in range(19))
    v5 = struct.pack("<iiHHIIiiII", 27, -19, 1, 16, 3, 0, 0, 0, 0, 0) + struct.pack("<IIII", 0xF800, 0x7E0, 0x1F, 0)
    v5 = v5.ljust(120, b"\0")
    seeds["bmp"]["v5_565_top_down"] = b"BM" + struct.pack("<IHHI", 138 + len(rows), 0, 0, 138) + \
        struct.pack("<I", 124) + v5 + rows
    core = struct.pack("<HHHH", 27, 19, 1, 24)
    rows24 = b"".join(arr[y, :, :3].tobytes().ljust(84, b"\0") for y in range(19))
    seeds["bmp"]["os2_24"] = b"BM" + struct.pack("<IHHI", 26 + len(rows24), 0, 0, 26) + struct.pack("<I", 12) + \
        core + rows24
    # RLE8 and RLE4 (encoded and absolute runs, a delta, end of line, end of bitmap), 8-bit palette.
    pal = b"".join(bytes([i, (i * 7) % 256, 255 - i, 0]) for i in range(256))
    for name, comp, row in (("rle8", 1, bytes([5, 3, 0, 3, 7, 8, 9, 0, 0, 2, 2, 0, 3, 1, 0, 0])),
                            ("rle4", 2, bytes([5, 0x3a, 0, 5, 0x12, 0x34, 0x50, 0, 0, 0]))):
        data = row * 6 + bytes([0, 1])
        info = struct.pack("<iiHHIIiiII", 11, 6, 1, 8, comp, len(data), 0, 0, 0, 0)
        seeds["bmp"][name] = b"BM" + struct.pack("<IHHI", 54 + 1024 + len(data), 0, 0, 54 + 1024) + \
            struct.pack("<I", 40) + info + pal + data
    for m in ("P", "L", "RGBA"):
        seeds["gif"][m] = enc(modes[m], "GIF")
    seeds["gif"]["animated"] = enc(modes["P"], "GIF", save_all=True, append_images=[modes["L"]], duration=30)
    seeds["gif"]["transparent"] = enc(modes["P"], "GIF", transparency=2, interlace=False)
    for m in ("RGB", "RGBA", "L", "LA", "P", "1", "I16"):
        seeds["tiff"][m] = enc(modes[m], "TIFF")
    for c in ("tiff_lzw", "tiff_adobe_deflate", "packbits"):
        seeds["tiff"][c] = enc(modes["RGB"], "TIFF", compression=c, strip_size=400)
    seeds["tiff"]["jpeg"] = enc(modes["RGB"], "TIFF", compression="jpeg")
    seeds["tiff"]["cmyk"] = enc(modes["RGB"].convert("CMYK"), "TIFF")
    seeds["tiff"]["multipage"] = enc(modes["RGB"], "TIFF", save_all=True, append_images=[modes["L"]])
    seeds["tiff"]["tiled"] = tiled_tiff(arr[..., :3], 16, False)
    seeds["tiff"]["tiled_deflate"] = tiled_tiff(arr[..., :3], 16, True)
    for m in ("RGB", "RGBA"):
        seeds["webp"][f"{m}_lossless"] = enc(modes[m], "WEBP", lossless=True)
        seeds["webp"][f"{m}_lossy"] = enc(modes[m], "WEBP", quality=70)
    seeds["webp"]["animated"] = enc(modes["RGB"], "WEBP", save_all=True, append_images=[modes["L"]], duration=30)
    return seeds


def main(out):
    for d in targets():
        os.makedirs(os.path.join(out, d), exist_ok=True)
    rng = np.random.default_rng(0)
    images = {}
    for i, (w, h) in enumerate([(1, 1), (8, 8), (17, 9), (33, 20)]):
        im = Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8))
        for fmt, kw in (("JPEG", {"quality": 90}), ("JPEG", {"quality": 80, "subsampling": 2, "progressive": True}),
                        ("PNG", {})):
            b = io.BytesIO()
            im.save(b, fmt, **kw)
            images[f"{i}_{fmt}_{len(images)}"] = b.getvalue()
        b = io.BytesIO()
        np.save(b, np.asarray(im))
        images[f"{i}_npy"] = b.getvalue()
    for name, data in images.items():
        open(os.path.join(out, "image", name), "wb").write(data)
    # The restart-marker inserter: the baseline and progressive JPEGs above, and optimised Huffman tables
    # (often without the DC categories an absolute DC needs) in each subsampling.
    jpegs = {name: data for name, data in images.items() if "_JPEG_" in name}
    for i, (w, h) in enumerate([(8, 8), (40, 17), (130, 9)]):
        im = Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8))
        for sub in (0, 1, 2):
            b = io.BytesIO()
            im.save(b, "JPEG", quality=95 - 10 * sub, subsampling=sub, optimize=True)
            jpegs[f"opt_{i}_{sub}"] = b.getvalue()
        b = io.BytesIO()
        im.convert("L").save(b, "JPEG", quality=90)
        jpegs[f"gray_{i}"] = b.getvalue()
    for name, data in jpegs.items():
        open(os.path.join(out, "jpeg_restart_insert", name), "wb").write(data)
    for fmt, fname in ((tarfile.USTAR_FORMAT, "ustar"), (tarfile.GNU_FORMAT, "gnu"), (tarfile.PAX_FORMAT, "pax")):
        path = os.path.join(out, "tar", fname + ".tar")
        with tarfile.open(path, "w", format=fmt) as t:
            for k, (name, data) in enumerate(list(images.items())[:4]):
                key = f"dir/{'long' * (40 if fmt != tarfile.USTAR_FORMAT else 1)}{k}"
                for ext, payload in (("jpg", data[:200]), ("cls", str(k).encode()), ("json", b'{"label": 1}')):
                    info = tarfile.TarInfo(f"{key}.{ext}")
                    info.size = len(payload)
                    t.addfile(info, io.BytesIO(payload))
        # The loader writes the index sidecar next to the tar.
        import stoker
        try:
            stoker.Loader(path, batch_size=1, transforms=[stoker.CenterCrop(1)])
        except Exception:
            pass
        if os.path.exists(path + ".idx"):
            os.replace(path + ".idx", os.path.join(out, "index", fname + ".idx"))
    open(os.path.join(out, "list", "plain.csv"), "w").write("a/b.jpg,1\n/abs/c.png,0\n")
    open(os.path.join(out, "list", "header.csv"), "w").write("path,label\n# comment\n\n x.jpg , 3 \r\n")
    open(os.path.join(out, "list", "images_only.csv"), "w").write("image\na.webp\n\"b,c.tif\"\n")
    # fields_fuzz: a mode byte, then a mask (PNG L / P / I;16, .npy) or a boxes member (.npy, JSON).
    fields = {}
    m = rng.integers(0, 6, (9, 13), dtype=np.uint8)
    for mode in ("L", "P", "I;16"):
        img = Image.fromarray(m.astype(np.uint16) * 1000, "I;16") if mode == "I;16" else Image.fromarray(m, mode)
        b = io.BytesIO()
        img.save(b, "PNG")
        fields[f"mask_{mode.replace(';', '')}"] = bytes([0]) + b.getvalue()
    b = io.BytesIO()
    np.save(b, m)
    fields["mask_npy"] = bytes([1]) + b.getvalue()
    b = io.BytesIO()
    np.save(b, np.array([[2, 3, 30, 20, 1], [40, 10, 60, 45, 2]], np.float32))
    fields["boxes_npy"] = bytes([2]) + b.getvalue()
    fields["boxes_rows"] = bytes([8]) + b"[[1, 2, 10, 12], [30, 5, 4, 4, 7]]"
    fields["boxes_object"] = bytes([4 | 16]) + b'{"boxes": {"boxes": [[20, 20, 8, 6]], "labels": [3]}}'
    for name, data in fields.items():
        open(os.path.join(out, "fields", name), "wb").write(data)

    # volume_header_fuzz: the uncompressed files and gzips of two of them.
    vols = volumes(rng)
    seeds = dict(vols)
    seeds["nii1_u8.gz"] = gzip.compress(vols["nii1_u8"], mtime=0)
    seeds["npy_u8.gz"] = gzip.compress(vols["npy_u8"], mtime=0)
    write_all(os.path.join(out, "volume_header"), seeds)
    # nii_gz_fuzz: a mode byte (fuzz/nii_gz_fuzz.cc), then the volume: gzipped by the target (modes 0x00,
    # 0x0c stored, 0x80 cache="ram"), as a gzip stream (0x01), uncompressed (0x02), as two members (0x03).
    seeds = {}
    for name, data in vols.items():
        seeds[f"{name}.m00"] = bytes([0x00]) + data
        seeds[f"{name}.m01"] = bytes([0x01]) + gzip.compress(data, compresslevel=6, mtime=0)
        seeds[f"{name}.m02"] = bytes([0x02]) + data
    seeds["nii1_u8.m0c"] = bytes([0x0c]) + vols["nii1_u8"]
    seeds["nii2_f64.m80"] = bytes([0x80]) + vols["nii2_f64"]
    seeds["npy_u8.m03"] = bytes([0x03]) + vols["npy_u8"]
    write_all(os.path.join(out, "nii_gz"), seeds)

    # coco_fuzz: instances files as torchvision's CocoDetection reads them.
    coco = {
        "info": {"description": "fuzz seed"},
        "images": [{"id": 3, "file_name": "b.jpg", "width": 64, "height": 48},
                   {"id": 1, "file_name": "sub/a.jpg", "width": 32, "height": 32},
                   {"id": 7, "file_name": "/abs/c.png", "width": 8, "height": 8}],
        "annotations": [
            {"id": 10, "image_id": 1, "category_id": 2, "bbox": [1.5, 2, 10, 12.25], "area": 120, "iscrowd": 0,
             "segmentation": [[1, 2, 3, 4, 5, 6]]},
            {"id": 11, "image_id": 1, "category_id": 5, "bbox": [0, 0, 4, 4], "iscrowd": 1,
             "segmentation": {"counts": [0, 16], "size": [32, 32]}},
            {"id": 12, "image_id": 3, "category_id": 1, "bbox": [30, 5, 4, 4]},
            {"id": 13, "image_id": 3, "category_id": 1, "bbox": [1, 2, 3]},
            {"id": 14, "image_id": 3, "category_id": "x", "bbox": [1, 2, 3, 4]}],
        "categories": [{"id": 1, "name": "cat"}, {"id": 2, "name": "dog"}, {"id": 5, "name": "crowd"}],
    }
    seeds = {"instances.json": json.dumps(coco), "instances_pretty.json": json.dumps(coco, indent=1),
             "images_only.json": json.dumps({"images": coco["images"]}),
             "one_image.json": '{"images": [{"id": 0, "file_name": "x.jpg"}], "annotations": []}'}
    write_all(os.path.join(out, "coco"), seeds)

    # s3_list_fuzz: ListObjectsV2 bodies (s3rver's, AWS's pretty-printed one, entities and CDATA) and an
    # error body; the first line is also the key pattern the target matches keys against.
    s3rver = ('<?xml version="1.0" encoding="UTF-8"?>\n<ListBucketResult xmlns="http://doc.s3.amazonaws.com/'
              '2006-03-01/"><Name>stoker-test</Name><Prefix>a/</Prefix><KeyCount>1</KeyCount><MaxKeys>1000'
              '</MaxKeys><IsTruncated>false</IsTruncated><Contents><Key>a/f.txt</Key><LastModified>'
              '2026-12-04T17:01:50.000Z</LastModified><ETag>&quot;b1946ac92492d2347c6235b4d2611184&quot;</ETag>'
              '<Size>6</Size><StorageClass>STANDARD</StorageClass></Contents></ListBucketResult>')
    aws = """train/*.tar
<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/" data-note='a > b / c'>
  <Name>bucket</Name>
  <Prefix>train/</Prefix>
  <KeyCount>3</KeyCount>
  <MaxKeys>3</MaxKeys>
  <IsTruncated> true </IsTruncated>
  <!-- a comment -->
  <Contents>
    <Key>train/000000.tar</Key>
    <LastModified>2024-01-01T00:00:00.000Z</LastModified>
    <ETag>"aaa"</ETag>
    <Size>268435456</Size>
    <StorageClass>STANDARD</StorageClass>
  </Contents>
  <Contents>
    <Key>train/000001.tar</Key>
    <ETag>&quot;bbb-2&quot;</ETag>
    <Size>
      18446744073709551615
    </Size>
  </Contents>
  <Contents><Key>train/000002.tar</Key><Size>0</Size><ETag>"ccc"</ETag><Owner><ID>x</ID></Owner></Contents>
  <NextContinuationToken>1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=</NextContinuationToken>
  <ContinuationToken>previous</ContinuationToken>
</ListBucketResult>
"""
    entities = ("<ListBucketResult><IsTruncated>false</IsTruncated>"
                "<Contents><Key>a&amp;b &lt;c&gt; &apos;d&apos; &quot;e&quot; &#65;&#x42;&#xe9;&#x1F600;</Key>"
                "<Size>1</Size><ETag>\"x\"</ETag></Contents>"
                "<Contents><Key><![CDATA[raw & <kept>]]></Key><Size>3</Size><ETag>\"z\"</ETag></Contents>"
                "</ListBucketResult>")
    error = ('<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>NoSuchBucket</Code><Message>The specified '
             'bucket does not exist</Message><BucketName>b</BucketName><RequestId>4442587FB7D0A2F9</RequestId>'
             '</Error>')
    write_all(os.path.join(out, "s3_list"), {"s3rver.xml": s3rver, "aws.xml": aws, "entities.xml": entities,
                                             "error.xml": error})

    # state_fuzz: state_dict()s of a 37-record loader with batch 4 (fuzz/state_fuzz.cc's): version 1, 2 and
    # an elastic one with earlier parts and a mixture's.
    def state(**kw):
        st = {"version": 2, "seed": 7, "epoch": 0, "batches_done": 0, "dataset_size": 37, "batch_size": 4,
              "shuffle": False, "drop_last": False, "world_size": 1, "earlier": []}
        st.update(kw)
        return json.dumps(st)
    seeds = {"fresh.json": state(), "mid.json": state(epoch=2, batches_done=5, shuffle=True),
             "v1.json": json.dumps({"version": 1, "seed": 7, "epoch": 1, "batches_done": 3, "dataset_size": 37,
                                    "batch_size": 4, "shuffle": True, "drop_last": True, "world_size": 1,
                                    "rank": 0}),
             "elastic.json": state(batches_done=2, batch_size=3, world_size=2, drop_last=True,
                                   earlier=[{"world_size": 4, "batch_size": 2, "batches_done": 1}]),
             "mixture.json": state(mixture=[{"name": "a", "size": 5, "count": 20}, {"name": "b", "size": 13,
                                                                                    "count": 17}]),
             "window.json": state(version=3, shuffle=True, shuffle_window=2)}
    write_all(os.path.join(out, "state"), seeds)

    # mixture_fuzz: stoker.Mix(...)._json() of a few mixtures (weights, sizes, label offsets and maps).
    from stoker.mixture import Mix
    seeds = {
        "weights.json": Mix({"a": "x/train", "bb": ["s/{0..3}.tar", "t.tar"]}, weights={"a": 0.8, "bb": 0.2},
                            samples_per_epoch=100)._json(),
        "sizes.json": Mix({"a": "x", "b": "yy", "c": "zzz"}, label_offset={"b": 1000})._json(),
        "maps.json": Mix({"a": "x", "b": "yy"}, weights={"a": 1, "b": 3}, label_map={"a": {0: 5, 1: 6, 4: 2}},
                         samples_per_epoch=7)._json(),
        # At the edge of int64: "yy" opens the target's 13-record list, whose label 12 lands on 2^63 - 1.
        "edges.json": Mix({"a": "x", "b": "yy"}, weights={"a": 5e-324, "b": 1.7976931348623157e308},
                          samples_per_epoch=2**32 - 1, label_offset={"a": -2**63, "b": 2**63 - 13})._json(),
    }
    write_all(os.path.join(out, "mixture"), seeds)

    # bmp_fuzz, gif_fuzz, tiff_fuzz, webp_fuzz: each format in its modes and layouts (image_format_fuzz.h).
    for target, seeds in format_seeds(rng).items():
        write_all(os.path.join(out, target), seeds)

    missing = [t for t in targets() if not os.listdir(os.path.join(out, t))]
    if missing:
        sys.exit(f"make_fuzz_corpus: no seeds for {', '.join(missing)} (add them in {__file__})")
    print(f"make_fuzz_corpus: seeds under {out} for {', '.join(targets())}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "build-fuzz/corpus")
