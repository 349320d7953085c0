"""``python -m benchmarks`` from the repository root: the same as ``benchmarks/bench.py``."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench import main

sys.exit(main(sys.argv[1:]))
