"""bench/sections/png.py: PNG decode (issue 36): png_bench against PIL, and its section."""
import json, os

from sections.base import SEED, fmt, log, measure, run_cmd
from sections.pytorch import bench_venv


def bench_png(sluice, bindir, quick, workdir):
    """png_bench: decode_image's CPU per PNG against a bare libspng loop, on the suite's images saved as PNG."""
    pb, py = os.path.join(bindir, "png_bench"), bench_venv(bindir)
    if not os.path.exists(pb) or py is None:
        log("png_bench or the bench venv missing: PNG decode skipped")
        return None
    jpg, png = os.path.join(workdir, "png-src"), os.path.join(workdir, "png")
    n = 24 if quick else 120
    out, err, rc = run_cmd([sluice, "gen", "imagenet", "--format", "folder", "--classes", "2", "--n", str(n), "--seed",
                            str(SEED), "--out", jpg, "--quiet"])
    if rc:
        log("PNG decode skipped: gen failed: %s" % err[-300:])
        return None
    code = ("import glob, os, sys\nfrom PIL import Image\nos.makedirs(sys.argv[2], exist_ok=True)\n"
            "for i, f in enumerate(sorted(glob.glob(sys.argv[1] + '/*/*.jpg'))):\n"
            "    Image.open(f).convert('RGB').save('%s/%03d.png' % (sys.argv[2], i))\n")
    out, err, rc = run_cmd([py, "-c", code, jpg, png])
    if rc:
        log("PNG decode skipped: no PIL to write PNGs: %s" % err[-300:])
        return None
    out, cpu, rss = measure([pb, png, "--rounds", "3" if quick else "5"])
    return json.loads(out.strip().splitlines()[-1])


def png_report(pr):
    return ["## PNG decode (issue 36)\n",
            "`build/png_bench`: %d of the suite's images saved as RGB PNG; CPU per image of `decode_image` (channels 3) in "
            "a one-thread pipeline (files + read_file + decode_image, less the same without the decode) against a bare "
            "libspng decode loop to RGB8 over the same bytes in memory; medians of %d alternating rounds.\n" % (
                pr["images"], pr["rounds"]),
            "| figure | value | target |", "| --- | ---: | ---: |",
            "| bare libspng | %s us/image | |" % fmt(pr["bare_us"]),
            "| decode_image | %s us/image | |" % fmt(pr["sluice_us"]),
            "| ratio | %s x | <= 1.1 x |" % fmt(pr["ratio"], 3), ""]
