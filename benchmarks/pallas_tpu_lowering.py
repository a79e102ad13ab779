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
"""Pallas TPU lowering coverage: which everyday ops inside a kernel lower.

Each case is a tiny kernel (f32 or int32 (8, 128) blocks in VMEM, or int32
scalars in SMEM) exported for TPU on this host
(`export(..., lowering_platforms=("tpu",))`, upstream's newest:
`jax.export.export(..., platforms=("tpu",))`). A case counts as lowered
when the export succeeds, or when it stops at jax 0.4.26's Mosaic
compilation asking for the TPU's kind (Pallas's lowering to Mosaic is done
by then); one refused for want of a chip's kind is named apart.

Prints "lowered N/M" and names each failure with its first error line.
Run with the jax to measure importable, e.g.
  PYTHONPATH=.work/tree python benchmarks/pallas_tpu_lowering.py
  /work/venv-upstream/bin/python benchmarks/pallas_tpu_lowering.py
"""
from __future__ import annotations

import os
import sys

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu
import numpy as np

ANY = getattr(pl, "ANY", None) or pltpu.TPUMemorySpace.ANY
SMEM = pltpu.TPUMemorySpace.SMEM if hasattr(pltpu, "TPUMemorySpace") \
    else pltpu.SMEM
F32 = jax.ShapeDtypeStruct((8, 128), jnp.float32)
I32 = jax.ShapeDtypeStruct((8, 128), jnp.int32)
SCALARS = jax.ShapeDtypeStruct((2,), jnp.int32)


def vector(fn, *shapes):
  """A kernel applying `fn` to whole (8, 128) blocks."""
  out = jax.eval_shape(fn, *shapes)
  def kernel(*refs):
    refs[-1][...] = fn(*(r[...] for r in refs[:-1]))
  return pl.pallas_call(kernel, out_shape=out), shapes


def scalar(fn):
  """A kernel applying `fn` to two int32 scalars read from SMEM."""
  def kernel(x_ref, o_ref):
    o_ref[0] = fn(x_ref[0], x_ref[1])
  return pl.pallas_call(
      kernel, out_shape=jax.ShapeDtypeStruct((1,), jnp.int32),
      in_specs=[pl.BlockSpec(memory_space=SMEM)],
      out_specs=pl.BlockSpec(memory_space=SMEM)), (SCALARS,)


def dma_loop(steps: int = 4, *, interpret: object = False):
  """Double-buffered DMAs from HBM whose slot is `i % 2` in a fori_loop:
  o[i] = 2 * x[i] (tests/pallas_tpu_lowering_test.py runs it too)."""
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
  shape = jax.ShapeDtypeStruct((steps, 8, 128), jnp.float32)
  return pl.pallas_call(
      kernel, out_shape=shape, interpret=interpret,
      grid_spec=pltpu.PrefetchScalarGridSpec(
          num_scalar_prefetch=0, grid=(),
          in_specs=[pl.BlockSpec(memory_space=ANY)],
          out_specs=pl.BlockSpec(memory_space=None),
          scratch_shapes=[pltpu.VMEM((2, 8, 128), jnp.float32),
                          pltpu.SemaphoreType.DMA((2,))])), (shape,)


