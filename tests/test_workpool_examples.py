"""The WorkPool examples run and do what they say: the termination demo and
a directory walk, a job that is not a crawl. No network."""

from __future__ import annotations

import importlib.util
import os
import random
import re
import sys
from pathlib import Path
from types import ModuleType

import trio

EXAMPLES = Path(__file__).parents[1] / "examples"


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"{name}_wp_example", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def make_tree(root: Path, rng: random.Random, depth: int = 0) -> None:
    for i in range(rng.randrange(0, 5)):
        (root / f"f{i}.bin").write_bytes(b"x" * rng.randrange(0, 5000))
    if depth < 4:
        for i in range(rng.randrange(0, 4)):
            sub = root / f"d{i}"
            sub.mkdir()
            make_tree(sub, rng, depth + 1)


def os_walk_totals(root: Path) -> tuple[int, int, int]:
    dirs = files = size = 0
    for top, _, names in os.walk(root):
        dirs += 1
        for name in names:
            files += 1
            size += os.lstat(os.path.join(top, name)).st_size
    return dirs, files, size


async def test_directory_walk_matches_os_walk(tmp_path: Path) -> None:
    walk = load("directory_walk")
    for seed in range(5):
        root = tmp_path / f"t{seed}"
        root.mkdir()
        make_tree(root, random.Random(seed))
        with trio.fail_after(20):
            totals = await walk.walk(str(root), workers=4)
        assert (totals.directories, totals.files, totals.bytes) == os_walk_totals(root)


async def test_directory_walk_script(tmp_path: Path) -> None:
    make_tree(tmp_path, random.Random(7))
    dirs, files, size = os_walk_totals(tmp_path)
    with trio.fail_after(30):
        done = await trio.run_process(
            [sys.executable, str(EXAMPLES / "directory_walk.py"), str(tmp_path)],
            capture_stdout=True,
            capture_stderr=True,
        )
    assert done.stdout.decode() == f"{dirs} directories, {files} files, {size} bytes\n"


async def test_termination_script_shows_the_race_and_no_loss_with_workpool() -> None:
    with trio.fail_after(60):
        done = await trio.run_process(
            [sys.executable, str(EXAMPLES / "termination.py")],
            capture_stdout=True,
            capture_stderr=True,
        )
    out = done.stdout.decode()
    assert re.search(r"^naive supervisor: lost pages in [1-9]\d* of 50 runs$", out, re.M), out
    assert re.search(r"^exact supervisor: lost pages in 0 of 50 runs$", out, re.M), out
    assert re.search(r"^WorkPool supervisor: lost pages in 0 of 50 runs$", out, re.M), out
