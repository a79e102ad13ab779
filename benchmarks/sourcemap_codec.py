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
"""Speed of the source map `mappings` codec (jax._src.sourcemap) vs upstream's.

Times `serialize_mappings` and `deserialize_mappings` on 10^4, 10^5 and 10^6
segments of jaxpr-like mappings (a few segments per line, 4 fields, column and
line deltas that often need 2-digit VLQs) and reports ms per 10^5 segments,
which should stay flat (linear growth).  Both functions have upstream's
semantics (relative segments), so for a same-run ratio the benchmark times
upstream's own `jax._src.sourcemap` (introduced in jax 0.4.28), read from a
clone or bundle of jax-ml/jax (`--jax-repo`, or $JAX_UPSTREAM_REPO; `--tag`, default
jax-v0.4.28) on the same inputs, and checks that both give the same results.
Target: at least upstream's speed at 10^5 segments, both ways.  Without a
clone it times a plain digit-by-digit codec written here instead.

Times are CPU times of this process (`time.process_time`, median of several
runs): on a shared, loaded machine wall-clock times of a single-threaded codec
mostly measure the wait for a core. Every run starts right after a full
garbage collection: the collections its own allocations trigger count, one
that earlier runs left due (whose cost is that of the whole heap) does not.

  python benchmarks/sourcemap_codec.py [--quick] [--jax-repo DIR] [--tag TAG]

Needs the fork on PYTHONPATH (or installed).
"""
from __future__ import annotations

import argparse
import gc
import os
import random
import statistics
import sys
import time
import types

import _common  # noqa: F401  (puts build/, forktool's home, on sys.path)

from jax._src import sourcemap  # pylint: disable=g-import-not-at-top

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
  """Relative segments -> text, digit by digit."""
  return ";".join(",".join("".join(_naive_vlq(f) for f in seg) for seg in line)
                  for line in mappings)


def naive_deserialize(text: str):
  """Text -> relative segments, digit by digit."""
  out = []
  for line in text.split(";"):
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
        segs.append(tuple(vals))
    out.append(segs)
  return out


def load_upstream(jax_repo: str, tag: str) -> types.ModuleType:
  """Upstream's jax/_src/sourcemap.py at `tag`, as a module."""
  from forktool import tree as T
  with T.open_jax_repo(jax_repo) as repo:
    src = T.git(repo, "show", f"{tag}:jax/_src/sourcemap.py",
                git_dir=True).decode()
  mod = types.ModuleType("upstream_sourcemap")
  mod.__file__ = f"{tag}:jax/_src/sourcemap.py"
  sys.modules[mod.__name__] = mod  # dataclasses look their module up.
  exec(compile(src, mod.__file__, "exec"), mod.__dict__)  # pylint: disable=exec-used
  return mod


def cpu_timeit(fn, *, repeat: int) -> float:
  """Median CPU seconds of `fn()`, each run after a full collection."""
  fn()
  times = []
  for _ in range(repeat):
    gc.collect()
    t0 = time.process_time()
    fn()
    times.append(time.process_time() - t0)
  return statistics.median(times)


def main(argv: list[str]) -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--quick", action="store_true")
  parser.add_argument("--jax-repo", default=os.environ.get("JAX_UPSTREAM_REPO"))
  parser.add_argument("--tag", default="jax-v0.4.28")
  args = parser.parse_args(argv)
  if args.jax_repo:
    upstream = load_upstream(args.jax_repo, args.tag)
    ref_name = f"upstream {args.tag}"
    ref_ser, ref_de = upstream.serialize_mappings, upstream.deserialize_mappings
  else:
    ref_name = "naive (no --jax-repo)"
    ref_ser, ref_de = naive_serialize, naive_deserialize
  sizes = [10**4, 10**5] if args.quick else [10**4, 10**5, 10**6]
  print(f"reference: {ref_name}")
  print(f"{'segments':>9} {'op':>12} {'ms':>9} {'ms/1e5':>8} "
        f"{'ref ms/1e5':>11} {'speedup':>8}")
  speedups = {}
  for n in sizes:
    m = sourcemap.relative_mappings(make_mappings(n))
    text = sourcemap.serialize_mappings(m)
    assert text == naive_serialize(m) == ref_ser(m)
    assert sourcemap.deserialize_mappings(text) == m
    assert [list(map(tuple, line)) for line in ref_de(text)] == m
    repeat = 5 if n < 10**6 else 3
    for op, fast, ref, arg in (
        ("serialize", sourcemap.serialize_mappings, ref_ser, m),
        ("deserialize", sourcemap.deserialize_mappings, ref_de, text)):
      t = cpu_timeit(lambda: fast(arg), repeat=repeat)  # pylint: disable=cell-var-from-loop
      if n <= 10**5:
        tr = cpu_timeit(lambda: ref(arg), repeat=3)  # pylint: disable=cell-var-from-loop
        ref_s = f"{tr * 1e3 * 1e5 / n:11.1f}"
        ratio = f"{tr / t:7.1f}x"
        if n == 10**5:
          speedups[op] = tr / t
      else:
        ref_s, ratio = f"{'-':>11}", f"{'-':>8}"
      per = t * 1e3 * 1e5 / n
      print(f"{n:>9} {op:>12} {t * 1e3:9.1f} {per:8.1f} {ref_s} {ratio}")
  for op, r in speedups.items():
    verdict = "OK" if r >= 1.0 else "UNDER TARGET"
    print(f"{op}: {r:.1f}x {ref_name} at 1e5 segments (target >= 1x): "
          f"{verdict}")


if __name__ == "__main__":
  main(sys.argv[1:])
