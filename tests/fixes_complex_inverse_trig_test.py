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
"""Accuracy of complex asin, acos, asinh, acosh, atan, atanh and log1p.

One class per patch (0130, 0131, 0132); each class has tests that fail on
upstream jax 0.4.26 (others guard behaviour the patch keeps). Errors are
measured in ulps of the result's magnitude, |got - want| / (|want| eps),
against NumPy (C99's casin and friends) or, for log1p, whose NumPy version
is itself inaccurate, against mpmath values computed once (mp.dps = 50).
"""
from __future__ import annotations

from absl.testing import absltest
from absl.testing import parameterized
import numpy as np

import jax
from jax import lax
from jax.experimental import enable_x64
import jax.numpy as jnp
from jax._src import test_util as jtu

jax.config.parse_flags_with_absl()

_ULPS = 4
_DTYPES = (np.complex64, np.complex128)
# Real and imaginary parts of the grid: tiny, ordinary, near +-1 and huge.
_PARTS = (0.0, 1e-30, 1e-20, 1e-10, 1e-3, 0.5, 1 - 2.0**-20, 1.0,
          1 + 2.0**-20, 2.0, 1e3, 1e10, 1e20, 1e30)


def _grid(dtype) -> np.ndarray:
  parts = np.array([-p for p in _PARTS[::-1]] + [-0.0] + list(_PARTS))
  x, y = np.meshgrid(parts, parts)
  z = np.empty(x.shape, dtype)
  z.real = x
  z.imag = y
  return z.ravel()


def _ulps(got: np.ndarray, want: np.ndarray, dtype) -> np.ndarray:
  eps = np.finfo(dtype).eps
  tiny = np.finfo(dtype).tiny
  got = got.astype(np.complex128)
  want = want.astype(np.complex128)
  with np.errstate(invalid="ignore"):
    return np.abs(got - want) / (np.maximum(np.abs(want), tiny) * eps)


class _AccuracyTestCase(jtu.JaxTestCase):

  def check_against_numpy(self, name: str, dtype) -> None:
    z = _grid(dtype)
    with enable_x64():
      got = np.asarray(jax.jit(getattr(jnp, name))(z))
    with np.errstate(all="ignore"):
      want = getattr(np, name)(z.astype(np.complex128)).astype(dtype)
    self.assertEqual(got.dtype, dtype)
    finite = np.isfinite(want)
    err = np.where(finite, _ulps(got, want, dtype), 0.0)
    worst = int(np.argmax(err))
    self.assertLessEqual(
        err[worst], _ULPS,
        f"{name}({z[worst]}) = {got[worst]}, NumPy: {want[worst]}")
    # Where NumPy's answer is infinite (atanh(+-1)) so is ours.
    np.testing.assert_array_equal(got[~finite], want[~finite])
    # Zeros carry NumPy's signs (branch cuts, signed zero inputs).
    for part in (np.real, np.imag):
      zero = part(want) == 0
      np.testing.assert_array_equal(
          np.signbit(part(got)[zero]), np.signbit(part(want)[zero]),
          err_msg=f"{name}: signs of zeros at {z[zero]}")

  def check_grads_at_ordinary_points(self, name: str) -> None:
    # Both signs of re(z): acosh's JVP rule must match its branch.
    z = np.array([0.3 + 0.4j, -0.7 + 0.2j, 1.5 - 0.5j, -2.0 - 3.0j])
    with enable_x64():
      jtu.check_grads(jax.vmap(getattr(jnp, name)), (z,), order=1,
                      modes=["fwd", "rev"])

  def check_real_lowering_kept(self, op: str, mlir_op: str) -> None:
    f = jax.jit(getattr(lax, op))
    self.assertIn(f"{mlir_op} %arg0", f.lower(np.float32(0.5)).as_text())
    self.assertNotIn(f"{mlir_op} %arg0", f.lower(np.complex64(0.5)).as_text())


def _complex(re, im, dtype) -> np.ndarray:
  z = np.empty(len(re), dtype)
  z.real = re
  z.imag = im
  return z


