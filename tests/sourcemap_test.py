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
"""Tests for jax._src.sourcemap (TC39 source maps, revision 3)."""
from __future__ import annotations

import itertools
import json
import linecache
import random
import re
from typing import NamedTuple

from absl.testing import absltest
from absl.testing import parameterized
import hypothesis
from hypothesis import strategies as st

from jax._src import sourcemap
from jax._src import source_info_util
from jax._src import test_util as jtu

_B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
INT32_MIN, INT32_MAX = -2**31, 2**31 - 1

_settings = hypothesis.settings(
    max_examples=150, deadline=None, derandomize=True,
    suppress_health_check=list(hypothesis.HealthCheck))


def ref_vlq(v: int) -> str:
  """The spec's VLQ, digit by digit (an independent reference)."""
  u = 1 if v == INT32_MIN else ((-v << 1) | 1 if v < 0 else v << 1)
  out = ""
  while True:
    d, u = u & 31, u >> 5
    out += _B64[d | (32 if u else 0)]
    if not u:
      return out


def ref_deserialize(text: str):
  """The spec's decoding to absolute fields, digit by digit."""
  out, prev = [], [0] * 5
  for line in text.split(";"):
    segs = []
    prev[0] = 0
    for seg in line.split(",") if line else []:
      vals, acc, shift = [], 0, 0
      for c in seg:
        d = _B64.index(c)  # ValueError for a bad character
        acc += (d & 31) << shift
        shift += 5
        if d & 32:
          if shift > 30:
            raise ValueError("range")
          continue
        if acc >> 32:
          raise ValueError("range")
        vals.append(INT32_MIN if acc == 1 else
                    (-(acc >> 1) if acc & 1 else acc >> 1))
        acc = shift = 0
      if shift or len(vals) not in (1, 4, 5):
        raise ValueError("bad segment")
      for i, v in enumerate(vals):
        prev[i] += v
      segs.append(tuple(prev[:len(vals)]))
    out.append(segs)
  return out


def ref_error_position(text: str) -> int | None:
  """Where a left-to-right reader of `text` meets its first error, if any."""
  pos = 0
  for line in text.split(";"):
    for seg in line.split(",") if line else []:
      n = acc = shift = 0
      for i, c in enumerate(seg):
        if c not in _B64:
          return pos + i
        d = _B64.index(c)
        acc += (d & 31) << shift
        if d & 32:
          shift += 5
          if shift > 30:
            return pos + i
        else:
          if acc >> 32:
            return pos + i
          n += 1
          acc = shift = 0
      if shift:
        return pos + len(seg)
      if n not in (1, 4, 5):
        return pos
      pos += len(seg) + 1
    if not line:
      pos += 1
  return None


def ref_serialize(mappings) -> str:
  prev = [0] * 5
  lines = []
  for line in mappings:
    prev[0] = 0
    segs = []
    for seg in line:
      segs.append("".join(ref_vlq(f - prev[i]) for i, f in enumerate(seg)))
      prev[:len(seg)] = seg
    lines.append(",".join(segs))
  return ";".join(lines)


segment_st = st.one_of(
    st.tuples(st.integers(0, 300)),
    st.tuples(*[st.integers(0, 5000)] * 4),
    st.tuples(*[st.integers(0, 5000)] * 5),
)
mappings_st = st.lists(
    st.lists(segment_st, max_size=6).map(
        # Generated columns grow along a line.
        lambda segs: [(sum(s[0] for s in segs[:i + 1]),) + s[1:]
                      for i, s in enumerate(segs)]),
    min_size=1, max_size=12)


def random_mappings(rng: random.Random, num_lines: int, *,
                    big: bool = False) -> list[list[tuple[int, ...]]]:
  out = []
  for _ in range(num_lines):
    col = 0
    line = []
    for _ in range(rng.choice([0, 0, 1, 3, 6])):
      col += rng.randint(0, 2**20 if big and rng.random() < 0.1 else 40)
      kind = rng.choice([1, 4, 4, 4, 5])
      if kind == 1:
        line.append((col,))
      else:
        hi = 2**30 if big and rng.random() < 0.1 else 200
        seg = (col, rng.randint(0, 3), rng.randint(0, hi), rng.randint(0, 90))
        line.append(seg + ((rng.randint(0, 7),) if kind == 5 else ()))
    out.append(line)
  return out


