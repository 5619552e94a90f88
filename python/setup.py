# setup.py: builds the `sluice` Python package: the C extension sluice._sluice (public API only, include/) with
# libsluice linked in statically, plus the pure-Python layer. Offline: `pip install --no-build-isolation ./python`.
# SLUICE_BUILD_DIR may name an existing CMake build dir holding libsluice.a (absolute, or relative to the repository
# root); otherwise CMake builds one under python/build/.
import os
import re
import shlex
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def version():
    with open(os.path.join(ROOT, "CMakeLists.txt")) as f:
        m = re.search(r"project\(sluice VERSION ([0-9.]+)", f.read())
    if not m:
        sys.exit("setup.py: no project version in CMakeLists.txt")
    return m.group(1)


def cmake_build():
    """The build dir holding libsluice.a and sluice.pc: SLUICE_BUILD_DIR, or one made here with CMake."""
    d = os.environ.get("SLUICE_BUILD_DIR")
    if d:
        d = os.path.join(ROOT, d)  # relative: to the repository root (pip runs this from a copy or python/)
        if not os.path.exists(os.path.join(d, "libsluice.a")):
            sys.exit(f"setup.py: SLUICE_BUILD_DIR={d} holds no libsluice.a (build the library there first)")
        return d
    d = os.path.join(HERE, "build", "libsluice")
    jobs = os.environ.get("SLUICE_JOBS", str(os.cpu_count() or 1))
    # only the library is built here: neither the tests nor the bench programs (CMakeLists.txt's options)
    subprocess.check_call(["cmake", "-S", ROOT, "-B", d, "-DSL_BUILD_TESTS=OFF", "-DSL_BUILD_BENCH=OFF",
                           "-DCMAKE_BUILD_TYPE=Release"], stdout=subprocess.DEVNULL)
    subprocess.check_call(["cmake", "--build", d, "-j", jobs, "--target", "sluice_static"])
    return d


def link_flags(build_dir):
    """The library's own dependencies, read from the sluice.pc the CMake build wrote (Requires.private and
    Libs.private), resolved by pkg-config: Debian's shared libraries."""
    with open(os.path.join(build_dir, "sluice.pc")) as f:
        pc = f.read()
    req = re.search(r"^Requires\.private:(.*)$", pc, re.M)
    priv = re.search(r"^Libs\.private:(.*)$", pc, re.M)
    flags = []
    if req and req.group(1).strip():
        out = subprocess.check_output(["pkg-config", "--libs"] + req.group(1).split(), text=True)
        flags += shlex.split(out)
    if priv:
        flags += shlex.split(priv.group(1))
    return flags


class BuildExt(build_ext):
    def build_extensions(self):
        import numpy

        d = cmake_build()
        self.force = True  # the module must be relinked when libsluice.a changed, which setuptools cannot see
        for ext in self.extensions:
            ext.include_dirs += [os.path.join(ROOT, "include"), numpy.get_include()]
            # libsluice.a whole, its symbols kept out of the module's exports.
            ext.extra_objects += [os.path.join(d, "libsluice.a")]
            ext.extra_link_args += ["-Wl,--exclude-libs,ALL"] + link_flags(d)
        super().build_extensions()


setup(
    name="sluice",
    version=version(),
    description="Fast ML input pipelines that find and remove their own bottlenecks, and ML provenance",
    packages=["sluice"],
    ext_modules=[
        Extension(
            "sluice._sluice",
            sources=["sluice/_sluice.c"],
            define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
            extra_compile_args=["-std=c11", "-Wall", "-Wextra", "-Wno-unused-parameter",
                                "-Wno-missing-field-initializers"],
        )
    ],
    cmdclass={"build_ext": BuildExt},
    python_requires=">=3.9",
)
