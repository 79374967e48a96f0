#!/usr/bin/env bash
# make check-wheel: builds the self-contained wheel (make wheel) and tests it
# as a user would, from a directory outside the checkout:
#   1. a venv that sees Debian's torch: import stoker, iterate a loader over a
#      small generated folder (JPEG, PNG, WebP, TIFF, BMP) with torch output, compare the
#      pixels with PIL's, run `stoker --version`, `python -m stoker --version`,
#      `stoker inspect`, `stoker verify` and `stoker doctor` (its
#      sitecustomize found in the installed package) from the venv's bin/;
#   2. `ldd` on the installed extension and CLI: no libjpeg, libpng, libz,
#      libtiff, libwebp or libgif;
#   3. a venv where torch cannot be imported: the output="numpy" path;
#   4. the stubs and py.typed are in the installed package.
#   scripts/wheel_test.sh WHEEL
set -euo pipefail
wheel=$(realpath "${1:?usage: wheel_test.sh WHEEL}")
root=$(cd "$(dirname "$0")/.." && pwd)
version=$(sed -n 's/^project(stoker VERSION \([0-9.]*\).*/\1/p' "$root/CMakeLists.txt")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"  # outside the checkout: nothing is imported from python/
fail() { echo "wheel_test: FAILED: $*" >&2; exit 1; }

echo "wheel_test: $(basename "$wheel") (stoker $version)"
unzip -l "$wheel" > contents.txt
for f in stoker/_bin/stoker stoker/py.typed stoker/_stoker.pyi stoker/_doctor_site/sitecustomize.py \
         stoker/__main__.py; do
  grep -q " $f\$" contents.txt || fail "$f is not in the wheel"
done
grep -q " stoker/_stoker\.cpython-.*\.so\$" contents.txt || fail "the extension is not in the wheel"