_KNOWN_VLQS = (
    (0, b"A"), (1, b"C"), (-1, b"D"), (15, b"e"), (-15, b"f"), (16, b"gB"),
    (-16, b"hB"), (511, b"+f"), (512, b"ggB"), (INT32_MAX, b"+/////D"))


class VlqTest(jtu.JaxTestCase):

  @parameterized.parameters(0, 1, 2, 3, 4, 5, -1, -2, -3, -4, 123, 456, 1024,
                            1025, 2**16, 2**31 - 1, -2**31 + 1)
  def test_roundtrip_vlq(self, value):
    enc = sourcemap.encode_vlq(value)
    self.assertIsInstance(enc, bytes)
    self.assertEqual(enc.decode(), ref_vlq(value))
    self.assertEqual(sourcemap.decode_vlq(enc), value)

  @parameterized.parameters(*_KNOWN_VLQS)
  def test_known_encodings(self, value, enc):
    self.assertEqual(sourcemap.encode_vlq(value), enc)
    self.assertEqual(sourcemap.decode_vlq(enc), value)

  def test_non_canonical_digits_decode(self):
    # Redundant zero continuation digits still spell a value.
    self.assertEqual(sourcemap.decode_vlq(b"ggA"), 0)
    self.assertEqual(sourcemap.decode_vlq(b"ggggggA"), 0)

  def test_decode_vlq_reads_one_value(self):
    # As upstream's: the first value of the input; from an iterator, exactly
    # its digits are consumed.
    self.assertEqual(sourcemap.decode_vlq(b"AC"), 0)
    it = iter(b"gBDA")
    self.assertEqual(sourcemap.decode_vlq(it), 16)
    self.assertEqual(sourcemap.decode_vlq(it), -1)
    self.assertEqual(list(it), [ord("A")])

  # -2**31: CodecContractTest.
  @hypothesis.given(st.integers(INT32_MIN + 1, INT32_MAX))
  @_settings
  def test_vlq_property(self, value):
    enc = sourcemap.encode_vlq(value)
    self.assertEqual(enc.decode(), ref_vlq(value))
    self.assertEqual(sourcemap.decode_vlq(enc), value)


class SegmentTest(jtu.JaxTestCase):

  @parameterized.parameters(b"A", b"C", b"AAAA", b"ACDE", b"AACAA",
                            b"gBAAA")
  def test_roundtrip_segment(self, enc):
    self.assertEqual(sourcemap.encode_segment(sourcemap.decode_segment(enc)),
                     enc)

  def test_decode_segment_values(self):
    self.assertEqual(sourcemap.decode_segment(b"ACDE"), (0, 1, -1, 2))
    self.assertEqual(sourcemap.decode_segment(b"gBAAA"), (16, 0, 0, 0))

  # -2**31: CodecContractTest.
  @hypothesis.given(st.one_of(
      st.tuples(st.integers(INT32_MIN + 1, INT32_MAX)),
      st.tuples(*[st.integers(INT32_MIN + 1, INT32_MAX)] * 4),
      st.tuples(*[st.integers(INT32_MIN + 1, INT32_MAX)] * 5)))
  @_settings
  def test_segment_property(self, seg):
    enc = sourcemap.encode_segment(seg)
    self.assertEqual(enc.decode(), "".join(map(ref_vlq, seg)))
    self.assertEqual(sourcemap.decode_segment(enc), seg)


