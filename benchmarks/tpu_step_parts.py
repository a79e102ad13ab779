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
"""Where benchmarks/tpu.py's training step spends the fork's extra time.

    python benchmarks/tpu_step_parts.py --baseline-pythonpath DIR
    python benchmarks/tpu_step_parts.py --smoke [--baseline-pythonpath DIR]

A worker process with the fork, then one with the baseline (the jax that DIR
on PYTHONPATH gives, e.g. a TPU machine's own jax 0.10.2), one at a time,
both on tpu.model()'s numbers. Each compiles and times, in this order:

- steps: the training step as written ("plain") and as tpu.VARIANTS make
  it, `--batches` batches of `--steps` steps after a first call, feeding the
  parameters back; a variant whose module is one already compiled on that
  side is not compiled again;
- the fork through the PJRT adapter: the plain step with `memory_fitting_level`
  O2 added to the compile options the adapter hands the plugin (jax 0.10.2's
  default; jaxlib 0.4.26's options lack the field), and with all of the
  baseline's ExecutableBuildOptions (its debug_options too) added;
- the baseline: the fork's modules (the StableHLO jax 0.4.26 lowered, as a
  portable artifact) compiled by the baseline's client directly
  (`compile_and_load`, its own options) and run, next to its own module
  through that same door; the plain step with `jax_memory_fitting_level`
  UNKNOWN (what the field reads as where it is absent);
- parts: each piece of the step, forward and `vjp` (the embedding lookup, the
  qkv split each way, one layer, the head's loss, the targets' pick each way,
  the Adam update), the median of 5 batches of 10 calls.

For each program: ms, the compiled program's temporary memory and bytes
accessed, and counts in its optimized HLO (`as_text()`): fusions, copy-start/
copy-done, copies, transposes, converts, gathers, scatters; and the loss.
Each row is printed as it is measured; two tables at the end, each figure
with fork / baseline of the same program where both ran. A worker stops
taking new programs near `--budget` seconds in all.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tpu  # noqa: E402  pylint: disable=g-import-not-at-top

# Sizes: benchmarks/tpu.py's chip sizes with 2 layers (the fork's extra time
# did not grow with layers: 2.2 ms a step at 4, 2.5 ms at 2), and --smoke's.
SIZES = {
    "chip": dict(tpu.SIZES["chip"], layers=2, steps=10, batches=3),
    "smoke": dict(tpu.SIZES["smoke"], steps=2, batches=2),
}
STEPS = (("plain", ()), ("pick_one_hot", ("pick_one_hot",)),
         ("split_concat", ("split_concat",)),
         ("split_slices", ("split_slices",)),
         ("concat+one_hot", ("split_concat", "pick_one_hot")))
# The fork's modules the baseline compiles too.
SHARED = ("plain", "concat+one_hot")
# Opcodes counted in the optimized HLO.
COUNTED = ("fusion", "copy-start", "copy-done", "copy", "transpose",
           "convert", "gather", "scatter")
COLUMNS = ("ms", "temp_mb", "gb_accessed", "fusion", "copy-done", "copy",
           "transpose", "convert", "gather", "scatter", "layout")
# memory_fitting_level (ExecutableBuildOptionsProto field 25) = EFFORT_O2
# (29), in an ExecutableBuildOptionsProto (CompileOptionsProto field 3) that
# protobuf merges into the one already there.
_MFL_O2 = b"\x1a\x03\xc8\x01\x1d"


def hlo_counts(text: str) -> dict[str, object]:
  """Instructions of each opcode in COUNTED in an HLO module's text, and a
  digest of its entry computation's layout (the same for the same layouts of
  the parameters and results)."""
  found = re.findall(r"= .*?\s([a-z][\w-]*)\(", text)
  layout = re.search(r"entry_computation_layout=(\{.*?\})(?:, \w+=|$)",
                     text.split("\n", 1)[0])
  return {**{op: found.count(op) for op in COUNTED},
          "layout": hashlib.sha256(layout.group(1).encode()).hexdigest()[:8]
                    if layout else None}


def figures(compiled) -> dict[str, object]:
  """tpu.py's figures of a compiled program (a `Compiled` or a client's
  LoadedExecutable), and its HLO counts."""
  if not hasattr(compiled, "memory_analysis"):
    class Shim:
      memory_analysis = compiled.get_compiled_memory_stats
      cost_analysis = compiled.cost_analysis
      as_text = compiled.get_hlo_text
    compiled = Shim
  out = tpu._program_figures(compiled, "")  # pylint: disable=protected-access
  del out["gflops"]
  try:
    out.update(hlo_counts(compiled.as_text()))
  except Exception as e:  # pylint: disable=broad-except
    out["note"] = f"no HLO text: {e!r}"[:200]
  return out


def _run_steps(call, args, s) -> tuple[float, float]:
  """(ms a step, the median of the batches; the last loss) of
  call(params, opt, inputs, targets) -> (params, opt, loss)."""
  import jax  # pylint: disable=g-import-not-at-top
  params, opt, inputs, targets = args
  params, opt, loss = jax.block_until_ready(call(params, opt, inputs, targets))
  ms = []
  for _ in range(s["batches"]):
    t0 = time.perf_counter()
    for _ in range(s["steps"]):
      params, opt, loss = call(params, opt, inputs, targets)
    jax.block_until_ready((params, opt, loss))
    ms.append((time.perf_counter() - t0) / s["steps"] * 1e3)
  return statistics.median(ms), float(loss)


def _step_row(compiled, call, args, s, compile_s) -> dict[str, object]:
  ms, loss = _run_steps(call, args, s)
  return {"compile_s": compile_s, "ms": ms, "loss": loss, **figures(compiled)}


def _write_artifact(lowered, path: str) -> None:
  """The lowered module as a StableHLO portable artifact (jax 0.4.26's
  oldest supported version, which later jaxes read)."""
  from jax._src.interpreters import mlir  # pylint: disable=g-import-not-at-top
  from jax._src.lib import xla_client  # pylint: disable=g-import-not-at-top
  from jax._src.lib.mlir.dialects import hlo  # pylint: disable=g-import-not-at-top
  module = mlir.module_to_bytecode(lowered.compiler_ir("stablehlo"))
  with open(path, "wb") as f:
    f.write(xla_client._xla.mlir.serialize_portable_artifact(  # pylint: disable=protected-access
        module, hlo.get_minimum_version()))


class Steps:
  """The step's variants on one side: each compiled once per module."""

  def __init__(self, s, artifacts: str | None):
    self.s, self.artifacts, self.texts = s, artifacts, {}

  def row(self, name: str, variants) -> dict[str, object]:
    import jax  # pylint: disable=g-import-not-at-top
    step, args = tpu.train_step(self.s, variants)
    lowered = jax.jit(step).lower(*args)
    text = lowered.as_text()
    if text in self.texts:
      return {"note": f"the {self.texts[text]} step's module"}
    self.texts[text] = name
    if self.artifacts and name in SHARED:
      _write_artifact(lowered, os.path.join(self.artifacts, name + ".mlirbc"))
    t0 = time.perf_counter()
    compiled = lowered.compile()
    return _step_row(compiled, compiled, args, self.s,
                     time.perf_counter() - t0)


