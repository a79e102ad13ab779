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
"""Which block shapes a TPU accepts, by dtype, against InterpretParams().

Run on a TPU machine with the fork installed (JAX_PLATFORMS=tpu,cpu):
    python chipcheck/tiling_on_chip.py
For each dtype x array shape x block shape it compiles and runs a copy
kernel on the chip (a grid over the blocks), then the same call under
`pltpu.InterpretParams()` on the CPU, and prints one line:
    <dtype> array <shape> block <shape>: chip ACCEPTED|REFUSED, interpret
    ACCEPTED|REFUSED [AGREE|DISAGREE] [the chip's first error line]
and at the end the count of disagreements. The chip's result is checked
against the input (a copy must be exact).
"""
from __future__ import annotations

import itertools
import sys

import numpy as np

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

DTYPES = ["float32", "int32", "uint32", "bfloat16", "float16", "int16",
          "int8", "uint8", "float8_e4m3fn", "float8_e5m2", "bool"]
CASES = [  # (array shape, block shape)
    ((256, 256), (8, 128)), ((256, 256), (16, 128)), ((256, 256), (32, 128)),
    ((256, 256), (64, 128)), ((256, 256), (8, 256)), ((256, 256), (4, 128)),
    ((256, 256), (256, 256)), ((16, 256), (8, 128)), ((16, 256), (16, 128)),
    ((24, 256), (8, 128)), ((8, 256), (8, 128)), ((64, 96), (8, 96)),
    ((64, 96), (32, 96)), ((2, 64, 256), (1, 16, 256)),
    ((2, 64, 256), (1, 32, 256)),
]


def copy_call(shape, block, dtype, interpret):
  grid = tuple(n // b for n, b in zip(shape, block))
  index_map = lambda *i: i
  return pl.pallas_call(
      lambda x_ref, o_ref: o_ref.__setitem__(..., x_ref[...]),
      out_shape=jax.ShapeDtypeStruct(shape, dtype), grid=grid,
      in_specs=[pl.BlockSpec(index_map, block)],
      out_specs=pl.BlockSpec(index_map, block), interpret=interpret)


def data(shape, dtype):
  x = np.arange(np.prod(shape)).reshape(shape) % 7
  return jnp.asarray(x.astype(bool) if dtype == "bool" else x).astype(dtype)


def attempt(fn, x, device):
  try:
    out = jax.block_until_ready(jax.jit(fn, device=device)(x))
    if not np.array_equal(np.asarray(out), np.asarray(x)):
      return "ACCEPTED (WRONG VALUES)", ""
    return "ACCEPTED", ""
  except Exception as e:  # pylint: disable=broad-except
    lines = [l for l in str(e).splitlines() if l.strip()]
    tiling = [l for l in lines if "tiling" in l or "divisible" in l]
    return "REFUSED", (tiling or lines or [type(e).__name__])[0][:200]


def main() -> int:
  tpu = jax.devices("tpu")[0]
  cpu = jax.devices("cpu")[0]
  print(f"chip: {tpu.device_kind}; jax {jax.__version__}")
  disagree = 0
  for dtype, (shape, block) in itertools.product(DTYPES, CASES):
    chip, why = attempt(copy_call(shape, block, dtype, False),
                        jax.device_put(data(shape, dtype), tpu), tpu)
    interp, iwhy = attempt(
        copy_call(shape, block, dtype, pltpu.InterpretParams()),
        jax.device_put(data(shape, dtype), cpu), cpu)
    agree = chip.split()[0] == interp.split()[0]
    disagree += not agree
    print(f"{dtype} array {shape} block {block}: chip {chip}, interpret "
          f"{interp} {'AGREE' if agree else 'DISAGREE'}"
          + (f" | chip: {why}" if why else "")
          + (f" | interpret: {iwhy}" if iwhy and not agree else ""),
          flush=True)
  print(f"{disagree} disagreements")
  return 0


if __name__ == "__main__":
  sys.exit(main())