class MappingsTest(jtu.JaxTestCase):

  def test_upstream_example(self):
    # The example: upstream's `jax._src.sourcemap` (jax 0.4.28+)
    # returns the segments as the spec stores them, relative.
    m = sourcemap.deserialize_mappings("AAGE,KAAA;CACF")
    self.assertEqual(m, [[(0, 0, 3, 2), (5, 0, 0, 0)], [(1, 0, 1, -2)]])
    self.assertEqual(sourcemap.absolute_mappings(m),
                     [[(0, 0, 3, 2), (5, 0, 3, 2)], [(1, 0, 4, 0)]])
    self.assertEqual(sourcemap.serialize_mappings(m), "AAGE,KAAA;CACF")

  def test_example(self):
    m = sourcemap.deserialize_mappings("A,AAAC;;AACDE")
    self.assertEqual(m, [[(0,), (0, 0, 0, 1)], [], [(0, 0, 1, -1, 2)]])
    self.assertEqual(sourcemap.serialize_mappings(m), "A,AAAC;;AACDE")

  def test_generator_takes_absolute_gives_relative(self):
    gen = sourcemap.MappingsGenerator()
    with self.assertRaisesRegex(RuntimeError, "No current group"):
      gen.new_segment(0)
    gen.new_group()
    gen.new_segment(0)
    gen.new_segment(0, 0, 0, 1)
    gen.new_group()
    gen.new_group()
    gen.new_segment(0, 0, 1, 0, 2)
    gen.new_segment(4, 0, 1, 3, 2)
    self.assertEqual(gen.mappings(), [[(0,), (0, 0, 0, 1)], [],
                                      [(0, 0, 1, -1, 2), (4, 0, 0, 3, 0)]])
    self.assertEqual(sourcemap.serialize_mappings(gen.mappings()),
                     "A,AAAC;;AACDE,IAAGA")

  def test_relative_encoding(self):
    # The generated column restarts on every line; the other fields carry on
    # across lines; 1-field segments don't touch them.
    m = [[(3, 1, 10, 4), (7,)], [(2, 1, 12, 0, 3)], [], [(1, 0, 0, 5, 1)]]
    rel = sourcemap.relative_mappings(m)
    s = sourcemap.serialize_mappings(rel)
    self.assertEqual(s, ref_serialize(m))
    self.assertEqual(s, "GCUI,I;EAEJG;;CDZKF")
    self.assertEqual(sourcemap.deserialize_mappings(s), rel)
    self.assertEqual(sourcemap.absolute_mappings(rel), m)
    # Relative fields may be negative.
    self.assertEqual(sourcemap.serialize_mappings([[(0, 0, -1, 0)], [(-1,)]]),
                     "AADA;D")

  @parameterized.parameters("", ";", ";;A", "A;;", "AAAA;;;;")
  def test_empty_lines(self, s):
    m = sourcemap.deserialize_mappings(s)
    self.assertLen(m, s.count(";") + 1)
    self.assertEqual(sourcemap.serialize_mappings(m), s)

  def test_serialize_accepts_index_types_and_lists(self):
    np = jtu.np
    self.assertEqual(
        sourcemap.serialize_mappings([[tuple(np.int64(i) for i in (1, 0, 2, 3))]]),
        "CAEG")
    self.assertEqual(sourcemap.serialize_mappings([[[1, 0, 2, 3]]]), "CAEG")

  def test_no_process_wide_side_effects(self):
    # The decoder leaves the garbage collector alone.
    import gc  # pylint: disable=g-import-not-at-top
    self.assertTrue(gc.isenabled())
    calls = []
    gc.callbacks.append(lambda phase, info: calls.append(phase))
    try:
      sourcemap.deserialize_mappings(
          sourcemap.serialize_mappings(random_rel(random.Random(0), 5000)))
    finally:
      gc.callbacks.pop()
    self.assertTrue(gc.isenabled())

  @hypothesis.given(mappings_st)
  @_settings
  def test_mappings_property(self, m):
    rel = sourcemap.relative_mappings(m)
    s = sourcemap.serialize_mappings(rel)
    self.assertEqual(s, ref_serialize(m))
    self.assertEqual(sourcemap.deserialize_mappings(s), rel)
    self.assertEqual(ref_deserialize(s), m)
    self.assertEqual(sourcemap.absolute_mappings(rel), m)

  @parameterized.parameters(0, 1, 2, 3)
  def test_large_mappings(self, seed):
    rng = random.Random(seed)
    m = random_mappings(rng, 3000, big=seed % 2 == 1)
    if seed == 3:
      m[5] = [(0, 0, 0, 0), (4,), (9, 1, 2**31 - 1, 1)]  # -2**31 delta etc.
      m[6] = [(1, 1, 0, 0)]
    rel = sourcemap.relative_mappings(m)
    s = sourcemap.serialize_mappings(rel)
    self.assertEqual(s, ref_serialize(m))
    self.assertEqual(sourcemap.deserialize_mappings(s), rel)
    self.assertEqual(sourcemap.absolute_mappings(
        sourcemap.deserialize_mappings(s)), m)

  def test_every_short_valid_text(self):
    # Every valid text of up to 4 characters from an alphabet with single-digit
    # and continuation digits and both separators: decoded as the reference
    # decodes it (invalid ones: FuzzTest).
    for n in range(5):
      for chars in itertools.product("Ag/,;", repeat=n):
        s = "".join(chars)
        if ref_error_position(s) is None:
          self.assertEqual(sourcemap.absolute_mappings(
              sourcemap.deserialize_mappings(s)), ref_deserialize(s), msg=s)

  def test_mutated_large_valid_mappings(self):
    # The mutations of FuzzTest.test_fuzz_large_mappings that are valid and
    # spell no -2**31 (CodecContractTest): decoded as the reference decodes.
    for s in mutated_large_mappings():
      if ref_error_position(s) is None and not _NEGATIVE_ZERO.search(s):
        self.assertEqual(sourcemap.absolute_mappings(
            sourcemap.deserialize_mappings(s)), ref_deserialize(s), msg=s)