def _with_options(s, extra: bytes) -> dict[str, object]:
  """The plain step, compiled through the PJRT adapter with `extra` appended
  to the CompileOptionsProto it hands the plugin."""
  import jax  # pylint: disable=g-import-not-at-top
  from jax._src import pjrt_adapter  # pylint: disable=g-import-not-at-top
  if pjrt_adapter.plugin_of(jax.devices()[0].client) is None:
    return {"note": "not through the PJRT adapter"}
  if not hasattr(pjrt_adapter, "_options"):
    return {"note": "pjrt_adapter._options is gone"}
  options = pjrt_adapter._options  # pylint: disable=protected-access
  pjrt_adapter._options = lambda o: options(o) + extra  # pylint: disable=protected-access
  try:
    return Steps(s, None).row("plain", ())
  finally:
    pjrt_adapter._options = options  # pylint: disable=protected-access


def _client_step(module: bytes, s) -> dict[str, object]:
  """A module (MLIR bytecode) compiled by this jax's client directly, with
  this jax's compile options, and run on the plain step's arguments."""
  import jax  # pylint: disable=g-import-not-at-top
  from jax._src import compiler  # pylint: disable=g-import-not-at-top
  from jax._src.lib import xla_client as xc  # pylint: disable=g-import-not-at-top
  _, args = tpu.train_step(s)
  device = jax.devices()[0]
  options = compiler.get_compile_options(
      num_replicas=1, num_partitions=1, backend=device.client)
  t0 = time.perf_counter()
  exe = device.client.compile_and_load(module, xc.DeviceList((device,)),
                                       options)
  compile_s = time.perf_counter() - t0
  state = jax.tree_util.tree_structure(args[:2])

  def call(params, opt, inputs, targets):
    flat = jax.tree_util.tree_leaves((params, opt, inputs, targets))
    outs = [o[0] for o in exe.execute_sharded(flat)
            .disassemble_into_single_device_arrays()]
    params, opt = jax.tree_util.tree_unflatten(state,
                                               outs[:state.num_leaves])
    return params, opt, outs[state.num_leaves]

  return _step_row(exe, call, args, s, compile_s)


