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
"""`jnp.take_along_axis` picking one element per row: the fork / a baseline.

    python benchmarks/take_along_axis.py [--rounds 3]     # CPU, vs 0.4.26
    python benchmarks/take_along_axis.py --baseline-pythonpath DIR  # a chip
    python benchmarks/take_along_axis.py --smoke    # tiny sizes, CPU, seconds

Patch 0029 keeps the pick `take_along_axis(x, labels[..., None], -1)` a
gather and its forward-mode tangent a gather, and makes its transpose (the
gradient) a select of the broadcast cotangent instead of a scatter-add.
For each shape (`--shapes`, default (8, 128, 512) and (8, 256, 8192)), float32
x and int32 labels made with NumPy (the same on both sides), jitted
(`jit(f).lower(...).compile()`), each worker times:

- `pick`: the pick alone (forward only);
- `grad`: the gradient of sum(pick(x) * w) with respect to x (the transpose);
- `ce`: `value_and_grad` of a cross-entropy, mean(logsumexp(x) - pick(x));

seconds per call, wall-clock and CPU time of all the worker's threads (steadier
on a shared machine; meaningless for a chip), the medians of 9 batches (each
batch's calls dispatched back to back, the last waited for; a batch at least
`--min-time` s, its number of calls fixed when the program is compiled); and
once per worker the gathers and scatters in the optimized HLO (XLA:CPU
expands a scatter into a loop: none shows there), a digest of the pick's
bits and the gradient's sum (the same on both sides).

A worker process runs the fork (this interpreter's jax), another the
baseline: `--baseline-pythonpath DIR` (the jax that DIR on PYTHONPATH gives,
e.g. a TPU machine's jax 0.10.2, or a materialized tree) run by
`--baseline-python` (default: this interpreter); by default the pristine
upstream jax 0.4.26 sources (benchmarks/_common.py). On the CPU (without
--baseline-pythonpath, or with JAX_PLATFORMS=cpu) both workers stay up and
each round times every case batch by batch, the two sides alternating;
otherwise (a chip takes one process at a time) each round starts one worker,
times every case, stops it, then the other. Even rounds time the fork first,
odd rounds the baseline. It prints each round's ratio (fork / baseline:
above 1 is the fork slower) and the medians over rounds.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time

SHAPES = ((8, 128, 512), (8, 256, 8192))
SMOKE_SHAPES = ((2, 4, 16), (2, 8, 64))
CASES = ("pick", "grad", "ce")
BATCHES = 9


def _calls_per_batch(f, *args, min_time: float) -> int:
  """How many calls of f(*args) (compiled) make a batch of `min_time` s."""
  import jax  # pylint: disable=g-import-not-at-top
  jax.block_until_ready(f(*args))
  number = 1
  while True:
    t0 = time.perf_counter()
    for _ in range(number):
      out = f(*args)
    jax.block_until_ready(out)
    if time.perf_counter() - t0 >= min_time or number >= 1 << 16:
      return number
    number *= 2


def _timed(f, *args, number: int, batches: int) -> tuple[float, float]:
  """Seconds per call, wall-clock and the process's CPU time (all threads),
  the medians of `batches` batches of `number` calls, each batch's calls
  dispatched back to back and its last waited for."""
  import jax  # pylint: disable=g-import-not-at-top
  times, cpu = [], []
  for _ in range(batches):
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(number):
      out = f(*args)
    jax.block_until_ready(out)
    times.append((time.perf_counter() - t0) / number)
    cpu.append((time.process_time() - c0) / number)
  return statistics.median(times), statistics.median(cpu)


def worker(shapes, min_time: float) -> None:
  """Compiles every case, prints their facts, then times the cases named on
  stdin, one per line, printing seconds per call (JSON lines)."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top

  def pick(x, labels):
    return jnp.take_along_axis(x, labels[..., None], -1)[..., 0]

  def grad(x, labels, w):
    return jax.grad(lambda x: jnp.sum(pick(x, labels) * w))(x)

  def ce(x, labels):
    def loss(x):
      lse = jax.scipy.special.logsumexp(x, axis=-1)
      return jnp.mean(lse - pick(x, labels))
    return jax.value_and_grad(loss)(x)

  facts: dict[str, object] = {"jax": jax.__version__,
                              "backend": jax.default_backend()}
  programs = {}
  for shape in shapes:
    rng = np.random.RandomState(0)
    x = jnp.asarray(rng.randn(*shape).astype(np.float32))
    labels = jnp.asarray(rng.randint(0, shape[-1], shape[:-1]).astype(np.int32))
    w = jnp.asarray(rng.randn(*shape[:-1]).astype(np.float32))
    for case, f, args in (("pick", pick, (x, labels)),
                          ("grad", grad, (x, labels, w)),
                          ("ce", ce, (x, labels))):
      key = f"{case} {_name(shape)}"
      compiled = jax.jit(f).lower(*args).compile()
      number = _calls_per_batch(compiled, *args, min_time=min_time)
      programs[key] = (compiled, args, number)
      hlo = compiled.as_text()
      facts[key + " gathers"] = hlo.count(" gather(")
      facts[key + " scatters"] = hlo.count(" scatter(")
      result = compiled(*args)
      if case == "pick":
        facts[key + " sha"] = hashlib.sha256(
            np.asarray(result).tobytes()).hexdigest()[:12]
      elif case == "grad":
        facts[key + " sum"] = float(np.asarray(result, np.float64).sum())
  print(json.dumps(facts), flush=True)
  for line in sys.stdin:
    case, name, batches = line.split()
    compiled, args, number = programs[f"{case} {name}"]
    print(json.dumps(_timed(compiled, *args, number=number,
                            batches=int(batches))), flush=True)