def random_rel(rng, n):
  return sourcemap.relative_mappings(random_mappings(rng, n))


_JUNK = _B64 + ",;" * 8 + "=é \n\"-"
# A VLQ that spells -2**31, "negative zero": a first digit of value 1, then
# zero digits (a VLQ starts where no continuation digit precedes it).
_NEGATIVE_ZERO = re.compile(r"(?<![g-z0-9+/])(B|hg*A)")


def mutated_large_mappings():
  """150 mutations of a long valid text, some valid, most not."""
  rng = random.Random(0)
  base = sourcemap.serialize_mappings(
      sourcemap.relative_mappings(random_mappings(rng, 600, big=True)))
  for _ in range(150):
    chars = list(base)
    for _ in range(rng.randint(1, 3)):
      i = rng.randrange(len(chars))
      op = rng.random()
      if op < 0.6:
        chars[i] = rng.choice(_JUNK)
      elif op < 0.8:
        del chars[i]
      else:
        chars.insert(i, rng.choice(_JUNK))
    yield "".join(chars)


class CodecContractTest(jtu.JaxTestCase):
  """Patch 0008's own contract: -2**31, errors, ranges, field counts, types.

  From jax 0.4.28 upstream's own jax._src.sourcemap supersedes patch 0008 and
  promises none of this (it writes -2**31 with its magnitude, has no range,
  field-count or type checks, raises whatever its code meets on bad input
  and decodes bytes only).
  """
  superseded_patch = "0008"

  def test_int32_min_is_negative_zero(self):
    enc = sourcemap.encode_vlq(INT32_MIN)
    self.assertIsInstance(enc, bytes)
    self.assertEqual(enc.decode(), ref_vlq(INT32_MIN))
    self.assertEqual(enc, b"B")
    self.assertEqual(sourcemap.decode_vlq(b"B"), INT32_MIN)
    self.assertEqual(sourcemap.decode_vlq("B"), INT32_MIN)
    seg = b"+/////DAAB"
    self.assertEqual(sourcemap.encode_segment(sourcemap.decode_segment(seg)),
                     seg)

  @parameterized.parameters(2**31, -2**31 - 1, 2**40, -2**64)
  def test_encode_out_of_range(self, value):
    with self.assertRaisesRegex(ValueError, "32-bit"):
      sourcemap.encode_vlq(value)

  def test_encode_bad_type(self):
    for bad in (1.0, "1", None, True):
      with self.assertRaises(TypeError):
        sourcemap.encode_vlq(bad)

  @parameterized.parameters(
      (b"", "truncated VLQ value at position 0"),
      (b"g", "truncated VLQ value at position 1"),
      (b"gg", "truncated VLQ value at position 2"),
      (b"g=", "invalid base64 character '=' at position 1"),
      (b"\xff", "invalid base64 character .* at position 0"),
      ("gé", "invalid base64 character 'é' at position 1"),
      (b"gggggggA", "position 6 .* 32-bit"),   # 8 digits.
      (b"ggggggE", "32-bit"),                  # 2**32 > max magnitude.
  )
  def test_decode_vlq_errors(self, enc, msg):
    with self.assertRaisesRegex(ValueError, msg):
      sourcemap.decode_vlq(enc)

  def test_str_and_bytes_input(self):
    for value, enc in _KNOWN_VLQS:
      self.assertEqual(sourcemap.decode_vlq(enc.decode()), value)
    self.assertEqual(sourcemap.decode_segment("gBAAA"), (16, 0, 0, 0))
    self.assertEqual(sourcemap.deserialize_mappings(b"AAAC"), [[(0, 0, 0, 1)]])
    with self.assertRaises(TypeError):
      sourcemap.deserialize_mappings(12)

  @parameterized.parameters(b"AA", b"AAA", b"AAAAAA")
  def test_decode_segment_wrong_field_count(self, enc):
    with self.assertRaisesRegex(ValueError, "1, 4 or 5 fields"):
      sourcemap.decode_segment(enc)
    with self.assertRaisesRegex(ValueError, "empty segment"):
      sourcemap.decode_segment(b"")

  def test_encode_segment_wrong_field_count(self):
    for seg in [(), (1, 2), (1, 2, 3), (1, 2, 3, 4, 5, 6)]:
      with self.assertRaisesRegex(ValueError, "1, 4 or 5 fields"):
        sourcemap.encode_segment(seg)

  def test_generator_errors(self):
    # (Its "No current group" check, upstream's too: MappingsTest.)
    gen = sourcemap.MappingsGenerator()
    gen.new_group()
    with self.assertRaisesRegex(ValueError, "1, 4 or 5 fields"):
      gen.new_segment(0, 1)
    with self.assertRaises(TypeError):
      gen.new_segment(0.5)

  def test_serialize_errors(self):
    with self.assertRaisesRegex(ValueError, "1, 4 or 5 fields"):
      sourcemap.serialize_mappings([[(0, 1)]])
    with self.assertRaises(TypeError):
      sourcemap.serialize_mappings([[(0, 0, 1.5, 0)]])

  def check_errors(self, s, pattern):
    # Errors name the position, short and long inputs alike.
    with self.assertRaisesRegex(ValueError, pattern):
      sourcemap.deserialize_mappings(s)
    pad = "AAAA," * 1000
    shift = len(pad)
    def moved(m):
      return f"position {int(m.group(1)) + shift}"
    long_pattern = re.sub(r"position (\d+)", moved, pattern)
    with self.assertRaisesRegex(ValueError, long_pattern):
      sourcemap.deserialize_mappings(pad + s)

  @parameterized.named_parameters(
      ("bad_char", "AAAA,AA=A", "invalid base64 character '=' at position 7"),
      ("non_ascii", "AAAA;Aé", "invalid base64 character 'é' at position 6"),
      ("truncated", "AAAA,AAAg", "truncated VLQ value at position 9"),
      ("truncated_before_sep", "AAAg;AAAA", "truncated VLQ value at position 4"),
      ("two_fields", "AAAA,CA", "position 5 .* has 2 fields"),
      ("three_fields", "AAAA;CAA", "position 5 .* has 3 fields"),
      ("six_fields", "AAAAAA", "position 0 .* has 6 fields"),
      ("empty_segment", "AAAA,,AAAA", "empty segment at position 5"),
      ("trailing_comma", "AAAA,", "empty segment at position 5"),
      ("out_of_range", "AAAA,ggggggE", "position 11 .* 32-bit"),
      # The first error met reading left to right, whatever its kind.
      ("empty_then_truncated", ",g", "empty segment at position 0"),
      ("size_then_bad_char", "AA,!", "position 0 .* has 2 fields"),
      ("range_then_bad_char", "gggggggA,!", "position 6 .* 32-bit"),
      ("truncated_then_empty", "AAAg,,", "truncated VLQ value at position 4"),
  )
  def test_deserialize_errors(self, s, pattern):
    self.check_errors(s, pattern)