def _read_module(path: str) -> bytes:
  from jax._src.interpreters import mlir  # pylint: disable=g-import-not-at-top
  from jax._src.lib import xla_client as xc  # pylint: disable=g-import-not-at-top
  with open(path, "rb") as f, mlir.make_ir_context():
    return mlir.module_to_bytecode(
        xc._xla.mlir.deserialize_portable_artifact(f.read()))  # pylint: disable=protected-access


def _own_module(s) -> bytes:
  import jax  # pylint: disable=g-import-not-at-top
  from jax._src.interpreters import mlir  # pylint: disable=g-import-not-at-top
  step, args = tpu.train_step(s)
  return mlir.module_to_bytecode(jax.jit(step).lower(*args).compiler_ir())


def _with_memory_fitting_level(s, level: str) -> dict[str, object]:
  import jax  # pylint: disable=g-import-not-at-top
  before = getattr(jax.config, "jax_memory_fitting_level", None)
  if before is None:
    return {"note": "no jax_memory_fitting_level"}
  jax.config.update("jax_memory_fitting_level", level)
  try:
    return Steps(s, None).row("plain", ())
  finally:
    jax.config.update("jax_memory_fitting_level", before)


def part_tasks(s) -> list[tuple[str, object]]:
  """(name, thunk) for each piece of the step, forward and vjp."""
  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  import numpy as np  # pylint: disable=g-import-not-at-top
  rng = np.random.default_rng(1)
  b, n, d, v = s["batch"], s["seq"], s["d_model"], s["vocab"]

  def normal(shape, dtype):
    return jnp.asarray(rng.standard_normal(shape, np.float32), dtype)

  bf16, f32 = jnp.bfloat16, jnp.float32
  m = {k: tpu.model(s, k) for k in
       ((), ("split_concat",), ("split_slices",), ("pick_one_hot",))}
  plain = m[()]
  params, targets = plain["params"], plain["targets"]
  x = normal((b, n, d), bf16)
  logits = normal((b, n, v), f32)
  qkv = normal((b, n, 3 * d), bf16)
  picked_ct = normal((b, n), f32)
  grads = jax.tree_util.tree_map(lambda p: normal(p.shape, p.dtype), params)

  def vjp(f, primals, ct):
    def program(primals, ct):
      out, f_vjp = jax.vjp(f, *primals)
      return out, f_vjp(ct)
    return program, (primals, ct)

  cases = {
      "embed": vjp(lambda e: plain["embed"]({"embed": e}, plain["inputs"]),
                   (params["embed"],), x),
      "split jnp": vjp(lambda a: tuple(plain["split"](a)), (qkv,), (x,) * 3),
      "split slices": vjp(lambda a: tuple(m[("split_slices",)]["split"](a)),
                          (qkv,), (x,) * 3),
      "split concat": vjp(lambda a: tuple(m[("split_concat",)]["split"](a)),
                          (qkv,), (x,) * 3),
      "layer": vjp(plain["layer"], (params["layers"][0], x), x),
      "head": vjp(lambda p, a: plain["head"](p, a, targets),
                  ({"norm": params["norm"], "unembed": params["unembed"]}, x),
                  jnp.float32(1)),
      "pick take": vjp(lambda a: plain["pick"](a, targets), (logits,),
                       picked_ct),
      "pick one_hot": vjp(
          lambda a: m[("pick_one_hot",)]["pick"](a, targets), (logits,),
          picked_ct),
      "update": (plain["update"], (params, plain["opt"], grads)),
  }

  def thunk(f, args):
    def run():
      t0 = time.perf_counter()
      compiled = jax.jit(f).lower(*args).compile()
      compile_s = time.perf_counter() - t0
      call = lambda: compiled(*args)
      jax.block_until_ready(call())
      times = []
      for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(10):
          out = call()
        jax.block_until_ready(out)
        times.append((time.perf_counter() - t0) / 10 * 1e3)
      return {"compile_s": compile_s, "ms": statistics.median(times),
              **figures(compiled)}
    return run

  return [(name, thunk(f, args)) for name, (f, args) in cases.items()]


