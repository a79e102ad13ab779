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
"""On a TPU, with the fork: the Pallas TPU lowering rules of the patch
"pallas tpu: lowering rules for erf, sign, integer rem and floor_divide,
argmax" compiled and run on the chip against NumPy (exact for integers and
comparisons, a tolerance for erf and float sums), and against the same
kernel in interpret mode. Prints PASS/FAIL per kernel and a count.

Run (one process, about 60 small kernels):
  JAX_PLATFORMS=tpu,cpu python chipcheck/lowering_on_chip.py
(`--dry-run` on a CPU runs the "chip" kernels in interpret mode.)
"""
from __future__ import annotations

import math
import operator
import sys
import traceback

import numpy as np

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

SMEM = pltpu.TPUMemorySpace.SMEM
ANY = pltpu.TPUMemorySpace.ANY
RNG = np.random.default_rng(0)


def floats(shape=(8, 128)):
  x = RNG.normal(size=shape).astype(np.float32) * 3
  x.flat[:6] = [0.0, -0.0, np.nan, np.inf, -np.inf, 1.0]
  x[3, 7:12] = np.nanmax(x)   # ties
  return x


def finite(shape=(8, 128)):
  return RNG.normal(size=shape).astype(np.float32)


def ints(shape=(8, 128), nonzero=False):
  x = RNG.integers(-50, 50, size=shape).astype(np.int32)
  x.flat[:2] = [np.iinfo(np.int32).min + 1, np.iinfo(np.int32).max]
  return np.where(x == 0, 7, x).astype(np.int32) if nonzero else x


def vector_call(fn, *args, interpret=False):
  out = jax.eval_shape(fn, *args)
  def kernel(*refs):
    refs[-1][...] = fn(*(r[...] for r in refs[:-1]))
  return pl.pallas_call(kernel, out_shape=out, interpret=interpret)


PAIRS = np.array([7, 2, -7, 2, 7, -2, -7, -2, 6, 3, -6, 3, 0, 5, 1, -9,
                  2**31 - 1, 10, -2**31 + 1, 10], np.int32)


def scalar_call(fn, pairs, interpret=False):
  n = len(pairs) // 2
  def kernel(x_ref, o_ref):
    for i in range(n):
      o_ref[i] = fn(x_ref[2 * i], x_ref[2 * i + 1])
  return pl.pallas_call(
      kernel, out_shape=jax.ShapeDtypeStruct((n,), jnp.int32),
      in_specs=[pl.BlockSpec(memory_space=SMEM)],
      out_specs=pl.BlockSpec(memory_space=SMEM), interpret=interpret)


def dma_loop_call(steps, interpret=False):
  """Double-buffered DMAs from HBM, slot `i % 2` in a fori_loop."""
  def kernel(x_hbm, o_ref, buf, sems):
    def copy(i, slot):
      return pltpu.make_async_copy(x_hbm.at[i], buf.at[slot], sems.at[slot])
    copy(0, 0).start()
    def body(i, carry):
      slot = i % 2
      @pl.when(i + 1 < steps)
      def _():
        copy(i + 1, 1 - slot).start()
      copy(i, slot).wait()
      o_ref[i] = buf[slot] * 2.0
      return carry
    lax.fori_loop(0, steps, body, 0)
  return pl.pallas_call(
      kernel, out_shape=jax.ShapeDtypeStruct((steps, 8, 128), jnp.float32),
      interpret=interpret,
      grid_spec=pltpu.PrefetchScalarGridSpec(
          num_scalar_prefetch=0, grid=(),
          in_specs=[pl.BlockSpec(memory_space=ANY)],
          out_specs=pl.BlockSpec(memory_space=None),
          scratch_shapes=[pltpu.VMEM((2, 8, 128), jnp.float32),
                          pltpu.SemaphoreType.DMA((2,))]))


def np_cumsum(x, axis, reverse):
  if reverse:
    return np.flip(np.cumsum(np.flip(x, axis), axis, x.dtype), axis)
  return np.cumsum(x, axis, x.dtype)


TOL = dict(rtol=1e-5, atol=1e-5)
# (name, make_call(interpret), args, NumPy's answer, tolerance or None)
CASES = []


def vector(name, fn, np_fn, *args, tol=None):
  CASES.append((name, lambda interpret: vector_call(fn, *args,
                                                    interpret=interpret),
                args, np_fn(*args), tol))


def scalar(name, fn, np_fn):
  CASES.append((name, lambda interpret: scalar_call(fn, PAIRS, interpret),
                (PAIRS,), np_fn(PAIRS[0::2], PAIRS[1::2]), None))


vector("erf", lax.erf, np.vectorize(math.erf, otypes=[np.float32]), floats(),
       tol=dict(rtol=1e-5, atol=2e-6))
vector("sign_f32", jnp.sign, np.sign, floats())
vector("sign_i32", jnp.sign, np.sign, ints())
vector("rem_i32", lax.rem, np.fmod, ints(), ints(nonzero=True))
vector("mod_i32", jnp.remainder, np.remainder, ints(), ints(nonzero=True))
vector("floordiv_i32", jnp.floor_divide, np.floor_divide, ints(),
       ints(nonzero=True))