class FuzzTest(jtu.JaxTestCase):
  """Decoders see arbitrary input: only ValueError (patch 0008's contract)."""
  superseded_patch = "0008"

  def assert_only_value_error(self, fn, arg):
    # Anything else (TypeError, IndexError, ...) fails the test.
    try:
      fn(arg)
    except ValueError:
      pass

  @hypothesis.given(st.binary(max_size=12))
  @_settings
  def test_fuzz_vlq_and_segment_bytes(self, data):
    self.assert_only_value_error(sourcemap.decode_vlq, data)
    self.assert_only_value_error(sourcemap.decode_segment, data)

  @hypothesis.given(st.text(alphabet=_JUNK, max_size=60))
  @_settings
  def test_fuzz_mappings_text(self, s):
    self.assert_only_value_error(sourcemap.deserialize_mappings, s)
    try:
      sourcemap.deserialize_mappings(s)
    except ValueError as e:
      self.assertEqual(int(re.search(r"position (\d+)", str(e))[1]),
                       ref_error_position(s), msg=f"{e} in {s!r}")
    else:
      self.assertIsNone(ref_error_position(s))
    self.assert_only_value_error(sourcemap.decode_segment, s)

  def test_every_short_text(self):
    # Every text of up to 4 characters from an alphabet with single-digit and
    # continuation digits, both separators and a bad character: decoded as the
    # reference decodes it, or the error where a left-to-right reader meets it.
    alphabet = "Ag/,;!"
    for n in range(5):
      for chars in itertools.product(alphabet, repeat=n):
        s = "".join(chars)
        try:
          m = sourcemap.deserialize_mappings(s)
        except ValueError as e:
          self.assertEqual(int(re.search(r"position (\d+)", str(e))[1]),
                           ref_error_position(s), msg=f"{e} in {s!r}")
        else:
          self.assertIsNone(ref_error_position(s), msg=s)
          self.assertEqual(sourcemap.absolute_mappings(m), ref_deserialize(s))

  def test_fuzz_large_mappings(self):
    # Mutations of long valid strings reach the vectorized decoder.
    for s in mutated_large_mappings():
      try:
        m = sourcemap.deserialize_mappings(s)
      except ValueError as e:
        with self.assertRaises(ValueError):
          ref_deserialize(s)
        # The error names where a left-to-right reader meets it.
        self.assertEqual(int(re.search(r"position (\d+)", str(e))[1]),
                         ref_error_position(s), msg=f"{e} in {s!r}")
      else:
        self.assertIsNone(ref_error_position(s))
        self.assertEqual(sourcemap.absolute_mappings(m), ref_deserialize(s))

  @hypothesis.given(st.one_of(st.binary(max_size=80), st.text(max_size=80)))
  @_settings
  def test_fuzz_from_json(self, data):
    self.assert_only_value_error(sourcemap.SourceMap.from_json, data)

  @hypothesis.given(st.recursive(
      st.none() | st.booleans() | st.integers() | st.text(_JUNK, max_size=8),
      lambda c: st.lists(c, max_size=3) | st.dictionaries(
          st.sampled_from(["version", "sources", "sourcesContent", "names",
                           "mappings", "file", "sourceRoot", "ignoreList"]),
          c, max_size=6),
      max_leaves=12))
  @_settings
  def test_fuzz_from_json_structures(self, obj):
    self.assert_only_value_error(sourcemap.SourceMap.from_json,
                                 json.dumps(obj))