def worker(side: str, s, artifacts: str, budget: float,
           only: str | None) -> None:
  """Prints each row as `ROW <json>` on stdout as it is measured."""
  start = time.perf_counter()
  import jax  # pylint: disable=g-import-not-at-top
  print(f"{side}: jax {jax.__version__} on {jax.default_backend()}",
        file=sys.stderr, flush=True)
  if only == "parts":
    tasks = [("parts", n, t) for n, t in part_tasks(s)]
    return _run(tasks, start, budget)
  steps = Steps(s, artifacts if side == "fork" else None)
  tasks = [("steps", name, lambda v=v, name=name: steps.row(name, v))
           for name, v in STEPS]
  if side == "fork":
    tasks.append(("steps", "plain, + mfl O2",
                  lambda: _with_options(s, _MFL_O2)))
    path = os.path.join(artifacts, "build_options.bin")
    if os.path.exists(path):
      with open(path, "rb") as f:
        extra = f.read()
      tasks.append(("steps", "plain, + the baseline's build options",
                    lambda: _with_options(s, extra)))
  else:
    tasks.insert(1, ("steps", "own module, client",
                     lambda: _client_step(_own_module(s), s)))
    for i, name in enumerate(SHARED):
      path = os.path.join(artifacts, name + ".mlirbc")
      if os.path.exists(path):
        tasks.insert(2 + i, ("steps", f"fork's {name} module, client",
                             lambda p=path: _client_step(_read_module(p), s)))
    tasks.append(("steps", "plain, mfl UNKNOWN",
                  lambda: _with_memory_fitting_level(s, "UNKNOWN")))
  if only != "steps":
    tasks.append(("parts", None, lambda: part_tasks(s)))  # made when reached
  _run(tasks, start, budget)


