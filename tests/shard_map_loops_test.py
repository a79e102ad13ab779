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
"""Loops in shard_map whose trip count depends on the data or on axis_index.

Before patch 0024 each of these failed on jaxlib 0.4.26: to compile (XLA's
verifier: "Inconsistent while sharding among instructions"; its partitioner:
"PartitionId instruction is not supported for SPMD partitioning") or, with
check_rep=True, to trace ("No replication rule for while", "... for cond").
Every result is compared with the same computation written per shard with
NumPy: shard k of the data, at mesh position k (row-major over the mesh
axes). Data are small integers in float32, so loops of additions and
doublings are exact. A partially manual shard_map (auto=), which jaxlib
0.4.26 cannot compile with a loop in it, raises at trace time.
"""
from __future__ import annotations

import os
if "--xla_force_host_platform_device_count" not in os.environ.get(
    "XLA_FLAGS", ""):
  os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                             " --xla_force_host_platform_device_count=8")

import itertools as it
import math

from absl.testing import absltest
from absl.testing import parameterized
import numpy as np

import jax
import jax.numpy as jnp
from jax import lax
from jax._src import test_util as jtu
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu
from jax.experimental.shard_map import shard_map
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

jax.config.parse_flags_with_absl()

_MESHES = {"1d": ((4,), ("x",)), "2d": ((4, 2), ("x", "y"))}
_ROWS = 4  # rows of each shard


def _mesh(name: str) -> Mesh:
  shape, names = _MESHES[name]
  return Mesh(np.array(jax.devices()[:math.prod(shape)]).reshape(shape), names)


def _pos(mesh: Mesh):
  """This device's position in the mesh, row-major: the index of its shard."""
  pos = 0
  for name, size in mesh.shape.items():
    pos = pos * size + lax.axis_index(name)
  return pos


def _ints(seed: int, *shape: int) -> np.ndarray:
  return np.random.RandomState(seed).randint(0, 4, shape).astype(np.float32)


def _n(x):
  """A trip count from the shard's data, 0 to 3."""
  return x[0, 0].astype(jnp.int32)


def _np_fori(lo: int, hi: int, body, c):
  for i in range(lo, hi):
    c = body(i, c)
  return c


def _np_while(cond, body, c):
  while cond(c):
    c = body(c)
  return c


