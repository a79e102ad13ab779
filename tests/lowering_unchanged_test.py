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
"""The lowered StableHLO of varied programs, locations included, is pinned.

Patches that make lowering faster must not change what it emits: each
program's module text (`get_asm(enable_debug_info=True)`, this file's path
replaced by `THIS_FILE`, object addresses by `0x?`) hashes to the value recorded in `EXPECTED` from the
series. To record again after a deliberate change:

    PYTHONPATH=.work/tree python tests/lowering_unchanged_test.py --record

Lines above `EXPECTED` are part of the pinned locations: edit below it.
"""
from __future__ import annotations

from functools import partial
import hashlib
import os
import re
import sys

if "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS",
                                                                ""):
  os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                             " --xla_force_host_platform_device_count=2")

from absl.testing import absltest
import numpy as np

import jax
from jax import lax
import jax.numpy as jnp
from jax._src import config
from jax.experimental import pallas as pl
from jax.experimental.shard_map import shard_map
from jax.sharding import Mesh, PartitionSpec as P

jax.config.parse_flags_with_absl()

f32 = jnp.float32


def mid():
  def loss(params, x):
    for w, g in params:
      x = jax.nn.gelu(jnp.dot(x, w))
      mean = jnp.mean(x, axis=-1, keepdims=True)
      var = jnp.mean(jnp.square(x - mean), axis=-1, keepdims=True)
      x = (x - mean) * lax.rsqrt(var + 1e-5) * g
    return jnp.mean(x ** 2)
  params = [(jnp.ones((8, 8), f32), jnp.ones((8,), f32))] * 2
  return jax.value_and_grad(loss), (params, jnp.ones((4, 8), f32))


def control_flow():
  def f(x, n):
    x = lax.fori_loop(0, 3, lambda i, c: c * 2. + i, x)
    x = lax.while_loop(lambda c: c[1] < n, lambda c: (c[0] + 1, c[1] + 1),
                       (x, 0))[0]
    x = lax.cond(n > 2, jnp.sin, jnp.cos, x)
    x = lax.switch(n, [jnp.exp, jnp.tanh, lambda v: -v], x)
    return lax.scan(lambda c, v: (c + v, c * v), 0., x)
  return f, (jnp.arange(5, dtype=f32), 3)


def custom_rules():
  @jax.custom_jvp
  def soft(x):
    return jnp.log1p(jnp.exp(x))
  soft.defjvp(lambda p, t: (soft(p[0]), t[0] * jax.nn.sigmoid(p[0])))

  @jax.custom_vjp
  def clip(x):
    return jnp.clip(x, -1, 1)
  clip.defvjp(lambda x: (clip(x), x), lambda x, g: (g * (jnp.abs(x) < 1),))

  def f(x):
    return jnp.sum(soft(x) + clip(x) + jax.nn.relu(x))
  return jax.grad(f), (jnp.linspace(-2, 2, 6, dtype=f32),)


def nested_jit():
  @jax.jit
  def inner(x, y):
    return jnp.dot(x, y) + 1

  @partial(jax.jit, static_argnums=1)
  def middle(x, k):
    return inner(x, x) * k + inner(x.T, x)

  def f(x):
    return middle(x, 2) - jax.jit(jnp.tanh)(middle(x, 3))
  return f, (jnp.ones((3, 3), f32),)


def sharded():
  mesh = Mesh(np.array(jax.devices()[:2]), ("i",))

  @partial(shard_map, mesh=mesh, in_specs=(P("i"), P()), out_specs=P())
  def f(x, y):
    return lax.psum(jnp.sum(x * y, axis=0), "i")
  return f, (jnp.ones((4, 3), f32), jnp.ones((3,), f32))


def pallas_interpret():
  def kernel(x_ref, y_ref, o_ref):
    o_ref[...] = x_ref[...] * 2. + y_ref[...]
  spec = pl.BlockSpec(lambda i: (i, 0), (2, 4))
  f = pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((4, 4), f32),
                     grid=(2,), in_specs=[spec, spec], out_specs=spec,
                     interpret=True)
  return f, (jnp.ones((4, 4), f32), jnp.ones((4, 4), f32))


def windows():
  def f(x):
    m = lax.reduce_window(x, -jnp.inf, lax.max, (2, 2), (1, 1), "SAME")
    s = lax.reduce_window(x, 0., lax.add, (3, 1), (2, 1), "VALID")
    return jnp.sum(m) + jnp.sum(s) + jnp.sum(jnp.cumsum(x, axis=1))
  return jax.value_and_grad(f), (jnp.ones((6, 5), f32),)