class SourceMapJsonTest(jtu.JaxTestCase):

  def test_roundtrip_sourcemap_json(self):
    data = {
        "version": 3,
        "sources": ["foo.js", "bar.js"],
        "sourcesContent": [None, None],
        "names": ["src", "maps", "are", "fun"],
        "mappings": "A,AAAC;;AACDE",
    }
    sm = sourcemap.SourceMap.from_json(json.dumps(data))
    self.assertEqual(sm.mappings,
                     [[(0,), (0, 0, 0, 1)], [], [(0, 0, 1, -1, 2)]])
    self.assertEqual(sm.sources_content, [None, None])
    self.assertEqual(json.loads(sm.to_json()), data)

  def test_roundtrip_optional_fields(self):
    data = {
        "version": 3, "file": "out.txt", "sourceRoot": "/src/",
        "sources": ["a.py", None], "sourcesContent": ["x = 1\n", None],
        "names": [], "mappings": "AAAA;ACCC", "ignoreList": [1],
    }
    sm = sourcemap.SourceMap.from_json(json.dumps(data))
    self.assertEqual(sm.file, "out.txt")
    self.assertEqual(json.loads(sm.to_json()), data)
    # Bytes input is fine too.
    self.assertEqual(sourcemap.SourceMap.from_json(sm.to_json().encode()), sm)

  @parameterized.named_parameters(
      ("file_type", '"file": 1', "'file'"),
      ("source_root_type", '"sourceRoot": []', "'sourceRoot'"),
      ("ignore_list_type", '"ignoreList": 0', "'ignoreList'"),
      ("ignore_list_index", '"ignoreList": [1]', "'ignoreList'"),
      ("ignore_list_item", '"ignoreList": [true]', "'ignoreList'"),
  )
  def test_from_json_optional_field_errors(self, field, pattern):
    # The optional fields (patch 0020, on every release): maps otherwise valid.
    text = ('{"version": 3, "sources": ["a"], "sourcesContent": [], '
            f'"names": [], "mappings": "", {field}}}')
    with self.assertRaisesRegex(ValueError, pattern):
      sourcemap.SourceMap.from_json(text)


