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
"""Basic indexing: the fork (slices) against upstream jax 0.4.26 (gathers).

Run with the fork importable, e.g.
  PYTHONPATH=.work/<tree> python benchmarks/indexing.py [--big-mb 256]
      [--rounds 3]

Worker subprocesses, the fork and pristine upstream 0.4.26 alternating for
--rounds rounds, time per indexing expression: an eager call and
`jax.make_jaxpr` (on a small array), the jaxpr's equation count, and the
jitted forward and reverse mode (`jax.vjp` with a cotangent) on a float32
array of about --big-mb MB. Each time is the fastest single call (see
`_best`), and the best over rounds. Printed are ratios fork / upstream, and
each Ellipsis form / its explicit form.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402

# name -> (function source of x (and v), explicit-form name or None)
CASES: dict[str, tuple[str, str | None]] = {
    "x[..., 0, 0, :]": ("lambda x: x[..., 0, 0, :]", "x[:, 0, 0, :]"),
    "x[:, 0, 0, :]": ("lambda x: x[:, 0, 0, :]", None),
    "x[::2, ..., ::-3]": ("lambda x: x[::2, ..., ::-3]", "x[::2, :, :, ::-3]"),
    "x[::2, :, :, ::-3]": ("lambda x: x[::2, :, :, ::-3]", None),
    "x[None, ..., -1]": ("lambda x: x[None, ..., -1]", "x[None, :, :, :, -1]"),
    "x[None, :, :, :, -1]": ("lambda x: x[None, :, :, :, -1]", None),
    "x.at[..., 0].set(v)": ("lambda x, v: x.at[..., 0].set(v)",
                            "x.at[:, :, :, 0].set(v)"),
    "x.at[:, :, :, 0].set(v)": ("lambda x, v: x.at[:, :, :, 0].set(v)", None),
}

MEASURES = ["eager", "make_jaxpr", "eqns", "jit_fwd", "jit_grad"]

SMALL_SHAPE = (4, 8, 16, 32)


def _best(fn, *, budget: float = 1.5, max_calls: int = 300,
          min_calls: int = 5) -> float:
  """Seconds per call of `fn()`: the fastest of many single calls.

  On a shared, loaded machine the fastest call is the least disturbed one;
  it is far more stable than a median or a mean over batches (which a single
  preemption spoils). Calls continue until `budget` seconds are spent (at
  least `min_calls`, at most `max_calls`).
  """
  import time
  fn()
  best = float("inf")
  start = time.perf_counter()
  calls = 0
  while calls < min_calls or (calls < max_calls and
                              time.perf_counter() - start < budget):
    t0 = time.perf_counter()
    fn()
    best = min(best, time.perf_counter() - t0)
    calls += 1
  return best


def _count_eqns(jaxpr) -> int:
  import jax
  n = 0
  for eqn in jaxpr.eqns:
    n += 1
    for sub in jax.core.jaxprs_in_params(eqn.params):
      n += _count_eqns(sub)
  return n


def worker(big_mb: int) -> dict[str, dict[str, float]]:
  import numpy as np
  import jax
  import jax.numpy as jnp

  # Four dims, the last two 128 x 256 (the cases index all four).
  n_lead = max(1, big_mb * (1 << 20) // (4 * 128 * 256))
  big_shape = (max(1, n_lead // 32), min(32, n_lead), 128, 256)
  results: dict[str, dict[str, float]] = {}
  small = jnp.asarray(np.random.RandomState(0).rand(*SMALL_SHAPE),
                      jnp.float32)
  big = jnp.ones(big_shape, jnp.float32)
  for name, (src, _) in CASES.items():
    f = eval(src)  # noqa: S307 (our own literal sources)
    needs_v = "v" in src.split(":")[0]
    def args(x):
      return (x, jnp.ones(x[..., 0].shape, x.dtype)) if needs_v else (x,)
    r: dict[str, float] = {}
    small_args = args(small)
    r["eager"] = _best(
        lambda: jax.block_until_ready(f(*small_args)))
    r["make_jaxpr"] = _best(lambda: jax.make_jaxpr(f)(*small_args))
    r["eqns"] = _count_eqns(jax.make_jaxpr(f)(*small_args).jaxpr)
    big_args = args(big)
    fwd = jax.jit(f)
    r["jit_fwd"] = _best(lambda: jax.block_until_ready(fwd(*big_args)),
                         budget=3.0)
    # Reverse mode with an incoming cotangent (the gradient of a plain sum
    # would not depend on x, and XLA would fold it to a constant).
    ct = jnp.ones(jax.eval_shape(f, *big_args).shape, jnp.float32)
    grad = jax.jit(lambda ct, *a: jax.vjp(f, *a)[1](ct))
    r["jit_grad"] = _best(
        lambda: jax.block_until_ready(grad(ct, *big_args)), budget=3.0)
    results[name] = r
  results["_shape"] = {"big": list(big_shape)}  # type: ignore[dict-item]
  return results


def _run_worker(which: str, big_mb: int) -> dict:
  env = _common.env_for(which)
  env.setdefault("JAX_PLATFORMS", "cpu")
  out = subprocess.run(
      [sys.executable, os.path.abspath(__file__), "--worker",
       "--big-mb", str(big_mb)],
      env=env, check=True, capture_output=True, text=True)
  return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--worker", action="store_true")
  parser.add_argument("--big-mb", type=int, default=256)
  parser.add_argument("--rounds", type=int, default=3)
  args = parser.parse_args()
  if args.worker:
    import jax
    print(jax.__version__, file=sys.stderr)
    print(json.dumps(worker(args.big_mb)))
    return

  # Workers alternate; each figure is the best of --rounds (noisy machines).
  fork: dict = {}
  upstream: dict = {}
  for _ in range(args.rounds):
    for which, acc in (("fork", fork), ("upstream", upstream)):
      res = _run_worker(which, args.big_mb)
      for name, r in res.items():
        if name == "_shape":
          acc[name] = r
          continue
        prev = acc.setdefault(name, r)
        for m in MEASURES:
          prev[m] = min(prev[m], r[m])
  print(f"big array: float32{tuple(fork.pop('_shape')['big'])}, "
        f"small (eager, make_jaxpr, eqns): float32{SMALL_SHAPE}")
  upstream.pop("_shape")
  header = f"{'case':26s}" + "".join(f"{m:>12s}" for m in MEASURES)
  print("\nfork / upstream 0.4.26 (lower is better):")
  print(header)
  for name in CASES:
    print(f"{name:26s}" + "".join(
        f"{fork[name][m] / upstream[name][m]:12.2f}" for m in MEASURES))
  print("\nfork: Ellipsis form / explicit form (goal 1.00 +- 0.05):")
  print(header)
  for name, (_, explicit) in CASES.items():
    if explicit is None:
      continue
    print(f"{name:26s}" + "".join(
        f"{fork[name][m] / fork[explicit][m]:12.2f}" for m in MEASURES))
  print("\nupstream 0.4.26: Ellipsis form / explicit form:")
  print(header)
  for name, (_, explicit) in CASES.items():
    if explicit is None:
      continue
    print(f"{name:26s}" + "".join(
        f"{upstream[name][m] / upstream[explicit][m]:12.2f}" for m in MEASURES))
  print("\nabsolute (fork | upstream): eager and make_jaxpr in us, "
        "jit in ms, eqns")
  for name in CASES:
    f, u = fork[name], upstream[name]
    print(f"{name:26s} eager {f['eager']*1e6:8.1f} | {u['eager']*1e6:8.1f}"
          f"  make_jaxpr {f['make_jaxpr']*1e6:8.1f} | "
          f"{u['make_jaxpr']*1e6:8.1f}  eqns {f['eqns']:3.0f} | "
          f"{u['eqns']:3.0f}  fwd {f['jit_fwd']*1e3:7.2f} | "
          f"{u['jit_fwd']*1e3:7.2f}  grad {f['jit_grad']*1e3:7.2f} | "
          f"{u['jit_grad']*1e3:7.2f}")


if __name__ == "__main__":
  main()
