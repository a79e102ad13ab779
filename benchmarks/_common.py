# Copyright 2026 The JAX fork authors.
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     https://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.
"""Shared helpers for the benchmarks.

Benchmarks report *ratios taken in one run* (the machines are noisy).  To
compare against upstream jax 0.4.26 in the same run, a benchmark runs a worker
subprocess with `PYTHONPATH=upstream_tree()`: the pristine upstream sources,
extracted from the verified sdist (the same jaxlib serves both).
"""
from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "build"))


def upstream_tree() -> Path:
  """Pristine jax 0.4.26 sources (no patches), extracted once into .work/."""
  from forktool import upstream as U
  dest = REPO / ".work" / "upstream-pristine"
  if not (dest / "jax" / "__init__.py").exists():
    pin = U.load_pin()
    U.remove_tree(dest)
    U.extract(U.get_sdist(pin), pin, dest)
  return dest


def env_for(which: str) -> dict[str, str]:
  """Environment for a worker running `which` in {"fork", "upstream"}.

  "fork" is whatever `import jax` gives (the installed fork, or a
  materialized tree already on PYTHONPATH).
  """
  env = dict(os.environ)
  if which == "upstream":
    env["PYTHONPATH"] = str(upstream_tree())
  elif which != "fork":
    raise ValueError(f"unknown jax build {which!r}")
  return env


def timeit(fn, *, repeat: int = 7, number: int | None = None,
           min_time: float = 0.05) -> float:
  """Median seconds per call of `fn()` (which must block until done)."""
  fn()
  if number is None:
    number = 1
    while True:
      t0 = time.perf_counter()
      for _ in range(number):
        fn()
      if time.perf_counter() - t0 >= min_time or number >= 1 << 20:
        break
      number *= 2
  times = []
  for _ in range(repeat):
    t0 = time.perf_counter()
    for _ in range(number):
      fn()
    times.append((time.perf_counter() - t0) / number)
  return statistics.median(times)
