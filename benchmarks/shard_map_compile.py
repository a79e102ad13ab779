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
"""Compile time of shard_map programs without loops, this jax / a baseline.

Patch 0024 annotates loops and axis_index in shard_map bodies for XLA and
adds replication rules for while and cond; programs without loops must
compile as fast as before. Each figure is a ratio of medians from this one
run: trace, lower and compile (`jax.jit(f).lower(*args).compile()`, a fresh
function each time, so no cache is hit) of the same programs on 8 host CPU
devices, in a worker of this jax and one of the baseline, in interleaved
rounds. The baseline is upstream jax 0.4.26 (the pristine sdist), or with
--baseline TREE another jax tree, e.g. the series materialized without the
patch (`build/fork.py materialize --dir TREE --upto 0023-...`).

Run: python benchmarks/shard_map_compile.py [--rounds N] [--baseline TREE]
(with the fork importable, e.g. PYTHONPATH=<materialized tree>).
"""
from __future__ import annotations

import argparse
import math
import statistics
import sys

import _common

_WORKER = r'''
import json, os, statistics, sys, time
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
import numpy as np
import jax, jax.numpy as jnp
from jax import lax
from jax.experimental.shard_map import shard_map
from jax.sharding import Mesh, PartitionSpec as P
mesh = Mesh(np.array(jax.devices()).reshape(4, 2), ("x", "y"))
x = jnp.ones((64, 256), jnp.float32)
w = jnp.ones((256, 256), jnp.float32)

def elementwise():      # collectives, no loop, no axis_index
  def body(x):
    for _ in range(20):
      x = jnp.sin(x) * lax.psum(jnp.cos(x).sum(), "x") + 1.
    return x
  return shard_map(body, mesh, in_specs=P("x", "y"), out_specs=P("x", "y")), (x,)

def axis_index():       # the position: ring shifts, a table lookup, a cond
  def body(x):          # (no jax.random: its hash lowers to a loop)
    me = lax.axis_index("x") * 2 + lax.axis_index("y")
    for i in range(8):
      x = lax.ppermute(x, "x", [(j, (j + 1) % 4) for j in range(4)])
      x = jnp.sin(x) * jnp.arange(8.)[(me + i) % 8] + me
    return lax.cond(me % 2 == 0, lambda: x * 2., lambda: x - 1.)
  return shard_map(body, mesh, in_specs=P("x", "y"), out_specs=P("x", "y"),
                   check_rep=False), (x,)

def mlp_grad():         # a data-parallel MLP's gradient, check_rep=True
  def layer(w, x):
    h = jnp.tanh(x @ w)
    return h / lax.psum((h * h).sum(), "x")
  f = shard_map(lambda w, x: layer(w, layer(w, layer(w, x))), mesh,
                in_specs=(P(), P("x")), out_specs=P("x"))
  def loss(w, x):
    return (f(w, x) ** 2).sum()
  return jax.grad(loss), (w, x)

CASES = {"elementwise": elementwise, "axis_index": axis_index,
         "mlp_grad": mlp_grad}
print(json.dumps({"version": jax.__version__}), flush=True)
for line in sys.stdin:
  what, number = line.split()
  walls, cpus = [], []
  for _ in range(int(number)):
    f, args = CASES[what]()   # a new function: nothing cached
    t0, c0 = time.perf_counter(), time.process_time()
    jax.jit(f).lower(*args).compile()
    walls.append(time.perf_counter() - t0)
    cpus.append(time.process_time() - c0)
  print(json.dumps([statistics.median(walls), statistics.median(cpus)]),
        flush=True)
'''

_CASES = ("elementwise", "axis_index", "mlp_grad")


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--rounds", type=int, default=7)
  ap.add_argument("--compiles", type=int, default=3,
                  help="compiles per program per round")
  ap.add_argument("--baseline", default=None, metavar="TREE")
  args = ap.parse_args()

  env = {"JAX_PLATFORMS": "cpu"}
  this = _common.Worker("fork", _WORKER, env=env)
  if args.baseline:
    base = _common.Worker("fork", _WORKER,
                          env={**env, "PYTHONPATH": args.baseline})
  else:
    base = _common.Worker("upstream", _WORKER, env=env)
  print(f"this: jax {this.info['version']}; baseline: jax "
        f"{base.info['version']} at {args.baseline or 'upstream 0.4.26'}; "
        f"{args.rounds} rounds of {args.compiles} compiles per program")
  times: dict[tuple[str, str], list[list[float]]] = {}
  for what in _CASES:   # warm up both (imports, first compile)
    this.call(what, 1)
    base.call(what, 1)
  for r in range(args.rounds):
    pair = (this, base) if r % 2 == 0 else (base, this)
    for what in _CASES:
      for worker in pair:
        name = "this" if worker is this else "base"
        times.setdefault((name, what), []).append(
            worker.call(what, args.compiles))
  this.close()
  base.close()
  ratios = {"wall": [], "cpu": []}
  for what in _CASES:
    row = []
    for i, kind in enumerate(("wall", "cpu")):
      t = statistics.median(x[i] for x in times[("this", what)])
      b = statistics.median(x[i] for x in times[("base", what)])
      ratios[kind].append(t / b)
      row.append(f"{kind} {t * 1e3:.0f} / {b * 1e3:.0f} ms = {t / b:.3f}")
    print(f"{what}: " + ", ".join(row))
  for kind, rs in ratios.items():
    print(f"geometric mean, {kind}: "
          f"{math.exp(statistics.fmean(map(math.log, rs))):.3f}")


if __name__ == "__main__":
  sys.exit(main())