def indexing():
  def f(x, i, idx):
    y = x[i] + x[-1] + x[::2].sum(0) + x[idx].sum(0) + x[1:3, None, i].sum()
    x = x.at[idx, 1].add(1.).at[i].set(y)
    y = y + jnp.take_along_axis(x, jnp.argsort(x, axis=1)[:, :2], 1).sum()
    return lax.dynamic_slice(x, (i, 0), (2, 4)), jnp.where(x > 1, x, 0)
  return f, (jnp.ones((5, 4), f32), 2, jnp.array([0, 3, 1]))


def scopes():
  def f(x):
    with jax.named_scope("outer"):
      with jax.named_scope("inner"):
        x = jnp.sin(x)
      x = jax.named_call(lambda v: v * 2, name="doubled")(x)
    return jax.checkpoint(lambda v: jnp.exp(v) * v)(x)
  return jax.grad(lambda x: jnp.sum(f(x))), (jnp.ones((3,), f32),)


def _located(x):
  return jnp.cos(x) + 1


def locations():
  def f(x):
    return _located(x) * _located(x + 1)
  return f, (jnp.ones((2,), f32),)


def mixed_dtypes():
  def f(key, x):
    u = jax.random.uniform(key, (3,), jnp.bfloat16)
    b = x > 0
    c = lax.complex(x, x) * (1 + 2j)
    return (u, jnp.argmax(x), jnp.sort(x), b & jnp.array([True, False, True]),
            c, x.astype(jnp.int8) // 3, jnp.array([1, 2, 3], jnp.uint16))
  return f, (jax.random.PRNGKey(0), jnp.array([1., -2., 3.], f32))


PROGRAMS = {f.__name__: f for f in (
    mid, control_flow, custom_rules, nested_jit, sharded, pallas_interpret,
    windows, indexing, scopes, locations, mixed_dtypes)}
# Programs lowered with only the innermost user frame in their locations
# (`jax_include_full_tracebacks_in_locations=False`); the others with full
# tracebacks (the default), cut to 2 frames: both in this file.
USER_FRAME_ONLY = ("locations",)


def lowered_text(name: str) -> str:
  f, args = PROGRAMS[name]()
  full = name not in USER_FRAME_ONLY
  with config.include_full_tracebacks_in_locations(full), \
       config.traceback_in_locations_limit(2):
    module = jax.jit(f).lower(*args).compiler_ir()
  text = module.operation.get_asm(enable_debug_info=True)
  # Reprs of objects in locations (Pallas's indexing modes) carry addresses.
  text = re.sub(r" at 0x[0-9a-f]+>", " at 0x?>", text)
  # NumPy 2 prints scalars in parameters as np.int64(0), NumPy 1 as 0.
  text = re.sub(r"np\.[a-z]+[0-9]*_?\(([^()]*)\)", r"\1", text)
  return text.replace(__file__, "THIS_FILE")


def text_hash(text: str) -> str:
  return hashlib.sha256(text.encode()).hexdigest()[:16]


def text_hashes() -> dict[str, str]:
  """Every program's hash, lowered from here (the locations' outer frames
  are this function's and lowered_text's)."""
  return {name: text_hash(lowered_text(name)) for name in PROGRAMS}


@absltest.skipIf(sys.version_info < (3, 11),
                 "locations carry columns and qualified names from 3.11")
class LoweringUnchangedTest(absltest.TestCase):

  def test_every_program_lowers_to_the_pinned_text(self):
    self.assertIn("THIS_FILE", lowered_text("locations"))
    self.assertEqual(text_hashes(), EXPECTED)

  def test_lowering_twice_gives_the_same_text(self):
    self.assertEqual(lowered_text("mid"), lowered_text("mid"))


EXPECTED = {
    "mid": "6dfd05d12e1a456b",
    "control_flow": "c46f437a1df8dc75",
    "custom_rules": "cad500656891e686",
    "nested_jit": "dcf8b87b1f2e67af",
    "sharded": "0667a1b4675b5ee4",
    "pallas_interpret": "acafc64ccca06bc9",
    "windows": "606258af13eaa097",
    "indexing": "721e5a312d76b710",
    "scopes": "fdd5a77162f0a393",
    "locations": "2f1f7f3aba4a55c4",
    "mixed_dtypes": "8aff13dc660d62ac",
}


if __name__ == "__main__":
  if "--record" in sys.argv:
    print("EXPECTED = {")
    for name, value in text_hashes().items():
      print(f'    "{name}": "{value}",')
    print("}")
  else:
    absltest.main()
