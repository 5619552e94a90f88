"""bench/sections/pytorch.py: the PyTorch sections: the DataLoader peer on the suite's TFRecords, the Python package
(python_bench.py in a venv with the package) and the diagnosis of a DataLoader (torch_diagnose.py, issue 39)."""
import json, os, subprocess

from sections.base import DATA, TOP, log, measure, run_cmd
from sections.pipelines import with_data


def bench_torch(data_glob, quick, pipeline="imagenet"):
    py = "/usr/bin/python3"
    try:
        subprocess.run([py, "-c", "import torch, torchvision, PIL"], check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError):
        log("PyTorch peer skipped: python3-torch/python3-torchvision/python3-pil not installed (make deps-bench)")
        return None
    secs = "2" if quick else "10"
    try:  # quick data has too few images per worker for num_workers=2 to fill a batch of 64
        out, cpu, rss = measure([py, os.path.join(TOP, "bench/peers/torch_imagenet.py"), "--files", data_glob,
                                 "--pipeline", pipeline, "--workers", "0,1" if quick else "0,1,2", "--seconds", secs,
                                 "--warmup", "1" if quick else "3"], timeout=1800)
    except SystemExit as e:
        log("PyTorch peer failed: %s" % e)
        return None
    r = json.loads(out.strip().splitlines()[-1])
    r["cpu_seconds"] = cpu
    r["peak_rss_kb"] = rss
    return r


def bench_venv(bindir):
    """The Python of a venv beside the build with the package installed from this build (None: it could not be):
    the peers' venv when `make peers-venv` made it (torch 2 and torchvision, the versions the peers section
    measures), else a venv over Debian's packages (torch 1.13)."""
    venv = os.path.join(bindir, "peers-venv")
    if not os.path.exists(os.path.join(venv, "bin", "python")):
        venv = os.path.join(bindir, "pyvenv-bench")
    py = os.path.join(venv, "bin", "python")
    if not os.path.exists(py):
        out, err, rc = run_cmd(["/usr/bin/python3", "-m", "venv", "--system-site-packages", venv])
        if rc:
            log("Python bench skipped: no venv (python3-venv): %s" % err[-300:])
            return None
    out, err, rc = run_cmd([py, "-m", "pip", "install", "-q", "--no-build-isolation", "--no-deps", "./python"],
                           env={"SLUICE_BUILD_DIR": bindir}, timeout=1800)
    if rc:
        log("Python bench skipped: the package did not install: %s" % err[-500:])
        return None
    return py


def bench_python(sluice, bindir, names, quick, workdir):
    """bench/python_bench.py: Python's overhead on the imagenet and tabular pipelines, and a training loop fed by
    sluice.torch vs DataLoader. The package is installed from this build into a venv beside it first."""
    py = bench_venv(bindir)
    if py is None:
        return None
    specs = {}
    for n in ("imagenet", "tabular"):
        if n in names:
            specs[n] = os.path.join(workdir, "py-%s.json" % n)
            json.dump(with_data(json.load(open(os.path.join(TOP, "bench/pipelines/%s.json" % n))), quick),
                      open(specs[n], "w"))
    if "imagenet" not in specs:
        return None
    cmd = [py, os.path.join(TOP, "bench/python_bench.py"), "all", "--sluice", sluice, "--imagenet", specs["imagenet"],
           "--files", os.path.join(TOP, DATA["imagenet"][1] + ("-quick" if quick else ""), "*.tfrecord"),
           "--seconds", "2" if quick else "10", "--warmup", "1" if quick else "3", "--reps", "1" if quick else "3",
           "--optimize-seconds", "1" if quick else "3", "--workers", "0,1" if quick else "0,1,2"]
    if "tabular" in specs:
        cmd += ["--tabular", specs["tabular"]]
    out, err, rc = run_cmd(cmd, timeout=3600)
    if rc:
        log("Python bench failed (%d): %s" % (rc, err[-1000:]))
        return None
    return json.loads(out.strip().splitlines()[-1])


def bench_torch_diagnose(bindir, quick):
    """bench/torch_diagnose.py (issue 39): sluice.torch.diagnose on the planted loaders and the imagenet PIL loader,
    its recommendations against a num_workers x prefetch_factor grid, tuned() from num_workers=0, the translated
    spec's rate, the tracing cost."""
    py = bench_venv(bindir)
    if py is None:
        return None
    files = os.path.join(TOP, DATA["imagenet"][1] + ("-quick" if quick else ""), "*.tfrecord")
    cmd = [py, os.path.join(TOP, "bench/torch_diagnose.py"), "--files", files, "--seconds", "1" if quick else "10",
           "--diag-seconds", "2" if quick else "20", "--rounds", "1" if quick else "3",
           "--batch", "8" if quick else "64"]  # the quick data holds 96 images: batches of 8 make 12 an epoch
    out, err, rc = run_cmd(cmd, timeout=7200)
    if rc:
        log("torch diagnose bench failed (%d): %s" % (rc, err[-1000:]))
        return None
    return json.loads(out.strip().splitlines()[-1])


def torch_diagnose_report(td):
    """The "## Diagnosing a PyTorch DataLoader" section from bench/torch_diagnose.py's JSON."""
    import torch_diagnose_section  # bench/, on the path bench/run sets
    return torch_diagnose_section.section(td)