class _Worker:
  """A worker process of one side, spoken to in JSON lines."""

  def __init__(self, name, python, env, shapes, min_time):
    self.name = name
    self.proc = subprocess.Popen(
        [python, os.path.abspath(__file__), "--worker", "--shapes",
         ",".join(map(_name, shapes)), "--min-time", str(min_time)],
        env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    self.facts = self._read()

  def _read(self):
    line = self.proc.stdout.readline()
    if not line:
      sys.exit(f"the {self.name} worker failed (exit {self.proc.wait()})")
    return json.loads(line)

  def time(self, key: str, batches: int) -> list[float]:
    self.proc.stdin.write(f"{key} {batches}\n")
    self.proc.stdin.flush()
    return self._read()

  def close(self):
    self.proc.stdin.close()
    self.proc.wait(timeout=120)


def _name(shape) -> str:
  return "x".join(map(str, shape))


def _parse_shapes(text: str):
  return tuple(tuple(int(d) for d in s.split("x")) for s in text.split(","))


def main() -> None:
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--baseline-pythonpath", default=None, metavar="DIR",
                 help="PYTHONPATH giving the baseline jax (default: pristine "
                      "upstream 0.4.26; none with --smoke)")
  p.add_argument("--baseline-python", default=sys.executable,
                 help="the interpreter of the baseline worker")
  p.add_argument("--rounds", type=int, default=None,
                 help="default 3 (1 with --smoke)")
  p.add_argument("--shapes", type=_parse_shapes, default=None,
                 help="e.g. 8x128x512,8x256x8192 (the default)")
  p.add_argument("--min-time", type=float, default=None,
                 help="seconds per timed batch (default 0.05; 0.01 --smoke)")
  p.add_argument("--interleave", action=argparse.BooleanOptionalAction,
                 default=None,
                 help="keep both workers running and alternate them case by "
                      "case (default: on the CPU, i.e. without "
                      "--baseline-pythonpath or with JAX_PLATFORMS=cpu; a "
                      "chip takes one process at a time)")
  p.add_argument("--smoke", action="store_true",
                 help="tiny sizes on the CPU (JAX_PLATFORMS=cpu), one round, "
                      "the fork alone unless --baseline-pythonpath is given")
  p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
  args = p.parse_args()
  shapes = args.shapes or (SMOKE_SHAPES if args.smoke else SHAPES)
  min_time = args.min_time or (0.01 if args.smoke else 0.05)
  if args.worker:
    worker(shapes, min_time)
    return

  base_env = dict(os.environ)
  if args.smoke:
    base_env["JAX_PLATFORMS"] = "cpu"
  sides = {"fork": (sys.executable, base_env)}
  baseline = args.baseline_pythonpath
  if baseline is None and not args.smoke:
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import _common  # pylint: disable=g-import-not-at-top
    baseline = str(_common.upstream_tree())
  if baseline is not None:
    sides["baseline"] = (args.baseline_python,
                         dict(base_env, PYTHONPATH=baseline))
  interleave = args.interleave
  if interleave is None:
    interleave = (args.baseline_pythonpath is None or
                  base_env.get("JAX_PLATFORMS") == "cpu")
  rounds = args.rounds or (1 if args.smoke else 3)
  keys = [f"{c} {_name(s)}" for s in shapes for c in CASES]
  print(f"shapes {', '.join(map(_name, shapes))}, float32, jitted; {rounds} "
        f"rounds, {'interleaved' if interleave else 'one worker at a time'}"
        f"; baseline: {baseline or 'none'}", flush=True)
  start = lambda name: _Worker(name, *sides[name], shapes, min_time)
  workers = {name: start(name) for name in sides} if interleave else {}
  facts = {name: w.facts for name, w in workers.items()}
  times: dict[tuple[str, str], list[float]] = {}
  cpu: dict[tuple[str, str], list[float]] = {}
  for r in range(rounds):
    order = list(sides) if r % 2 == 0 else list(sides)[::-1]
    if interleave:
      for key in keys:
        batches = {name: [] for name in order}
        for _ in range(BATCHES):
          for name in order:
            batches[name].append(workers[name].time(key, 1))
        for name in order:
          wall, used = zip(*batches[name])
          times.setdefault((name, key), []).append(statistics.median(wall))
          cpu.setdefault((name, key), []).append(statistics.median(used))
    else:
      for name in order:
        t0 = time.perf_counter()
        w = start(name)
        facts.setdefault(name, w.facts)
        for key in keys:
          wall, used = w.time(key, BATCHES)
          times.setdefault((name, key), []).append(wall)
          cpu.setdefault((name, key), []).append(used)
        w.close()
        print(f"round {r} {name}: {time.perf_counter() - t0:.0f} s",
              flush=True)
  for w in workers.values():
    w.close()
  for name, f in facts.items():
    print(f"{name}: jax {f['jax']}, {f['backend']}")
  both = "baseline" in sides
  print("\n| case | fork ms | baseline ms | fork / baseline (each round) | "
        "median | CPU time: fork / baseline (median) | gathers, scatters in "
        "HLO: fork; baseline |")
  print("| --- | --- | --- | --- | --- | --- | --- |")
  for key in keys:
    fs = times[("fork", key)]
    f0 = facts["fork"]
    row = [key, f"{statistics.median(fs) * 1e3:.4g}"]
    counts = f"{f0[key + ' gathers']}, {f0[key + ' scatters']}"
    if both:
      bs = times[("baseline", key)]
      b0 = facts["baseline"]
      ratios = [f / b for f, b in zip(fs, bs)]
      cpu_ratios = [f / b for f, b in zip(cpu[("fork", key)],
                                          cpu[("baseline", key)])]
      row += [f"{statistics.median(bs) * 1e3:.4g}",
              ", ".join(f"{x:.3f}" for x in ratios),
              f"{statistics.median(ratios):.3f}",
              f"{statistics.median(cpu_ratios):.3f}",
              f"{counts}; {b0[key + ' gathers']}, {b0[key + ' scatters']}"]
    else:
      row += ["n/a", "n/a", "n/a", "n/a", f"{counts}; n/a"]
    print("| " + " | ".join(row) + " |")
  if both:
    f0, b0 = facts["fork"], facts["baseline"]
    same = all(f0[f"pick {_name(s)} sha"] == b0[f"pick {_name(s)} sha"]
               for s in shapes)
    print(f"\npick bits equal on both sides: {same}; gradient sums "
          "(fork / baseline): " + ", ".join(
              f"{f0[k]:.6g} / {b0[k]:.6g}"
              for k in (f"grad {_name(s)} sum" for s in shapes)))


if __name__ == "__main__":
  main()
