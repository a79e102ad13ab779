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

Prints, measured in one run on the default backend (CPU):
  * jitted jvp time / jitted primal time, for generic add and multiply
    reducers (Python functions, so the generic `reduce_window_p` path);
  * generic-add jvp time / `lax.add` monoid jvp time;
for float32 (1024, 1024), window (3, 3), strides (1, 1), SAME, and for a 4-D
NHWC pooling case (32, 64, 64, 64), window (1, 3, 3, 1), strides (1, 2, 2, 1).

Run: python benchmarks/reduce_window_jvp.py   (with the fork importable)
"""
from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import jax  # noqa: E402
from jax import lax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from _common import timeit  # noqa: E402


def _generic_add(a, b):
  return a + b


def _generic_mul(a, b):
  return a * b


CASES = {
    "2-D (1024, 1024) w(3,3) s(1,1) SAME":
        ((1024, 1024), (3, 3), (1, 1), "SAME"),
    "4-D NHWC (32, 64, 64, 64) w(1,3,3,1) s(1,2,2,1) SAME":
        ((32, 64, 64, 64), (1, 3, 3, 1), (1, 2, 2, 1), "SAME"),
}


def _fns(comp, init, dims, strides, padding):
  f = lambda x: lax.reduce_window(x, init, comp, dims, strides, padding)
  primal = jax.jit(f)
  jvp = jax.jit(lambda x, t: jax.jvp(f, (x,), (t,)))
  return primal, jvp


def _interleaved(fns: dict, rounds: int = 15) -> dict:
  """Min seconds per call of each fn, timed in interleaved rounds.

  The machines are shared and noisy; interleaving exposes every function to
  the same load, and the minimum over rounds is the least disturbed figure.
  """
  number = {k: max(1, int(0.05 / timeit(f, repeat=1))) for k, f in fns.items()}
  best = {k: float("inf") for k in fns}
  for _ in range(rounds):
    for k, f in fns.items():
      t0 = time.perf_counter()
      for _ in range(number[k]):
        f()
      best[k] = min(best[k], (time.perf_counter() - t0) / number[k])
  return best


def main() -> None:
  print(f"jax {jax.__version__}, backend {jax.default_backend()}; "
        "min over interleaved rounds")
  rng = np.random.RandomState(0)
  for name, (shape, dims, strides, padding) in CASES.items():
    x = jnp.asarray(rng.uniform(0.9, 1.1, shape).astype(np.float32))
    t = jnp.asarray(rng.randn(*shape).astype(np.float32))
    fns = {}
    for label, comp, init in [("generic add", _generic_add, 0.),
                              ("generic mul", _generic_mul, 1.),
                              ("lax.add monoid", lax.add, 0.)]:
      primal, jvp = _fns(comp, init, dims, strides, padding)
      fns[(label, "primal")] = lambda primal=primal: (
          primal(x).block_until_ready())
      fns[(label, "jvp")] = lambda jvp=jvp: jax.block_until_ready(jvp(x, t))
    best = _interleaved(fns)
    print(f"\n{name}")
    for label in ["generic add", "generic mul", "lax.add monoid"]:
      tp, tj = best[(label, "primal")], best[(label, "jvp")]
      print(f"  {label:15s} primal {tp * 1e3:8.3f} ms   jvp {tj * 1e3:8.3f} ms"
            f"   jvp/primal {tj / tp:5.2f}")
    ratio = best[("generic add", "jvp")] / best[("lax.add monoid", "jvp")]
    print(f"  generic-add jvp / lax.add monoid jvp: {ratio:5.2f}")


if __name__ == "__main__":
  main()
