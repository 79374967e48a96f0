"""Builds stoker's C++ parts with CMake for setuptools (pyproject.toml).

The extension (stoker/_stoker*.so) and the CLI (stoker/_bin/stoker, run by the
`stoker` command and `python3 -m stoker`) come from one CMake build of the
tree. Environment:
  STOKER_STATIC_DEPS=PREFIX  link libjpeg-turbo, libpng, zlib, libtiff, libwebp
                             and giflib statically
                             from PREFIX (scripts/build_static_deps.sh), for a
                             wheel that needs only the C/C++ runtime and numpy
                             (make wheel); default: the system's shared ones.
  STOKER_CMAKE_ARGS          more arguments for CMake's configure step.
  JOBS                       parallel build jobs (default: all cores).
"""
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent


def version():
    """The one version: project(stoker VERSION x.y.z) in CMakeLists.txt."""
    m = re.search(r"project\(stoker\s+VERSION\s+([0-9.]+)", (ROOT / "CMakeLists.txt").read_text())
    if not m:
        raise RuntimeError("CMakeLists.txt: no project(stoker VERSION ...)")
    return m.group(1)


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        out = Path(self.get_ext_fullpath(ext.name)).resolve().parent  # .../stoker
        build = Path(self.build_temp).resolve() / "cmake"
        args = [
            "-DCMAKE_BUILD_TYPE=Release",
            f"-DPython_EXECUTABLE={sys.executable}",
            f"-DSTOKER_PYTHON_OUT={out}",
            "-DSTOKER_BUILD_TESTS=OFF", "-DSTOKER_BUILD_BENCH=OFF", "-DSTOKER_BUILD_EXAMPLES=OFF",
            "-DSTOKER_WERROR=OFF",  # a user's newer compiler must not fail the install on a new warning
        ]
        if os.environ.get("STOKER_STATIC_DEPS"):
            args.append(f"-DSTOKER_STATIC_DEPS={Path(os.environ['STOKER_STATIC_DEPS']).resolve()}")
        args += shlex.split(os.environ.get("STOKER_CMAKE_ARGS", ""))
        jobs = os.environ.get("JOBS") or str(os.cpu_count() or 1)
        subprocess.run(["cmake", "-S", str(ROOT), "-B", str(build), *args], check=True)
        subprocess.run(["cmake", "--build", str(build), "--target", "_stoker", "stoker_cli", "-j", jobs], check=True)
        (out / "_bin").mkdir(parents=True, exist_ok=True)
        shutil.copy2(build / "tools" / "stoker", out / "_bin" / "stoker")

    # `pip install -e .` builds into build_lib, then copies the outputs into the
    # source tree: the CLI is one of them.
    def _cli_files(self):
        package_dir = self.get_finalized_command("build_py").get_package_dir("stoker")
        return (os.path.join(self.build_lib, "stoker", "_bin", "stoker"),
                os.path.join(package_dir, "_bin", "stoker"))

    def copy_extensions_to_source(self):
        super().copy_extensions_to_source()
        built, in_tree = self._cli_files()
        os.makedirs(os.path.dirname(in_tree), exist_ok=True)
        self.copy_file(built, in_tree, level=self.verbose)

    def _get_output_mapping(self):
        yield from super()._get_output_mapping()
        if self.inplace:
            yield self._cli_files()


setup(
    version=version(),
    ext_modules=[Extension("stoker._stoker", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    options={"build": {"build_base": "build-wheel"}},  # build/ is CMake's (make build)
)
