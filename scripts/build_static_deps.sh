#!/usr/bin/env bash
# Builds libjpeg-turbo, libpng, zlib, libtiff (with only its zlib and JPEG
# codecs), libwebp and giflib as position-independent static libraries, for a
# wheel that stands alone (make wheel).
#   scripts/build_static_deps.sh PREFIX
# Why from source: Debian's own libjpeg.a, libpng16.a, libz.a (and the
# others) are built without -fPIC, so no shared object (the Python extension)
# can link them.
# The sources are Debian 12's source packages of the same libraries, fetched
# with apt-get source through a private source list (the system's apt
# configuration is left as it is) and unpacked with Debian's patches; the
# versions are those of the -dev packages stoker builds against otherwise.
# Idempotent: a PREFIX whose stamp names the same versions is left as it is.
set -euo pipefail
prefix=$(realpath -m "${1:?usage: build_static_deps.sh PREFIX}")
jobs=${JOBS:-$(nproc)}
packages=(libjpeg-turbo/bookworm libpng1.6/bookworm zlib/bookworm tiff/bookworm libwebp/bookworm giflib/bookworm)
stamp="$prefix/.stoker-static-deps"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "${packages[*]}" ]; then
  echo "build_static_deps: $prefix is complete"
  exit 0
fi
work="$prefix.work"
rm -rf "$work" "$prefix"
mkdir -p "$work/apt/lists/partial" "$work/apt/sources.list.d" "$work/src"
# The machine's Debian sources, as deb-src entries, in a private apt state.
shopt -s nullglob
for f in /etc/apt/sources.list.d/*.sources; do
  sed 's/^Types:.*/Types: deb-src/' "$f" > "$work/apt/sources.list.d/$(basename "$f")"
done
if [ -f /etc/apt/sources.list ]; then
  grep -E '^deb ' /etc/apt/sources.list | sed 's/^deb /deb-src /' > "$work/apt/sources.list" || true
fi
touch "$work/apt/sources.list"
apt_opts=(-o "Dir::Etc::SourceList=$work/apt/sources.list" -o "Dir::Etc::SourceParts=$work/apt/sources.list.d"
          -o "Dir::State::Lists=$work/apt/lists" -o "APT::Sandbox::User=root")
apt-get "${apt_opts[@]}" -qq update
(cd "$work/src" && apt-get "${apt_opts[@]}" -qq source "${packages[@]}")

cmake_static() {  # cmake_static SOURCE_DIR [OPTIONS...]
  local src=$1; shift
  cmake -S "$src" -B "$src/build-static" -DCMAKE_BUILD_TYPE=Release -DCMAKE_POSITION_INDEPENDENT_CODE=ON \
    -DCMAKE_INSTALL_PREFIX="$prefix" -DCMAKE_INSTALL_LIBDIR=lib -DCMAKE_PREFIX_PATH="$prefix" "$@" > "$src.log"
  cmake --build "$src/build-static" -j"$jobs" >> "$src.log"
  cmake --install "$src/build-static" >> "$src.log"
}
dir_of() { find "$work/src" -maxdepth 1 -mindepth 1 -type d -name "$1-*" | head -n1; }

zlib=$(dir_of zlib)  # its own configure (its CMake build always makes a shared library too)
(cd "$zlib" && CFLAGS="-O2 -fPIC" ./configure --static --prefix="$prefix" --libdir="$prefix/lib" > "$zlib.log" &&
  make -j"$jobs" libz.a >> "$zlib.log" && make install >> "$zlib.log")
cmake_static "$(dir_of libpng1.6)" -DPNG_SHARED=OFF -DPNG_STATIC=ON -DPNG_TESTS=OFF -DPNG_EXECUTABLES=OFF \
  -DZLIB_ROOT="$prefix" -DZLIB_LIBRARY="$prefix/lib/libz.a" -DZLIB_INCLUDE_DIR="$prefix/include"
command -v nasm > /dev/null || { echo "build_static_deps: nasm is needed for libjpeg-turbo's SIMD code" >&2; exit 1; }
# (libjpeg-turbo reads a relative CMAKE_INSTALL_LIBDIR against its source folder)
cmake_static "$(dir_of libjpeg-turbo)" -DENABLE_SHARED=OFF -DENABLE_STATIC=ON -DWITH_TURBOJPEG=OFF -DWITH_SIMD=ON -DCMAKE_INSTALL_LIBDIR="$prefix/lib" \
  -DREQUIRE_SIMD=ON
# libtiff: the codecs PIL's TIFFs use that need no other library (LZW,
# PackBits, CCITT, ...) plus zlib's Deflate and libjpeg's JPEG, the two above;
# the rest (LZMA, ZSTD, WebP, JBIG, LERC) off: such TIFFs are `unsupported`.
cmake_static "$(dir_of tiff)" -DBUILD_SHARED_LIBS=OFF -Dtiff-tools=OFF -Dtiff-tests=OFF -Dtiff-contrib=OFF \
  -Dtiff-docs=OFF -Dcxx=OFF -Dzlib=ON -Djpeg=ON -Djpeg12=OFF -Dold-jpeg=OFF -Djbig=OFF -Dlzma=OFF -Dzstd=OFF \
  -Dwebp=OFF -Dlerc=OFF -Dlibdeflate=OFF -DZLIB_LIBRARY="$prefix/lib/libz.a" -DZLIB_INCLUDE_DIR="$prefix/include" \
  -DJPEG_LIBRARY="$prefix/lib/libjpeg.a" -DJPEG_INCLUDE_DIR="$prefix/include"
cmake_static "$(dir_of libwebp)" -DBUILD_SHARED_LIBS=OFF -DWEBP_BUILD_ANIM_UTILS=OFF -DWEBP_BUILD_CWEBP=OFF \
  -DWEBP_BUILD_DWEBP=OFF -DWEBP_BUILD_GIF2WEBP=OFF -DWEBP_BUILD_IMG2WEBP=OFF -DWEBP_BUILD_VWEBP=OFF \
  -DWEBP_BUILD_WEBPINFO=OFF -DWEBP_BUILD_WEBPMUX=OFF -DWEBP_BUILD_EXTRAS=OFF
giflib=$(dir_of giflib)  # its own Makefile; only the static library and its header
(cd "$giflib" && make -j"$jobs" libgif.a CFLAGS="-O2 -fPIC -std=gnu99 -Wall" > "$giflib.log" &&
  install -m 644 libgif.a "$prefix/lib/" && install -m 644 gif_lib.h "$prefix/include/")
rm -rf "$work"
echo "${packages[*]}" > "$stamp"
echo "build_static_deps: libjpeg-turbo, libpng, zlib, libtiff, libwebp, giflib (static, PIC) in $prefix"
