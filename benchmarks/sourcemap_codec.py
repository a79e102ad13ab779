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
"""Speed of the source map `mappings` codec (jax._src.sourcemap).

Times `serialize_mappings` and `deserialize_mappings` on 10^4, 10^5 and 10^6
segments of jaxpr-like mappings (a few segments per line, 4 fields, column and
line deltas that often need 2-digit VLQs) and reports ms per 10^5 segments,
which should stay flat (linear growth).  Targets: <= 125 ms (serialize) and
<= 100 ms (deserialize) per 10^5 segments, half of what a straightforward
digit-by-digit codec takes.  For a same-run ratio the benchmark also times
such a straightforward codec (written here, per-character Python).

Times are CPU times of this process (`time.process_time`, median of several
runs): on a shared, loaded machine wall-clock times of a single-threaded codec
mostly measure the wait for a core.

  python benchmarks/sourcemap_codec.py [--quick]

Needs the fork on PYTHONPATH (or installed).
"""
from __future__ import annotations

import random
import statistics
import sys
import time

from jax._src import sourcemap  # pylint: disable=g-import-not-at-top

TARGET_MS = {"serialize": 125.0, "deserialize": 100.0}
_B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
_VAL = {c: i for i, c in enumerate(_B64)}


def make_mappings(num_segments: int, seed: int = 0):
  rng = random.Random(seed)
  out = []
  total = 0
  src_line = 0
  while total < num_segments:
    k = min(rng.randint(0, 8), num_segments - total)
    col = 0
    line = []
    for _ in range(k):
      col += rng.randint(1, 40)
      src_line = max(0, src_line + rng.randint(-40, 40))
      line.append((col, rng.randint(0, 3), src_line, rng.randint(0, 80)))
    out.append(line)
    total += k
  return out


# A plain codec, digit by digit, for the same-run comparison.
def _naive_vlq(v: int) -> str:
  v = (-v << 1) | 1 if v < 0 else v << 1
  s = ""
  while True:
    d = v & 31
    v >>= 5
    if v:
      s += _B64[d | 32]
    else:
      return s + _B64[d]


def naive_serialize(mappings) -> str:
  prev = [0, 0, 0, 0, 0]
  lines = []
  for line in mappings:
    prev[0] = 0
    segs = []
    for seg in line:
      s = ""
      for i, f in enumerate(seg):
        s += _naive_vlq(f - prev[i])
        prev[i] = f
      segs.append(s)
    lines.append(",".join(segs))
  return ";".join(lines)


def naive_deserialize(text: str):
  prev = [0, 0, 0, 0, 0]
  out = []
  for line in text.split(";"):
    prev[0] = 0
    segs = []
    if line:
      for seg in line.split(","):
        vals = []
        acc = shift = 0
        for ch in seg:
          d = _VAL[ch]
          acc += (d & 31) << shift
          if d & 32:
            shift += 5
          else:
            vals.append(-(acc >> 1) if acc & 1 else acc >> 1)
            acc = shift = 0
        for i, x in enumerate(vals):
          prev[i] += x
        segs.append(tuple(prev[:len(vals)]))
    out.append(segs)
  return out


def cpu_timeit(fn, *, repeat: int) -> float:
  """Median CPU seconds of `fn()`."""
  fn()
  times = []
  for _ in range(repeat):
    t0 = time.process_time()
    fn()
    times.append(time.process_time() - t0)
  return statistics.median(times)


def main(argv: list[str]) -> None:
  quick = "--quick" in argv
  sizes = [10**4, 10**5] if quick else [10**4, 10**5, 10**6]
  print(f"{'segments':>9} {'op':>12} {'ms':>9} {'ms/1e5':>8} "
        f"{'naive ms/1e5':>13} {'speedup':>8}")
  worst = {"serialize": 0.0, "deserialize": 0.0}
  for n in sizes:
    m = make_mappings(n)
    text = sourcemap.serialize_mappings(m)
    assert text == naive_serialize(m)
    assert sourcemap.deserialize_mappings(text) == m
    repeat = 5 if n < 10**6 else 3
    for op, fast, naive, arg in (
        ("serialize", sourcemap.serialize_mappings, naive_serialize, m),
        ("deserialize", sourcemap.deserialize_mappings, naive_deserialize,
         text)):
      t = cpu_timeit(lambda: fast(arg), repeat=repeat)  # pylint: disable=cell-var-from-loop
      if n <= 10**5:
        tn = cpu_timeit(lambda: naive(arg), repeat=3)  # pylint: disable=cell-var-from-loop
        naive_s = f"{tn * 1e3 * 1e5 / n:13.1f}"
        ratio = f"{tn / t:7.1f}x"
      else:
        naive_s, ratio = f"{'-':>13}", f"{'-':>8}"
      per = t * 1e3 * 1e5 / n
      worst[op] = max(worst[op], per)
      print(f"{n:>9} {op:>12} {t * 1e3:9.1f} {per:8.1f} {naive_s} {ratio}")
  for op, w in worst.items():
    verdict = "OK" if w <= TARGET_MS[op] else "OVER TARGET"
    print(f"{op}: worst {w:.1f} ms per 1e5 segments "
          f"(target <= {TARGET_MS[op]:.0f}): {verdict}")


if __name__ == "__main__":
  main(sys.argv[1:])
