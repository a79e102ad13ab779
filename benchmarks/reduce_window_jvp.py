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
"""Forward-mode AD cost of `lax.reduce_window` with a generic reducer.

Prints, measured in one run on the default backend (CPU unless told), for
each case (float32):
  * jitted jvp time / jitted primal time, for generic add and multiply
    reducers (Python functions, so the generic `reduce_window_p` path) and
    the `lax.add` monoid;
  * generic-add jvp time / `lax.add` monoid jvp time;
with, given `--upstream PYTHON` (a Python whose jax is upstream's, e.g. a
venv with jax==0.4.28 jaxlib==0.4.28, the first release with a generic jvp)
and `--baseline TREE` (another jax tree, e.g. the fork before a change),
their figures beside ours. Each jax runs in a worker process; the workers
are timed in turn, case by case, for `--rounds` rounds, and each figure is
the median over rounds of the best of a few repetitions in a round, by
the clock and by the worker's CPU time (all its threads; steadier on a
loaded machine).

Run: python benchmarks/reduce_window_jvp.py [--upstream PYTHON]
       [--baseline TREE] [--rounds 3]   (with the fork importable)
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

CASES = {
    "(1024, 1024) w(3,3) s(1,1) SAME":
        ((1024, 1024), (3, 3), (1, 1), "SAME"),
    "(256, 256) w(3,3) s(1,1) SAME":
        ((256, 256), (3, 3), (1, 1), "SAME"),
    "NHWC (32, 64, 64, 64) w(1,3,3,1) s(1,2,2,1) SAME":
        ((32, 64, 64, 64), (1, 3, 3, 1), (1, 2, 2, 1), "SAME"),
    "(1024, 1024) w(8,8) s(1,1) SAME":
        ((1024, 1024), (8, 8), (1, 1), "SAME"),
    "(1024, 1024) w(8,8) s(8,8) VALID":
        ((1024, 1024), (8, 8), (8, 8), "VALID"),
}
REDUCERS = ["generic add", "generic mul", "lax.add monoid"]

# The worker: builds the jitted primal and jvp of each reducer for a case
# (named by its index on stdin) and answers each request with the best of a
# few timed repetitions of each, as one JSON line.
_WORKER = r"""
import json, sys, time
import numpy as np
import jax
from jax import lax
import jax.numpy as jnp

cases = json.loads(sys.argv[1])
reducers = {"generic add": (lambda a, b: a + b, 0.),
            "generic mul": (lambda a, b: a * b, 1.),
            "lax.add monoid": (lax.add, 0.)}
built = {}

def build(k):
  shape, dims, strides, padding = cases[k]
  rng = np.random.RandomState(0)
  x = jnp.asarray(rng.uniform(0.9, 1.1, shape).astype(np.float32))
  t = jnp.asarray(rng.randn(*shape).astype(np.float32))
  fns = {}
  for label, (comp, init) in reducers.items():
    f = lambda x, comp=comp, init=init: lax.reduce_window(
        x, init, comp, tuple(dims), tuple(strides), padding)
    primal, jvp = jax.jit(f), jax.jit(lambda x, t, f=f: jax.jvp(f, (x,), (t,)))
    fns[label + "|primal"] = lambda p=primal: p(x).block_until_ready()
    fns[label + "|jvp"] = lambda j=jvp: jax.block_until_ready(j(x, t))
  number = {}
  for key, fn in fns.items():
    fn()
    t0 = time.perf_counter()
    fn()
    number[key] = max(1, int(0.03 / max(time.perf_counter() - t0, 1e-6)))
  return fns, number

print(json.dumps({"version": jax.__version__,
                  "backend": jax.default_backend()}), flush=True)
for line in sys.stdin:
  k = int(line)
  if k not in built:
    built[k] = build(k)
  fns, number = built[k]
  best = {}
  for _ in range(5):
    for key, fn in fns.items():
      t0, c0 = time.perf_counter(), time.process_time()
      for _ in range(number[key]):
        fn()
      dt = (time.perf_counter() - t0) / number[key]
      dc = (time.process_time() - c0) / number[key]
      best[key] = min(best.get(key, dt), dt)
      best["cpu " + key] = min(best.get("cpu " + key, dc), dc)
  print(json.dumps(best), flush=True)