/usr/bin/python3 -m venv --system-site-packages venv-torch
venv-torch/bin/pip install -q --no-index --no-deps "$wheel"
site=$(venv-torch/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
[ -f "$site/stoker/_bin/stoker" ] || fail "the CLI is not installed in $site/stoker/_bin"

echo "wheel_test: no codec libraries in the installed binaries"
for bin in "$site"/stoker/_stoker*.so "$site/stoker/_bin/stoker"; do
  ldd "$bin" > ldd.txt
  if grep -E "libjpeg|libpng|libz\.so|libtiff|libwebp|libgif" ldd.txt; then
    fail "$(basename "$bin") links a shared codec library"
  fi
  if grep -q "not found" ldd.txt; then cat ldd.txt; fail "$(basename "$bin") has a missing library"; fi
done

echo "wheel_test: a small folder: JPEG, PNG, WebP, TIFF (LZW; JPEG-in-TIFF: the static libtiff's codecs), BMP"
/usr/bin/python3 - <<'EOF'
import os
import numpy as np
from PIL import Image
rng = np.random.default_rng(0)
savers = [("jpg", dict(quality=90)), ("png", {}), ("webp", dict(quality=80)), ("tif", dict(compression="tiff_lzw")),
          ("tiff", dict(compression="jpeg", quality=85)), ("bmp", {})]
for cls in ("cat", "dog"):
    os.makedirs(f"folder/{cls}")
    for i, (ext, kw) in enumerate(savers):
        px = rng.integers(0, 256, (24 + 2 * i, 32, 3), dtype=np.uint8)
        Image.fromarray(px).save(f"folder/{cls}/{i}.{ext}", **kw)
EOF

check_loader='
import sys
import numpy as np
from PIL import Image
import stoker
out = sys.argv[1]
assert stoker.__version__ == sys.argv[2], (stoker.__version__, sys.argv[2])
assert stoker.__file__.startswith(sys.prefix), stoker.__file__  # the installed copy, not a checkout
loader = stoker.Loader("folder", batch_size=5, transforms=[stoker.CenterCrop(20)], dtype="uint8",
                       layout="NHWC", output=out)
# the reference: PIL decode, center crop as torchvision (top = round((h - 20) / 2)), ImageFolder order
paths = [f"folder/{c}/{f}" for c in ("cat", "dog") for f in sorted(__import__("os").listdir(f"folder/{c}"))]
ref = []
for p in paths:
    a = np.asarray(Image.open(p).convert("RGB"))
    t, l = int(round((a.shape[0] - 20) / 2.0)), int(round((a.shape[1] - 20) / 2.0))
    ref.append(a[t:t + 20, l:l + 20])
got, labels = [], []
for images, y in loader:
    if out == "torch":
        import torch
        assert isinstance(images, torch.Tensor) and images.dtype == torch.uint8
        images, y = images.numpy(), y.numpy()
    else:
        assert isinstance(images, np.ndarray) and sys.modules.get("torch") is None
    got.extend(images)
    labels.extend(int(v) for v in y)
assert labels == [0] * 6 + [1] * 6, labels
assert all(np.array_equal(g, r) for g, r in zip(got, ref)) and len(got) == len(ref) == 12
print(f"wheel_test: {len(got)} images equal to PIL\x27s with output={out!r}")
'
venv-torch/bin/python -c "$check_loader" torch "$version"

echo "wheel_test: the drop-in (stoker.datasets + stoker.DataLoader) equals torch's DataLoader over torchvision's ImageFolder"
venv-torch/bin/python -c '
import torch, torchvision.transforms as T
from torch.utils.data import DataLoader as TorchDataLoader
from torchvision.datasets import ImageFolder as TVImageFolder
from stoker import DataLoader
from stoker.datasets import ImageFolder
tf = T.Compose([T.CenterCrop(20), T.ToTensor(), T.Lambda(lambda t: t * 2)])  # the Lambda runs as Python
ours = list(DataLoader(ImageFolder("folder", tf), batch_size=5, num_workers=2))
theirs = list(TorchDataLoader(TVImageFolder("folder", tf), batch_size=5))
assert len(ours) == len(theirs) == 3
assert all(torch.equal(a, b) and torch.equal(y, z) for (a, y), (b, z) in zip(ours, theirs))
print("wheel_test: the drop-in gives torch\x27s batches")
' || fail "the drop-in"

echo "wheel_test: the CLI from the venv's bin/"
[ "$(venv-torch/bin/stoker --version)" = "stoker $version" ] || fail "stoker --version: $(venv-torch/bin/stoker --version)"
[ "$(venv-torch/bin/python -m stoker --version)" = "stoker $version" ] || fail "python -m stoker --version"
venv-torch/bin/stoker inspect folder > inspect.txt || fail "stoker inspect"
grep -q "^records: 12 (12 readable)" inspect.txt || { cat inspect.txt; fail "stoker inspect does not read 12 records"; }
venv-torch/bin/stoker verify folder > /dev/null || fail "stoker verify"
# The doctor's sitecustomize is found beside the installed package: it times
# a plain DataLoader loop with no change to the program.
cat > loop.py <<'PY'
import torch
from torch.utils.data import DataLoader, TensorDataset
for _ in range(2):
    for b in DataLoader(TensorDataset(torch.arange(256.0)), batch_size=4):
        pass
PY
venv-torch/bin/stoker doctor --no-probe --report "" -q -- venv-torch/bin/python loop.py > doctor.txt 2>&1 ||
  { cat doctor.txt; fail "stoker doctor"; }
grep -q "timed by the doctor, no code change" doctor.txt || { cat doctor.txt; fail "the doctor did not time the loop"; }

echo "wheel_test: a venv where torch cannot be imported"
/usr/bin/python3 -m venv --system-site-packages venv-numpy
site_np=$(venv-numpy/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
# Debian's torch is in the system site-packages this venv sees: a .pth blocks
# it for every program in the venv, as if it were not installed.
echo "import sys; sys.modules['torch'] = None" > "$site_np/zz_no_torch.pth"
venv-numpy/bin/python -c "import torch" 2> /dev/null && fail "torch is still importable in venv-numpy"
venv-numpy/bin/pip install -q --no-index --no-deps "$wheel"
venv-numpy/bin/python -c "$check_loader" numpy "$version"
venv-numpy/bin/python -c "
import stoker
try:
    stoker.Loader('folder', batch_size=2)   # output='torch' by default: a clear error, not a crash
except ImportError as e:
    print('wheel_test: output=\"torch\" without torch:', e)
else:
    raise SystemExit('output=torch without torch did not raise ImportError')
"
echo "wheel_test: passed"