CASES = {
    # elementwise float math
    "add": lambda: vector(jnp.add, F32, F32),
    "mul": lambda: vector(jnp.multiply, F32, F32),
    "div": lambda: vector(jnp.divide, F32, F32),
    "max": lambda: vector(jnp.maximum, F32, F32),
    "abs": lambda: vector(jnp.abs, F32),
    "exp": lambda: vector(jnp.exp, F32),
    "log": lambda: vector(jnp.log, F32),
    "sqrt": lambda: vector(jnp.sqrt, F32),
    "tanh": lambda: vector(jnp.tanh, F32),
    "sigmoid": lambda: vector(jax.nn.sigmoid, F32),
    "erf": lambda: vector(lax.erf, F32),
    "sign_f32": lambda: vector(jnp.sign, F32),
    # integer arithmetic on vectors
    "int_add": lambda: vector(jnp.add, I32, I32),
    "int_rem": lambda: vector(lax.rem, I32, I32),
    "int_mod": lambda: vector(jnp.remainder, I32, I32),
    "int_floordiv": lambda: vector(jnp.floor_divide, I32, I32),
    "sign_i32": lambda: vector(jnp.sign, I32),
    # integer arithmetic on SMEM scalars
    "scalar_rem": lambda: scalar(lax.rem),
    "scalar_mod": lambda: scalar(jnp.remainder),
    "scalar_floordiv": lambda: scalar(jnp.floor_divide),
    "mod2_in_fori_loop": dma_loop,
    # comparisons, logic and shifts
    "lt_f32": lambda: vector(lambda x, y: jnp.where(x < y, x, y), F32, F32),
    "eq_i32": lambda: vector(lambda x, y: jnp.where(x == y, x, y), I32, I32),
    "and_i32": lambda: vector(jnp.bitwise_and, I32, I32),
    "shift_left": lambda: vector(lax.shift_left, I32, I32),
    "shift_right_logical": lambda: vector(lax.shift_right_logical, I32, I32),
    # reductions
    "sum": lambda: vector(lambda x: jnp.sum(x, 1, keepdims=True), F32),
    "max_reduce": lambda: vector(lambda x: jnp.max(x, 1, keepdims=True), F32),
    "min_reduce": lambda: vector(lambda x: jnp.min(x, 1, keepdims=True), F32),
    "argmax": lambda: vector(lambda x: jnp.argmax(x, 1, keepdims=True), F32),
    "argmin": lambda: vector(lambda x: jnp.argmin(x, 1, keepdims=True), F32),
    "cumsum": lambda: vector(lambda x: jnp.cumsum(x, 1), F32),
    # casts, iota, transposes
    "cast_f32_i32": lambda: vector(lambda x: x.astype(jnp.int32), F32),
    "cast_i32_f32": lambda: vector(lambda x: x.astype(jnp.float32), I32),
    "iota": lambda: vector(
        lambda x: x + lax.broadcasted_iota(jnp.int32, (8, 128), 1), I32),
    "transpose": lambda: vector(
        lambda x: x.T, jax.ShapeDtypeStruct((128, 128), jnp.float32)),
}


def export_for_tpu(call, *shapes):
  if hasattr(jax, "export") and hasattr(jax.export, "export"):
    return jax.export.export(jax.jit(call), platforms=("tpu",))(*shapes)
  from jax.experimental import export
  return export.export(call, lowering_platforms=("tpu",))(*shapes)


def lower(name: str) -> str | None:
  """None if case `name` lowers for TPU, else why not."""
  try:
    call, shapes = CASES[name]()
    export_for_tpu(call, *shapes)
  except Exception as e:  # pylint: disable=broad-except
    lines = (str(e).strip() or type(e).__name__).splitlines()
    if "Unrecognized TPU device kind: cpu" in lines[0]:
      return None   # 0.4.26: asked after lowering to Mosaic
    if lines[0].startswith("Exception while lowering eqn"):
      while e.__cause__ is not None:   # the rule's own error
        e = e.__cause__
      return f"{lines[1].strip()}: {type(e).__name__}: {str(e)[:120]}"
    return f"{type(e).__name__}: {lines[0][:160]}"
  return None


def main() -> None:
  failures = {name: lower(name) for name in CASES}
  failures = {k: v for k, v in failures.items() if v is not None}
  print(f"jax {jax.__version__}: lowered {len(CASES) - len(failures)}/"
        f"{len(CASES)}")
  for name, why in failures.items():
    chip = " [needs a chip's device kind]" if "device kind" in why else ""
    print(f"  FAIL {name}{chip}: {why}")


if __name__ == "__main__":
  main()
