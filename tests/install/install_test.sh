#!/usr/bin/env bash
# The C++ package, as a user gets it: `cmake --install` into a fresh prefix,
# then examples/cmake_package configured, built and run outside the tree
# against it (find_package(stoker CONFIG)), and the same program built with
# the flags of `pkg-config --cflags --libs stoker`. Both must iterate a small
# generated image folder and count its samples and labels.
#   install_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1
src=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cmake --install "$build" --prefix "$work/prefix" > "$work/install.log"
test -f "$work/prefix/include/stoker/stoker.h"
test -f "$work/prefix/include/stoker/fields.h"
test -f "$work/prefix/include/stoker/version.h"
ls "$work"/prefix/lib*/libstoker_core.a "$work"/prefix/lib*/cmake/stoker/stoker-config.cmake > /dev/null

# 6 images in 2 classes (labels 0 and 1): 3 x 0 + 3 x 1 = 3.
"${PYTHON:-/usr/bin/python3}" - "$work/data" <<'PY'
import os, sys
from PIL import Image
root = sys.argv[1]
for c in ("cats", "dogs"):
    os.makedirs(os.path.join(root, c))
    for i in range(3):
        Image.new("RGB", (40 + 7 * i, 30 + 5 * i), (40 * i, 90, 200)).save(os.path.join(root, c, f"{i}.jpg"))
PY
expect="6 samples, label sum 3"

# find_package, from a directory outside the checkout
(cd "$work" && cmake -S "$src/examples/cmake_package" -B app -DCMAKE_PREFIX_PATH="$work/prefix" > cmake.log \
  && cmake --build app > build.log) || { cat "$work/cmake.log" "$work/build.log" 2>/dev/null; exit 1; }
out=$("$work/app/count_batches" "$work/data")
echo "$out"
grep -q "^batch 0: 4 x 3 x 32 x 32$" <<< "$out"
grep -q "^$expect" <<< "$out"

# pkg-config
pc_dir=$(dirname "$(ls "$work"/prefix/lib*/pkgconfig/stoker.pc)")
flags=$(PKG_CONFIG_PATH="$pc_dir" pkg-config --cflags --libs stoker)
g++ -O1 "$src/examples/cmake_package/main.cc" -o "$work/count_pc" $flags
out=$("$work/count_pc" "$work/data")
grep -q "^$expect" <<< "$out"
echo "install_test: find_package and pkg-config builds both read the installed package"
