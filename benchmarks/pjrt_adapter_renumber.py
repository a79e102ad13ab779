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
"""The PJRT adapter's renumbering of optimized HLO (patch 0026's C half).

    python benchmarks/pjrt_adapter_renumber.py [--baseline OLD/pjrt_adapter.c]
        [--computations 3000] [--instructions 10] [--rounds 7]

Builds a synthetic optimized HloModuleProto as a later XLA writes it (ids
(computation << 32) | index, operands, root ids and a schedule) and times
`jax_pjrt_adapter_renumber` on it, in this process through ctypes: the
tree's C half (`jax._src.pjrt_adapter`, on PYTHONPATH) and, with
`--baseline`, another pjrt_adapter.c compiled here with the same flags,
interleaved, 5 calls a round each; prints each one's median and range and
checks that both write the same bytes.
"""
from __future__ import annotations

import argparse
import ctypes
from pathlib import Path
import statistics
import subprocess
import tempfile
import time


def varint(n: int) -> bytes:
  out = bytearray()
  while n >= 0x80:
    out.append(n & 0x7f | 0x80)
    n >>= 7
  return bytes(out + bytes([n]))


def field(number: int, value: int | bytes) -> bytes:
  if isinstance(value, int):
    return varint(number << 3) + varint(value)
  return varint(number << 3 | 2) + varint(len(value)) + value


def module(computations: int, instructions: int) -> bytes:
  parts, sequences = [], []
  shape = field(3, b"\x08\x0b\x10\x08\x10\x80\x01")
  for c in range(1, computations + 1):
    ids = [c << 32 | i for i in range(instructions)]
    body = field(1, b"computation%d" % c)
    for i, id_ in enumerate(ids):
      operands = b"".join(map(varint, ids[max(i - 2, 0):i]))
      body += field(2, field(1, b"add.%d.%d" % (c, i)) + field(2, b"add") +
                    shape + field(35, id_) +
                    (field(36, operands) if operands else b""))
    parts.append(field(3, body + field(5, c) + field(6, ids[-1])))
    ids_field = field(1, b"".join(map(varint, ids)))
    sequences.append(field(1, field(1, c) + field(2, ids_field)))
  return field(1, b"m") + b"".join(parts) + field(7, b"".join(sequences))


def renumberer(lib: ctypes.CDLL):
  f = lib.jax_pjrt_adapter_renumber
  f.restype = ctypes.c_size_t
  f.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p,
                ctypes.c_size_t]
  return f


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--baseline", type=Path)
  ap.add_argument("--computations", type=int, default=3000)
  ap.add_argument("--instructions", type=int, default=10)
  ap.add_argument("--rounds", type=int, default=7)
  args = ap.parse_args()
  from jax._src import pjrt_adapter  # pylint: disable=g-import-not-at-top
  libs = {"this": renumberer(pjrt_adapter._native())}  # pylint: disable=protected-access
  if args.baseline:
    so = Path(tempfile.mkdtemp()) / "baseline.so"
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", str(so),
                    str(args.baseline)], check=True)
    libs["baseline"] = renumberer(ctypes.CDLL(str(so)))
  data = module(args.computations, args.instructions)
  print(f"{args.computations} computations x {args.instructions} "
        f"instructions: {len(data)} bytes")
  buf = ctypes.create_string_buffer(len(data))
  times = {name: [] for name in libs}
  outputs = {}
  for _ in range(args.rounds):
    for name, renumber in libs.items():
      for _ in range(5):
        ctypes.memmove(buf, data, len(data))
        start = time.perf_counter()
        size = renumber(b"hlo", 3, buf, len(data))
        times[name].append(time.perf_counter() - start)
        outputs[name] = buf.raw[:size]
  for name, t in times.items():
    print(f"{name}: median {statistics.median(t) * 1e3:.1f} ms "
          f"({min(t) * 1e3:.1f}-{max(t) * 1e3:.1f}, {len(t)} calls), "
          f"{len(outputs[name])} bytes out")
  if len(set(outputs.values())) > 1:
    raise SystemExit("the two renumberings differ")


if __name__ == "__main__":
  main()