# name -> (body of the shard_map given its block x and its mesh position p,
# the same on a NumPy block and an int position). Each failed to compile on
# jaxlib 0.4.26: most loop counters never meet the data (XLA then made them
# replicated in an otherwise manual loop state), or the position reaches
# only a loop or a cond's branches (XLA left its partition-id unsharded).
_BODIES = {
    "fori_data": (
        lambda x, p: lax.fori_loop(0, _n(x) + 1, lambda i, c: c * 2. - 1., x),
        lambda x, p: _np_fori(0, int(x[0, 0]) + 1, lambda i, c: c * 2 - 1, x)),
    "fori_axis_index": (  # no trip on the first device
        lambda x, p: lax.fori_loop(0, p, lambda i, c: c + 1., x),
        lambda x, p: _np_fori(0, p, lambda i, c: c + 1, x)),
    "fori_both": (
        lambda x, p: lax.fori_loop(0, p + _n(x), lambda i, c: c - 1., x),
        lambda x, p: _np_fori(0, p + int(x[0, 0]), lambda i, c: c - 1, x)),
    "while_early_exit": (  # at most 3 + p steps, fewer once the sum is 100
        lambda x, p: lax.while_loop(
            lambda s: (s[0] < 3 + p) & (s[1].sum() < 100.),
            lambda s: (s[0] + 1, s[1] + 1.), (0, x))[1],
        lambda x, p: _np_while(lambda s: s[0] < 3 + p and s[1].sum() < 100,
                               lambda s: (s[0] + 1, s[1] + 1), (0, x))[1]),
    "nested": (
        lambda x, p: lax.fori_loop(0, p + 1, lambda i, c: lax.fori_loop(
            0, i + _n(x), lambda j, d: d + j, c), x),
        lambda x, p: _np_fori(0, p + 1, lambda i, c: _np_fori(
            0, i + int(x[0, 0]), lambda j, d: d + j, c), x)),
    "cond_on_axis_index_in_loop": (
        lambda x, p: lax.fori_loop(0, _n(x) + 1, lambda i, c: lax.cond(
            p % 2 == 0, lambda: c * 2., lambda: c + 1.), x),
        lambda x, p: _np_fori(0, int(x[0, 0]) + 1,
                              lambda i, c: c * 2 if p % 2 == 0 else c + 1, x)),
    "axis_index_into_a_branch": (  # the position is the cond's operand
        lambda x, p: lax.fori_loop(0, _n(x) + 1, lambda i, c: lax.cond(
            i % 2 == 0, lambda: c + p, lambda: c * 2.), x),
        lambda x, p: _np_fori(0, int(x[0, 0]) + 1,
                              lambda i, c: c + p if i % 2 == 0 else c * 2, x)),
    "switch_bound": (
        lambda x, p: lax.fori_loop(
            0, lax.switch(p % 3, [lambda: 1, lambda: 3, lambda: 0]),
            lambda i, c: c - i, x),
        lambda x, p: _np_fori(0, [1, 3, 0][p % 3], lambda i, c: c - i, x)),
    "scan_of_loops": (
        lambda x, p: lax.scan(lambda c, _: (lax.fori_loop(
            0, p + _n(c), lambda j, d: d + 1., c), None), x, None, length=3)[0],
        lambda x, p: _np_fori(0, 3, lambda i, c: c + p + int(c[0, 0]), x)),
}


def _per_shard(ref, x: np.ndarray, num_shards: int) -> np.ndarray:
  return np.concatenate([ref(b, k) for k, b in
                         enumerate(np.split(x, num_shards))])


def _shmap(body, mesh: Mesh, check_rep: bool):
  spec = P(mesh.axis_names)
  return shard_map(lambda x: body(x, _pos(mesh)), mesh, in_specs=spec,
                   out_specs=spec, check_rep=check_rep)


def _cases(**axes):
  """Named test cases, one per combination of the values of `axes`."""
  names, values = zip(*axes.items())
  return parameterized.named_parameters(
      dict(testcase_name="".join(f"_{n}={v}" for n, v in zip(names, vs)),
           **dict(zip(names, vs))) for vs in it.product(*values))


