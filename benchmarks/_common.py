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

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "build"))


def upstream_tree(version: str | None = None) -> Path:
  """Pristine jax sources (no patches), extracted once into .work/.

  By default the pinned jax 0.4.26, its sdist verified against fork.toml;
  another release `version` (one the series was rebased onto) is the sdist
  `build/fork.py rebase` caches, fetched with pip if it is not there.
  """
  from forktool import upstream as U
  pin = U.load_pin()
  pinned = version is None or version == pin.version
  dest = REPO / ".work" / (
      "upstream-pristine" if pinned else f"upstream-pristine-{version}")
  if not (dest / "jax" / "__init__.py").exists():
    U.remove_tree(dest)
    if pinned:
      U.extract(U.get_sdist(pin), pin, dest)
    else:
      from forktool import rebase
      U.extract(rebase.fetch_release_sdist(version, pin.name), None, dest)
  return dest


def env_for(which: str, version: str | None = None) -> dict[str, str]:
  """Environment for a worker running `which` in {"fork", "upstream"}.

  "fork" is whatever `import jax` gives (the installed fork, or a
  materialized tree already on PYTHONPATH); "upstream" is
  `upstream_tree(version)`.
  """
  env = dict(os.environ)
  if which == "upstream":
    env["PYTHONPATH"] = str(upstream_tree(version))
  elif which != "fork":
    raise ValueError(f"unknown jax build {which!r}")
  return env


class Worker:
  """A worker process, `python -c SOURCE *args` in `env_for(which)`.

  It speaks JSON lines: `info` is the first line it prints; `call(*words)`
  writes the words as one line to its stdin and returns the line it answers.
  """

  def __init__(self, which: str, source: str, *args: str,
               env: dict[str, str | None] | None = None):
    full_env = env_for(which)
    full_env["PYTHONHASHSEED"] = "0"   # the same dict/set layouts everywhere
    for k, v in (env or {}).items():
      if v is None:
        full_env.pop(k, None)
      else:
        full_env[k] = v
    self.proc = subprocess.Popen(
        [sys.executable, "-c", source, *args], env=full_env,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    self.info = self.read()

  def read(self):
    return json.loads(self.proc.stdout.readline())

  def call(self, *words):
    self.proc.stdin.write(" ".join(map(str, words)) + "\n")
    self.proc.stdin.flush()
    return self.read()

  def close(self):
    self.proc.stdin.close()
    self.proc.wait(timeout=60)


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
