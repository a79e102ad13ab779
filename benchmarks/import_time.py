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
"""Cost of `import jax`: the fork vs upstream jax 0.4.26, in one run.

With dumping off, the fork's dump machinery must cost nothing at import (no
`atexit` or at-fork handler, no thread): this benchmark times `import jax` in
fresh interpreters, alternating fork and upstream (same Python, same jaxlib),
and reports the medians and their ratio (target: fork / upstream <= 1.02).
Times are CPU times of the importing process (`time.process_time`), which a
loaded machine disturbs less than wall-clock times.

  python benchmarks/import_time.py [--runs N]

Needs the fork on PYTHONPATH (or installed).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

from _common import env_for  # pylint: disable=g-import-not-at-top

_CHILD = r"""
import atexit, json, os, time
registered = []
_atexit_register = atexit.register
def _record(fn, *a, **k):
  registered.append(getattr(fn, "__module__", "?"))
  return _atexit_register(fn, *a, **k)
atexit.register = _record
_at_fork = os.register_at_fork
def _record_fork(**k):
  registered.append(next(iter(k.values())).__module__)
  return _at_fork(**k)
os.register_at_fork = _record_fork
t0 = time.process_time()
w0 = time.perf_counter()
import jax
cpu = time.process_time() - t0
wall = time.perf_counter() - w0
print(json.dumps({"cpu": cpu, "wall": wall, "version": jax.__version__,
                  "handlers": registered}))
"""


def run_once(which: str, pycache: str) -> dict:
  env = env_for(which)
  env.pop("JAX_DUMP_IR_TO", None)
  # Imports read bytecode, as installed packages do (each build its own
  # cache, written by the warm-up runs).
  env.pop("PYTHONDONTWRITEBYTECODE", None)
  env["PYTHONPYCACHEPREFIX"] = os.path.join(pycache, which)
  out = subprocess.run([sys.executable, "-c", _CHILD], env=env, check=True,
                       capture_output=True, text=True).stdout
  return json.loads(out.strip().splitlines()[-1])


def main(argv: list[str]) -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--runs", type=int, default=21)
  args = parser.parse_args(argv)
  results: dict[str, list[dict]] = {"fork": [], "upstream": []}
  pycache = tempfile.mkdtemp(prefix="jax_import_time_")
  try:
    for _ in range(2):  # Write the bytecode; warm the file system caches.
      for which in results:
        run_once(which, pycache)
    for _ in range(args.runs):
      for which in results:
        results[which].append(run_once(which, pycache))
  finally:
    shutil.rmtree(pycache, ignore_errors=True)
  cpu = {w: statistics.median(r["cpu"] for r in rs) for w, rs in results.items()}
  wall = {w: statistics.median(r["wall"] for r in rs)
          for w, rs in results.items()}
  for w in results:
    r = results[w][0]
    print(f"{w:8s} {r['version']:18s} import jax: {cpu[w] * 1e3:7.1f} ms CPU, "
          f"{wall[w] * 1e3:7.1f} ms wall (median of {args.runs}); "
          f"atexit/at-fork handlers from: {sorted(set(r['handlers']))}")
  print(f"fork / upstream: {cpu['fork'] / cpu['upstream']:.3f} (CPU), "
        f"{wall['fork'] / wall['upstream']:.3f} (wall)   target <= 1.02")


if __name__ == "__main__":
  main(sys.argv[1:])
