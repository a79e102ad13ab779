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
"""shard_map(auto=...) whose manual axes have size 1 (patch 0177).

On jaxlib 0.4.26 such a shard_map aborted the process whatever its body (even
`lambda x: x`): the manual sharding over axes of size 1 becomes {replicated},
and XLA's partitioner CHECK-fails on SPMDFullToShardShape and
SPMDShardToFullShape ("Check failed: hlo->sharding().IsManual() ||
hlo->sharding().IsManualSubgroup()"); lax.axis_index there failed with
"PartitionId instruction is not supported for SPMD partitioning" (the fork's
patch 0024 raised NotImplementedError at trace time). Compiled programs run in
a child process, so that an abort fails the tests instead of ending the run.
Not covered (NotImplementedError at lowering): collectives over the size-1
axes, pure_callback.
"""
from __future__ import annotations

import os
if "--xla_force_host_platform_device_count" not in os.environ.get(
    "XLA_FLAGS", ""):
  os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                             " --xla_force_host_platform_device_count=8")

import json
import subprocess
import sys
import textwrap

from absl.testing import absltest
import numpy as np

import jax
from jax import lax
from jax._src import test_util as jtu
from jax.experimental.shard_map import shard_map
from jax.sharding import Mesh, PartitionSpec as P

jax.config.parse_flags_with_absl()

# Each case prints one line: its name and its result as a list.
_CHILD = textwrap.dedent("""
    import json
    from functools import partial
    import numpy as np
    import jax
    import jax.numpy as jnp
    from jax import lax
    from jax.experimental.shard_map import shard_map
    from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

    def report(name, value):
      print(json.dumps([name, np.asarray(value).tolist()]), flush=True)

    # Upstream's test (jax 0.5.0): no operand, the index as the output.
    mesh = Mesh(np.array(jax.devices()[:2]).reshape(1, 2), ("i", "j"))
    @partial(jax.jit, out_shardings=NamedSharding(mesh, P("i", None)))
    def f():
      return shard_map(lambda: lax.axis_index("i").reshape(1, 1), mesh,
                       in_specs=(), out_specs=P("i", None), check_rep=False,
                       auto=frozenset({"j"}))()
    report("no_operand", f())

    mesh = Mesh(np.array(jax.devices()).reshape(1, 8), ("i", "j"))
    x = jax.device_put(np.arange(16.).reshape(2, 8),
                       NamedSharding(mesh, P(None, "j")))
    def run(body, x=x, check_rep=True):
      return jax.jit(shard_map(body, mesh, in_specs=P("i"), out_specs=P("i"),
                               check_rep=check_rep, auto=frozenset({"j"})))(x)
    report("identity", run(lambda x: x))
    report("plus_index", run(lambda x: x + 10. * (lax.axis_index("i") + 1)))
    report("loop_to_index", run(lambda x: lax.fori_loop(
        0, lax.axis_index("i") + 2, lambda k, c: 2. * c, x), check_rep=False))
    # Residuals (here of sin and of the index) are named over the manual axes.
    report("grad_sin", jax.grad(lambda y: run(jnp.sin, y).sum())(x))
    report("grad_index", jax.grad(lambda y: run(
        lambda x: x * (lax.axis_index("i") + 3.), y).sum())(x))
    # Split over "j": patch 0145's max, not jaxlib's (1.1754944e-38 here).
    report("max", run(lambda x: jnp.max(x - 100., 1, keepdims=True) + 0. * x))
    """)


@jtu.with_config(jax_numpy_dtype_promotion="standard")
class SizeOneManualAxisTest(jtu.JaxTestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    proc = subprocess.run([sys.executable, "-c", _CHILD], env=os.environ,
                          capture_output=True, text=True, timeout=300)
    cls.stderr = proc.stderr[-2000:]
    cls.results = dict(json.loads(line) for line in proc.stdout.splitlines()
                       if line.startswith("["))

  def result(self, name: str) -> np.ndarray:
    self.assertIn(name, self.results, self.stderr)
    return np.array(self.results[name])

  def test_axis_index_without_operands(self):
    self.assertArraysEqual(self.result("no_operand"), np.zeros((1, 1), int))

  def test_body_without_axis_index(self):
    x = np.arange(16.).reshape(2, 8)
    self.assertArraysEqual(self.result("identity"), x)
    self.assertArraysEqual(self.result("max"),
                           np.repeat(x[:, 7:] - 100., 8, 1))

  def test_axis_index_is_zero(self):
    x = np.arange(16.).reshape(2, 8)
    self.assertArraysEqual(self.result("plus_index"), x + 10.)
    self.assertArraysEqual(self.result("loop_to_index"), 4. * x)

  def test_grad(self):
    x = np.arange(16.).reshape(2, 8)
    self.assertAllClose(self.result("grad_sin"), np.cos(x), rtol=1e-6)
    self.assertArraysEqual(self.result("grad_index"), np.full((2, 8), 3.))

  def test_lowered_without_manual_region(self):
    mesh = Mesh(np.array(jax.devices()).reshape(1, 8), ("i", "j"))
    f = jax.jit(shard_map(lambda x: x * lax.axis_index("i"), mesh,
                          in_specs=P("i"), out_specs=P("i"),
                          auto=frozenset({"j"})))
    text = f.lower(np.ones((2, 8), np.float32)).as_text()
    self.assertNotIn("SPMDFullToShardShape", text)
    self.assertNotIn("partition_id", text)

  def test_manual_axis_of_size_two_still_raises(self):
    # Patch 0024: jaxlib 0.4.26 does not finish compiling this.
    mesh = Mesh(np.array(jax.devices()[:4]).reshape(2, 2), ("i", "j"))
    f = shard_map(lambda x: x * lax.axis_index("i"), mesh, in_specs=P("i"),
                  out_specs=P("i"), check_rep=False, auto=frozenset({"j"}))
    with self.assertRaisesRegex(NotImplementedError, "lax.axis_index at"):
      jax.make_jaxpr(f)(np.ones((4, 8), np.float32))


if __name__ == "__main__":
  absltest.main(testLoader=jtu.JaxTestLoader())