# The bodies mix int32 loop indices and positions with float32 data.
@jtu.with_config(jax_numpy_dtype_promotion="standard")
class LoopTest(jtu.JaxTestCase):

  @_cases(body=_BODIES, mesh=_MESHES, check_rep=[True, False])
  def test_loop(self, body, mesh, check_rep):
    body, ref = _BODIES[body]
    mesh = _mesh(mesh)
    x = _ints(0, mesh.size * _ROWS, 8)
    f = jax.jit(_shmap(body, mesh, check_rep))
    self.assertAllClose(f(x), _per_shard(ref, x, mesh.size))

  @_cases(body=_BODIES, check_rep=[True, False])
  def test_vmap(self, body, check_rep):
    # vmap of a shard_map whose loops are not batched: y is.
    body, ref = _BODIES[body]
    mesh = _mesh("2d")
    spec = P(mesh.axis_names)
    f = jax.jit(jax.vmap(shard_map(
        lambda x, y: body(x, _pos(mesh)) * y, mesh, in_specs=(spec, spec),
        out_specs=spec, check_rep=check_rep), in_axes=(None, 0)))
    x, ys = _ints(1, mesh.size * _ROWS, 8), _ints(2, 3, mesh.size * _ROWS, 8)
    self.assertAllClose(f(x, ys), _per_shard(ref, x, mesh.size) * ys)

  @_cases(body=_BODIES)
  def test_vmap_batched_trip_counts(self, body):
    # The loop runs until every example is done. check_rep=True only: with
    # check_rep=False most of these loops, batched, already compiled on
    # jaxlib 0.4.26 (a batched predicate changes the loop XLA sees).
    body, ref = _BODIES[body]
    mesh = _mesh("2d")
    xs = _ints(3, 3, mesh.size * _ROWS, 8)
    f = jax.jit(jax.vmap(_shmap(body, mesh, True)))
    self.assertAllClose(
        f(xs), np.stack([_per_shard(ref, x, mesh.size) for x in xs]))

  @_cases(body=["fori_axis_index", "cond_on_axis_index_in_loop"])
  def test_without_jit(self, body):
    # Each equation runs on its own: the replication rules (check_rep=True).
    body, ref = _BODIES[body]
    mesh = _mesh("1d")
    x = _ints(4, mesh.size * _ROWS, 8)
    self.assertAllClose(_shmap(body, mesh, True)(x),
                        _per_shard(ref, x, mesh.size))

  @_cases(mesh=_MESHES, check_rep=[True, False])
  def test_grad_of_loop_bounded_by_data_and_axis_index(self, mesh, check_rep):
    # The loop computes a scale with no tangent (reverse mode does not go
    # through while loops); its trip count comes from the data and the
    # position.
    def body(x, p):
      scale = lax.fori_loop(0, p + _n(x), lambda i, s: s * .5 + 1.,
                            lax.stop_gradient(x))
      return jnp.sin(x) * scale
    def ref_grad(x, p):
      return np.cos(x) * _np_fori(0, p + int(x[0, 0]), lambda i, s: s * .5 + 1,
                                  x)
    mesh = _mesh(mesh)
    x = _ints(3, mesh.size * _ROWS, 8)
    g = jax.jit(jax.grad(lambda x: _shmap(body, mesh, check_rep)(x).sum()))
    self.assertAllClose(g(x), _per_shard(ref_grad, x, mesh.size), rtol=1e-5)

  @_cases(mesh=_MESHES)
  def test_grad_of_scan_with_cond_on_axis_index(self, mesh):
    # check_rep=True: the cond's replication rule, transposed.
    def body(x, p):
      step = lambda c, i: (lax.cond(p % 3 == i, lambda c: c * 2., jnp.sin, c),
                           None)
      return lax.scan(step, x, jnp.arange(3))[0]
    def ref_grad(x, p):
      v, dv = x, np.ones_like(x)
      for i in range(3):
        v, dv = (2 * v, 2 * dv) if p % 3 == i else (np.sin(v), np.cos(v) * dv)
      return dv
    mesh = _mesh(mesh)
    x = _ints(4, mesh.size * _ROWS, 8)
    g = jax.jit(jax.grad(lambda x: _shmap(body, mesh, True)(x).sum()))
    self.assertAllClose(g(x), _per_shard(ref_grad, x, mesh.size), rtol=1e-5)

  def test_examples_of_the_issue(self):
    mesh = Mesh(np.array(jax.devices()[:4]), ("x",))
    f = jax.jit(shard_map(lambda x: lax.fori_loop(
        0, x[0, 0].astype(jnp.int32) + 3, lambda i, c: c + 1., x),
        mesh, in_specs=P("x"), out_specs=P("x"), check_rep=False))
    self.assertAllClose(f(jnp.zeros((32, 128))), np.full((32, 128), 3.))
    g = jax.jit(shard_map(lambda x: lax.fori_loop(
        0, lax.axis_index("x") * 3, lambda i, c: c + 1., x),
        mesh, in_specs=P("x"), out_specs=P("x"), check_rep=False))
    self.assertAllClose(g(jnp.zeros((32, 128))),
                        np.repeat(np.arange(4.) * 3, 8)[:, None] * np.ones(128))