class ComplexAsinAcosTest(_AccuracyTestCase):
  """0130: complex asin, acos, asinh and acosh (Hull, Fairgrieve & Tang)."""

  @parameterized.product(name=["arcsin", "arccos", "arcsinh", "arccosh"],
                         dtype=_DTYPES)
  def test_grid(self, name, dtype):
    self.check_against_numpy(name, dtype)

  def test_sweep_reproduction(self):
    z = np.array([1e20 + 1e20j, 1e-20 + 1e-20j, -1e10 + 1j, 0.5 + 1e-9j,
                  3e38 + 0j, 1e-30 - 2j], np.complex64)
    for name in ["arccos", "arcsin"]:
      got = np.asarray(getattr(jnp, name)(z))
      want = getattr(np, name)(z.astype(np.complex128))
      self.assertLessEqual(np.max(_ulps(got, want, np.complex64)), _ULPS,
                           f"{name}({z}) = {got}, NumPy: {want}")

  def test_branch_cuts(self):
    # On the cuts, with either sign of zero.
    on_real_axis = _complex([2, 2, -2, -2, 1e30, -1e30, 0.5, -0.5],
                            [0.0, -0.0, 0.0, -0.0, 0.0, -0.0, 0.0, -0.0],
                            np.complex64)
    on_imag_axis = _complex([0.0, -0.0, 0.0, -0.0, 0.0, -0.0],
                            [2, 2, -2, -2, 1e30, -1e30], np.complex64)
    for name, z in [("arcsin", on_real_axis), ("arccos", on_real_axis),
                    ("arccosh", on_real_axis), ("arcsinh", on_imag_axis)]:
      got = np.asarray(getattr(jnp, name)(z))
      want = getattr(np, name)(z.astype(np.complex128)).astype(np.complex64)
      for part in (np.real, np.imag):
        np.testing.assert_array_equal(np.signbit(part(got)),
                                      np.signbit(part(want)),
                                      err_msg=f"{name}({z}) = {got}")
      self.assertLessEqual(np.max(_ulps(got, want, np.complex64)), _ULPS)

  @parameterized.parameters("arcsin", "arccos", "arcsinh", "arccosh")
  def test_grads(self, name):
    self.check_grads_at_ordinary_points(name)

  @parameterized.parameters("asin", "asinh", "acosh")
  def test_real_lowering_kept(self, op):
    self.check_real_lowering_kept(op, f"chlo.{op}")


class ComplexAtanAtanhTest(_AccuracyTestCase):
  """0131: complex atan and atanh."""

  @parameterized.product(name=["arctan", "arctanh"], dtype=_DTYPES)
  def test_grid(self, name, dtype):
    self.check_against_numpy(name, dtype)

  def test_near_one_and_huge(self):
    z = np.array([1 + 1e-30j, -1 - 1e-20j, 1e20 + 1e20j, -1e30 + 1j,
                  -0.99999988 - 0.001j], np.complex64)
    got = np.asarray(jnp.arctanh(z))
    want = np.arctanh(z.astype(np.complex128))
    self.assertLessEqual(np.max(_ulps(got, want, np.complex64)), _ULPS,
                         f"arctanh({z}) = {got}, NumPy: {want}")

  @parameterized.parameters("arctan", "arctanh")
  def test_grads(self, name):
    self.check_grads_at_ordinary_points(name)

  @parameterized.parameters("atan", "atanh")
  def test_real_lowering_kept(self, op):
    self.check_real_lowering_kept(op, f"chlo.{op}")


_LOG1P = [  # (x, y, mpmath.log1p(x + iy)), mp.dps = 50
    (2.0**66, 2.0**66, 4.6094287507236363e+1, 7.8539816339744831e-1),
    (-2.0**100, 1.0, 6.9314718055994531e+1, 3.1415926535897932),
    (2.0**-100, 2.0**-100, 7.8886090522101181e-31, 7.8886090522101181e-31),
    (-2.0**-60, 0.0, -8.6736173798840355e-19, 0.0),
    (-2.0**-34, 2.0**-17, -2.9103830455886671e-11, 7.6293945315460595e-6),
    (-1 + 2.0**-10, 2.0**-10, -6.5848982153194804, 7.8539816339744831e-1),
    (-1.0, 2.0**-100, -6.9314718055994531e+1, 1.5707963267948966),
    (-0.5, 0.5, -3.4657359027997265e-1, 7.8539816339744831e-1),
    (-0.25, 0.25, -2.3500181462286778e-1, 3.2175055439664219e-1),
    (0.5, -0.25, 4.191645952022216e-1, -1.6514867741462684e-1),
    (2.0, 3.0, 1.4451858789480823, 7.8539816339744831e-1),
    (2.0**33, -2.0**-33, 2.2873856958594611e+1, -1.3552527154491084e-20),
    (-2.0, 2.0**-66, 9.1835496157991212e-41, 3.1415926535897932),
    (2.0**127, 2.0**127, 8.8376265521393027e+1, 7.8539816339744831e-1),
]


class ComplexLog1pTest(_AccuracyTestCase):
  """0132: complex log1p."""

  @parameterized.parameters(*_DTYPES)
  def test_against_mpmath(self, dtype):
    x, y, re, im = map(np.array, zip(*_LOG1P))
    z = (x + 1j * y).astype(dtype)
    with enable_x64():
      got = np.asarray(jax.jit(jnp.log1p)(z))
    want = (re + 1j * im).astype(dtype)
    err = _ulps(got, want, dtype)
    worst = int(np.argmax(err))
    self.assertLessEqual(
        err[worst], _ULPS,
        f"log1p({z[worst]}) = {got[worst]}, mpmath: {want[worst]}")

  def test_grads(self):
    self.check_grads_at_ordinary_points("log1p")

  def test_real_lowering_kept(self):
    self.check_real_lowering_kept("log1p", "stablehlo.log_plus_one")


if __name__ == "__main__":
  absltest.main(testLoader=jtu.JaxTestLoader())
