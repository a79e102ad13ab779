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
"""Programs with collectives on several CPU devices, dispatched back to back.

On jaxlib 0.4.26's CPU client, executions of programs whose collectives span
some of the devices (a psum over one mesh axis, a concatenate along a sharded
dimension) deadlocked when several were in flight (patch 0030,
`pxla._runs_alone`). Each workload runs in a process of its own, so a hang is
a failure after `_LIMIT` seconds, not a stalled run.
"""
from __future__ import annotations

import os
if "--xla_force_host_platform_device_count" not in os.environ.get(
    "XLA_FLAGS", ""):
  os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                             " --xla_force_host_platform_device_count=8")

import subprocess
import sys
import threading

from absl.testing import absltest
import numpy as np

import jax
import jax.numpy as jnp
from jax import lax
from jax._src import test_util as jtu
from jax.experimental import io_callback
from jax.experimental.shard_map import shard_map
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

jax.config.parse_flags_with_absl()

_LIMIT = 240   # seconds; the workloads take a few seconds each

# 8 inputs, each called `CALLS // 8` times, results compared with NumPy's;
# on jaxlib 0.4.26 without patch 0030 each workload hung in most runs.
_WORKLOAD = """
import os
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
import numpy as np
import jax, jax.numpy as jnp
from jax import lax
from jax.experimental.shard_map import shard_map
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P
mesh = Mesh(np.array(jax.devices()).reshape(4, 2), ("i", "j"))
s = NamedSharding(mesh, P("i", "j"))
CALLS = 2000
if WHICH == "psum":        # all-reduces over {0,2,4,6} and {1,3,5,7}
  f = jax.jit(shard_map(lambda x: lax.psum(jnp.sin(x) + x, "i"), mesh=mesh,
                        in_specs=P("i", "j"), out_specs=P(None, "j")))
  ref = lambda x: (np.sin(x) + x).reshape(4, -1, x.shape[1]).sum(0)
  shape = (256, 128)
else:                      # eager; the same all-reduces, made by XLA
  f = lambda x: lax.concatenate([x] * 4, 0)
  ref = lambda x: np.concatenate([x] * 4, 0)
  shape = (4, 256)
xs = [np.random.RandomState(k).uniform(-1, 1, shape).astype(np.float32)
      for k in range(8)]
want = [ref(x) for x in xs]
args = [jax.device_put(x, s) for x in xs]
wrong = 0
for _ in range(CALLS // 8):
  outs = [f(a) for a in args]   # no wait between calls
  wrong += sum(not np.allclose(np.asarray(o), w, rtol=1e-5, atol=1e-5)
               for o, w in zip(outs, want))
print("calls", CALLS, "wrong", wrong)
"""


class BackToBackTest(jtu.JaxTestCase):

  def _run(self, which):
    source = f"WHICH = {which!r}\n" + _WORKLOAD
    try:
      out = subprocess.run([sys.executable, "-c", source], capture_output=True,
                           text=True, timeout=_LIMIT)
    except subprocess.TimeoutExpired as e:
      self.fail(f"{which}: no result within {_LIMIT} s (a deadlock?); "
                f"stderr: {(e.stderr or b'')[-2000:]!r}")
    self.assertEqual(out.returncode, 0, out.stderr[-3000:])
    self.assertEqual(out.stdout.split(), ["calls", "2000", "wrong", "0"])

  def test_psum_over_one_mesh_axis(self):
    self._run("psum")

  def test_eager_concatenate_along_a_sharded_dimension(self):
    self._run("concatenate")


def _unsafe_call(f, *args):
  return f.lower(*args).compile()._executable.unsafe_call


@jtu.with_config(jax_platforms="cpu")
class WhichProgramsRunAloneTest(jtu.JaxTestCase):
  """Only programs that can wait for another device's part of them wait."""

  def setUp(self):
    super().setUp()
    if jax.default_backend() != "cpu" or jax.device_count() < 8:
      self.skipTest("needs 8 host CPU devices")
    self.mesh = Mesh(np.array(jax.devices()[:8]).reshape(4, 2), ("i", "j"))
    self.x = jax.device_put(jnp.arange(64.).reshape(8, 8),
                            NamedSharding(self.mesh, P("i", "j")))

  def _shard_map(self, body, out_specs=P("i", "j")):
    return jax.jit(shard_map(body, mesh=self.mesh, in_specs=P("i", "j"),
                             out_specs=out_specs, check_rep=False))

  def test_collectives_on_several_devices_run_alone(self):
    for f in [self._shard_map(lambda x: lax.psum(x, "i"), P(None, "j")),
              self._shard_map(lambda x: lax.psum(x, ("i", "j")), P()),
              self._shard_map(lambda x: lax.ppermute(
                  x, "j", [(0, 1), (1, 0)])),
              self._shard_map(lambda x: lax.all_gather(x, "i", tiled=True),
                              P(None, "j")),
              jax.jit(lambda x: lax.concatenate([x] * 4, 0)),
              jax.jit(lambda x: x.sum())]:
      self.assertTrue(_unsafe_call(f, self.x).runs_alone)

  def test_callbacks_on_several_devices_run_alone(self):
    barrier = threading.Barrier(8)
    def meet(x):   # each device's callback waits for the others'
      barrier.wait(timeout=60)
      return x
    f = self._shard_map(lambda x: io_callback(
        meet, jax.ShapeDtypeStruct(x.shape, x.dtype), x))
    self.assertTrue(_unsafe_call(f, self.x).runs_alone)
    outs = [f(self.x) for _ in range(20)]
    for out in outs:
      self.assertArraysEqual(out, self.x)

  def test_other_programs_do_not(self):
    one = jax.device_put(jnp.ones(8), jax.devices()[0])
    for f, args in [(jax.jit(lambda x: jnp.sin(x) * 2), (self.x,)),
                    (self._shard_map(jnp.sin), (self.x,)),
                    (jax.jit(lambda x: x.sum()), (one,))]:
      self.assertFalse(_unsafe_call(f, *args).runs_alone)

  def test_ordered_effects_keep_their_order(self):
    seen = []
    f = jax.jit(lambda x, k: (io_callback(seen.append, None, k, ordered=True),
                              x.sum(0))[1])
    self.assertTrue(_unsafe_call(f, self.x, 0).runs_alone)
    outs = [f(self.x, k) for k in range(30)]
    jax.effects_barrier()
    self.assertEqual([int(k) for k in seen], list(range(30)))
    for out in outs:
      self.assertArraysEqual(out, np.asarray(self.x).sum(0))

  def test_dispatched_from_several_threads(self):
    f = self._shard_map(lambda x: lax.psum(x, "i"), P(None, "j"))
    want = np.asarray(self.x).reshape(4, 2, 8).sum(0)
    results = []
    def work():
      results.extend(f(self.x) for _ in range(100))
    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
      t.start()
    for t in threads:
      t.join(timeout=_LIMIT)
    self.assertLen(results, 300)
    for out in results:
      self.assertArraysEqual(out, want)


if __name__ == "__main__":
  absltest.main(testLoader=jtu.JaxTestLoader())
