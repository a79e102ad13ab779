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
"""Pallas TPU lowering coverage: which everyday kernel forms lower for a TPU.

Each case is a tiny kernel (VMEM blocks of whole TPU tiles: (8, 128) for
32-bit types, (16, 128) bf16 and int16, (32, 128) int8; or int32 scalars in
SMEM) exported for TPU on this host (`export(..., lowering_platforms=
("tpu",))`; today's jax: `jax.export.export(..., platforms=("tpu",))`). A
case lowers when the export succeeds, or when it stops at jax 0.4.26's Mosaic
compilation asking for the TPU's kind (Pallas's lowering is done by then).

  python benchmarks/pallas_tpu_lowering.py
      "lowered N/M" for the jax this Python imports, each failure named.
  python benchmarks/pallas_tpu_lowering.py --peer PEER_PYTHON
      A markdown table: the Pallas TPU lowering rules of the jax that
      PEER_PYTHON imports (e.g. a venv with today's jax) against this
      one's, then each case on both. The peer runs this file with
      `--json` and without PYTHONPATH. Today's jax asks for a chip's device
      kind in some rules; there a case is tried again as on a TPU v5e.
  python benchmarks/pallas_tpu_lowering.py --chip
      On a TPU: each case compiled and run on the chip ("runs" or why not).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

if __name__ == "__main__" and "--chip" not in sys.argv:
  os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
from jax._src import core as jax_core
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu
import numpy as np

ANY = getattr(pl, "ANY", None) or pltpu.TPUMemorySpace.ANY
SMEM = pltpu.TPUMemorySpace.SMEM if hasattr(pltpu, "TPUMemorySpace") \
    else pltpu.SMEM
TILES = {"float32": (8, 128), "int32": (8, 128), "bfloat16": (16, 128),
         "int16": (16, 128), "int8": (32, 128)}
BLOCK = {dtype: jax.ShapeDtypeStruct(shape, dtype)
         for dtype, shape in TILES.items()}
F32, I32 = BLOCK["float32"], BLOCK["int32"]
SCALARS = jax.ShapeDtypeStruct((2,), jnp.int32)


def vector(fn, *shapes):
  """A kernel applying `fn` to whole blocks."""
  out = jax.eval_shape(fn, *shapes)
  def kernel(*refs):
    refs[-1][...] = fn(*(r[...] for r in refs[:-1]))
  return pl.pallas_call(kernel, out_shape=out), shapes


def block(body, shape=F32):
  """A kernel `body(x_ref, o_ref)` on one block, its output like its input."""
  return pl.pallas_call(body, out_shape=shape), (shape,)


def scalar(fn):
  """A kernel applying `fn` to two int32 scalars read from SMEM."""
  def kernel(x_ref, o_ref):
    o_ref[0] = fn(x_ref[0], x_ref[1])
  return pl.pallas_call(
      kernel, out_shape=jax.ShapeDtypeStruct((1,), jnp.int32),
      in_specs=[pl.BlockSpec(memory_space=SMEM)],
      out_specs=pl.BlockSpec(memory_space=SMEM)), (SCALARS,)


def dma_loop(steps: int = 4, *, interpret: object = False):
  """Double-buffered DMAs from HBM whose slot is `i % 2` in a fori_loop:
  o[i] = 2 * x[i] (tests/pallas_tpu_lowering_test.py runs it too)."""
  def kernel(x_hbm, o_ref, buf, sems):
    def copy(i, slot):
      return pltpu.make_async_copy(x_hbm.at[i], buf.at[slot], sems.at[slot])
    copy(0, 0).start()
    def body(i, carry):
      slot = i % 2
      @pl.when(i + 1 < steps)
      def _():
        copy(i + 1, 1 - slot).start()
      copy(i, slot).wait()
      o_ref[i] = buf[slot] * 2.0
      return carry
    lax.fori_loop(0, steps, body, 0)
  shape = jax.ShapeDtypeStruct((steps, 8, 128), jnp.float32)
  return pl.pallas_call(
      kernel, out_shape=shape, interpret=interpret,
      grid_spec=pltpu.PrefetchScalarGridSpec(
          num_scalar_prefetch=0, grid=(),
          in_specs=[pl.BlockSpec(memory_space=ANY)],
          out_specs=pl.BlockSpec(memory_space=None),
          scratch_shapes=[pltpu.VMEM((2, 8, 128), jnp.float32),
                          pltpu.SemaphoreType.DMA((2,))])), (shape,)


# The forms tests/pallas_tpu_lowering_test.py runs (with NumPy's answers),
# each a function of whole blocks, or a kernel body on one block.
def sum_to_scalar(x_ref, o_ref):   # issue 54, as a new user writes it
  o_ref[...] = jnp.full(o_ref.shape, jnp.sum(x_ref[...]), o_ref.dtype)


def vmem_scalar_loop_bound(x_ref, o_ref):   # issue 54
  n = x_ref[0, 1].astype(jnp.int32)
  o_ref[...] = lax.fori_loop(0, n, lambda i, a: a + 1.0, x_ref[...])


def vmem_scalar_compare(x_ref, o_ref):   # issue 54: lowered before
  o_ref[...] = jnp.where(x_ref[...] > x_ref[0, 1], 1.0, 0.0)


def vmem_scalar_arithmetic(x_ref, o_ref):
  x, s = x_ref[...], x_ref[0, 1]
  o_ref[...] = x * s + (s - x_ref[1, 2]) * 2


def vmem_scalar_when(x_ref, o_ref):
  o_ref[...] = x_ref[...]
  @pl.when(x_ref[0, 1] > x_ref[1, 0])
  def _():
    o_ref[...] = -x_ref[...]


def mod_div_3(x):   # issue 54: int32 `x % 3`, `x // 3` with a Python int
  return x % 3 + x // 3 * 8


def reduce_to_scalar(reduce):
  return lambda x: jnp.full(x.shape, reduce(x), x.dtype)


def all_any(x):
  b = x > 0
  return jnp.where(jnp.all(b, 1, keepdims=True), 1, 0) + jnp.where(
      jnp.any(b, 0, keepdims=True), 2, 0) + jnp.where(jnp.all(b), 4, 0) \
      + jnp.where(jnp.any(b), 8, 0)


COMPARES = (lax.eq, lax.ne, lax.lt, lax.le, lax.gt, lax.ge)


def scalar_arithmetic(x):
  """x with Python scalars: + - * max min (bool: & | ^)."""
  if x.dtype == jnp.bool_:
    return ((x & True) | False) ^ True
  return jnp.minimum(jnp.maximum((x * 3 + 2) - 1, 1), 9)


def scalar_compares(x):
  """Which of x == 1, x != 1, x < 1, ... holds last, as an int32."""
  one = True if x.dtype == jnp.bool_ else 1
  out = jnp.zeros(x.shape, jnp.int32)
  for k, op in enumerate(COMPARES):
    out = jnp.where(op(x, jnp.asarray(one, x.dtype)), k + 1, out)
  return out


def bool_from(fn):
  """fn of the booleans x > 0 of an int32 block."""
  return lambda x: fn(x > 0).astype(jnp.int32)


CASES = {
    # elementwise float math
    "add": lambda: vector(jnp.add, F32, F32),
    "mul": lambda: vector(jnp.multiply, F32, F32),
    "div": lambda: vector(jnp.divide, F32, F32),
    "max": lambda: vector(jnp.maximum, F32, F32),
    "abs": lambda: vector(jnp.abs, F32),
    "exp": lambda: vector(jnp.exp, F32),
    "log": lambda: vector(jnp.log, F32),
    "sqrt": lambda: vector(jnp.sqrt, F32),
    "tanh": lambda: vector(jnp.tanh, F32),
    "sigmoid": lambda: vector(jax.nn.sigmoid, F32),
    "erf": lambda: vector(lax.erf, F32),
    "sign_f32": lambda: vector(jnp.sign, F32),
    "cos": lambda: vector(jnp.cos, F32),
    "tan": lambda: vector(jnp.tan, F32),
    "floor": lambda: vector(jnp.floor, F32),
    "ceil": lambda: vector(jnp.ceil, F32),
    "stop_gradient": lambda: vector(lax.stop_gradient, F32),
    "isfinite": lambda: vector(lambda x: jnp.where(jnp.isfinite(x), x, 0), F32),
    "bitcast_convert_type": lambda: vector(
        lambda x: lax.bitcast_convert_type(x, jnp.int32), F32),
    # integer arithmetic on vectors
    "int_add": lambda: vector(jnp.add, I32, I32),
    "int_rem": lambda: vector(lax.rem, I32, I32),
    "int_mod": lambda: vector(jnp.remainder, I32, I32),
    "int_floordiv": lambda: vector(jnp.floor_divide, I32, I32),
    "sign_i32": lambda: vector(jnp.sign, I32),
    "x % 3 + x // 3": lambda: vector(mod_div_3, I32),
    "x % 3": lambda: vector(lambda x: x % 3, I32),
    "x // 3": lambda: vector(lambda x: x // 3, I32),
    "jnp.remainder(x, 3)": lambda: vector(lambda x: jnp.remainder(x, 3), I32),
    "jnp.floor_divide(x, 3)": lambda: vector(
        lambda x: jnp.floor_divide(x, 3), I32),
    "x % -3": lambda: vector(lambda x: x % -3, I32),
    "x // -3": lambda: vector(lambda x: x // -3, I32),
    "lax.rem(x, 3), lax.div(x, 3)": lambda: vector(
        lambda x: lax.rem(x, 3) + lax.div(x, 3), I32),
    # integer arithmetic on SMEM scalars
    "scalar_rem": lambda: scalar(lax.rem),
    "scalar_mod": lambda: scalar(jnp.remainder),
    "scalar_floordiv": lambda: scalar(jnp.floor_divide),
    "scalar % 3, // 3": lambda: scalar(lambda x, y: x % 3 + y // 3),
    "mod2_in_fori_loop": dma_loop,
    # comparisons, logic and shifts
    "lt_f32": lambda: vector(lambda x, y: jnp.where(x < y, x, y), F32, F32),
    "eq_i32": lambda: vector(lambda x, y: jnp.where(x == y, x, y), I32, I32),
    "and_i32": lambda: vector(jnp.bitwise_and, I32, I32),
    "shift_left": lambda: vector(lax.shift_left, I32, I32),
    "shift_right_logical": lambda: vector(lax.shift_right_logical, I32, I32),
    "shift_right_arithmetic": lambda: vector(
        lax.shift_right_arithmetic, I32, I32),
    # vector op Python scalar, each dtype
    **{f"{name} with a scalar, {dtype}": (
        lambda fn=fn, dtype=dtype: vector(fn, BLOCK[dtype]))
       for dtype in TILES
       for name, fn in [("+ - * max min", scalar_arithmetic),
                        ("compares", scalar_compares)]},
    "and, or, xor with a scalar, bool": lambda: vector(
        bool_from(scalar_arithmetic), I32),
    "compares with a scalar, bool": lambda: vector(
        bool_from(scalar_compares), I32),
    # scalars read from a VMEM block
    "VMEM scalar as a loop bound": lambda: block(vmem_scalar_loop_bound),
    "VMEM scalar in a compare": lambda: block(vmem_scalar_compare),
    "VMEM scalar in arithmetic": lambda: block(vmem_scalar_arithmetic),
    "VMEM scalar in arithmetic, int32": lambda: block(
        vmem_scalar_arithmetic, I32),
    "VMEM scalar in pl.when": lambda: block(vmem_scalar_when),
    "VMEM scalar in arithmetic, bf16": lambda: block(
        vmem_scalar_arithmetic, BLOCK["bfloat16"]),
    # reductions
    "sum": lambda: vector(lambda x: jnp.sum(x, 1, keepdims=True), F32),
    "max_reduce": lambda: vector(lambda x: jnp.max(x, 1, keepdims=True), F32),
    "min_reduce": lambda: vector(lambda x: jnp.min(x, 1, keepdims=True), F32),
    "sum to a scalar": lambda: block(sum_to_scalar),
    **{f"{f.__name__} to a scalar, {dtype}": (
        lambda f=f, dtype=dtype: vector(reduce_to_scalar(f), BLOCK[dtype]))
       for f in (jnp.sum, jnp.max, jnp.min)
       for dtype in ("float32", "int32", "bfloat16")},
    "sum over all axes, keepdims": lambda: vector(
        lambda x: x - jnp.sum(x, keepdims=True), F32),
    "sum over axis 0": lambda: vector(lambda x: x - jnp.sum(x, 0)[None], F32),
    "sum over axes (1, 2) of 3-D": lambda: vector(
        lambda x: x - jnp.sum(x, (1, 2), keepdims=True),
        jax.ShapeDtypeStruct((2, 8, 128), jnp.float32)),
    "max over axes (0, 1) of 3-D": lambda: vector(
        lambda x: x - jnp.max(x, (0, 1))[None, None],
        jax.ShapeDtypeStruct((2, 8, 128), jnp.float32)),
    **{f"{f.__name__} over axis 1, {dtype}": (
        lambda f=f, dtype=dtype: vector(
            lambda x: f(x, 1, keepdims=True), BLOCK[dtype]))
       for f in (jnp.sum, jnp.max, jnp.min) for dtype in ("int32", "bfloat16")},
    "all, any (reduce_and, reduce_or)": lambda: vector(all_any, F32),
    "argmax": lambda: vector(lambda x: jnp.argmax(x, 1, keepdims=True), F32),
    "argmin": lambda: vector(lambda x: jnp.argmin(x, 1, keepdims=True), F32),
    "cumsum": lambda: vector(lambda x: jnp.cumsum(x, 1), F32),
    # casts, iota, transposes
    "cast_f32_i32": lambda: vector(lambda x: x.astype(jnp.int32), F32),
    "cast_i32_f32": lambda: vector(lambda x: x.astype(jnp.float32), I32),
    "iota": lambda: vector(
        lambda x: x + lax.broadcasted_iota(jnp.int32, (8, 128), 1), I32),
    "transpose": lambda: vector(
        lambda x: x.T, jax.ShapeDtypeStruct((128, 128), jnp.float32)),
}


def export_for_tpu(call, *shapes):
  if hasattr(jax, "export") and hasattr(jax.export, "export"):
    return jax.export.export(jax.jit(call), platforms=("tpu",))(*shapes)
  from jax.experimental import export  # pylint: disable=g-import-not-at-top
  return export.export(call, lowering_platforms=("tpu",))(*shapes)


def why(e: BaseException) -> str:
  """One line: the lowering rule's own error where there is one."""
  lines = (str(e).strip() or type(e).__name__).splitlines()
  if lines[0].startswith("Exception while lowering eqn"):
    eqn = lines[1].strip()
    while e.__cause__ is not None:   # the rule's own error
      e = e.__cause__
    text = str(e).strip().splitlines()
    return f"{eqn}: {type(e).__name__}: {(text or [''])[0][:120]}"
  return f"{type(e).__name__}: {lines[0][:160]}"