class SourceMapJsonContractTest(jtu.JaxTestCase):
  """Patch 0008's own from_json: absent lists allowed, checks, ValueError.

  From jax 0.4.28 upstream's from_json (superseding patch 0008) needs every
  field and checks none beyond those of patch 0020.
  """
  superseded_patch = "0008"

  def test_absent_optional_lists(self):
    sm = sourcemap.SourceMap.from_json(
        '{"version": 3, "sources": ["a"], "mappings": "AAAA"}')
    self.assertEqual((sm.names, sm.sources_content), ([], []))

  @parameterized.named_parameters(
      ("not_json", "{", "line 1 column 2"),
      ("not_object", "[3]", "must be a JSON object"),
      ("version", '{"version": "3", "sources": [], "mappings": ""}',
       "'version' must be 3"),
      ("version_bool", '{"version": true, "sources": [], "mappings": ""}',
       "'version' must be 3"),
      ("no_sources", '{"version": 3, "mappings": ""}', "no 'sources'"),
      ("sources_type", '{"version": 3, "sources": "a", "mappings": ""}',
       "'sources' must be a list"),
      ("sources_item", '{"version": 3, "sources": [1], "mappings": ""}',
       r"'sources' must be a list of strings and nulls, got \[1\]"),
      ("names_item",
       '{"version": 3, "sources": [], "names": [null], "mappings": ""}',
       r"'names' must be a list of strings, got \[None\]"),
      ("content_item",
       '{"version": 3, "sources": ["a"], "sourcesContent": [2], "mappings": ""}',
       r"'sourcesContent' must be a list of strings and nulls"),
      ("mappings_type", '{"version": 3, "sources": [], "mappings": 5}',
       "'mappings' must be a string"),
      ("mappings_bad", '{"version": 3, "sources": ["a"], "mappings": "AA*A"}',
       "position 2"),
      ("source_index", '{"version": 3, "sources": ["a"], "mappings": "ACAA"}',
       r"segment \(0, 1, 0, 0\) on generated line 0 .* outside the 1 sources"),
      ("name_index", '{"version": 3, "sources": ["a"], "mappings": "AAAAA"}',
       r"segment \(0, 0, 0, 0, 0\) on generated line 0 .* or 0 names"),
      ("negative_column", '{"version": 3, "sources": ["a"], '
       '"mappings": "CAAA,FAAA"}',
       r"segment \(-1, 0, 0, 0\) on generated line 0 has a negative field"),
      ("negative_line", '{"version": 3, "sources": ["a"], '
       '"mappings": "AAAA;AADA"}',
       r"segment \(0, 0, -1, 0\) on generated line 1 has a negative field"),
      ("sections", '{"version": 3, "sections": []}', "sections"),
      ("deep", "[" * 100000 + "]" * 100000, "nested too deeply"),
  )
  def test_from_json_errors(self, text, pattern):
    with self.assertRaisesRegex(ValueError, pattern):
      sourcemap.SourceMap.from_json(text)