"""


class _Worker:

  def __init__(self, python: str, env: dict[str, str]):
    self.proc = subprocess.Popen(
        [python, "-c", _WORKER, json.dumps(list(CASES.values()))],
        env={**os.environ, **env}, stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, text=True)
    self.info = self.call(None)

  def call(self, k: int | None) -> dict:
    if k is not None:
      self.proc.stdin.write(f"{k}\n")
      self.proc.stdin.flush()
    line = self.proc.stdout.readline()
    if not line:
      raise RuntimeError("benchmark worker failed")
    return json.loads(line)

  def close(self) -> None:
    self.proc.stdin.close()
    self.proc.wait(timeout=60)


def nonzero(t: float) -> float:
  """A time to divide by: a chip's worker may spend no measurable CPU time on
  a call, and its ratio then reads nan."""
  return t or float("nan")


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--upstream", metavar="PYTHON",
                  help="a Python whose jax is upstream's (e.g. 0.4.28)")
  ap.add_argument("--baseline", metavar="TREE",
                  help="another jax tree, run with this Python")
  ap.add_argument("--rounds", type=int, default=3)
  ap.add_argument("--cases", nargs="*", type=int, default=None,
                  help="indices into the cases (default: all)")
  args = ap.parse_args()
  runs = {"ours": (sys.executable, {})}
  if args.baseline:
    runs["baseline"] = (sys.executable, {"PYTHONPATH": args.baseline})
  if args.upstream:
    runs["upstream"] = (args.upstream, {"PYTHONPATH": ""})
  workers = {label: _Worker(*run) for label, run in runs.items()}
  for label, w in workers.items():
    print(f"{label}: jax {w.info['version']}, backend {w.info['backend']}")
  cases = args.cases if args.cases is not None else range(len(CASES))
  times: dict[tuple[str, int], list[dict]] = {}
  for _ in range(args.rounds):
    for k in cases:
      for label, w in workers.items():
        times.setdefault((label, k), []).append(w.call(k))
  for w in workers.values():
    w.close()
  print(f"\nmedian over {args.rounds} interleaved rounds of the best of 5; "
        "wall time, and in brackets the process's CPU time (all threads)")
  names = list(CASES)
  for k in cases:
    print(f"\n{names[k]}")
    med = {label: {key: statistics.median(r[key] for r in times[label, k])
                   for key in times[label, k][0]} for label in workers}
    for reducer in REDUCERS:
      cells = []
      for label, m in med.items():
        tp, tj = m[reducer + "|primal"], m[reducer + "|jvp"]
        cp, cj = m["cpu " + reducer + "|primal"], m["cpu " + reducer + "|jvp"]
        cells.append(f"{label} primal {tp * 1e3:7.3f} ms jvp {tj * 1e3:7.3f} "
                     f"ms jvp/primal {tj / tp:5.2f} ({cj / nonzero(cp):5.2f})")
      print(f"  {reducer:15s} " + " | ".join(cells))
    ratio = lambda m, c="": (m[c + "generic add|jvp"] /
                             nonzero(m[c + "lax.add monoid|jvp"]))
    print("  generic-add jvp / lax.add monoid jvp: " + " | ".join(
        f"{label} {ratio(m):5.2f} ({ratio(m, 'cpu '):5.2f})"
        for label, m in med.items()))
    ours = med["ours"]
    for label in list(med)[1:]:
      m = med[label]
      print(f"  {label} generic jvp / ours: " + ", ".join(
          f"{r.split()[1]} {m[r + '|jvp'] / ours[r + '|jvp']:5.2f} "
          f"({m[f'cpu {r}|jvp'] / nonzero(ours[f'cpu {r}|jvp']):5.2f})"
          for r in REDUCERS[:2]))


if __name__ == "__main__":
  main()
