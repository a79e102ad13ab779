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
"""Memory left behind by programs with host callbacks, once JAX's caches
are cleared: on a newer PJRT CPU plugin through the adapter (patch 0026)
and on the built-in CPU backend, in one process.

    python benchmarks/pjrt_adapter_memory.py [--programs 800]

Prints the RSS growth (MiB) over N jitted programs that each call a
`pure_callback`, after `jax.clear_caches()`, and how many of the adapter's
host callbacks are still registered.
"""
from __future__ import annotations

import argparse
import gc
import os
import sys
import time

import numpy as np


def rss_mib() -> float:
  with open("/proc/self/statm") as f:
    return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def grow(device, n: int) -> float:
  import jax  # pylint: disable=g-import-not-at-top
  x = jax.device_put(np.arange(4.0, dtype=np.float32), device)
  def one(i):
    f = jax.jit(lambda v: jax.pure_callback(lambda a: a + i, v, v) * 2)
    return f(x).block_until_ready()
  for i in range(20):  # warm up
    one(i)
  jax.clear_caches(); gc.collect()
  before = rss_mib()
  for i in range(n):
    one(i)
  jax.effects_barrier()
  jax.clear_caches(); gc.collect(); time.sleep(0.5); gc.collect()
  return rss_mib() - before


def main() -> None:
  parser = argparse.ArgumentParser()
  parser.add_argument("--programs", type=int, default=800)
  args = parser.parse_args()
  sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
  from conftest import pjrt_plugin_path  # pylint: disable=g-import-not-at-top
  import jax  # pylint: disable=g-import-not-at-top
  from jax._src import pjrt_adapter  # pylint: disable=g-import-not-at-top
  if hasattr(pjrt_adapter, "load"):
    pjrt_adapter.load("bench_cpu", library_path=pjrt_plugin_path())
    client = pjrt_adapter.make_client("bench_cpu", {"cpu_device_count": 1})
  else:  # fork4's adapter, for the figure before
    from jax._src.lib import xla_client  # pylint: disable=g-import-not-at-top
    pjrt_adapter.load_plugin("bench_cpu", pjrt_plugin_path())
    xla_client.initialize_pjrt_plugin("bench_cpu")
    client = pjrt_adapter.adopt("bench_cpu", xla_client.make_c_api_client(
        "bench_cpu", {"cpu_device_count": 1}, None))
  built_in = grow(jax.devices("cpu")[0], args.programs)
  plugin = grow(client.local_devices()[0], args.programs)
  print(f"{args.programs} programs with a host callback, caches cleared: "
        f"RSS +{built_in:.1f} MiB on the built-in CPU backend, "
        f"+{plugin:.1f} MiB on the plugin; adapter callbacks still "
        f"registered: {len(pjrt_adapter._callbacks)}")


if __name__ == "__main__":
  main()
