# test_install.py: the package as a user installs it: the `sluice` command and `python -m sluice` (the CLI installed
# beside the package), and README.md's Python quick start run as written in a fresh plain venv (build isolation:
# setuptools, wheel and numpy from PyPI) on a copy of the repository's files.
import os
import re
import shutil
import subprocess
import sys

import pytest

import sluice

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_python_m_sluice_runs_the_cli(tmp_path):
    out = subprocess.run([sys.executable, "-m", "sluice", "--version"], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == f"sluice {sluice.__version__}"
    # the CLI's exit status and messages come through unchanged
    bad = subprocess.run([sys.executable, "-m", "sluice", "run", str(tmp_path / "none.json")], capture_output=True,
                         text=True)
    assert bad.returncode != 0 and "none.json" in bad.stderr


def test_sluice_console_script():
    script = os.path.join(os.path.dirname(sys.executable), "sluice")
    assert os.access(script, os.X_OK), f"pip installed no `sluice` command beside {sys.executable}"
    out = subprocess.run([script, "gen", "--help"], capture_output=True, text=True)
    assert out.returncode == 0 and "imagenet" in out.stdout + out.stderr


def readme_blocks():
    """README.md's Python quick start: its sh block and its first python block."""
    with open(os.path.join(ROOT, "README.md")) as f:
        text = f.read()
    part = text[text.index("**Python.**"):text.index("Other entry points:")]
    sh = re.search(r"```sh\n(.*?)```", part, re.S).group(1)
    py = re.search(r"```python\n(.*?)```", part, re.S).group(1)
    return sh, py


@pytest.mark.skipif(not shutil.which("git"), reason="git lists the repository's files")
def test_readme_quick_start_in_a_plain_venv(tmp_path):
    # a clean copy of the tracked (and new, not ignored) files: no build dir, no data, no venv
    files = subprocess.run(["git", "-C", ROOT, "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                           capture_output=True, check=True).stdout.decode().split("\0")
    clone = tmp_path / "sluice"
    for f in filter(None, files):
        src = os.path.join(ROOT, f)
        if os.path.isfile(src):
            os.makedirs(clone / os.path.dirname(f), exist_ok=True)
            shutil.copy2(src, clone / f)
    sh, py = readme_blocks()
    env = dict(os.environ)
    env.pop("VIRTUAL_ENV", None)
    env.pop("PYTHONPATH", None)
    # The test's own interpreter makes the venv (the README's `python3`); SLUICE_BUILD_DIR, when the suite sets it,
    # reuses the library already built instead of a second CMake build.
    bindir = tmp_path / "bin"
    bindir.mkdir()
    os.symlink(getattr(sys, "_base_executable", sys.executable), bindir / "python3")
    env["PATH"] = f"{bindir}:{env.get('PATH', '')}"
    r = subprocess.run(["bash", "-ec", sh], cwd=clone, env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    venv_py = clone / "venv" / "bin" / "python"
    # a plain venv: it sees no system site-packages
    r = subprocess.run([venv_py, "-c", "import sys; print(sys.prefix != sys.base_prefix)"], capture_output=True,
                       text=True, check=True, env=env)
    assert r.stdout.strip() == "True"
    check = py + "\nassert images.dtype.name == 'float32' and images.shape[1:] == (224, 224, 3), images.shape\n" \
                 "assert labels.shape == images.shape[:1]\nprint('ok', images.shape)\n"
    r = subprocess.run([venv_py, "-c", check], cwd=clone, env=env, capture_output=True, text=True)
    assert r.returncode == 0 and "ok" in r.stdout, r.stdout + r.stderr


def test_setup_names_what_is_missing(tmp_path):
    # python/ copied away from the repository (what pips before 21.3 did): the repository is named as missing
    pkg = tmp_path / "python"
    shutil.copytree(os.path.join(ROOT, "python"), pkg, ignore=shutil.ignore_patterns("build", "*.egg-info", "_bin"))
    env = {k: v for k, v in os.environ.items() if k not in ("SLUICE_BUILD_DIR", "SLUICE_ROOT")}
    r = subprocess.run([sys.executable, "setup.py", "--version"], cwd=pkg, env=env, capture_output=True, text=True)
    assert r.returncode != 0 and "SLUICE_ROOT" in r.stderr, r.stderr
    # with the repository named but no cmake on the PATH: the tool and the Debian packages to install
    bindir = tmp_path / "bin"
    bindir.mkdir()
    os.symlink(sys.executable, bindir / "python3")
    env.update(SLUICE_ROOT=ROOT, PATH=str(bindir))
    r = subprocess.run([str(bindir / "python3"), "setup.py", "build_ext"], cwd=pkg, env=env, capture_output=True,
                       text=True)
    assert r.returncode != 0 and "no `cmake` on the PATH" in r.stderr and "make deps" in r.stderr, r.stderr
    assert "libjansson-dev" in r.stderr