def _run(tasks, start: float, budget: float) -> None:
  longest = 0.0
  while tasks:
    table, name, thunk = tasks.pop(0)
    if table == "parts" and name is None:
      tasks.extend(("parts", n, t) for n, t in thunk())
      continue
    if time.perf_counter() - start + 1.5 * longest > budget:
      row = {"note": "skipped: out of time"}
    else:
      t0 = time.perf_counter()
      try:
        row = thunk()
      except Exception as e:  # pylint: disable=broad-except
        row = {"note": f"failed: {e!r}"[:300]}
      longest = max(longest, time.perf_counter() - t0)
    print("ROW " + json.dumps([table, name, row]), flush=True)


def _fmt(x) -> str:
  if x is None:
    return "n/a"
  return f"{x:.4g}" if isinstance(x, float) else str(x)


def table(title: str, fork: dict, base: dict, ref: str | None = None) -> None:
  """Rows: each program on each side; columns: each figure (fork / baseline
  of the same program in brackets), then with `ref`: ms / the baseline's
  `ref` row's, and the loss."""
  print(f"\n{title}\n")
  extra = [f"ms / baseline's {ref}", "loss"] if ref else []
  print("| program | " + " | ".join([*COLUMNS, *extra]) + " |")
  print("| --- " * (len(COLUMNS) + len(extra) + 1) + "|")
  ref_ms = base.get(ref, {}).get("ms") if ref else None
  for name in dict.fromkeys([*fork, *base]):
    for side, rows in (("fork", fork), ("baseline", base)):
      row = rows.get(name)
      if row is None:
        continue
      if "ms" not in row:
        print(f"| {side}: {name} | {row.get('note')} |")
        continue
      other = (base if side == "fork" else {}).get(name, {})
      cells = []
      for c in COLUMNS:
        cell = _fmt(row.get(c))
        if (other.get(c) and isinstance(row.get(c), (int, float)) and
            isinstance(other[c], (int, float))):
          cell += f" ({row[c] / other[c]:.3f})"
        cells.append(cell)
      if ref:
        cells += [_fmt(row["ms"] / ref_ms) if ref_ms else "n/a",
                  _fmt(row.get("loss"))]
      print(f"| {side}: {name} | " + " | ".join(cells) + " |")


