#!/usr/bin/env python3
"""Seed corpora for the fuzz targets: small tars (stoker, GNU, pax, ustar
layouts), index sidecars, and small JPEG/PNG/.npy images.

    python3 scripts/make_fuzz_corpus.py OUT_DIR
"""
import io
import os
import sys
import tarfile

import numpy as np
from PIL import Image

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python"))


def main(out):
    for d in ("tar", "index", "image", "list", "fields"):
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
    print(f"make_fuzz_corpus: seeds under {out}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "build-fuzz/corpus")
