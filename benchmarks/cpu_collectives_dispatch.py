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
"""What running multi-device CPU programs with collectives one at a time costs.

Patch 0030 dispatches an execution of a program with collectives on several
devices of jaxlib's CPU client only once the one before has finished, through
Python (not the C++ fast path). Each figure is a ratio of medians from this
one run, on 8 host CPU devices, this jax / a baseline, in interleaved rounds:
seconds per call of 25 batches of 8 calls dispatched back to back, each batch
waited for, of

  tiny_psum   a psum over all 8 devices of a (64, 64) array: dispatch-bound;
  train_step  a data-parallel MLP step (grad, pmean over all devices, update),
              each step taking the last one's parameters;
  elementwise a program without collectives on the 8 devices (unchanged);

and `compile`: jit-lower-compile of train_step's function (the patch reads
the optimized HLO once per program). The baseline is upstream jax 0.4.26 (the
pristine sdist; default) or, with --baseline TREE, another jax tree, e.g. the
series materialized without the patch. Batches of 8: with hundreds of calls in
flight, upstream deadlocks on these programs too (the bug the patch fixes).

Run: python benchmarks/cpu_collectives_dispatch.py [--rounds N] [--baseline TREE]
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
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
mesh = Mesh(np.array(jax.devices()), ("d",))
shard = lambda x: jax.device_put(x, NamedSharding(mesh, P("d")))

tiny = jax.jit(shard_map(lambda x: lax.psum(x, "d"), mesh=mesh,
                         in_specs=P("d"), out_specs=P()))
elementwise = jax.jit(lambda x: jnp.sin(x) * 2.)
small = shard(jnp.ones((512, 64)))

def step_fn():
  def loss(w, x):
    h = x
    for _ in range(3):
      h = jnp.tanh(h @ w)
    return (h ** 2).mean()
  def step(w, x):
    g = shard_map(lambda w, x: lax.pmean(jax.grad(loss)(w, x), "d"),
                  mesh=mesh, in_specs=(P(), P("d")), out_specs=P())(w, x)
    return w - 0.01 * g
  return step
step = jax.jit(step_fn())
w0 = jnp.eye(256) * 0.5
xs = shard(jnp.ones((8 * 64, 256)) * 0.1)

def calls(what, n):   # n batches of 8 calls, each batch waited for
  t0 = time.perf_counter()
  for _ in range(n):
    if what == "tiny_psum":
      outs = [tiny(small) for _ in range(8)]
    elif what == "elementwise":
      outs = [elementwise(small) for _ in range(8)]
    else:
      w = w0
      for _ in range(8):
        w = step(w, xs)
      outs = [w]
    jax.block_until_ready(outs)
  return (time.perf_counter() - t0) / (8 * n)

def compile_once():
  t0 = time.perf_counter()
  jax.jit(step_fn()).lower(w0, xs).compile()
  return time.perf_counter() - t0

print(json.dumps({"version": jax.__version__}), flush=True)
for line in sys.stdin:
  what, number = line.split()
  if what == "compile":
    print(json.dumps(statistics.median(compile_once()
                                       for _ in range(int(number)))),
          flush=True)
  else:
    print(json.dumps(calls(what, int(number))), flush=True)
'''

_CASES = {"tiny_psum": 25, "train_step": 25, "elementwise": 25,
          "compile": 2}


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--rounds", type=int, default=7)
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
        f"{args.rounds} rounds")
  for what in _CASES:   # warm up both (compiles)
    this.call(what, 1)
    base.call(what, 1)
  times: dict[tuple[str, str], list[float]] = {}
  for r in range(args.rounds):
    pair = (this, base) if r % 2 == 0 else (base, this)
    for what, number in _CASES.items():
      for worker in pair:
        name = "this" if worker is this else "base"
        times.setdefault((name, what), []).append(worker.call(what, number))
  this.close()
  base.close()
  ratios = []
  for what in _CASES:
    t = statistics.median(times[("this", what)])
    b = statistics.median(times[("base", what)])
    unit, scale = ("ms", 1e3) if what == "compile" else ("us per call", 1e6)
    print(f"{what}: {t * scale:.0f} / {b * scale:.0f} {unit} = {t / b:.3f}")
    ratios.append(t / b)
  print(f"geometric mean: "
        f"{math.exp(statistics.fmean(map(math.log, ratios))):.3f}")


if __name__ == "__main__":
  sys.exit(main())