def lower(name: str) -> str | None:
  """None if case `name` lowers for TPU, else why not."""
  try:
    call, shapes = CASES[name]()
    export_for_tpu(call, *shapes)
  except Exception as e:  # pylint: disable=broad-except
    if "Unrecognized TPU device kind: cpu" in str(e):
      return None   # 0.4.26: asked after lowering to Mosaic
    return why(e)
  return None


def lower_as_on_a_chip(name: str) -> str | None:
  """`lower(name)` with today's jax told that this host is a TPU v5e."""
  from jax._src.pallas.mosaic import tpu_info  # pylint: disable=g-import-not-at-top
  tpu_info.registry["cpu"] = lambda: tpu_info.get_tpu_info_for_chip(
      tpu_info.ChipVersion.TPU_V5E, 1)
  try:
    return lower(name)
  finally:
    del tpu_info.registry["cpu"]


def run_on_chip(name: str) -> str | None:
  """None if case `name` compiles and runs on this host's TPU."""
  try:
    call, shapes = CASES[name]()
    rng = np.random.default_rng(0)
    args = [np.asarray(rng.integers(-4, 5, s.shape)).astype(s.dtype)
            for s in shapes]
    jax.block_until_ready(jax.jit(call)(*args))
  except Exception as e:  # pylint: disable=broad-except
    return why(e)
  return None