class _Pos(NamedTuple):
  file_name: str
  start_line: int
  start_column: int


class FromRegionsTest(jtu.JaxTestCase):

  def test_regions_to_segments(self):
    text = "let\n  a = f x\n  b = g a c\nin (b,)"
    f1 = source_info_util.Frame("/p/m.py", "fn", 10, 4, 10, 9)
    f2 = _Pos("/p/other.py", 3, 0)
    regions = [[], [(2, 9, f1)], [(2, 11, f2), (4, 6, f1)], []]
    sm = sourcemap.source_map_from_regions(text, regions)
    self.assertEqual(sm.sources, ["/p/m.py", "/p/other.py"])
    self.assertEqual(sm.sources_content, [])
    self.assertEqual(sm.names, [])
    self.assertEqual(sourcemap.absolute_mappings(sm.mappings), [
        [],
        [(2, 0, 9, 4), (9,)],
        # The nested region wins inside [4, 6), the outer one around it.
        [(2, 1, 2, 0), (4, 0, 9, 4), (6, 1, 2, 0), (11,)],
        [],
        [],  # Past the last line.
    ])
    again = sourcemap.SourceMap.from_json(sm.to_json())
    self.assertEqual(again, sm)

  def test_adjacent_and_none_regions(self):
    f = _Pos("a.py", 1, 0)
    g = _Pos("a.py", 2, 3)
    sm = sourcemap.source_map_from_regions(
        "abcdef", [[(0, 2, f), (2, 4, f), (4, 5, None), (5, 6, g)]])
    # Same target across adjacent regions: one segment; None maps nothing.
    self.assertEqual(sourcemap.absolute_mappings(sm.mappings),
                     [[(0, 0, 0, 0), (4,), (5, 0, 1, 3), (6,)], []])

  def test_options(self):
    # The source's text comes from linecache (files, notebook cells, ...); its
    # second line has "é" (2 UTF-8 bytes, 1 UTF-16 unit) before byte 3.
    name = "/src/pkg/a.py"
    linecache.cache[name] = (None, None, ["x = 1\n", "é = 2\n"], name)
    self.addCleanup(linecache.cache.pop, name, None)
    f = _Pos(name, 2, 3)
    sm = sourcemap.source_map_from_regions(
        "x\ny", [[(0, 1, f)]],
        canonicalize_filename=lambda p: p.removeprefix("/src/"),
        include_source_content=True)
    self.assertEqual(sm.sources, ["pkg/a.py"])
    self.assertEqual(sm.sources_content, ["x = 1\né = 2\n"])
    self.assertEqual(sm.mappings, [[(0, 0, 1, 2), (1,)], [], []])
    self.assertEqual(sourcemap.absolute_mappings(sm.mappings), sm.mappings)

  def test_reads_this_file(self):
    f = _Pos(__file__, 1, 0)
    sm = sourcemap.source_map_from_regions("x", [[(0, 1, f)]],
                                           include_source_content=True)
    with open(__file__, encoding="utf-8") as fh:
      self.assertEqual(sm.sources_content, [fh.read()])

  def test_errors(self):
    f = _Pos("a.py", 1, 0)
    with self.assertRaisesRegex(ValueError, "regions for 2 lines"):
      sourcemap.source_map_from_regions("one line", [[], []])
    with self.assertRaisesRegex(ValueError, "bad region columns"):
      sourcemap.source_map_from_regions("x", [[(3, 1, f)]])
    with self.assertRaisesRegex(ValueError, "unpack"):
      sourcemap.source_map_from_regions("x", [[(0, f)]])


if __name__ == "__main__":
  absltest.main(testLoader=jtu.JaxTestLoader())
