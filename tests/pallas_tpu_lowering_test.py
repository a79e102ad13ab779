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
"""Pallas TPU lowering rules for erf, sign, integer rem and floor_divide,
boolean and float comparisons (with scalars too), argmax/argmin, reductions
(to a scalar, over several axes, of int32, and/or), scalars read from VMEM
blocks, cumsum, cos, tan, floor, ceil, arithmetic shifts, bitcasts: each
kernel lowers for TPU on this CPU host, to the Mosaic ops named, and runs in
interpret mode with NumPy's answers. (On a TPU: tests/tpu_test.py runs them
on the chip, registered in tests/pallas_kernels.py.)"""
from __future__ import annotations

import math
import operator
from unittest import mock

from absl.testing import absltest
from absl.testing import parameterized
import numpy as np

import jax
import jax.numpy as jnp
from jax import lax
from jax._src import test_util as jtu
from jax._src import tpu_custom_call
from jax.experimental import export
from jax.experimental import mosaic
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu
import pallas_kernels
import pallas_tpu_lowering  # benchmarks/: its kernels are this file's too

register = pallas_kernels.registrar(__name__)
SMEM = pltpu.TPUMemorySpace.SMEM
RNG = np.random.default_rng(0)


def floats(shape=(8, 128)):
  x = RNG.normal(size=shape).astype(np.float32) * 3
  x.flat[:6] = [0.0, -0.0, np.nan, np.inf, -np.inf, 1.0]
  return x


def ints(shape=(8, 128), nonzero=False):
  x = RNG.integers(-50, 50, size=shape).astype(np.int32)
  return np.where(x == 0, 7, x).astype(np.int32) if nonzero else x


def normal():
  return RNG.normal(size=(8, 128)).astype(np.float32)


def small(shape=(8, 128), dtype=np.float32):
  """Small integers (in any dtype): sums and products are exact."""
  return RNG.integers(-4, 5, size=shape).astype(dtype)


def vector_call(fn, *args, interpret):
  """pallas_call of `fn` on whole blocks of `args` (VMEM)."""
  out = jax.eval_shape(fn, *args)
  def kernel(*refs):
    refs[-1][...] = fn(*(r[...] for r in refs[:-1]))
  return pl.pallas_call(kernel, out_shape=out, interpret=interpret)


def block_call(body, x, *, interpret):
  """pallas_call of the kernel `body(x_ref, o_ref)` on one block like x."""
  return pl.pallas_call(body, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                        interpret=interpret)


PAIRS = np.array([7, 2, -7, 2, 7, -2, -7, -2, 6, 3, -6, 3, 0, 5, 1, -9],
                 np.int32)


def scalar_call(fn, pairs, *, interpret):
  """pallas_call of `fn` on int32 scalar pairs read from SMEM, one result
  per pair written to SMEM."""
  n = len(pairs) // 2
  def kernel(x_ref, o_ref):
    for i in range(n):
      o_ref[i] = fn(x_ref[2 * i], x_ref[2 * i + 1])
  return pl.pallas_call(
      kernel, out_shape=jax.ShapeDtypeStruct((n,), jnp.int32),
      in_specs=[pl.BlockSpec(memory_space=SMEM)],
      out_specs=pl.BlockSpec(memory_space=SMEM), interpret=interpret)


def np_cumsum(x, axis, reverse):
  if reverse:
    return np.flip(np.cumsum(np.flip(x, axis), axis, x.dtype), axis)
  return np.cumsum(x, axis, x.dtype)


def np_scalar_compares(x):
  one = np.asarray(True if x.dtype == np.bool_ else 1, x.dtype)
  out = np.zeros(x.shape, np.int32)
  for k, op in enumerate((operator.eq, operator.ne, operator.lt, operator.le,
                          operator.gt, operator.ge)):
    out = np.where(op(x, one), k + 1, out).astype(np.int32)
  return out


def np_scalar_arithmetic(x):
  if x.dtype == np.bool_:
    return ~x
  return np.minimum(np.maximum(x * 3 + 2 - 1, 1), 9).astype(x.dtype)


