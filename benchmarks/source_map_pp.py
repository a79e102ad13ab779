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
"""Cost of source maps when pretty-printing a large jaxpr.

The jaxpr is the gradient of a 12-layer transformer block stack (about 2,500
equations). Two worker processes each build it once: one on the fork, one on
pristine upstream 0.4.26. Their timings are interleaved, round by round, and
reported as ratios of medians taken in this one run:

  * fork with source-map collection / fork without (goal: <= 1.10);
  * fork without collection / upstream 0.4.26 (goal: <= 1.02).

Timings are CPU time of each worker, pooled over a few worker processes per
side; `--control` runs the fork on both sides to show the noise floor.

Run: python benchmarks/source_map_pp.py [--rounds N] [--procs N] [--control]
(with the fork importable, e.g. PYTHONPATH=<materialized tree>).
"""
from __future__ import annotations

import argparse
import statistics
import time

import _common

_WORKER = r'''
import gc, json, sys, time
import jax, jax.numpy as jnp

NUM_LAYERS, D, HEADS, SEQ = 12, 64, 4, 16

def layer_norm(x, g, b):
  m = x.mean(-1, keepdims=True)
  v = ((x - m) ** 2).mean(-1, keepdims=True)
  return (x - m) * jax.lax.rsqrt(v + 1e-5) * g + b

def block(p, x):
  h = layer_norm(x, p["g1"], p["b1"])
  q, k, v = (h @ p[n] for n in ("wq", "wk", "wv"))
  split = lambda t: t.reshape(SEQ, HEADS, D // HEADS).transpose(1, 0, 2)
  q, k, v = split(q), split(k), split(v)
  s = q @ k.transpose(0, 2, 1) / jnp.sqrt(D // HEADS)
  s = jnp.where(jnp.tril(jnp.ones((SEQ, SEQ), bool)), s, -1e9)
  a = jax.nn.softmax(s, axis=-1) @ v
  x = x + a.transpose(1, 0, 2).reshape(SEQ, D) @ p["wo"]
  h = layer_norm(x, p["g2"], p["b2"])
  return x + jax.nn.gelu(h @ p["w1"] + p["c1"]) @ p["w2"] + p["c2"]

def loss(params, x):
  for p in params:
    x = block(p, x)
  return (x ** 2).mean()

def init():
  ks = iter(jax.random.split(jax.random.PRNGKey(0), 8 * NUM_LAYERS))
  n = lambda *s: jax.random.normal(next(ks), s) * 0.02
  return [dict(wq=n(D, D), wk=n(D, D), wv=n(D, D), wo=n(D, D),
               w1=n(D, 4 * D), c1=jnp.zeros(4 * D), w2=n(4 * D, D),
               c2=jnp.zeros(D), g1=jnp.ones(D), b1=jnp.zeros(D),
               g2=jnp.ones(D), b2=jnp.zeros(D)) for _ in range(NUM_LAYERS)]

jaxpr = jax.make_jaxpr(jax.grad(loss))(init(), jnp.ones((SEQ, D)))
print(json.dumps({"eqns": len(jaxpr.eqns), "version": jax.__version__}),
      flush=True)

def run(mode, number):
  # CPU time of this process: other processes sharing the machine's cores
  # inflate wall time far more than they inflate this.
  gc.collect()
  t0 = time.process_time()
  for _ in range(number):
    if mode == "plain":
      jaxpr.pretty_print(use_color=False)
    else:
      jaxpr.pretty_print(use_color=False, source_map=[])
  return (time.process_time() - t0) / number

if len(sys.argv) > 1 and sys.argv[1] == "check":
  regions = []
  text = jaxpr.pretty_print(use_color=False, source_map=regions)
  assert text == jaxpr.pretty_print(use_color=False)
  n = sum(len(r) for r in regions)
  print(json.dumps({"lines": len(regions), "regions": n}), flush=True)
for line in sys.stdin:
  mode, number = line.split()
  print(json.dumps(run(mode, int(number))), flush=True)
'''


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--rounds", type=int, default=15)
  parser.add_argument("--procs", type=int, default=3,
                      help="worker processes per side: a process's memory "
                      "layout alone moves its timings by a few percent, so "
                      "timings are pooled over several")
  parser.add_argument("--number", type=int, default=1,
                      help="pretty-prints per timing")
  parser.add_argument("--control", action="store_true",
                      help="run the fork in place of upstream too (A/A), to "
                      "show the noise floor of the fork/upstream ratio")
  args = parser.parse_args()

  t0 = time.perf_counter()
  # Separate workers for each kind of timing: a worker that also collects
  # maps would carry their garbage and caches into its plain timings.
  mappers = [_common.Worker("fork", _WORKER, *(["check"] if p == 0 else []))
             for p in range(args.procs)]
  forks = [_common.Worker("fork", _WORKER) for _ in range(args.procs)]
  ups = [_common.Worker("fork" if args.control else "upstream", _WORKER)
         for _ in range(args.procs)]
  fork, upstream = mappers[0], ups[0]
  check = fork.read()   # the "check" line
  assert fork.info["eqns"] == upstream.info["eqns"], (fork.info, upstream.info)
  print(f"jaxpr: grad of a 12-layer transformer block stack, "
        f"{fork.info['eqns']} top-level equations; "
        f"fork {fork.info['version']} vs upstream {upstream.info['version']}")
  print(f"source map: {check['lines']} lines, "
        f"{check['regions']} regions")
  for w in forks + ups:  # warm up
    w.call("plain", 1)
  for w in mappers:
    w.call("map", 1)

  # plain[p][r]: worker p, round r.
  plain, mapped, up = ([[] for _ in range(args.procs)] for _ in range(3))
  for r in range(args.rounds):
    # Interleave, rotating the order so no side always runs first.
    jobs = [(out[p], worker, mode)
            for p in range(args.procs)
            for out, worker, mode in ((plain, forks[p], "plain"),
                                      (mapped, mappers[p], "map"),
                                      (up, ups[p], "plain"))]
    k = r % len(jobs)
    for out, worker, mode in jobs[k:] + jobs[:k]:
      out.append(worker.call(mode, args.number))
  for w in mappers + forks + ups:
    w.close()

  med = statistics.median
  flat = lambda xss: [x for xs in xss for x in xs]
  for name, xss in (("fork, no source map:  ", plain),
                    ("fork, with source map:", mapped),
                    ("upstream 0.4.26:      ", up)):
    print(f"pretty_print, {name} median {med(flat(xss)) * 1e3:7.1f} ms, "
          f"min {min(flat(xss)) * 1e3:7.1f} ms")
  # CPU-time noise only adds, so the minima are the steadiest estimates; the
  # median of the per-round ratios cancels slow drifts of the machine's load.
  def ratios(a, b):
    mins = statistics.fmean(min(x) / min(y) for x, y in zip(a, b))
    meds = statistics.fmean(med(x) / med(y) for x, y in zip(a, b))
    per_round = med(x / y for xs, ys in zip(a, b) for x, y in zip(xs, ys))
    return (f"{mins:.3f} (min); {meds:.3f} (median); "
            f"{per_round:.3f} (per-round median)")
  print(f"with map / without (fork):   {ratios(mapped, plain)}; goal <= 1.10")
  other = "fork (A/A control)" if args.control else "upstream"
  print(f"fork without map / {other}: {ratios(plain, up)}; goal <= 1.02")
  print(f"(ratios averaged over {args.procs} workers per kind; {args.rounds} "
        f"rounds x {args.number} prints; {time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
  main()
