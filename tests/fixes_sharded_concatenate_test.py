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
"""Concatenates and cumsums that jaxlib 0.4.26's SPMD partitioner splits.

On several CPU devices, jaxlib 0.4.26 miscomputes a concatenate whose result
XLA shards along the concatenated dimension: a result also replicated over
other mesh axes comes out multiplied by their size, and the padding of an
operand that does not split evenly is added in (jax-ml/jax#19106, #21403;
fixed in jaxlib 0.4.29's XLA). `jnp.cumsum`, an associative scan of
concatenates on CPU, inherits it. Every answer is checked against NumPy;
programs XLA does not partition must lower as before. The tests pass on a
newer XLA CPU plugin too (JAX_FORK_TEST_ON_PLUGIN=1), where concatenates
lower as before.
"""
from __future__ import annotations

import os
if "--xla_force_host_platform_device_count" not in os.environ.get(
    "XLA_FLAGS", ""):
  os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                             " --xla_force_host_platform_device_count=8")

from functools import partial

from absl.testing import absltest
from absl.testing import parameterized
import numpy as np

import jax
from jax import lax
import jax.numpy as jnp
from jax._src import test_util as jtu
from jax.experimental.shard_map import shard_map
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

jax.config.parse_flags_with_absl()

_MESHES = {"8": ((8,), ("x",)), "2x4": ((2, 4), ("x", "y")),
           "4x2": ((4, 2), ("x", "y")), "2x2x2": ((2, 2, 2), ("x", "y", "z"))}


def _mesh(name: str) -> Mesh:
  shape, names = _MESHES[name]
  return Mesh(np.array(jax.devices()[:8]).reshape(shape), names)


def _specs(names) -> list[P]:
  """Specs on either dimension, over one axis, the last, or all of them."""
  specs = [P(names[0]), P(None, names[-1]), P(names)]
  if len(names) > 1:
    specs += [P(names[-1]), P(names[0], names[-1])]
  return specs


# (array, start, stop) pieces, sliced inside the program: even and uneven
# operands, two and three of them.
_PIECES = [[("a", 0, 16), ("b", 0, 16)],
           [("a", 0, 1), ("a", 1, 16)],
           [("a", 0, 3), ("b", 0, 13)],
           [("a", 0, 12), ("b", 5, 16), ("a", 8, 16)]]