def np_all_any(x):
  b = x > 0
  return (np.where(b.all(1, keepdims=True), 1, 0) +
          np.where(b.any(0, keepdims=True), 2, 0) + np.where(b.all(), 4, 0)
          + np.where(b.any(), 8, 0)).astype(np.int32)


bench = pallas_tpu_lowering
bools = lambda x: x > 0
# (name, function, NumPy's, inputs, Mosaic ops its lowering holds)
VECTOR_CASES = [
    ("erf", lax.erf, np.vectorize(math.erf, otypes=[np.float32]),
     lambda: (floats(),), ["math.erf"]),
    ("sign_f32", jnp.sign, np.sign, lambda: (floats(),), ["arith.select"]),
    ("sign_i32", jnp.sign, np.sign, lambda: (ints(),), ["arith.select"]),
    ("rem_i32", lax.rem, np.fmod, lambda: (ints(), ints(nonzero=True)),
     ["arith.remsi"]),
    ("mod_i32", jnp.remainder, np.remainder,
     lambda: (ints(), ints(nonzero=True)), ["arith.remsi", "arith.xori"]),
    ("floordiv_i32", jnp.floor_divide, np.floor_divide,
     lambda: (ints(), ints(nonzero=True)), ["arith.divsi", "arith.remsi"]),
    ("lt_f32", lambda x, y: jnp.where(x < y, 1, 0),
     lambda x, y: np.where(x < y, 1, 0), lambda: (floats(), floats()),
     ["arith.cmpf olt"]),
    ("le_f32", lambda x, y: jnp.where(x <= y, 1, 0),
     lambda x, y: np.where(x <= y, 1, 0), lambda: (floats(), floats()),
     ["arith.cmpf ole"]),
    ("ge_f32", lambda x, y: jnp.where(x >= y, 1, 0),
     lambda x, y: np.where(x >= y, 1, 0), lambda: (floats(), floats()),
     ["arith.cmpf oge"]),
    ("isnan", lambda x: jnp.where(jnp.isnan(x), 1, 0),
     lambda x: np.where(np.isnan(x), 1, 0), lambda: (floats(),),
     ["arith.cmpf oeq", "arith.xori"]),  # ne: not oeq (Mosaic: no une)
    *[(f"{name}_bool", lambda x, y, op=op: jnp.where(op(x > 0, y > 0), 1, 0),
       lambda x, y, op=op: np.where(op(x > 0, y > 0), 1, 0),
       lambda: (ints(), ints()), ["arith.xori"])
      for name, op in [("eq", operator.eq), ("ne", operator.ne),
                       ("lt", operator.lt), ("le", operator.le),
                       ("gt", operator.gt), ("ge", operator.ge)]],
    *[(f"{name}_axis{axis}",
       lambda x, f=f, axis=axis: f(x, axis, keepdims=True),
       lambda x, f=f, axis=axis: getattr(np, f.__name__)(x, axis,
                                                         keepdims=True),
       lambda: (floats(),), ["vector.multi_reduction <minimumf>"])
      for name, f in [("argmax", jnp.argmax), ("argmin", jnp.argmin),
                      ("min", jnp.min)] for axis in (0, 1)],
    *[(f"cumsum_{dtype.__name__}_axis{axis}{'_reverse' * reverse}",
       lambda x, axis=axis, reverse=reverse: lax.cumsum(x, axis, reverse),
       lambda x, axis=axis, reverse=reverse: np_cumsum(x, axis, reverse),
       lambda dtype=dtype: (ints() if dtype is np.int32 else
                            RNG.normal(size=(8, 128)).astype(np.float32),),
       ["tpu.rotate"])
      for dtype in (np.int32, np.float32) for axis in (0, 1)
      for reverse in (False, True)],
    # Integer % and // by Python ints, in jnp's forms (issue 54): their sign
    # fix-ups compare a boolean vector with a boolean scalar.
    ("mod_div_3", bench.mod_div_3, lambda x: x % 3 + x // 3 * 8,
     lambda: (ints(),), ["arith.remsi", "arith.divsi", "arith.xori"]),
    *[(f"{name}_{k}".replace("-", "neg"), lambda x, f=f, k=k: f(x, k),
       lambda x, f=f, k=k: f(x, np.int32(k)), lambda: (ints(),),
       ["arith.divsi" if "div" in name else "arith.remsi"])
      for name, f in [("mod", operator.mod), ("floordiv", operator.floordiv),
                      ("remainder", jnp.remainder),
                      ("floor_divide", jnp.floor_divide)]
      for k in (3, -3)],
    # Reductions to a scalar, over several axes, of int32, and/or.
    *[(f"{f.__name__}_to_scalar_{dtype.__name__}",
       bench.reduce_to_scalar(f),
       lambda x, f=f: np.full(x.shape, getattr(np, f.__name__)(x), x.dtype),
       lambda dtype=dtype: (small(dtype=dtype),),
       ["vector.multi_reduction", "vector.extract"])
      for f in (jnp.sum, jnp.max, jnp.min) for dtype in (np.float32, np.int32)],
    ("sum_keepdims", lambda x: x - jnp.sum(x, keepdims=True),
     lambda x: x - np.sum(x, keepdims=True), lambda: (small(),),
     ["vector.multi_reduction <add>"]),
    ("sum_axis0", lambda x: x - jnp.sum(x, 0)[None],
     lambda x: x - np.sum(x, 0),
     lambda: (small(),), ["vector.multi_reduction <add>"]),
    ("sum_axes12_3d", lambda x: x - jnp.sum(x, (1, 2), keepdims=True),
     lambda x: x - np.sum(x, (1, 2), keepdims=True),
     lambda: (small((2, 8, 128)),), ["vector.multi_reduction <add>"]),
    ("max_axes01_3d", lambda x: x - jnp.max(x, (0, 1))[None, None],
     lambda x: x - np.max(x, (0, 1)), lambda: (small((2, 8, 128)),),
     ["vector.multi_reduction <maximumf>"]),
    *[(f"{f.__name__}_axis1_{dtype.__name__}",
       lambda x, f=f: f(x, 1, keepdims=True),
       lambda x, f=f: getattr(np, f.__name__)(x, 1, keepdims=True),
       lambda dtype=dtype: (small((16, 128), dtype),),
       [f"vector.multi_reduction <{kind}>"])
      for f, kinds in [(jnp.sum, ("add", "add")),
                       (jnp.max, ("maxsi", "maximumf")),
                       (jnp.min, ("minsi", "minimumf"))]
      for dtype, kind in zip((np.int32, jnp.bfloat16), kinds)],
    ("all_any", bench.all_any, np_all_any, lambda: (small(),),
     ["vector.multi_reduction <minimumf>",
      "vector.multi_reduction <maximumf>"]),
    # Vector op Python scalar, each dtype; booleans from x > 0.
    *[(f"{name}_{np.dtype(dtype).name}", fn, np_fn,
       lambda dtype=dtype: (small((8 * 4 // np.dtype(dtype).itemsize, 128),
                                  dtype),), ops)
      for dtype in (np.float32, np.int32, jnp.bfloat16, np.int16, np.int8)
      for name, fn, np_fn, ops in [
          ("scalar_arithmetic", bench.scalar_arithmetic, np_scalar_arithmetic,
           ["vector.broadcast"]),
          ("scalar_compares", bench.scalar_compares, np_scalar_compares,
           ["vector.broadcast"])]
      if (name, dtype) != ("scalar_arithmetic", np.int8)],  # tpu: refused
    ("scalar_arithmetic_bool", bench.bool_from(bench.scalar_arithmetic),
     lambda x: np_scalar_arithmetic(x > 0).astype(np.int32),
     lambda: (small(dtype=np.int32),), ["arith.xori"]),
    ("scalar_compares_bool", bench.bool_from(bench.scalar_compares),
     lambda x: np_scalar_compares(x > 0), lambda: (small(dtype=np.int32),),
     ["arith.xori"]),
    # Math that jax 0.10.2 lowers.
    ("cos", jnp.cos, np.cos, lambda: (normal(),), ["math.cos"]),
    ("tan", jnp.tan, np.tan, lambda: (normal(),), ["math.tan"]),
    ("floor", jnp.floor, np.floor, lambda: (floats(),), ["math.floor"]),
    ("ceil", jnp.ceil, np.ceil, lambda: (floats(),), ["math.ceil"]),
    ("isfinite", lambda x: jnp.where(jnp.isfinite(x), x, 0),
     lambda x: np.where(np.isfinite(x), x, 0), lambda: (floats(),),
     ["arith.subf", "arith.cmpf oeq"]),
    ("stop_gradient", lambda x: lax.stop_gradient(x) * 2, lambda x: x * 2,
     lambda: (floats(),), ["arith.mulf"]),
    ("bitcast_convert_type", lambda x: lax.bitcast_convert_type(x, jnp.int32),
     lambda x: x.view(np.int32), lambda: (floats(),), ["tpu.bitcast"]),
    ("shift_right_arithmetic", lax.shift_right_arithmetic, np.right_shift,
     lambda: (ints(), np.abs(ints()) % 31), ["arith.shrsi"]),
    # Controls: these lowered before.
    ("add", jnp.add, np.add, lambda: (floats(), floats()), ["arith.addf"]),
    ("mul_i32", jnp.multiply, np.multiply, lambda: (ints(), ints()),
     ["arith.muli"]),
    ("exp", jnp.exp, np.exp, lambda: (floats(),), ["math.exp"]),
    ("max", jnp.maximum, np.maximum, lambda: (floats(), floats()),
     ["arith.maximumf"]),
    ("eq_i32", lambda x, y: jnp.where(x == y, x, y),
     lambda x, y: np.where(x == y, x, y), lambda: (ints(), ints() // 10),
     ["arith.cmpi eq"]),
    ("shift_left", lax.shift_left, np.left_shift,
     lambda: (ints(), np.abs(ints()) % 31), ["arith.shli"]),
    ("shift_right_logical", lax.shift_right_logical,
     lambda x, y: (x.view(np.uint32) >> y.view(np.uint32)).view(np.int32),
     lambda: (ints(), np.abs(ints()) % 31), ["arith.shrui"]),
    ("cast", lambda x: x.astype(jnp.int32), lambda x: x.astype(np.int32),
     lambda: (RNG.normal(size=(8, 128)).astype(np.float32) * 100,),
     ["arith.fptosi"]),
    ("iota", lambda x: x + lax.broadcasted_iota(jnp.int32, (8, 128), 1),
     lambda x: x + np.arange(128, dtype=np.int32), lambda: (ints(),),
     ["tpu.iota"]),
    ("transpose", lambda x: x.T, lambda x: x.T,
     lambda: (RNG.normal(size=(128, 128)).astype(np.float32),),
     ["vector.transpose"]),
    ("sum", lambda x: jnp.sum(x, 1, keepdims=True),
     lambda x: np.sum(x, 1, keepdims=True),
     lambda: (RNG.normal(size=(8, 128)).astype(np.float32),),
     ["vector.multi_reduction <add>"]),
]

def _with_5(x):
  x[0, 1] = 5
  return x


# Scalars read from a VMEM block (issue 54: as a loop bound, x[0, 1] times).
BLOCK_CASES = [
    ("loop_bound", bench.vmem_scalar_loop_bound, lambda x: x + 5,
     lambda: (_with_5(small()),), ["vector.extract", "scf.for"]),
    ("compare", bench.vmem_scalar_compare,
     lambda x: np.where(x > x[0, 1], 1.0, 0.0).astype(x.dtype),
     lambda: (small(),), ["vector.extract", "arith.cmpf ogt"]),
    *[(f"arithmetic_{np.dtype(dtype).name}", bench.vmem_scalar_arithmetic,
       lambda x: x * x[0, 1] + (x[0, 1] - x[1, 2]) * 2, lambda dtype=dtype: (
           small((8 * 4 // np.dtype(dtype).itemsize, 128), dtype),),
       ["vector.extract"])
      for dtype in (np.float32, np.int32, jnp.bfloat16, np.int16, np.int8)],
    ("when", bench.vmem_scalar_when,
     lambda x: -x if x[0, 1] > x[1, 0] else x, lambda: (small(),),
     ["vector.extract", "scf.if"]),
]

SCALAR_CASES = [
    ("rem", lax.rem, np.fmod, ["arith.remsi"]),
    ("mod", jnp.remainder, np.remainder, ["arith.remsi", "arith.xori"]),
    ("floordiv", jnp.floor_divide, np.floor_divide, ["arith.divsi"]),
    ("mod_floordiv_3", lambda x, y: x % 3 + y // 3,
     lambda x, y: x % 3 + y // 3, ["arith.remsi", "arith.divsi"]),
    ("sign", lambda x, y: jnp.sign(x) * y, lambda x, y: np.sign(x) * y,
     ["arith.select"]),
]


_EXACT = (jnp.sign, jnp.floor, jnp.ceil)


# What a TPU v5e refuses of these (InterpretParams() too): int16 max and min,
# jnp.where by a compare of int16 or int8 vectors, a scalar read from VMEM
# narrower than 32 bits.
REFUSED = {
    "vector_scalar_arithmetic_int16": pallas_kernels.INT_VECTORS,
    "vector_scalar_compares_int16": pallas_kernels.INT_VECTORS,
    "vector_scalar_compares_int8": pallas_kernels.INT_VECTORS,
    **{f"vmem_scalar_arithmetic_{t}": pallas_kernels.SCALAR_READ
       for t in ("bfloat16", "int16", "int8")}}


def _vector_kernel(name, fn, np_fn, args):
  args = args()
  want = np_fn(*args)
  tol = None
  if np.asarray(want).dtype == np.float32 and fn not in _EXACT:
    # Float math: XLA:CPU's and the chip's erf, exp and sums are not NumPy's
    # to the last bit (nor the order of a float cumsum's additions).
    tol = dict(rtol=1e-5, atol=1e-5)
  return register(
      f"vector_{name}",
      lambda interpret: vector_call(fn, *args, interpret=interpret), args,
      want, tol=tol, refused=REFUSED.get(f"vector_{name}"))
VECTOR_KERNELS = {name: _vector_kernel(name, fn, np_fn, args)
                  for name, fn, np_fn, args, _ in VECTOR_CASES}
BLOCK_KERNELS = {
    name: register(f"vmem_scalar_{name}", lambda interpret, body=body, x=x:
                   block_call(body, x, interpret=interpret), (x,), np_fn(x),
                   refused=REFUSED.get(f"vmem_scalar_{name}"),
                   rule="scalar reads from VMEM" if name.startswith(
                       "arithmetic") else None)
    for name, body, np_fn, args, _ in BLOCK_CASES
    for x in args()}
SCALAR_KERNELS = {
    name: register(f"smem_scalars_{name}", lambda interpret, fn=fn: scalar_call(
        fn, PAIRS, interpret=interpret), (PAIRS,),
                   np_fn(PAIRS[0::2], PAIRS[1::2]))
    for name, fn, np_fn, _ in SCALAR_CASES}
_x = RNG.normal(size=(5, 8, 128)).astype(np.float32)
MOD_2_DMA_LOOP = register(
    "mod_2_in_fori_loop_picks_dma_slot",
    lambda interpret: pallas_tpu_lowering.dma_loop(5, interpret=interpret)[0],
    (_x,), 2 * _x)


class LoweringTest(jtu.JaxTestCase):

  def mosaic_module(self, call, *args) -> str:
    """The Mosaic module of `call` exported for TPU on this host."""
    modules = []
    as_tpu_kernel = mosaic.as_tpu_kernel
    def capture(module, *args, **kwargs):
      modules.append(module.operation.get_asm())
      return as_tpu_kernel(module, *args, **kwargs)
    shapes = [jax.ShapeDtypeStruct(np.shape(a), np.asarray(a).dtype)
              for a in args]
    with mock.patch.object(mosaic, "as_tpu_kernel", capture):
      exported = export.export(call, lowering_platforms=("tpu",))(*shapes)
    self.assertIn("tpu_custom_call", exported.mlir_module())
    self.assertLen(modules, 1)
    return modules[0]

  def assert_refused(self, call, *args, words="int32"):
    with self.assertRaises(Exception) as e:
      self.mosaic_module(call, *args)
    causes, cause = [], e.exception
    while cause is not None:
      causes.append(cause)
      cause = cause.__cause__
    self.assertIsInstance(causes[-1], NotImplementedError)
    self.assertEqual(str(causes[-1]), words)

  def check(self, kernel, ops):
    module = self.mosaic_module(kernel.make(False), *kernel.args)
    for op in ops:
      self.assertIn(op, module)
    if kernel.refused:   # a TPU's Mosaic refuses it: InterpretParams() too
      with self.assertRaisesRegex(Exception, kernel.refused):
        kernel.run(pltpu.InterpretParams())
    kernel.check(pltpu.InterpretParams(checks=False) if kernel.refused else
                 True)

  @parameterized.named_parameters(
      (name, name, ops) for name, _, _, _, ops in VECTOR_CASES)
  def test_vector(self, name, ops):
    self.check(VECTOR_KERNELS[name], ops)

  @parameterized.named_parameters(
      (name, name, ops) for name, _, _, _, ops in BLOCK_CASES)
  def test_vmem_scalars(self, name, ops):
    self.check(BLOCK_KERNELS[name], ops)

  @parameterized.named_parameters(
      (name, name, ops) for name, _, _, ops in SCALAR_CASES)
  def test_smem_scalars(self, name, ops):
    self.check(SCALAR_KERNELS[name], ops)

  def test_mod_2_in_fori_loop_picks_dma_slot(self):
    # `i % 2` of the loop index on the scalar unit: rem, then its sign fix-up
    # compares booleans (`ne`), which once stopped the lowering.
    self.check(MOD_2_DMA_LOOP, ["arith.remsi", "arith.xori", "scf.for",
                                "tpu.enqueue_dma"])

  def test_argmax_of_integers_is_refused(self):
    x = ints()
    self.assert_refused(
        vector_call(lambda x: jnp.argmax(x, 1), x, interpret=False), x)
    self.mosaic_module(    # the twin in floats lowers
        vector_call(lambda x: jnp.argmax(x, 1), x.astype(np.float32),
                    interpret=False), x.astype(np.float32))

  def test_min_of_int16_is_refused(self):
    # As jax 0.10.2: reductions of floats and int32 only.
    x = small((16, 128), np.int16)
    self.assert_refused(
        vector_call(lambda x: jnp.min(x, 1), x, interpret=False), x,
        words="Reductions over int16")
    self.mosaic_module(    # the twin in int32 lowers
        vector_call(lambda x: jnp.min(x, 1), x.astype(np.int32),
                    interpret=False), x.astype(np.int32))

  def test_bf16_max_to_a_scalar_is_refused(self):
    # As jax 0.10.2: only 32-bit scalars.
    x = small((16, 128), jnp.bfloat16)
    self.assert_refused(
        vector_call(bench.reduce_to_scalar(jnp.max), x, interpret=False), x,
        words="Reductions of bfloat16 to a scalar: only 32-bit types can be "
        "scalars; cast the operand first.")
    self.mosaic_module(    # the twin, cast first, lowers
        vector_call(bench.reduce_to_scalar(
            lambda x: jnp.max(x.astype(jnp.float32))), x, interpret=False), x)

  def test_python_pipeline_needs_a_tpu(self):
    # Exporting for TPU on this host needs no device kind, but running
    # Mosaic's own passes here (jax_mosaic_use_python_pipeline) does.
    x = floats()
    call = vector_call(jnp.exp, x, interpret=False)
    # jax 0.4.30 asks for the TPU backend there itself (patch 0027's check
    # is upstream's own from 0.4.30 on, in upstream's words).
    error = ((RuntimeError, "Unknown backend tpu")
             if jax.__version_info__ >= (0, 4, 30) else
             (ValueError, "needs a TPU device kind, not 'cpu'"))
    with tpu_custom_call._MOSAIC_USE_PYTHON_PIPELINE(True):
      with self.assertRaisesRegex(*error):
        self.mosaic_module(call, x)
    self.assertIn("math.exp", self.mosaic_module(call, x))


if __name__ == "__main__":
  absltest.main(testLoader=jtu.JaxTestLoader())
