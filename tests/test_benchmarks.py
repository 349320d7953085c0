"""The benchmarks still start, and their harness still works.

No benchmark runs here (they take minutes and print figures, not verdicts), but
a benchmark that no longer starts is found only when someone needs its figures:
a module moved in the package, a helper renamed. So this checks what is cheap:

* every file of ``benchmarks/`` is a benchmark ``benchmarks/bench.py`` lists, or a
  shared piece it names, so a new script gets its line there;
* every benchmark answers ``--help`` (``bench.py check``: it imports what it
  uses and parses its options);
* the harness's own tests (``benchmarks/test_*.py``: the generated site, the
  exact-once verdict, the local servers, the measurement of a child) pass. They
  run in a child pytest, with ``benchmarks/`` first on its path, so that the
  folder's module names (``run``, ``servers``) never shadow anything here.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).parents[1]
BENCHMARKS = ROOT / "benchmarks"


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("benchmarks_entry", BENCHMARKS / "bench.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _env() -> dict[str, str]:
    """This tree first on the children's path (not an installed copy elsewhere)."""
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return dict(os.environ, PYTHONPATH=path)


def test_every_file_is_a_listed_benchmark_or_a_named_helper() -> None:
    bench = _bench()
    scripts = {b.script for b in bench.BENCHMARKS.values()}
    files = {p.name for p in BENCHMARKS.glob("*.py")}
    assert sorted(files - scripts - set(bench.HELPERS)) == []  # unlisted files
    assert sorted((scripts | set(bench.HELPERS)) - files) == []  # listed, not there
    assert not scripts & set(bench.HELPERS)


def test_the_list_names_each_benchmark_and_finds_it_by_either_name() -> None:
    bench = _bench()
    listing = bench.listing()
    for name, benchmark in bench.BENCHMARKS.items():
        assert f"  {name} " in listing
        assert bench.find(name) is benchmark
        assert bench.find(benchmark.script) is benchmark
        assert bench.find(benchmark.script.removesuffix(".py")) is benchmark
    assert bench.find("no_such_benchmark") is None


def test_every_benchmark_starts() -> None:
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / "bench.py"), "check"],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=110,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_harness_tests_pass() -> None:
    tests = sorted(str(p) for p in BENCHMARKS.glob("test_*.py"))
    assert len(tests) == 4
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *tests],
        capture_output=True,
        text=True,
        env=_env(),
        cwd=ROOT,
        timeout=110,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
