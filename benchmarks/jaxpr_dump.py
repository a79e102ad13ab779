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
"""Cost of jaxpr dumps (jax_dump_ir_*), against pristine upstream 0.4.26.

Two persistent worker processes, one on the fork and one on upstream, take
turns, round by round; every figure is a ratio of medians from this one run:

  * dumping off: jit dispatch time, fork / upstream (goal 1.00 +- 0.02);
  * dumping off: compile time of a train step (trace + lower + XLA compile,
    caches cleared each time), fork / upstream (goal 1.00 +- 0.02);
  * all modes on (stablehlo, jaxpr, jaxpr_html to a local directory): time
    spent dumping / compile time, and compile-with-dumps / compile;
  * the same to a gs:// bucket of a GCS emulator on loopback (the PyPI
    package gcp-storage-emulator, if installed; uploads are synchronous):
    time spent uploading per lowering / compile time.

The train step is a small MLP with remat on each layer, a scan over
micro-batches and an Adam update. Times are CPU time of the worker process
(other processes sharing the cores inflate wall time much more).

Run: python benchmarks/jaxpr_dump.py [--rounds N]
(with the fork importable, e.g. PYTHONPATH=<materialized tree>).
"""
from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import subprocess
import sys
import time

import _common

_WORKER = r'''
import gc, json, statistics, sys, tempfile, time
import jax, jax.numpy as jnp
sys.path.insert(0, sys.argv[1])   # examples/: the shared train step
from mlp_train_step import train_inputs, train_step
ARGS = train_inputs(sizes=(32, 64, 64, 64, 10), micro_batches=4, batch=8)

small = jax.jit(lambda x, y: x * y + 1.0)
X = jnp.ones((8,))
small(X, X).block_until_ready()

FORK = "fork" in jax.__version__
dump_seconds = [0.0]
upload_seconds = [0.0]  # Wall time: the upload waits on the server.
if FORK:
  from jax._src import jaxpr_dump
  from jax._src.interpreters import mlir
  def timed(fn, total, clock):
    def wrapper(*a, **k):
      t0 = clock()
      try:
        return fn(*a, **k)
      finally:
        total[0] += clock() - t0
    return wrapper
  # Every lowering's jaxpr dump goes through dump_jaxpr.
  jaxpr_dump.dump_jaxpr = timed(jaxpr_dump.dump_jaxpr, dump_seconds,
                                time.process_time)
  mlir.dump_module_to_file = timed(mlir.dump_module_to_file, dump_seconds,
                                   time.process_time)
  jaxpr_dump._upload = timed(jaxpr_dump._upload, upload_seconds,
                             time.perf_counter)
  jax.config.update("jax_dump_ir_modes", "stablehlo,jaxpr,jaxpr_html")
print(json.dumps({"version": jax.__version__, "fork": FORK}), flush=True)

def compile_once(dump_dir):
  jax.clear_caches()
  gc.collect()
  jax.config.update("jax_dump_ir_to", dump_dir)
  dump_seconds[0] = upload_seconds[0] = 0.0
  t0, w0 = time.process_time(), time.perf_counter()
  jax.jit(train_step).lower(*ARGS).compile()
  total, wall = time.process_time() - t0, time.perf_counter() - w0
  jax.config.update("jax_dump_ir_to", "")
  return total, dump_seconds[0], upload_seconds[0], wall

def run(what, number):
  if what == "dispatch":
    gc.collect()
    t0 = time.process_time()
    for _ in range(number):
      small(X, X)
    small(X, X).block_until_ready()
    return (time.process_time() - t0) / number
  if what == "compile":
    return statistics.median(compile_once("")[0] for _ in range(number))
  if what == "compile_dump":
    with tempfile.TemporaryDirectory() as d:
      runs = [compile_once(d) for _ in range(number)]
    return [statistics.median(r[0] for r in runs),
            statistics.median(r[1] for r in runs)]
  if what == "compile_gcs":
    import gcsfs
    fs = gcsfs.GCSFileSystem()
    if not fs.exists("jax-bench"):
      fs.mkdir("jax-bench")
    runs = [compile_once("gs://jax-bench/run") for _ in range(number)]
    return [statistics.median(r[2] / (r[3] - r[2]) for r in runs),
            statistics.median(r[2] for r in runs)]
  raise ValueError(what)

for line in sys.stdin:
  what, number = line.split()
  print(json.dumps(run(what, int(number))), flush=True)
'''