scalar("smem_rem", lax.rem, np.fmod)
scalar("smem_mod", jnp.remainder, np.remainder)
scalar("smem_floordiv", jnp.floor_divide, np.floor_divide)
scalar("smem_sign", lambda x, y: jnp.sign(x) * y, lambda x, y: np.sign(x) * y)
for name, op in [("lt", operator.lt), ("le", operator.le),
                 ("gt", operator.gt), ("ge", operator.ge),
                 ("eq", operator.eq), ("ne", operator.ne)]:
  x, y = floats(), floats()
  y[:, ::3] = x[:, ::3]   # equal lanes, NaN with NaN among them
  vector(f"{name}_f32", lambda x, y, op=op: jnp.where(op(x, y), 1, 0),
         lambda x, y, op=op: np.where(op(x, y), 1, 0), x, y)
  vector(f"{name}_bool", lambda x, y, op=op: jnp.where(op(x > 0, y > 0), 1, 0),
         lambda x, y, op=op: np.where(op(x > 0, y > 0), 1, 0), ints(), ints())
vector("isnan", lambda x: jnp.where(jnp.isnan(x), 1, 0),
       lambda x: np.where(np.isnan(x), 1, 0), floats())
for axis in (0, 1):
  nan_free = finite()
  nan_free[2, 5:9] = 9.0   # ties
  nan_free[1:4, 3] = -9.0
  for name, f, np_f in [("argmax", jnp.argmax, np.argmax),
                        ("argmin", jnp.argmin, np.argmin),
                        ("min", jnp.min, np.min)]:
    vector(f"{name}_axis{axis}",
           lambda x, f=f, axis=axis: f(x, axis, keepdims=True),
           lambda x, f=np_f, axis=axis: f(x, axis, keepdims=True), nan_free)
    if name != "min":
      vector(f"{name}_axis{axis}_nan",
             lambda x, f=f, axis=axis: f(x, axis, keepdims=True),
             lambda x, f=np_f, axis=axis: f(x, axis, keepdims=True), floats())
  vector(f"argmax_1d_out_axis{axis}", lambda x, axis=axis: jnp.argmax(x, axis),
         lambda x, axis=axis: np.argmax(x, axis), nan_free)
  for reverse in (False, True):
    rev = "_reverse" * reverse
    vector(f"cumsum_i32_axis{axis}{rev}",
           lambda x, a=axis, r=reverse: lax.cumsum(x, a, r),
           lambda x, a=axis, r=reverse: np_cumsum(x, a, r), ints())
    vector(f"cumsum_f32_axis{axis}{rev}",
           lambda x, a=axis, r=reverse: lax.cumsum(x, a, r),
           lambda x, a=axis, r=reverse: np_cumsum(x, a, r), finite(), tol=TOL)
for x in [finite()]:
  CASES.append(("mod2_dma_loop",
                lambda interpret: dma_loop_call(5, interpret),
                (np.stack([x + i for i in range(5)]),),
                2 * np.stack([x + i for i in range(5)]), None))
# Controls that lowered before.
vector("add", jnp.add, np.add, floats(), floats())
vector("exp", jnp.exp, np.exp, finite(), tol=TOL)
vector("sum", lambda x: jnp.sum(x, 1, keepdims=True),
       lambda x: np.sum(x, 1, keepdims=True), finite(), tol=TOL)
vector("iota", lambda x: x + lax.broadcasted_iota(jnp.int32, (8, 128), 1),
       lambda x: x + np.arange(128, dtype=np.int32), ints())


def compare(got, want, tol):
  got = np.asarray(got)
  if got.shape != np.shape(want):
    return f"shape {got.shape}, NumPy's {np.shape(want)}"
  try:
    if tol:
      np.testing.assert_allclose(got, want, **tol)
    else:
      np.testing.assert_array_equal(got, want)
  except AssertionError as e:
    bad = [l for l in str(e).splitlines() if "Mismatch" in l or "Max" in l]
    return "; ".join(s.strip() for s in bad) or str(e)[:300]
  return None


def main() -> int:
  dry_run = "--dry-run" in sys.argv   # the script itself, interpret mode
  print(f"jax {jax.__version__}, devices {jax.devices()}")
  if jax.devices()[0].platform != "tpu" and not dry_run:
    print("no TPU: nothing to check")
    return 2
  failed = []
  for name, make_call, args, want, tol in CASES:
    try:
      got = jax.block_until_ready(make_call(dry_run)(*args))
    except Exception as e:  # pylint: disable=broad-except
      lines = [l for l in traceback.format_exception_only(type(e), e)
               if l.strip()]
      print(f"FAIL {name}: on the chip: {' | '.join(lines)[:600]}")
      failed.append(name)
      continue
    why = compare(got, want, tol)
    if why is None:
      why = compare(got, make_call(True)(*args), tol)
      why = why and f"interpret mode differs: {why}"
    else:
      why = f"NumPy differs: {why}"
    print(f"{'FAIL' if why else 'PASS'} {name}{': ' + why if why else ''}")
    if why:
      failed.append(name)
  print(f"passed {len(CASES) - len(failed)}/{len(CASES)}"
        + (f"; failed: {' '.join(failed)}" if failed else ""))
  return 1 if failed else 0


if __name__ == "__main__":
  sys.exit(main())