class ShardedConcatenateTest(jtu.JaxTestCase):

  def setUp(self):
    super().setUp()
    if jax.device_count() < 8:
      self.skipTest("needs 8 devices")

  @parameterized.named_parameters((f"_{name}", name) for name in _MESHES)
  def test_concatenate_matches_numpy(self, name):
    mesh = _mesh(name)
    rng = np.random.RandomState(0)
    arrays = {k: rng.randint(-50, 50, (16, 16)).astype(np.float32)
              for k in "ab"}
    for spec in _specs(mesh.axis_names):
      sharded = {k: jax.device_put(x, NamedSharding(mesh, spec))
                 for k, x in arrays.items()}
      for axis in (0, 1):
        def operands(xs, piece, axis=axis):
          return [lax.slice_in_dim(xs[k], start, stop, axis=axis)
                  for k, start, stop in piece]
        # Each result as XLA chooses, and constrained to the input's spec.
        @jax.jit
        def f(xs, axis=axis, spec=spec):
          outs = [jnp.concatenate(operands(xs, piece), axis)
                  for piece in _PIECES]
          return outs, [lax.with_sharding_constraint(
              out, NamedSharding(mesh, spec)) for out in outs]
        free, constrained = f(sharded)
        for piece, out, out_c in zip(_PIECES, free, constrained):
          expected = np.concatenate(operands(arrays, piece), axis)
          with self.subTest(spec=spec, axis=axis, piece=piece):
            self.assertArraysEqual(out, expected)
            self.assertArraysEqual(out_c, expected)
        with self.subTest(spec=spec, axis=axis, eager=True):
          self.assertArraysEqual(
              jnp.concatenate([sharded["a"], sharded["b"]], axis),
              np.concatenate([arrays["a"], arrays["b"]], axis))

  def test_replicated_and_sharded_operands(self):
    # jax-ml/jax#19106: twelve ones came out as fours.
    mesh = Mesh(np.array(jax.devices()[:8]).reshape(4, 2), ("data", "model"))
    one = jax.device_put(jnp.ones((2,)), NamedSharding(mesh, P(None)))
    two = jax.device_put(jnp.ones((10,)), NamedSharding(mesh, P("model")))
    self.assertArraysEqual(jnp.concatenate([one, two]), np.ones(12))
    self.assertArraysEqual(jax.jit(jnp.concatenate)([one, two]), np.ones(12))
    four = jax.device_put(jnp.ones((4,)), NamedSharding(mesh, P("data")))
    twelve = jax.device_put(jnp.ones((12,)), NamedSharding(mesh, P("data")))
    self.assertArraysEqual(jnp.concatenate([four, twelve]), np.ones(16))

  def test_dtypes_keys_and_gradient(self):
    mesh = _mesh("2x4")
    for x in [np.arange(24, dtype=np.int32).reshape(12, 2),
              np.arange(12) % 3 == 0,
              (np.arange(12) - 1j * np.arange(12)).astype(np.complex64),
              np.array([-0., 1., np.inf, -np.inf, np.nan, 2.] * 2, np.float32)]:
      xs = jax.device_put(x, NamedSharding(mesh, P("y")))
      f = jax.jit(lambda a: jnp.concatenate([a[:5], a, a[7:]]))
      with self.subTest(dtype=x.dtype):
        self.assertArraysEqual(f(xs), np.concatenate([x[:5], x, x[7:]]))
    self.assertArraysEqual(
        jnp.signbit(jnp.concatenate([xs, xs])), np.signbit(np.tile(x, 2)))
    keys = jax.random.split(jax.random.key(0), 8)
    out = jnp.concatenate([jax.device_put(keys, NamedSharding(mesh, P("x"))),
                           keys[:3]])
    data = np.asarray(jax.random.key_data(keys))
    self.assertArraysEqual(jax.random.key_data(out),
                           np.concatenate([data, data[:3]]))
    a = jax.device_put(jnp.arange(12.), NamedSharding(mesh, P("x")))
    grad = jax.grad(lambda a: (jnp.concatenate([a, a[1:]]) ** 2).sum())(a)
    x = np.arange(12.)
    self.assertArraysEqual(grad, 2 * x * (1 + (x >= 1)))

  @parameterized.named_parameters((f"_{name}", name) for name in ("8", "2x4"))
  def test_cumulative_reductions_match_numpy(self, name):
    mesh = _mesh(name)
    names = mesh.axis_names
    rng = np.random.RandomState(1)
    x = rng.randint(-9, 9, size=512).astype(np.float32)
    for spec in [P(names[0]), P(names[-1]), P(names)]:
      xs = jax.device_put(x, NamedSharding(mesh, spec))
      # 37 of 512: uneven shards.
      f = jax.jit(lambda a: (jnp.cumsum(a), lax.cumsum(a, reverse=True),
                             jnp.cumsum(a[:37]), lax.cummax(a)))
      expected = (np.cumsum(x), np.cumsum(x[::-1])[::-1], np.cumsum(x[:37]),
                  np.maximum.accumulate(x))
      for out, want in zip(f(xs), expected):
        with self.subTest(spec=spec):
          self.assertArraysEqual(out, want)
      with self.subTest(spec=spec, eager=True):
        self.assertArraysEqual(jnp.cumsum(xs), np.cumsum(x))
    x = rng.randint(-9, 9, size=(8, 64)).astype(np.int32)
    xs = jax.device_put(x, NamedSharding(mesh, P(None, names[-1])))
    self.assertArraysEqual(jnp.cumsum(xs, axis=1), np.cumsum(x, axis=1))
    self.assertArraysEqual(jnp.cumprod(xs % 2 * 2 - 1, axis=1),
                           np.cumprod(x % 2 * 2 - 1, axis=1).astype(np.int32))

  def test_shard_map_with_auto_axes(self):
    mesh = _mesh("2x4")
    x = np.arange(64, dtype=np.float32).reshape(8, 8)
    @jax.jit
    @partial(shard_map, mesh=mesh, in_specs=P("x"), out_specs=P("x"),
             check_rep=False, auto=frozenset({"y"}))
    def f(a):
      return jnp.concatenate([a[:, 3:], a[:, :3]], axis=1)
    xs = jax.device_put(x, NamedSharding(mesh, P("x", "y")))
    self.assertArraysEqual(f(xs), np.roll(x, -3, axis=1))

  def test_unpartitioned_programs_lower_as_before(self):
    def f(a):
      return jnp.concatenate([a, a[1:]]), jnp.cumsum(a)
    x = jnp.arange(16.)
    single = jax.jit(f).lower(x).as_text()
    self.assertIn("stablehlo.concatenate", single)
    self.assertNotIn("dynamic_update_slice", single)
    mesh = _mesh("8")
    body = jax.jit(shard_map(lambda a: f(a)[0], mesh=mesh, in_specs=P("x"),
                             out_specs=P("x")))
    manual = body.lower(x).as_text()
    self.assertIn("stablehlo.concatenate", manual)
    self.assertNotIn("dynamic_update_slice", manual)
    sharded = jax.device_put(x, NamedSharding(mesh, P("x")))
    text = jax.jit(f).lower(sharded).as_text()
    if os.environ.get("JAX_FORK_TEST_ON_PLUGIN") == "1":
      # A newer XLA partitions concatenates right: they lower as before.
      self.assertIn("stablehlo.concatenate", text)
    else:
      self.assertNotIn("stablehlo.concatenate", text)


if __name__ == "__main__":
  absltest.main(testLoader=jtu.JaxTestLoader())
