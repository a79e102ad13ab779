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
"""On a TPU, with the fork: what `pltpu.InterpretParams()` refuses (the
Pallas TPU lowering's refusals, VMEM blocks of the dtypes a chip refuses) the
chip refuses too, and each corrected twin runs on both with the same answer.

Run: JAX_PLATFORMS=tpu,cpu python chipcheck/refusals_on_chip.py
One line per kernel: chip ACCEPTED|REFUSED, interpret ACCEPTED|REFUSED,
AGREE|DISAGREE (and for accepted pairs, whether the answers are equal), the
first line of each error; then the count of disagreements.
"""
from __future__ import annotations

import sys

import numpy as np

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def whole(body, x, out_dtype=None):
  """A kernel over the whole (8, 128) array: o = body(x)."""
  def kernel(x_ref, o_ref):
    o_ref[...] = body(x_ref[...], o_ref).astype(o_ref.dtype)
  return lambda interpret: pl.pallas_call(
      kernel, out_shape=jax.ShapeDtypeStruct(x.shape, out_dtype or x.dtype),
      interpret=interpret)


def blocked(dtype):
  spec = pl.BlockSpec(lambda i: (i, 0), (32, 256))
  return lambda interpret: pl.pallas_call(
      lambda x_ref, o_ref: o_ref.__setitem__(..., x_ref[...]),
      out_shape=jax.ShapeDtypeStruct((64, 256), dtype), grid=(2,),
      in_specs=[spec], out_specs=spec, interpret=interpret)


def scalar_store(x_ref, o_ref):
  o_ref[...] = x_ref[...]
  o_ref[0, 0] = x_ref[1, 1]


def masked_store(x_ref, o_ref):
  rows, cols = (lax.broadcasted_iota(jnp.int32, o_ref.shape, d)
                for d in (0, 1))
  o_ref[...] = jnp.where((rows == 0) & (cols == 0), x_ref[1, 1], x_ref[...])


def store(kernel, x):
  return lambda interpret: pl.pallas_call(
      kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
      interpret=interpret)


F = (np.arange(8 * 128) % 7 + 1).astype(np.float32).reshape(8, 128)
I = F.astype(np.int32)
bcast = lambda v, o: jnp.broadcast_to(v, o.shape)
CASES = [  # (name, call maker, input)
    ("cumprod", whole(lambda v, o: lax.cumprod(v, 1), F), F),
    ("cumsum (its twin)", whole(lambda v, o: jnp.cumsum(v, 1), F), F),
    ("argmax of int32", whole(lambda v, o: bcast(jnp.argmax(
        v, 1, keepdims=True), o), I), I),
    ("argmax of float32 (its twin)", whole(lambda v, o: bcast(jnp.argmax(
        v.astype(jnp.float32), 1, keepdims=True), o), I), I),
    ("sum to a scalar", whole(lambda v, o: jnp.full(o.shape, v.sum()), F), F),
    ("keepdims sums (its twin)", whole(lambda v, o: bcast(
        v.sum(1, keepdims=True).sum(0, keepdims=True), o), F), F),
    ("a scalar stored into VMEM", store(scalar_store, F), F),
    ("a masked store (its twin)", store(masked_store, F), F),
    *((f"{t} blocks", blocked(t), np.ones((64, 256), t)) for t in (
        "float16", "uint8", "uint16", "uint32", "bool", "int32", "float32",
        "bfloat16")),
]


def attempt(make, interpret, x, device):
  try:
    out = jax.jit(make(interpret), device=device)(jax.device_put(x, device))
    return "ACCEPTED", np.asarray(jax.block_until_ready(out)), ""
  except Exception as e:  # pylint: disable=broad-except
    lines = [l for l in str(e).splitlines() if l.strip()] or [type(e).__name__]
    return "REFUSED", None, f"{type(e).__name__}: {lines[0][:160]}"


def main() -> int:
  tpu, cpu = jax.devices("tpu")[0], jax.devices("cpu")[0]
  print(f"chip: {tpu.device_kind}; jax {jax.__version__}")
  disagree = 0
  for name, make, x in CASES:
    chip, c_out, c_why = attempt(make, False, x, tpu)
    interp, i_out, i_why = attempt(make, pltpu.InterpretParams(), x, cpu)
    agree = chip == interp and (c_out is None or np.array_equal(
        c_out, i_out, equal_nan=True))
    disagree += not agree
    print(f"{name}: chip {chip}, interpret {interp} "
          f"{'AGREE' if agree else 'DISAGREE'}"
          + (f" | chip: {c_why}" if c_why else "")
          + (f" | interpret: {i_why}" if i_why else ""), flush=True)
  print(f"{disagree} disagreements")
  return 0


if __name__ == "__main__":
  sys.exit(main())