def gcs_emulator() -> tuple[subprocess.Popen, dict[str, str]] | None:
  """A GCS emulator on a free loopback port, and the environment that
  points gcsfs (etils.epath's client) at it; None if it is not installed."""
  exe = shutil.which("gcp-storage-emulator") or os.path.join(
      os.path.dirname(sys.executable), "gcp-storage-emulator")
  if not os.access(exe, os.X_OK):
    return None
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
  proc = subprocess.Popen([exe, "start", "--host", "127.0.0.1", "--port",
                           str(port), "-M"], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL)
  for _ in range(300):
    try:
      socket.create_connection(("127.0.0.1", port), timeout=1).close()
      break
    except OSError:
      time.sleep(0.1)
  return proc, {"STORAGE_EMULATOR_HOST": f"http://127.0.0.1:{port}",
                "FSSPEC_GS_TOKEN": "anon", "NO_GCE_CHECK": "true",
                "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false"}


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--rounds", type=int, default=7)
  ap.add_argument("--dispatch-calls", type=int, default=3000)
  ap.add_argument("--compiles", type=int, default=3)
  args = ap.parse_args()

  gcs = gcs_emulator()
  fork, upstream = (
      _common.Worker(which, _WORKER, str(_common.REPO / "examples"),
                     env={"JAX_PLATFORMS": "cpu", "JAX_DUMP_IR_TO": None,
                          **(gcs[1] if gcs else {})})
      for which in ("fork", "upstream"))
  if not fork.info["fork"] or upstream.info["fork"]:
    sys.exit(f"expected the fork and upstream, got {fork.info} and "
             f"{upstream.info}; put the fork on PYTHONPATH")
  print(f"fork {fork.info['version']} vs upstream "
        f"{upstream.info['version']}, {args.rounds} interleaved rounds")
  times: dict[str, list] = {k: [] for k in (
      "dispatch_fork", "dispatch_up", "compile_fork", "compile_up",
      "compile_dump", "compile_gcs")}
  try:
    for r in range(args.rounds):
      order = [(fork, "fork"), (upstream, "up")]
      if r % 2:
        order.reverse()
      for w, tag in order:
        times[f"dispatch_{tag}"].append(w.call("dispatch",
                                              args.dispatch_calls))
      for w, tag in order:
        times[f"compile_{tag}"].append(w.call("compile", args.compiles))
      times["compile_dump"].append(fork.call("compile_dump", args.compiles))
      if gcs:
        times["compile_gcs"].append(fork.call("compile_gcs", args.compiles))
  finally:
    fork.close()
    upstream.close()
    if gcs:
      gcs[0].terminate()
      gcs[0].wait(timeout=30)

  med = lambda xs: statistics.median(xs)
  d_f, d_u = med(times["dispatch_fork"]), med(times["dispatch_up"])
  c_f, c_u = med(times["compile_fork"]), med(times["compile_up"])
  c_on = med(t[0] for t in times["compile_dump"])
  dump = med(t[1] for t in times["compile_dump"])
  print(f"dumping off, jit dispatch:  fork {d_f * 1e6:8.2f} us  upstream "
        f"{d_u * 1e6:8.2f} us  ratio {d_f / d_u:.3f}  (goal 1.00 +- 0.02)")
  print(f"dumping off, train step compile: fork {c_f * 1e3:8.1f} ms  "
        f"upstream {c_u * 1e3:8.1f} ms  ratio {c_f / c_u:.3f}  "
        "(goal 1.00 +- 0.02)")
  print(f"all modes on: dump {dump * 1e3:.1f} ms; dump / compile "
        f"{dump / c_f:.3f}; compile with dumps / without {c_on / c_f:.3f}")
  if gcs:
    ratio = med(t[0] for t in times["compile_gcs"])
    upload = med(t[1] for t in times["compile_gcs"])
    print(f"all modes on, to the GCS emulator: upload {upload * 1e3:.1f} ms "
          f"per lowering; upload / the rest of that compile (wall) "
          f"{ratio:.3f}")
  else:
    print("GCS upload: not measured (pip install gcp-storage-emulator)")


if __name__ == "__main__":
  main()
