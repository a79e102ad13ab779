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
"""Memory a Pallas TPU kernel in interpret mode leaves once caches are cleared.

Each preset runs in a process of its own: it lowers and runs `--warmup`
distinct small kernels (a DMA, a semaphore, a scratch accumulator; each
closes over its own constant, so each is a new kernel), clearing JAX's
caches every 50 kernels (so that what a kernel leaves behind adds up, not
what hundreds of live cached kernels hold at once), then does the same with
`--kernels` more and reports the growth of RSS
(MiB, and KiB per kernel) after `jax.clear_caches()` and `gc.collect()`, and
of the bytes malloc holds in use (glibc's `mallinfo2`). The warm-up must
outlast malloc's arenas filling to their high-water mark: on jaxlib 0.4.26
RSS grows over the first ~200 kernels (fork and upstream alike, more for a
larger program) and is flat after, while the bytes in use barely move; a
shorter warm-up counts that fill as a leak.

Presets: `interpret=True`, `InterpretParams()`, and with `--python PY`
(a Python whose jax is another, e.g. upstream 0.4.26 or the newest) that
jax's interpret=True (0.4.26: a kernel without DMAs) or InterpretParams().

Run: python benchmarks/pallas_interpret_leak.py [--kernels 600]
[--python PY ...] (with this jax importable, e.g. PYTHONPATH=<tree>).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

_WORKER = r'''
import gc, json, sys
import numpy as np
import jax, jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu
mode, warmup, kernels = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
interpret = True if mode == "true" else pltpu.InterpretParams()
ANY = getattr(pl, "ANY", None) or pltpu.TPUMemorySpace.ANY
dmas = hasattr(pltpu, "make_async_copy") and (
    mode != "true" or hasattr(pltpu, "InterpretParams"))

import ctypes
class _Mallinfo2(ctypes.Structure):
  _fields_ = [(n, ctypes.c_size_t) for n in (
      "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks "
      "keepcost").split()]
try:
  _libc = ctypes.CDLL("libc.so.6")
  _libc.mallinfo2.restype = _Mallinfo2
except (OSError, AttributeError):
  _libc = None

def in_use_mib():
  if _libc is None:
    return float("nan")
  m = _libc.mallinfo2()
  return (m.uordblks + m.hblkhd) / 2**20

def rss_mib():
  with open("/proc/self/statm") as f:
    return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20

def one(k):
  c = float(k)
  if dmas:
    def kernel(x_ref, o_ref, buf, acc, sem):
      copy = pltpu.make_async_copy(x_ref, buf, sem)
      copy.start()
      copy.wait()
      acc[...] = buf[...] + c
      o_ref[...] = acc[...]
    f = pl.pallas_call(
        kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
        interpret=interpret, grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=0, in_specs=[pl.BlockSpec(memory_space=ANY)],
            scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32),
                            pltpu.VMEM((8, 128), jnp.float32),
                            pltpu.SemaphoreType.DMA]))
  else:  # 0.4.26's interpret mode has no DMAs
    def kernel(x_ref, o_ref, acc):
      acc[...] = x_ref[...] + c
      o_ref[...] = acc[...]
    f = pl.pallas_call(
        kernel, out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
        interpret=interpret, grid_spec=pltpu.PrefetchScalarGridSpec(
            num_scalar_prefetch=0, grid=(1,),
            in_specs=[pl.BlockSpec(lambda i: (0, 0), (8, 128))],
            out_specs=pl.BlockSpec(lambda i: (0, 0), (8, 128)),
            scratch_shapes=[pltpu.VMEM((8, 128), jnp.float32)]))
  out = jax.jit(f)(jnp.ones((8, 128), jnp.float32))
  assert float(out[0, 0]) == 1 + c

def batch(start, n):  # caches cleared every 50 kernels and at the end
  for k in range(start, start + n):
    one(k)
    if (k + 1 - start) % 50 == 0 or k + 1 == start + n:
      jax.clear_caches()
      gc.collect()

import os
batch(0, warmup)
before, used = rss_mib(), in_use_mib()
batch(warmup, kernels)
after = rss_mib()
print(json.dumps(dict(version=jax.__version__, dmas=dmas,
                      growth_mib=after - before,
                      in_use_mib=in_use_mib() - used)))
'''


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--kernels", type=int, default=600)
  ap.add_argument("--warmup", type=int, default=300)
  ap.add_argument("--python", nargs="*", default=[],
                  help="other Pythons (another jax), for their interpret mode")
  args = ap.parse_args()
  env = {**os.environ, "JAX_PLATFORMS": "cpu"}
  runs = [("true", sys.executable, env), ("params", sys.executable, env)]
  for py in args.python:
    other = {**env, "PYTHONPATH": ""}
    runs += [("true", py, other), ("params", py, other)]
  print(f"{args.kernels} kernels after {args.warmup}; RSS growth after "
        "jax.clear_caches() and gc.collect()")
  for mode, python, run_env in runs:
    r = subprocess.run([python, "-c", _WORKER, mode, str(args.warmup),
                        str(args.kernels)], env=run_env, capture_output=True,
                       text=True, check=False)
    if r.returncode:
      print(f"{python} {mode}: failed: {r.stderr.strip().splitlines()[-1:]}")
      continue
    res = json.loads(r.stdout.strip().splitlines()[-1])
    label = "interpret=True" if mode == "true" else "InterpretParams()"
    print(f"jax {res['version']} {label}{'' if res['dmas'] else ' (no DMA)'}"
          f": RSS {res['growth_mib']:.1f} MiB, "
          f"{res['growth_mib'] * 1024 / args.kernels:.1f} KiB per kernel; "
          f"malloc in use {res['in_use_mib'] * 1024 / args.kernels:.2f} KiB "
          "per kernel")


if __name__ == "__main__":
  sys.exit(main())