@jtu.with_config(jax_numpy_dtype_promotion="standard")
class ReplicationTest(jtu.JaxTestCase):
  """check_rep=True: a loop's or cond's results vary over an axis where its
  predicate or index does; otherwise they keep their operands' replication."""

  def setUp(self):
    super().setUp()
    self.mesh = _mesh("2d")
    self.x = _ints(5, self.mesh.size * _ROWS, 8)

  def shmap(self, f, out_specs):
    return jax.jit(shard_map(f, self.mesh, in_specs=P(("x", "y")),
                             out_specs=out_specs, check_rep=True))

  def test_loop_bounded_by_a_psum_is_replicated(self):
    def f(x):
      n = lax.psum(_n(x), ("x", "y"))
      return lax.fori_loop(0, n, lambda i, c: c + 1., jnp.zeros(8))
    total = self.x[::_ROWS, 0].sum()
    self.assertAllClose(self.shmap(f, P())(self.x), np.full(8, total))

  def test_loop_bounded_by_axis_index_varies(self):
    f = lambda x: lax.fori_loop(0, lax.axis_index("y"), lambda i, c: c + 1.,
                                jnp.zeros(8))
    with self.assertRaisesRegex(ValueError, "missing the required axes y"):
      self.shmap(f, P())(self.x)
    out = self.shmap(f, P("y"))(self.x)   # replicated over 'x', not 'y'
    self.assertAllClose(out, np.repeat([0., 1.], 8))

  def test_loop_carrying_a_varying_value_varies(self):
    f = lambda x: lax.fori_loop(0, lax.psum(_n(x), "x"),
                                lambda i, c: c + x[0, 0], 0.)
    with self.assertRaisesRegex(ValueError, "could not infer replication"):
      jax.jit(shard_map(f, _mesh("1d"), in_specs=P("x"), out_specs=P(),
                        check_rep=True))(self.x[:16])

  def test_cond(self):
    pred = lambda x: lax.psum(_n(x), ("x", "y")) > 5
    f = lambda x: lax.cond(pred(x), lambda: jnp.ones(8), lambda: jnp.zeros(8))
    self.assertAllClose(self.shmap(f, P())(self.x),
                        np.ones(8) * (self.x[::_ROWS, 0].sum() > 5))
    g = lambda x: lax.cond(lax.axis_index("x") == 1, lambda: jnp.ones(8),
                           lambda: jnp.zeros(8))
    with self.assertRaisesRegex(ValueError, "missing the required axes x"):
      self.shmap(g, P())(self.x)
    self.assertAllClose(self.shmap(g, P("x"))(self.x),
                        np.repeat([0., 1., 0., 0.], 8))


@jtu.with_config(jax_numpy_dtype_promotion="standard")
class PartialAutoTest(jtu.JaxTestCase):
  """On jaxlib 0.4.26 a partially manual shard_map (auto=) does not compile a
  loop or an axis_index (XLA's sharding propagation does not finish): an
  error at trace time names the line."""

  def setUp(self):
    super().setUp()
    self.mesh = Mesh(np.array(jax.devices()[:4]).reshape(2, 2), ("i", "j"))

  def trace(self, body):
    f = shard_map(body, self.mesh, in_specs=P("i"), out_specs=P("i"),
                  check_rep=False, auto=frozenset({"j"}))
    jax.make_jaxpr(f)(np.zeros((4, 8), np.float32))

  def test_loop(self):
    def body(x):
      return lax.fori_loop(0, 3, lambda i, c: c + 1., x)
    line = body.__code__.co_firstlineno + 1
    with self.assertRaisesRegex(
        NotImplementedError,
        rf"The loop \(scan\) at \S*shard_map_loops_test.py:{line}\b.* "
        r"auto=\{'j'\}: jaxlib 0.4.26 cannot compile it in a partially manual "
        r"computation .* Make the shard_map manual over every mesh axis"):
      self.trace(body)

  def test_axis_index(self):
    def body(x):
      return x * lax.axis_index("i")
    line = body.__code__.co_firstlineno + 1
    with self.assertRaisesRegex(
        NotImplementedError,
        rf"lax.axis_index at \S*shard_map_loops_test.py:{line}\b.*pass the "
        "index in as an argument sharded over the axis"):
      self.trace(body)

  def test_loop_free_body_still_compiles(self):
    f = jax.jit(shard_map(lambda x: lax.psum(x, "i"), self.mesh,
                          in_specs=P("i"), out_specs=P(), check_rep=False,
                          auto=frozenset({"j"})))
    x = jax.device_put(np.arange(32.).reshape(4, 8),
                       NamedSharding(self.mesh, P("i", "j")))
    self.assertAllClose(f(x), x[:2] + x[2:])