def rules() -> dict[str, list[str]]:
  """The primitives with a Pallas TPU (TensorCore) lowering rule, and every
  primitive this jax defines."""
  from jax._src.pallas.mosaic import lowering  # pylint: disable=g-import-not-at-top
  table = lowering.lowering_rules
  if any(isinstance(v, dict) for v in table.values()):
    table = next(iter(table.values()))   # today's: by core type, TC first
  defined = {v.name for m in list(sys.modules.values())
             if m is not None and m.__name__.startswith("jax")
             for v in list(vars(m).values())
             if isinstance(v, jax_core.Primitive)}
  return {"rules": sorted(p.name for p in table),
          "defined": sorted(defined)}


def measure() -> dict:
  peer = hasattr(jax, "export") and hasattr(jax.export, "export")
  cases = {}
  for name in CASES:
    cases[name] = lower(name)
    if peer and cases[name] and "device kind" in cases[name]:
      on_chip = lower_as_on_a_chip(name)
      cases[name] = ("needs a chip's device kind; as on a TPU v5e: " +
                     (on_chip or "lowers"))
  return {"version": jax.__version__, "cases": cases, **rules()}


def cell(result: str | None) -> str:
  return "lowers" if result is None else f"refused ({result})".replace(
      "|", "\\|")


def table(peer: dict, ours: dict) -> str:
  def rule(side, name):
    if name in side["rules"]:
      return "has a rule"
    return ("refused (no rule)" if name in side["defined"] else
            "no such primitive")
  groups = {}   # the primitives whose rules differ, by their two cells
  for name in sorted(set(peer["rules"]) ^ set(ours["rules"])):
    groups.setdefault((rule(peer, name), rule(ours, name)), []).append(name)
  rows = [f"| primitives | jax {peer['version']} | fork (jax "
          f"{ours['version']}) |", "| --- | --- | --- |"]
  rows += [f"| {', '.join(f'`{n}`' for n in names)} | {p} | {o} |"
           for (p, o), names in groups.items()]
  both = set(peer["rules"]) & set(ours["rules"])
  rows.append(f"| {len(both)} others | have rules | have rules |")
  rows += ["", f"| form | jax {peer['version']} | fork |", "| --- | --- | --- |"]
  rows += [f"| `{name}` | {cell(peer['cases'].get(name))} | "
           f"{cell(ours['cases'][name])} |" for name in ours["cases"]]
  return "\n".join(rows)


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--peer", metavar="PYTHON")
  parser.add_argument("--json", action="store_true")
  parser.add_argument("--chip", action="store_true")
  args = parser.parse_args()
  if args.chip:
    ran = 0
    for name in CASES:
      reason = run_on_chip(name)
      ran += reason is None
      print(f"{name}: {'runs' if reason is None else cell(reason)}",
            flush=True)
    print(f"jax {jax.__version__} on a {jax.devices()[0].device_kind}: "
          f"{ran}/{len(CASES)} run")
    return
  if args.json:
    print(json.dumps(measure()))
    return
  if args.peer:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    peer = subprocess.run([args.peer, __file__, "--json"], env=env,
                          capture_output=True, text=True)
    if peer.returncode:
      sys.exit(f"{args.peer} failed:\n{peer.stderr}")
    print(table(json.loads(peer.stdout.splitlines()[-1]), measure()))
    return
  failures = {k: v for k, v in measure()["cases"].items() if v is not None}
  print(f"jax {jax.__version__}: lowered {len(CASES) - len(failures)}/"
        f"{len(CASES)}")
  for name, reason in failures.items():
    print(f"  FAIL {name}: {reason}")


if __name__ == "__main__":
  main()
