# test_recipes.py: README.md's PyTorch recipes run as written (issue 49 row 3): its sh block generates an image
# folder and WebDataset shards with the `sluice` command, its python block reads them through
# examples/image-folder.json and examples/webdataset.json into a DataLoader; the batches are NCHW float32 with int64
# labels, the folder's labels are torchvision ImageFolder's class indices, and a sample whose image is a PNG among
# JPEGs (as `convert --to tar` writes them) is read like the others.
import io
import os
import re
import shutil
import subprocess
import tarfile

import pytest

torch = pytest.importorskip("torch")

import sluice  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def recipe_blocks():
    with open(os.path.join(ROOT, "README.md")) as f:
        text = f.read()
    part = text[text.index("**PyTorch recipes.**"):]
    return (re.search(r"```sh\n(.*?)```", part, re.S).group(1), re.search(r"```python\n(.*?)```", part, re.S).group(1))


@pytest.fixture(scope="module")
def workdir(tmp_path_factory, cli):
    d = tmp_path_factory.mktemp("recipes")
    shutil.copytree(os.path.join(ROOT, "examples"), d / "examples")
    bindir = d / "bin"
    bindir.mkdir()
    os.symlink(cli, bindir / "sluice")
    sh, _ = recipe_blocks()
    env = dict(os.environ, PATH=f"{bindir}:{os.environ.get('PATH', '')}")
    r = subprocess.run(["bash", "-ec", sh], cwd=d, env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return d


def test_the_readme_recipes_run_as_written(workdir, monkeypatch):
    _, py = recipe_blocks()
    monkeypatch.chdir(workdir)
    seen = []
    real = torch.utils.data.DataLoader

    class Counting(real):  # counts each recipe's batches, checks each batch's shape and dtype
        def __iter__(self):
            n = 0
            for b in super().__iter__():
                assert b["image"].dtype == torch.float32 and tuple(b["image"].shape) == (64, 3, 224, 224)
                assert b["label"].dtype == torch.int64 and tuple(b["label"].shape) == (64,)
                assert set(b) == {"image", "label"}
                n += 1
                yield b
            seen.append(n)
    monkeypatch.setattr(torch.utils.data, "DataLoader", Counting)
    exec(compile(py, "README.md", "exec"), {})
    assert seen == [2, 2]  # 128 images, batches of 64


def test_the_folder_recipe_labels_as_imagefolder(workdir, monkeypatch):
    monkeypatch.chdir(workdir)
    classes = sorted(os.listdir("data/folder"))
    spec = sluice.Pipeline("examples/image-folder.json").spec()
    for e in sluice.Pipeline({"ops": spec["ops"][:1]}):  # its image_folder
        assert classes[int(e["label"])] == os.path.basename(os.path.dirname(e["filename"]))


def test_the_webdataset_recipe_reads_png_members_among_jpegs(workdir, monkeypatch, tmp_path):
    """A shard where some samples' image is a .png (the first present alternative is decoded) and one sample has
    no image at all (skipped, named with its shard and key)."""
    monkeypatch.chdir(workdir)
    from PIL import Image
    import numpy as np
    shard = tmp_path / "train-mixed.tar"
    with tarfile.open(shard, "w") as t:
        for k in range(70):
            ext = "png" if k % 3 else "jpg"
            b = io.BytesIO()
            Image.fromarray(np.full((40, 50, 3), k, np.uint8)).save(b, format="PNG" if ext == "png" else "JPEG")
            members = [] if k == 5 else [(f"s{k:03d}.{ext}", b.getvalue())]
            for name, data in members + [(f"s{k:03d}.cls", f"{k % 10}\n".encode())]:
                ti = tarfile.TarInfo(name)
                ti.size = len(data)
                t.addfile(ti, io.BytesIO(data))
    spec = sluice.Pipeline("examples/webdataset.json").spec()
    spec["ops"][0]["glob"] = str(shard)
    with pytest.warns(sluice.SkipWarning, match=r"sample 's005'\) has none of the components 'jpg;png;webp'"):
        (b,) = list(sluice.Pipeline(spec))
    assert b["image"].shape == (64, 3, 224, 224)
