# setup.py: builds the `sluice` Python package: the C extension sluice._sluice (public API only, include/) with
# libsluice linked in statically, the `sluice` CLI installed beside it (sluice/_bin/), and the pure-Python layer.
# `pip install ./python` (build isolation: setuptools, wheel and numpy from PyPI) or, offline on Debian,
# `pip install --no-build-isolation ./python`. SLUICE_BUILD_DIR may name an existing CMake build dir holding
# libsluice.a and the CLI (absolute, or relative to the repository root); otherwise CMake builds one under
# python/build/. SLUICE_ROOT names the repository when this file is not inside it.
import os
import re
import shlex
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.realpath(__file__))


def is_root(d):
    return os.path.exists(os.path.join(d, "src", "layers.txt")) and os.path.exists(os.path.join(d, "CMakeLists.txt"))


def find_root():
    """The repository: SLUICE_ROOT, else the nearest directory above this file holding CMakeLists.txt and
    src/layers.txt (pip >= 21.3 builds in place; older pips copy python/ alone to a temporary directory)."""
    env = os.environ.get("SLUICE_ROOT")
    if env:
        if not is_root(env):
            sys.exit(f"setup.py: SLUICE_ROOT={env} is not the sluice repository (no CMakeLists.txt and src/layers.txt)")
        return os.path.abspath(env)
    d = HERE
    while True:
        d = os.path.dirname(d)
        if is_root(d):
            return d
        if d == os.path.dirname(d):
            sys.exit(f"setup.py: the sluice repository is not above {HERE} (pip copied python/ away from it: use pip >= "
                     "21.3, which builds in place, or set SLUICE_ROOT to the repository)")


ROOT = find_root()


def deb_packages():
    """The Debian packages of the build, as the Makefile lists them (DEB_PKGS), for the error messages."""
    try:
        with open(os.path.join(ROOT, "Makefile")) as f:
            m = re.search(r"^DEB_PKGS :=((?:.*\\\n)*.*)$", f.read(), re.M)
        return " ".join(m.group(1).replace("\\", " ").split()) if m else ""
    except OSError:
        return ""


def need(what, why):
    """Stops the build with what is missing and how to install it."""
    pk = deb_packages()
    sys.exit(f"setup.py: {what}." + (f" {why}" if why else "") + " Building libsluice needs the Debian packages "
             f"`make deps` installs (run it in {ROOT}" + (f", or as root: apt-get install {pk}" if pk else "") + ").")


def version():
    with open(os.path.join(ROOT, "CMakeLists.txt")) as f:
        m = re.search(r"project\(sluice VERSION ([0-9.]+)", f.read())
    if not m:
        sys.exit("setup.py: no project version in CMakeLists.txt")
    return m.group(1)


def cmake_build():
    """The build dir holding libsluice.a, sluice.pc and the CLI: SLUICE_BUILD_DIR, or one made here with CMake."""
    d = os.environ.get("SLUICE_BUILD_DIR")
    if d:
        d = os.path.join(ROOT, d)  # relative: to the repository root
        for f in ("libsluice.a", "sluice"):
            if not os.path.exists(os.path.join(d, f)):
                sys.exit(f"setup.py: SLUICE_BUILD_DIR={d} holds no {f} (run `make build` there first)")
        return d
    for tool in ("cmake", "pkg-config", "cc"):
        if not shutil.which(tool):
            need(f"no `{tool}` on the PATH", "")
    d = os.path.join(HERE, "build", "libsluice")
    jobs = os.environ.get("SLUICE_JOBS", str(os.cpu_count() or 1))
    # only the library and the CLI are built here: neither the tests nor the bench programs (CMakeLists.txt's options)
    try:
        subprocess.check_call(["cmake", "-S", ROOT, "-B", d, "-DSL_BUILD_TESTS=OFF", "-DSL_BUILD_BENCH=OFF",
                               "-DCMAKE_BUILD_TYPE=Release"], stdout=subprocess.DEVNULL)
    except subprocess.CalledProcessError:
        need("CMake could not configure libsluice (its message is above)", "A library or header is likely missing.")
    try:
        subprocess.check_call(["cmake", "--build", d, "-j", jobs, "--target", "sluice_static", "sluice"])
    except subprocess.CalledProcessError:
        need("libsluice did not compile (the compiler's message is above)", "A header may be missing.")
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
        self.copy_cli(d)
        self.force = True  # the module must be relinked when libsluice.a changed, which setuptools cannot see
        for ext in self.extensions:
            ext.include_dirs += [os.path.join(ROOT, "include"), numpy.get_include()]
            # libsluice.a whole, its symbols kept out of the module's exports.
            ext.extra_objects += [os.path.join(d, "libsluice.a")]
            ext.extra_link_args += ["-Wl,--exclude-libs,ALL"] + link_flags(d)
        super().build_extensions()

    def copy_cli(self, build_dir):
        """The CLI (libsluice linked in statically) goes into the package as sluice/_bin/sluice; the `sluice`
        console script and `python -m sluice` exec it."""
        dst = os.path.join(HERE if self.inplace else self.build_lib, "sluice", "_bin")
        os.makedirs(dst, exist_ok=True)
        shutil.copy2(os.path.join(build_dir, "sluice"), os.path.join(dst, "sluice"))


setup(
    name="sluice",
    version=version(),
    description="Fast ML input pipelines that find and remove their own bottlenecks, and ML provenance",
    packages=["sluice", "sluice.torch"],
    ext_modules=[
        Extension(
            "sluice._sluice",
            # one module from the files of ext/, one per concern (py_module.c is its entry; py_ext.h what they share)
            sources=sorted(os.path.join("ext", f) for f in os.listdir(os.path.join(HERE, "ext")) if f.endswith(".c")),
            depends=[os.path.join("ext", "py_ext.h")],
            define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
            # hidden visibility: the names the files share stay inside the module; PyInit__sluice is its export
            extra_compile_args=["-std=c11", "-Wall", "-Wextra", "-Wno-unused-parameter",
                                "-Wno-missing-field-initializers", "-fvisibility=hidden"],
        )
    ],
    cmdclass={"build_ext": BuildExt},
    entry_points={"console_scripts": ["sluice = sluice.__main__:main"]},
    install_requires=["numpy"],
    python_requires=">=3.9",
)