def main():
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--baseline-pythonpath", default=None,
                 help="PYTHONPATH that gives the baseline jax (required "
                      "unless --smoke)")
  p.add_argument("--smoke", action="store_true",
                 help="tiny sizes on the CPU (JAX_PLATFORMS=cpu unless set), "
                      "the fork alone unless --baseline-pythonpath is given")
  for name, value in SIZES["chip"].items():
    p.add_argument("--" + name.replace("_", "-"), type=int, default=None,
                   help=f"default {value} ({SIZES['smoke'][name]} with "
                        "--smoke)")
  p.add_argument("--budget", type=float, default=220,
                 help="seconds for the whole run (default 220): the fork's "
                      "worker may take 45%% of it, the baseline's the rest")
  p.add_argument("--only", choices=["steps", "parts"],
                 help="the steps alone, or the parts alone (default both)")
  p.add_argument("--worker", choices=["fork", "baseline"],
                 help=argparse.SUPPRESS)
  p.add_argument("--artifacts", help=argparse.SUPPRESS)
  p.add_argument("--worker-budget", type=float, help=argparse.SUPPRESS)
  p.add_argument("--build-options", help=argparse.SUPPRESS)
  args = p.parse_args()
  sizes = dict(SIZES["smoke" if args.smoke else "chip"])
  sizes.update({k: getattr(args, k) for k in sizes
                if getattr(args, k) is not None})
  if args.worker:
    worker(args.worker, sizes, args.artifacts, args.worker_budget,
           args.only)
    return
  if args.build_options:
    with open(args.build_options, "wb") as f:
      f.write(baseline_build_options())
    return
  if not args.smoke and not args.baseline_pythonpath:
    p.error("--baseline-pythonpath is required (or --smoke)")
  env = dict(os.environ)
  if args.smoke:
    env.setdefault("JAX_PLATFORMS", "cpu")
  envs = {"fork": env}
  if args.baseline_pythonpath:
    envs["baseline"] = dict(env, PYTHONPATH=args.baseline_pythonpath)
  size_args = [a for k, v in sizes.items()
               for a in ("--" + k.replace("_", "-"), str(v))]
  print(f"sizes: {json.dumps(sizes)}", flush=True)
  start = time.perf_counter()
  rows = {side: {"steps": {}, "parts": {}} for side in envs}
  with tempfile.TemporaryDirectory() as artifacts:
    if "baseline" in envs and args.only != "parts":  # on the CPU
      subprocess.run(
          [sys.executable, __file__, "--build-options",
           os.path.join(artifacts, "build_options.bin")],
          env=dict(envs["baseline"], JAX_PLATFORMS="cpu"), check=False,
          timeout=60)
    for side, side_env in envs.items():
      left = args.budget - (time.perf_counter() - start)
      budget = left * 0.45 if side == "fork" and len(envs) == 2 else left
      with subprocess.Popen(
          [sys.executable, __file__, "--worker", side, "--artifacts",
           artifacts, "--worker-budget", str(budget - 15), *size_args,
           *(["--only", args.only] if args.only else [])],
          env=side_env, stdout=subprocess.PIPE, text=True) as proc:
        watchdog = threading.Timer(budget, proc.kill)
        watchdog.start()
        for line in proc.stdout:
          if line.startswith("ROW "):
            table_, name, row = json.loads(line[4:])
            rows[side][table_][name] = row
            print(f"{side} {table_} {name}: " + ", ".join(
                f"{k} {_fmt(v)}" for k, v in row.items()), flush=True)
        watchdog.cancel()
        if proc.wait():
          print(f"{side} worker exited {proc.returncode} (killed at its "
                f"budget, {budget:.0f} s, if negative)", flush=True)
  fork, base = rows["fork"], rows.get("baseline", {"steps": {}, "parts": {}})
  table("steps (ms: a step, the median of the batches)", fork["steps"],
        base["steps"], "plain")
  table("parts (forward and vjp; ms: a call, the median of 5 batches of 10)",
        fork["parts"], base["parts"])
  print(f"\ntotal {time.perf_counter() - start:.0f} s", flush=True)


def _varint(data: bytes, i: int) -> tuple[int, int]:
  n = shift = 0
  while True:
    n, i, shift = n | (data[i] & 0x7f) << shift, i + 1, shift + 7
    if data[i - 1] < 0x80:
      return n, i


def _records(data: bytes) -> list[tuple[int, bytes, bytes]]:
  """A protobuf message's fields: (number, whole record, length-delimited
  body or b"")."""
  out, i = [], 0
  while i < len(data):
    start = i
    key, i = _varint(data, i)
    body = b""
    if key & 7 == 0:
      _, i = _varint(data, i)
    elif key & 7 == 2:
      size, i = _varint(data, i)
      body, i = data[i:i + size], i + size
    else:
      i += {1: 8, 5: 4}[key & 7]
    out.append((key >> 3, data[start:i], body))
  return out


def baseline_build_options() -> bytes:
  """This jax's default ExecutableBuildOptionsProto (CompileOptionsProto
  field 3, its debug_options and effort levels included) less its repeated
  fields (12, 18), as a CompileOptionsProto record that protobuf merges into
  the one already there."""
  from jax._src import compiler  # pylint: disable=g-import-not-at-top
  options = compiler.get_compile_options(num_replicas=1, num_partitions=1)
  build, = [b for f, _, b in _records(options.SerializeAsString()) if f == 3]
  body = b"".join(r for f, r, _ in _records(build) if f not in (12, 18))
  size, n = b"", len(body)
  while True:
    size += bytes([n & 0x7f | (0x80 if n > 0x7f else 0)])
    n >>= 7
    if not n:
      return b"\x1a" + size + body


if __name__ == "__main__":
  main()