# Pallas TPU kernels in interpret mode, under shard_map over 4 devices: each
# receives its left neighbour's block by a remote copy, then loops.
_N = 4
_ANY = pltpu.TPUMemorySpace.ANY
_VMEM = pltpu.TPUMemorySpace.VMEM
_DMA = pltpu.SemaphoreType.DMA


def _kernel_on_mesh(kernel, num_scalar_prefetch: int, grid=()):
  def call(*args):
    x = args[-1]
    return pl.pallas_call(
        kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
        interpret=True,
        grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=num_scalar_prefetch, grid=grid,
            in_specs=[pl.BlockSpec(memory_space=_ANY)],
            out_specs=pl.BlockSpec(memory_space=_VMEM),
            scratch_shapes=[_DMA, _DMA]))(*args)
  mesh = Mesh(np.array(jax.devices()[:_N]), ("x",))
  return jax.jit(shard_map(call, mesh, in_specs=P("x"), out_specs=P("x"),
                           check_rep=False))


def _from_the_left(x: np.ndarray) -> list[np.ndarray]:
  return list(np.roll(x, x.shape[0] // _N, axis=0).reshape(_N, -1, x.shape[1]))


@jtu.with_config(jax_numpy_dtype_promotion="standard")
class PallasTest(jtu.JaxTestCase):

  def test_loop_bounded_by_axis_index_after_a_remote_copy(self):
    def kernel(x_ref, o_ref, send_sem, recv_sem):
      me = lax.axis_index("x")
      pltpu.async_remote_copy(x_ref, o_ref, send_sem, recv_sem,
                              device_id=lax.rem(me + 1, _N)).wait()
      o_ref[...] = lax.fori_loop(0, me, lambda i, o: o * 2. - 1., o_ref[...])
    x = _ints(6, _N * 8, 128)
    want = [_np_fori(0, d, lambda i, o: o * 2 - 1, b)
            for d, b in enumerate(_from_the_left(x))]
    np.testing.assert_array_equal(_kernel_on_mesh(kernel, 0)(x),
                                  np.concatenate(want))

  def test_loop_bounded_by_scalar_prefetch_after_a_remote_copy(self):
    # Two grid steps: the first receives the block; each step then adds
    # what a loop computes in as many steps as this device's length for the
    # step says.
    def kernel(lengths_ref, x_ref, o_ref, send_sem, recv_sem):
      step, me = pl.program_id(0), lax.axis_index("x")
      @pl.when(step == 0)
      def _():
        pltpu.async_remote_copy(x_ref, o_ref, send_sem, recv_sem,
                                device_id=lax.rem(me + 1, _N)).wait()
      o_ref[...] += lax.fori_loop(0, lengths_ref[step],
                                  lambda i, t: t * 2. + 1., 0.)
    lengths = np.array([2, 0, 3, 1, 0, 0, 1, 3], np.int32)  # 2 per device
    x = _ints(7, _N * 8, 128)
    want = [b + (2. ** n0 - 1) + (2. ** n1 - 1) for (n0, n1), b in
            zip(lengths.reshape(_N, 2), _from_the_left(x))]
    np.testing.assert_array_equal(
        _kernel_on_mesh(kernel, 1, grid=(2,))(lengths, x),
        np.concatenate(want))


if __name__ == "__main__":
  absltest.main(testLoader=jtu.JaxTestLoader())
