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
"""Jaxpr dumps (jax_dump_ir_*): local files, naming, AOT identity, faults.

The remote (GCS emulator) and browser (Chromium) checks live in
jaxpr_dump_gcs_test.py and jaxpr_dump_html_test.py.
"""
from __future__ import annotations

import collections
import contextlib
import errno
import gc
import gzip
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import threading
import warnings

from absl.testing import absltest
from absl.testing import parameterized
import numpy as np

import jax
import jax.numpy as jnp
from jax._src import config
from jax._src import jaxpr_dump
from jax._src import jaxpr_util
from jax._src import source_info_util
from jax._src import sourcemap
from jax._src import test_util as jtu

# The realistic train step: a small MLP, a scan over micro-batches, remat on
# each layer, and an Adam update (shared with benchmarks/jaxpr_dump.py).
from mlp_train_step import train_inputs, train_step

DUMP_OPTIONS = ("jax_dump_ir_to", "jax_dump_ir_modes", "jax_dump_ir_filter",
                "jax_dump_ir_local_dir", "jax_dump_ir_delete_local_after",
                "jax_include_debug_info_in_dumps")


@contextlib.contextmanager
def dump_options(**values):
  """Sets the dump options `values` for the block, then restores all of them
  (the dump tests of every file use this one fixture)."""
  saved = {k: config._read(k) for k in DUMP_OPTIONS}
  try:
    for k, v in values.items():
      jax.config.update(k, v)
    yield
  finally:
    for k, v in saved.items():
      jax.config.update(k, v)

# jax_<12 hex token>-<6 digit counter>_<sanitized name>.<ext>
_NAME_RE = re.compile(
    r"^jax_(?P<id>[0-9a-f]{12}-\d{6})_(?P<name>[A-Za-z0-9_.-]+?)"
    r"\.(?P<ext>jaxpr\.txt|jaxpr\.txt\.map|jaxpr\.html)$")
# jax_<12 hex token>-<6 digit counter>_<module name>_<stage>.mlir
_MLIR_RE = re.compile(
    r"^jax_(?P<id>[0-9a-f]{12}-\d{6})_(?P<module>[A-Za-z0-9_.-]+?)"
    r"_(?P<stage>compile|export|verification)\.mlir$")
# The files each mode writes, by extension.
_MODE_EXTS = {"stablehlo": {".mlir"}, "jaxpr": {".jaxpr.txt", ".jaxpr.txt.map"},
              "jaxpr_html": {".jaxpr.html"}}
_KEPT_RE = re.compile(r"(/[^\s,']*/jax_[^\s,'/]+?\.(?:jaxpr\.txt\.map|"
                      r"jaxpr\.txt|jaxpr\.html|mlir))(?=[,.'\s]|$)")

_B64 = {c: i for i, c in enumerate(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")}


def decode_mappings(mappings: str) -> list[list[tuple[int, ...]]]:
  """Decodes TC39 'mappings' into per-line absolute segments (a test oracle)."""
  out, src, line, col = [], 0, 0, 0
  for line_text in mappings.split(";"):
    segs, gen = [], 0
    for seg in filter(None, line_text.split(",")):
      fields, value, shift = [], 0, 0
      for ch in seg:
        d = _B64[ch]
        value += (d & 31) << shift
        if d & 32:
          shift += 5
          continue
        fields.append(-(value >> 1) if value & 1 else value >> 1)
        value = shift = 0
      gen += fields[0]
      if len(fields) >= 4:
        src, line, col = src + fields[1], line + fields[2], col + fields[3]
        segs.append((gen, src, line, col))
      else:
        segs.append((gen,))
    out.append(segs)
  return out


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
  value = shift = 0
  while True:
    byte = buf[pos]
    pos += 1
    value |= (byte & 0x7F) << shift
    shift += 7
    if byte < 0x80:
      return value, pos


def _protobuf_fields(buf: bytes):
  """(field number, value) pairs of a protobuf message (a test oracle):
  varints as ints, length-delimited fields as bytes."""
  pos = 0
  while pos < len(buf):
    key, pos = _varint(buf, pos)
    if key & 7 == 0:
      value, pos = _varint(buf, pos)
    elif key & 7 == 2:
      n, pos = _varint(buf, pos)
      value, pos = buf[pos:pos + n], pos + n
    else:
      raise AssertionError(f"unexpected wire type {key & 7}")
    yield key >> 3, value


def _varints(value: int | bytes) -> list[int]:
  """A repeated integer field's values, packed (bytes) or not (an int)."""
  if isinstance(value, int):
    return [value]
  out, pos = [], 0
  while pos < len(value):
    v, pos = _varint(value, pos)
    out.append(v)
  return out


def decode_pprof(data: bytes) -> dict:
  """The gzipped pprof `Profile` (github.com/google/pprof, proto/profile.proto)
  as {"strings", "sample_type", "samples": [(location ids, values, {label
  key: label str})], "locations": {id: [(function id, line)]},
  "functions": {id: (name, filename)}}, strings resolved."""
  fields = list(_protobuf_fields(gzip.decompress(data)))
  strings = [v.decode() for f, v in fields if f == 6]
  prof = {"strings": strings, "sample_type": [], "samples": [],
          "locations": {}, "functions": {}}
  for f, v in fields:
    sub = collections.defaultdict(list)
    if f in (1, 2, 4, 5):  # Messages: ValueType, Sample, Location, Function.
      for k, x in _protobuf_fields(v):
        sub[k].append(x)
    if f == 1:
      prof["sample_type"].append((strings[sub[1][0]], strings[sub[2][0]]))
    elif f == 2:
      labels = {}
      for label in sub[3]:
        d = dict(_protobuf_fields(label))
        labels[strings[d[1]]] = strings[d.get(2, 0)]
      prof["samples"].append((
          [i for x in sub[1] for i in _varints(x)],
          [i for x in sub[2] for i in _varints(x)], labels))
    elif f == 4:
      prof["locations"][sub[1][0]] = [
          (d.get(1, 0), d.get(2, 0))
          for d in map(dict, map(_protobuf_fields, sub[4]))]
    elif f == 5:
      prof["functions"][sub[1][0]] = (strings[sub[2][0]],
                                      strings[sub[4][0]])
  return prof


def source_line_of(marker: str) -> int:
  """The 1-based line of this file that contains `marker` (once)."""
  with open(__file__, encoding="utf-8") as f:
    hits = [i + 1 for i, l in enumerate(f) if l.rstrip().endswith(marker)]
  assert len(hits) == 1, (marker, hits)
  return hits[0]


def _child_main(how: str, out: str) -> None:
  """Run in a subprocess: dump train_step via `how` in {'call', 'aot'}."""
  args = train_inputs()
  jax.config.update("jax_dump_ir_to", out)
  jax.config.update("jax_dump_ir_modes", "jaxpr")
  jax.config.update("jax_dump_ir_filter", "^train_step$")
  step = jax.jit(train_step)
  if how == "aot":
    step.lower(*jax.tree_util.tree_map(
        lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), args))
  else:
    jax.block_until_ready(step(*args))


def run_child(how: str, out: str) -> None:
  code = textwrap.dedent(f"""
      import importlib.util, sys
      spec = importlib.util.spec_from_file_location(
          "jaxpr_dump_test", {__file__!r})
      mod = importlib.util.module_from_spec(spec)
      spec.loader.exec_module(mod)
      mod._child_main({how!r}, {out!r})
  """)
  # The parent's import path: pytest's puts examples/ on it.
  env = dict(os.environ, JAX_PLATFORMS="cpu",
             PYTHONPATH=os.pathsep.join(sys.path))
  subprocess.run([sys.executable, "-c", code], env=env, check=True,
                 timeout=240, capture_output=True)


_TMP = tempfile.gettempdir()  # Where tests make directories; see setUp.


@jtu.with_config(jax_numpy_rank_promotion="allow")
class DumpTestCase(jtu.JaxTestCase):
  """Restores the dump options and gives each test a fresh directory, and one
  for the temporary directories that dumps make."""

  def setUp(self):
    super().setUp()
    self.enter_context(dump_options())
    jax.clear_caches()  # Every test lowers afresh.
    self.dump_dir = self.make_dir()
    self.tmp_dir = self.make_dir()
    self.enter_context(absltest.mock.patch.object(tempfile, "tempdir",
                                                  self.tmp_dir))

  def make_dir(self) -> str:
    d = tempfile.mkdtemp(prefix="jaxpr_dump_test_", dir=_TMP)
    self.addCleanup(shutil.rmtree, d, ignore_errors=True)
    return d

  def configure(self, *, to=None, modes="jaxpr,jaxpr_html", filter="",
                local_dir="", delete_local_after=True):
    jax.config.update("jax_dump_ir_modes", modes)
    jax.config.update("jax_dump_ir_filter", filter)
    jax.config.update("jax_dump_ir_local_dir", local_dir)
    jax.config.update("jax_dump_ir_delete_local_after", delete_local_after)
    jax.config.update("jax_dump_ir_to", self.dump_dir if to is None else to)

  def dumps(self, directory=None, ext="jaxpr.txt"):
    """{function name: [file names]} of the dumps with extension `ext`."""
    out: dict[str, list[str]] = {}
    for f in sorted(os.listdir(directory or self.dump_dir)):
      m = _NAME_RE.match(f)
      if m and m["ext"] == ext:
        out.setdefault(m["name"], []).append(f)
    return out

  def read(self, name, directory=None):
    with open(os.path.join(directory or self.dump_dir, name), "rb") as f:
      return f.read()

  def run_step(self, *, aot: bool = False) -> list[str]:
    """Calls a jitted `step` (and, with `aot`, lowers and compiles it ahead of
    time), checks its result and returns the DumpIRWarning messages."""
    def step(x):
      return jnp.sin(x) * 3.0
    x = np.linspace(0, 1, 5, dtype=np.float32)
    with warnings.catch_warnings(record=True) as caught:
      warnings.simplefilter("always")
      out = jax.jit(step)(x)
      if aot:
        jax.jit(step).lower(x[:2]).compile()
    np.testing.assert_allclose(out, np.sin(x) * 3.0, rtol=1e-6)
    return [str(w.message) for w in caught
            if issubclass(w.category, jaxpr_dump.DumpIRWarning)]


class ConfigTest(DumpTestCase):

  def test_defaults(self):
    out = subprocess.run(
        [sys.executable, "-c",
         "import jax; r = jax.config.read; print(repr((r('jax_dump_ir_to'), "
         "r('jax_dump_ir_modes'), r('jax_dump_ir_filter'), "
         "r('jax_dump_ir_local_dir'), r('jax_dump_ir_delete_local_after'))))"],
        env={k: v for k, v in os.environ.items()
             if not k.startswith("JAX_DUMP_IR")},
        check=True, capture_output=True, text=True, timeout=120)
    self.assertEqual(out.stdout.strip(),
                     repr(("", "stablehlo", "", "", True)))

  def test_env_vars_and_absl_flags(self):
    code = textwrap.dedent("""
        import sys, warnings
        warnings.simplefilter("always")
        import jax
        jax.config.parse_flags_with_absl()
        r = jax.config.read
        print(repr((r('jax_dump_ir_to'), r('jax_dump_ir_modes'),
                    r('jax_dump_ir_filter'), r('jax_dump_ir_local_dir'),
                    r('jax_dump_ir_delete_local_after'))))
    """)
    env = dict(os.environ, JAX_DUMP_IR_TO="gs://b/p",
               JAX_DUMP_IR_MODES="jaxpr,stablehlo",
               JAX_DUMP_IR_FILTER="^train_step$",
               JAX_DUMP_IR_LOCAL_DIR="/staging",
               JAX_DUMP_IR_DELETE_LOCAL_AFTER="false")
    out = subprocess.run(
        [sys.executable, "-c", code, "--jax_dump_ir_modes=jaxpr_html"],
        env=env, check=True, capture_output=True, text=True, timeout=120)
    self.assertEqual(out.stdout.strip(), repr(
        ("gs://b/p", "jaxpr_html", "^train_step$", "/staging", False)))

  def test_invalid_values_warn_when_dumping(self):
    # The options are read where they are used, as upstream's are: an unknown
    # mode or a bad regex dumps nothing, says why, and the program runs.
    for modes, pattern, error in [
        ("jaxpr,hlo", "", r"unknown modes \['hlo'\]; the modes are "
         r"stablehlo, jaxpr, jaxpr_html, eqn_count_pprof"),
        ("stablehlo,jaxpr", "train_(step", r"\(error: missing \)")]:
      with self.subTest(modes=modes, filter=pattern):
        jax.clear_caches()
        self.configure(modes=modes, filter=pattern)
        msgs = self.run_step()
        self.assertLen(msgs, 2)  # The jaxpr and the module.
        for msg in msgs:
          self.assertRegex(msg, error)
        self.assertEqual(os.listdir(self.dump_dir), [])
    jax.clear_caches()
    self.configure(modes=" jaxpr , stablehlo ")  # Spaces are fine.
    self.assertEqual(self.run_step(), [])
    self.assertLen(self.dumps()["step"], 1)

  def test_invalid_env_value_warns_when_dumping(self):
    env = dict(os.environ, JAX_PLATFORMS="cpu", JAX_DUMP_IR_TO=self.dump_dir,
               JAX_DUMP_IR_MODES="jaxpr,bogus")
    out = subprocess.run(
        [sys.executable, "-c",
         "import jax; print(jax.jit(lambda x: x + 1.0)(1.0))"],
        env=env, check=True, capture_output=True, text=True, timeout=120)
    self.assertEqual(out.stdout.strip(), "2.0")
    self.assertIn("DumpIRWarning", out.stderr)
    self.assertIn("unknown modes ['bogus']", out.stderr)
    self.assertEqual(os.listdir(self.dump_dir), [])


class ImportTest(DumpTestCase):

  _CHILD = textwrap.dedent("""
      import atexit, json, os, sys, threading
      handlers = []
      _register = atexit.register
      atexit.register = lambda fn, *a, **k: (
          handlers.append(fn.__module__), _register(fn, *a, **k))[1]
      _at_fork = os.register_at_fork
      os.register_at_fork = lambda **k: (
          handlers.append(next(iter(k.values())).__module__), _at_fork(**k))[1]
      import jax, numpy as np
      if os.environ.get("JAX_DUMP_IR_TO"):
        from jax._src import jaxpr_dump
        jaxpr_dump._upload_file = lambda local_path, dest: None  # No network.
      # Runs something either way: starting the backend registers handlers
      # of its own (on Python 3.9, importlib_metadata's at-fork one).
      jax.jit(lambda x: x + 1.0)(np.float32(1))
      imported = "jax._src.jaxpr_dump" in sys.modules
      print(json.dumps({"handlers": handlers, "imported": imported,
                        "threads": [t.name for t in threading.enumerate()]}))
      """)

  def _child(self, **env) -> dict:
    full = {k: v for k, v in os.environ.items() if not k.startswith("JAX_DUMP")}
    full.update(env, JAX_PLATFORMS="cpu")
    out = subprocess.run([sys.executable, "-c", self._CHILD], env=full,
                         check=True, capture_output=True, text=True,
                         timeout=240).stdout
    return json.loads(out.strip().splitlines()[-1])

  def test_nothing_registered_at_import_or_when_dumping(self):
    off = self._child()
    self.assertFalse(off["imported"])  # Not even imported with dumping off.
    self.assertNotIn("jax._src.jaxpr_dump", off["handlers"])
    # Local and remote dumps register no handler and start no thread.
    staging = self.make_dir()
    for env in ({"JAX_DUMP_IR_TO": self.dump_dir},
                {"JAX_DUMP_IR_TO": "gs://bucket/x",
                 "JAX_DUMP_IR_LOCAL_DIR": staging,
                 "JAX_DUMP_IR_DELETE_LOCAL_AFTER": "false"}):
      on = self._child(JAX_DUMP_IR_MODES="jaxpr", **env)
      self.assertEqual(on["handlers"], off["handlers"])
      self.assertEqual(on["threads"], off["threads"])
    self.assertNotEmpty(os.listdir(self.dump_dir))
    self.assertNotEmpty(os.listdir(staging))


class LocalDumpTest(DumpTestCase):

  def test_jaxpr_matches_make_jaxpr(self):
    def model(x, w):
      return jnp.sin(x @ w).sum()
    x = np.ones((2, 3), np.float32)
    w = np.ones((3, 4), np.float32)
    self.configure(modes="jaxpr", filter="^model$")
    out = jax.jit(model)(x, w)
    np.testing.assert_allclose(out, np.sin(x @ w).sum(), rtol=1e-6)
    (name,), = self.dumps().values()
    self.assertEqual(self.read(name).decode(),
                     str(jax.make_jaxpr(model)(x, w)) + "\n")
    # What README says: the jitted function's inner jaxpr; make_jaxpr of the
    # jitted function itself shows one pjit equation wrapping it.
    outer = jax.make_jaxpr(jax.jit(model))(x, w)
    self.assertNotEqual(self.read(name).decode(), str(outer) + "\n")
    self.assertEqual(self.read(name).decode(),
                     str(outer.eqns[0].params["jaxpr"]) + "\n")
    self.assertEqual(self.dumps(ext="jaxpr.html"), {})
    source_map = json.loads(self.read(name + ".map"))
    self.assertEqual(source_map["version"], 3)
    self.assertEqual(source_map["sources"], [__file__])
    with open(__file__, encoding="utf-8") as f:
      self.assertEqual(source_map["sourcesContent"], [f.read()])

  def test_source_map_points_at_the_equations_lines(self):
    def model(x):
      y = jnp.sin(x)  # MARK:sin
      return jnp.cos(y) * 2.0  # MARK:cos
    self.configure(modes="jaxpr", filter="^model$")
    jax.jit(model)(np.ones(3, np.float32))
    (name,), = self.dumps().values()
    text = self.read(name).decode()
    map_json = self.read(name + ".map")
    lines = decode_mappings(json.loads(map_json)["mappings"])
    # One group per line of the file, the empty one after its final newline
    # included.
    self.assertTrue(text.endswith("\n"))
    self.assertLen(lines, len(text.split("\n")))
    # The fork's own decoder reads it the same way.
    decoded = sourcemap.SourceMap.from_json(map_json)
    self.assertEqual(sourcemap.absolute_mappings(decoded.mappings), lines)
    found = {}
    for line_text, segs in zip(text.split("\n"), lines):
      for i, seg in enumerate(segs):
        if len(seg) < 4:
          continue
        end = segs[i + 1][0] if i + 1 < len(segs) else len(line_text)
        found[line_text[seg[0]:end]] = seg[2] + 1
    by_prim = {p: [l for t, l in found.items() if f"= {p} " in t]
               for p in ("sin", "cos", "mul")}
    self.assertEqual(by_prim["sin"], [source_line_of("# MARK:sin")])
    self.assertEqual(by_prim["cos"], [source_line_of("# MARK:cos")])
    self.assertEqual(by_prim["mul"], [source_line_of("# MARK:cos")])

  def test_modes_select_files(self):
    f = lambda x: x + 1.0
    x = np.float32(1)
    for modes, exts in [
        ("stablehlo", {".mlir"}),
        ("jaxpr", {".jaxpr.txt", ".jaxpr.txt.map"}),
        ("jaxpr_html", {".jaxpr.html"}),
        ("", set()),
        ("stablehlo,jaxpr,jaxpr_html",
         {".mlir", ".jaxpr.txt", ".jaxpr.txt.map", ".jaxpr.html"})]:
      with self.subTest(modes=modes):
        jax.clear_caches()
        d = self.make_dir()
        self.configure(to=d, modes=modes)
        jax.jit(f)(x)
        got = {re.sub(r"^[^.]*", "", n) for n in os.listdir(d)}
        self.assertEqual(got, exts)

  def test_stablehlo_default_is_upstream_behaviour(self):
    def g(x):
      return x * 2.0
    x = np.float32(1)
    jax.config.update("jax_dump_ir_to", self.dump_dir)
    jax.jit(g)(x)
    names = os.listdir(self.dump_dir)
    self.assertLen(names, 1)
    # 0.4.26 named it jax_ir<N>_jit_g_compile.mlir; the fork uses the same
    # per-process ids as the jaxpr dumps.
    self.assertRegex(names[0], _MLIR_RE)
    self.assertRegex(names[0], r"_jit_g_compile\.mlir$")
    text = self.read(names[0]).decode()
    self.assertIn("func.func public @main", text)
    self.assertIn("stablehlo.multiply", text)

  def test_filter_applies_to_every_mode(self):
    def train_step(x):
      return x - 1.0
    def eval_step(x):
      return x + 1.0
    x = np.float32(1)
    self.configure(modes="stablehlo,jaxpr", filter="^train_step$")
    jax.jit(train_step)(x)
    jax.jit(eval_step)(x)
    jax.jit(train_step).lower(x)
    self.assertEqual(list(self.dumps()), ["train_step"])
    mlir = [n for n in os.listdir(self.dump_dir) if n.endswith(".mlir")]
    self.assertLen(mlir, 1)
    self.assertIn("jit_train_step", mlir[0])

  def test_each_signature_dumped_once(self):
    def step(x, n):
      return x * n
    f = jax.jit(step, static_argnums=1)
    self.configure(modes="jaxpr", filter="^step$")
    a3, a4 = np.ones(3, np.float32), np.ones(4, np.float32)
    f(a3, 2)
    f(a3, 2)        # cached: no new lowering
    f(a3 + 1, 2)    # same signature
    f.lower(a3, 2)  # same jaxpr, lowered again by AOT
    f(a4, 2)        # new shape
    f(a3.astype(np.int32), 2)  # new dtype
    f(a3, 3)        # new static argument
    jax.clear_caches()
    f(a3, 2)        # a new trace after clearing the caches
    texts = [self.read(n).decode() for n in self.dumps()["step"]]
    self.assertLen(texts, 5)
    self.assertEqual(texts[0], texts[4])
    self.assertIn("f32[4]", texts[1])
    self.assertIn("i32[3]", texts[2])
    self.assertIn("3.0", texts[3])

  def test_path_objects_and_none(self):
    def step(x):
      return x + 4.0
    self.configure(to=pathlib.Path(self.dump_dir), modes="jaxpr")
    jax.jit(step)(np.float32(1))
    self.assertLen(self.dumps()["step"], 1)
    jax.config.update("jax_dump_ir_to", None)  # Off, as in upstream.
    jax.jit(step)(np.ones(2, np.float32))
    self.assertLen(self.dumps()["step"], 1)

  def test_aot_lower_dumps_without_running(self):
    def step(x):
      return jnp.exp(x)
    self.configure(modes="jaxpr,jaxpr_html", filter="^step$")
    jax.jit(step).lower(jax.ShapeDtypeStruct((5,), jnp.float32))
    self.assertLen(self.dumps()["step"], 1)
    self.assertLen(self.dumps(ext="jaxpr.html")["step"], 1)

  def test_failing_lowering_still_leaves_its_jaxpr(self):
    no_lowering_p = jax.core.Primitive("no_lowering_here")
    no_lowering_p.def_abstract_eval(lambda x: x)
    def broken(x):
      return no_lowering_p.bind(x * 2.0)
    self.configure(modes="jaxpr", filter="^broken$")
    with self.assertRaisesRegex(NotImplementedError, "no_lowering_here"):
      jax.jit(broken)(np.float32(1))
    (name,), = self.dumps().values()
    self.assertIn("no_lowering_here", self.read(name).decode())

  def test_pmap_and_nested_jit(self):
    def inner(x):
      return x * 2.0
    def outer(x):
      return jax.jit(inner)(x) + 1.0
    self.configure(modes="jaxpr")
    jax.pmap(outer)(np.ones((2, 3), np.float32))
    jax.jit(outer)(np.ones(3, np.float32))
    dumps = self.dumps()
    # Only top-level lowerings: `inner` is lowered inside its callers.
    self.assertEqual(sorted(dumps), ["outer"])
    self.assertLen(dumps["outer"], 2)

  def test_train_step_result_unchanged(self):
    args = train_inputs()
    expected = jax.jit(train_step)(*args)
    jax.clear_caches()
    self.configure(modes="stablehlo,jaxpr,jaxpr_html")
    got = jax.jit(train_step)(*args)
    jax.tree_util.tree_map(np.testing.assert_array_equal, got, expected)
    self.assertLen(self.dumps()["train_step"], 1)
    text = self.read(self.dumps()["train_step"][0]).decode()
    for prim in ("scan[", "remat2[", "dot_general[", "tanh", "sqrt"):
      self.assertIn(prim, text)


def _profiled(x):
  y = jnp.sin(x) * 2.0  # MARK:pprof_sin
  def body(c, xi):
    return c + jnp.cos(xi), None  # MARK:pprof_cos
  c, _ = jax.lax.scan(body, y[0], y)
  return jnp.tanh(c)  # MARK:pprof_tanh


def _leaf_counts(jaxpr: jax.core.Jaxpr) -> tuple[collections.Counter,
                                                 collections.Counter]:
  """Equations per (file, line) of their innermost user frame, and per
  primitive, sub-jaxprs included (as many times as they are used)."""
  lines, prims = collections.Counter(), collections.Counter()
  for _, eqn in jaxpr_util.all_eqns(jaxpr):
    prims[eqn.primitive.name] += 1
    if frame := source_info_util.user_frame(eqn.source_info):
      lines[(frame.file_name, frame.start_line)] += 1
  return lines, prims


class EquationProfileTest(DumpTestCase):

  def _profile_counts(self, name: str, directory=None):
    prof = decode_pprof(self.read(name, directory))
    self.assertEqual(prof["sample_type"], [("equations", "count")])
    lines, prims = collections.Counter(), collections.Counter()
    for location_ids, (count,), labels in prof["samples"]:
      prims[labels["primitive"]] += count
      if location_ids:  # Innermost first.
        (function_id, line), = prof["locations"][location_ids[0]]
        lines[(prof["functions"][function_id][1], line)] += count
    return prof, lines, prims

  def test_counts_per_source_line(self):
    x = np.linspace(0, 1, 4, dtype=np.float32)
    self.configure(modes="eqn_count_pprof", filter="^_profiled$")
    np.testing.assert_allclose(jax.jit(_profiled)(x), _profiled(x), rtol=1e-6)
    names = os.listdir(self.dump_dir)
    self.assertLen(names, 1)
    self.assertRegex(names[0], r"^jax_[0-9a-f]{12}-\d{6}_"
                     r"_profiled\.eqn_count_pprof$")
    _, lines, prims = self._profile_counts(names[0])
    expected_lines, expected_prims = _leaf_counts(
        jax.make_jaxpr(_profiled)(x).jaxpr)
    self.assertEqual(lines, expected_lines)
    self.assertEqual(prims, expected_prims)
    for marker in ("# MARK:pprof_sin", "# MARK:pprof_cos", "# MARK:pprof_tanh"):
      self.assertGreater(lines[(__file__, source_line_of(marker))], 0, marker)
    self.assertEqual(lines[(__file__, source_line_of("# MARK:pprof_sin"))], 2)

  def test_no_source_path_without_debug_info(self):
    x = np.linspace(0, 1, 4, dtype=np.float32)
    exts = {}
    for debug_info in (True, False):
      jax.clear_caches()
      d = self.make_dir()
      jax.config.update("jax_include_debug_info_in_dumps", debug_info)
      self.configure(to=d, modes="stablehlo,jaxpr,jaxpr_html,eqn_count_pprof",
                     filter="_profiled$")
      jax.jit(_profiled)(x)
      files = {re.sub(r"^jax_[^.]*", "", n): self.read(n, d)
               for n in os.listdir(d)}
      files[".eqn_count_pprof"] = gzip.decompress(files[".eqn_count_pprof"])
      exts[debug_info] = files
      for ext, data in files.items():
        with self.subTest(debug_info=debug_info, ext=ext):
          self.assertEqual(os.path.basename(__file__).encode() in data,
                           debug_info and ext != ".jaxpr.txt")
    self.assertEqual(set(exts[True]) - set(exts[False]), {".jaxpr.txt.map"})
    self.assertEqual(exts[True][".jaxpr.txt"], exts[False][".jaxpr.txt"])
    self.assertNotIn(b"loc(", exts[False][".mlir"])
    html = exts[False][".jaxpr.html"].decode()
    self.assertIn('"sources": []', html)
    self.assertIn('"counts": {}', html)
    # The profile still counts every equation, by primitive.
    names = [n for n in os.listdir(d) if n.endswith(".eqn_count_pprof")]
    prof, lines, prims = self._profile_counts(names[0], d)
    self.assertEqual((prof["locations"], prof["functions"], lines), ({}, {},
                                                                      {}))
    self.assertEqual(prims, _leaf_counts(jax.make_jaxpr(_profiled)(x).jaxpr)[1])

  def test_debug_info_option_from_the_environment(self):
    # Upstream's option (from 0.4.27 on): a string, false with "false" or "0".
    code = "import jax; print(jax.config.read('jax_include_debug_info_in_dumps'))"
    for value, expected in ((None, "True"), ("false", "false"), ("1", "1")):
      env = {k: v for k, v in os.environ.items()
             if k != "JAX_INCLUDE_DEBUG_INFO_IN_DUMPS"}
      if value is not None:
        env["JAX_INCLUDE_DEBUG_INFO_IN_DUMPS"] = value
      out = subprocess.run([sys.executable, "-c", code], env=env, check=True,
                           capture_output=True, text=True, timeout=120)
      self.assertEqual(out.stdout.strip(), expected)


class PmapDedupTest(DumpTestCase):

  def test_pmap_dumped_once_per_lowering(self):
    def step(x):
      return jnp.sin(x) * 2.0
    self.configure(modes="stablehlo,jaxpr", filter="^step$")
    x = np.ones((1, 3), np.float32)
    p = jax.pmap(step)
    np.testing.assert_allclose(p(x), np.sin(x) * 2.0, rtol=1e-6)
    p(x)                     # cached: no new lowering
    p.lower(x).compile()     # lowered (and traced) again: the same jaxpr
    jax.pmap(step).lower(x)  # a new pmap of the same function
    (txt,) = self.dumps()["step"]
    mlirs = [n for n in os.listdir(self.dump_dir) if n.endswith(".mlir")]
    self.assertLen(mlirs, 2)  # Both compiled modules are dumped.
    self.assertIn(_NAME_RE.match(txt)["id"], [_MLIR_RE.match(n)["id"]
                                               for n in mlirs])
    jax.pmap(step)(np.ones((1, 4), np.float32))  # a new shape: a new jaxpr
    self.assertLen(self.dumps()["step"], 2)
    jax.clear_caches()  # Traced again afterwards: dumped again, like jit.
    jax.pmap(step)(x)
    self.assertLen(self.dumps()["step"], 3)


class AotIdentityTest(DumpTestCase):

  def test_aot_and_call_dumps_identical_in_process(self):
    args = train_inputs()
    abstract = jax.tree_util.tree_map(
        lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype), args)
    d_call = self.make_dir()
    d_aot = self.make_dir()
    self.configure(to=d_call, modes="jaxpr", filter="^train_step$")
    jax.jit(train_step)(*args)
    jax.clear_caches()
    self.configure(to=d_aot, modes="jaxpr", filter="^train_step$")
    jax.jit(train_step).lower(*abstract)
    (call_txt,), = self.dumps(d_call).values()
    (aot_txt,), = self.dumps(d_aot).values()
    self.assertEqual(self.read(call_txt, d_call), self.read(aot_txt, d_aot))
    self.assertEqual(self.read(call_txt + ".map", d_call),
                     self.read(aot_txt + ".map", d_aot))

  def test_aot_and_call_dumps_identical_across_processes(self):
    # Two processes (an AOT compile job and a real run) writing to one
    # destination: distinct file names, byte-identical contents.
    results = {}
    threads = [threading.Thread(
        target=lambda how: results.setdefault(how, run_child(how,
                                                             self.dump_dir)),
        args=(how,)) for how in ("aot", "call")]
    for t in threads:
      t.start()
    for t in threads:
      t.join()
    self.assertEqual(sorted(results), ["aot", "call"])
    names = self.dumps()["train_step"]
    self.assertLen(names, 2)
    ids = {_NAME_RE.match(n)["id"].split("-")[0] for n in names}
    self.assertLen(ids, 2)  # One token per process.
    self.assertEqual(self.read(names[0]), self.read(names[1]))
    self.assertEqual(self.read(names[0] + ".map"),
                     self.read(names[1] + ".map"))
    self.assertIn(b"scan[", self.read(names[0]))
    self.assertIn(b"remat2[", self.read(names[0]))


class NamingTest(DumpTestCase):

  def test_names_are_sanitized(self):
    def make(name):
      def f(x):
        return x + 1.0
      f.__name__ = f.__qualname__ = name
      return f
    weird = ["<lambda>", "función", "a/b\\c:d*e?f\"g<h>i|j", "con", " .. ",
             "x" * 400, "tab\tnew\nline", "名前"]
    self.configure(modes="jaxpr,jaxpr_html")
    for name in weird:
      jax.jit(make(name))(np.float32(1))
    files = os.listdir(self.dump_dir)
    self.assertLen(files, 3 * len(weird))
    for f in files:
      self.assertRegex(f, _NAME_RE)
      self.assertLessEqual(len(f.encode()), 255)
    self.assertIn("_lambda_", "".join(files))
    self.assertEqual(jaxpr_dump.sanitize_name("train_step"), "train_step")
    self.assertEqual(jaxpr_dump.sanitize_name(""), "_")

  def test_names_never_collide_across_threads(self):
    # The same function name lowered concurrently from many threads.
    self.configure(modes="jaxpr")
    n = 16
    def work(i):
      def step(x):
        return x * float(i)
      jax.jit(step)(np.float32(1))
    threads = [threading.Thread(target=work, args=(i,)) for i in range(n)]
    for t in threads:
      t.start()
    for t in threads:
      t.join()
    names = self.dumps()["step"]
    self.assertLen(names, n)
    ids = [_NAME_RE.match(name)["id"] for name in names]
    self.assertLen(set(ids), n)
    bodies = {self.read(name) for name in names}
    self.assertLen(bodies, n)  # Nothing overwritten.

  def test_a_lowerings_files_share_its_id(self):
    self.configure(modes="stablehlo,jaxpr,jaxpr_html", filter="^step$")
    def step(x):
      return jnp.tanh(x) * 2.0
    jax.jit(step)(np.ones(3, np.float32))
    jax.jit(step).lower(np.ones(4, np.float32)).compile()  # AOT, new shape
    files = sorted(os.listdir(self.dump_dir))
    self.assertLen(files, 8)
    by_id: dict[str, set[str]] = {}
    for f in files:
      m = _NAME_RE.match(f) or _MLIR_RE.match(f)
      self.assertIsNotNone(m, f)
      ext = ".mlir" if f.endswith(".mlir") else "." + m["ext"]
      by_id.setdefault(m["id"], set()).add(ext)
    self.assertEqual(list(by_id.values()), [
        {".mlir", ".jaxpr.txt", ".jaxpr.txt.map", ".jaxpr.html"}] * 2)

  def _dump_in_children(self, n: int, env: dict[str, str], code: str) -> None:
    base = dict(os.environ, JAX_PLATFORMS="cpu", **env)
    prog = textwrap.dedent("""
        import jax, numpy as np
        from jax._src import jaxpr_dump
        """) + textwrap.dedent(code) + textwrap.dedent("""
        def step(x):
          return x * 2.0 + 1.0
        jax.jit(step)(np.ones(3, np.float32))
        """)
    procs = [subprocess.Popen([sys.executable, "-c", prog], env=base,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for _ in range(n)]
    for p in procs:
      _, err = p.communicate(timeout=240)
      self.assertEqual(p.returncode, 0, err.decode())

  def _check_two_processes(self, directory: str) -> None:
    files = sorted(os.listdir(directory))
    step = [f for f in files if "step" in f]
    # Every mode's file of both processes is there: nothing overwritten.
    self.assertLen(step, 8, files)
    ids = {(_NAME_RE.match(f) or _MLIR_RE.match(f))["id"] for f in step}
    self.assertLen(ids, 2)
    self.assertLen({i.split("-")[0] for i in ids}, 2)  # two process tokens
    mlirs = [f for f in step if f.endswith(".mlir")]
    self.assertLen(mlirs, 2)
    for f in mlirs:
      self.assertIn("stablehlo.multiply", self.read(f, directory).decode())

  def test_two_processes_share_a_destination(self):
    self._dump_in_children(2, {
        "JAX_DUMP_IR_TO": self.dump_dir,
        "JAX_DUMP_IR_MODES": "stablehlo,jaxpr,jaxpr_html"}, "")
    self._check_two_processes(self.dump_dir)

  def test_two_processes_share_a_staging_directory(self):
    staging = self.make_dir()
    self._dump_in_children(2, {
        "JAX_DUMP_IR_TO": "gs://bucket/run",
        "JAX_DUMP_IR_MODES": "stablehlo,jaxpr,jaxpr_html",
        "JAX_DUMP_IR_LOCAL_DIR": staging,
        "JAX_DUMP_IR_DELETE_LOCAL_AFTER": "false"},
        # Uploads succeed without a bucket; the staged files stay.
        "jaxpr_dump._upload_file = lambda local_path, dest: None\n")
    self._check_two_processes(staging)

  def test_forked_child_gets_a_new_token(self):
    if not hasattr(os, "fork"):
      self.skipTest("needs os.fork")
    token = jaxpr_dump.new_dump_id().split("-")[0]
    r, w = os.pipe()
    with warnings.catch_warnings():
      # JAX warns that forking a multithreaded process may deadlock; the
      # child only formats an id and exits.
      warnings.simplefilter("ignore", RuntimeWarning)
      pid = os.fork()
    if pid == 0:  # pragma: no cover (child)
      os.close(r)
      os.write(w, jaxpr_dump.new_dump_id().encode())
      os._exit(0)
    os.close(w)
    child_id = os.read(r, 100).decode()
    os.close(r)
    os.waitpid(pid, 0)
    self.assertNotEqual(child_id.split("-")[0], token)
    self.assertEqual(child_id.split("-")[1], "000000")

  def test_no_partial_files_left(self):
    self.configure(modes="stablehlo,jaxpr,jaxpr_html")
    jax.jit(lambda x: x - 2.0)(np.float32(1))
    self.assertFalse([n for n in os.listdir(self.dump_dir)
                      if n.startswith(".") or n.endswith(".tmp")])


class StateTest(DumpTestCase):
  """What dumping remembers is bounded."""

  def test_dumped_lowerings_are_remembered_up_to_a_bound(self):
    self.enter_context(absltest.mock.patch.object(jaxpr_dump, "_MAX_DUMPED",
                                                  3))
    self.configure(modes="jaxpr", filter="^step$")
    def lower(i):  # A new function each time: traced and lowered again.
      def step(x):
        return x * float(i)
      jax.jit(step).lower(np.float32(1))
    for i in range(10):
      lower(i)
      self.assertLessEqual(len(jaxpr_dump._dumped), 3)
    self.assertLen(self.dumps()["step"], 10)
    lower(9)  # Remembered: not dumped again.
    self.assertLen(self.dumps()["step"], 10)
    lower(0)  # Forgotten when the set was full: dumped again.
    self.assertLen(self.dumps()["step"], 11)

  def test_module_ids_go_with_their_modules(self):
    self.configure(modes="stablehlo,jaxpr", filter="^step$")
    gc.collect()
    before = len(jaxpr_dump.module_ids)
    def step(x):
      return x + 1.0
    lowered = jax.jit(step).lower(np.float32(1))  # Its module's id waits.
    self.assertLen(jaxpr_dump.module_ids, before + 1)
    del lowered
    jax.clear_caches()
    gc.collect()
    self.assertLen(jaxpr_dump.module_ids, before)

  def test_a_module_compiled_twice_is_dumped_twice(self):
    self.configure(modes="stablehlo,jaxpr", filter="^step$")
    def step(x):
      return x + 1.0
    lowered = jax.jit(step).lower(np.float32(1))
    lowered.compile()
    lowered.compile(compiler_options={"xla_embed_ir_in_executable": True})
    (txt,) = self.dumps()["step"]
    mlirs = sorted(f for f in os.listdir(self.dump_dir) if f.endswith(".mlir"))
    self.assertLen(mlirs, 2)  # Nothing overwritten.
    self.assertEqual([_MLIR_RE.match(f)["id"] for f in mlirs][0],
                     _NAME_RE.match(txt)["id"])  # The first shares the id.
    self.assertEqual(self.read(mlirs[0]), self.read(mlirs[1]))


class FaultMatrixTest(DumpTestCase):
  """Each fault, injected for each mode: the program runs, a DumpIRWarning
  names every file and where it was kept."""

  def _inject(self, fault: str) -> str:
    """Sets up `fault`; returns the destination to configure."""
    if fault == "sponge_unset":
      env = {k: v for k, v in os.environ.items()
             if k != "TEST_UNDECLARED_OUTPUTS_DIR"}
      self.enter_context(absltest.mock.patch.dict(os.environ, env, clear=True))
      return "sponge"
    if fault == "unwritable":
      blocker = os.path.join(self.dump_dir, "a_file")
      with open(blocker, "w") as f:
        f.write("not a directory")
      return os.path.join(blocker, "dumps")
    if fault in ("read_only", "disk_full"):
      if fault == "read_only":
        d = os.path.join(self.dump_dir, "ro")
        os.makedirs(d)
        error_type, code = PermissionError, errno.EACCES
      else:
        d = self.dump_dir
        error_type, code = OSError, errno.ENOSPC
      real = jaxpr_dump._write_local_file
      def fail_in_d(path, data):
        if os.path.dirname(path) == d:
          raise error_type(code, os.strerror(code), path)
        real(path, data)
      self.enter_context(absltest.mock.patch.object(
          jaxpr_dump, "_write_local_file", fail_in_d))
      return d
    if fault == "remote_fails":
      def refuse(local_path, dest):
        raise ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused")
      self.enter_context(absltest.mock.patch.object(
          jaxpr_dump, "_upload_file", refuse))
      self.staging = self.make_dir()
      return "gs://bucket/run"
    raise AssertionError(fault)

  @parameterized.product(
      fault=["sponge_unset", "unwritable", "read_only", "disk_full",
             "remote_fails"],
      mode=["stablehlo", "jaxpr", "jaxpr_html"])
  def test_fault(self, fault, mode):
    dest = self._inject(fault)
    self.configure(to=dest, modes=mode, filter="^step$",
                   local_dir=getattr(self, "staging", ""))
    msgs = self.run_step(aot=True)
    self.assertNotEmpty(msgs)
    text = " ".join(msgs)
    self.assertIn("sponge" if fault == "sponge_unset" else dest, text)
    if fault == "sponge_unset":
      self.assertIn("TEST_UNDECLARED_OUTPUTS_DIR", text)
    kept = set(_KEPT_RE.findall(text))
    # Two lowerings, each with all of the mode's files, kept (and named).
    exts = sorted(e for k in kept for e in _MODE_EXTS[mode] if k.endswith(e)
                  and not (e == ".jaxpr.txt" and k.endswith(".map")))
    self.assertEqual(exts, sorted(list(_MODE_EXTS[mode]) * 2), text)
    for k in kept:
      if fault == "remote_fails":
        self.assertEqual(os.path.dirname(k), self.staging)
      else:  # A new temporary directory, named.
        self.assertEqual(os.path.dirname(os.path.dirname(k)), self.tmp_dir)
        self.assertIn(repr(os.path.dirname(k)), text)
      with open(k, "rb") as f:
        self.assertIn(b"sin", f.read())


class FaultTest(DumpTestCase):

  def test_unwritable_local_directory(self):
    blocker = os.path.join(self.dump_dir, "a_file")
    with open(blocker, "w") as f:
      f.write("not a directory")
    dest = os.path.join(blocker, "dumps")  # mkdir fails: a file is in the way
    self.configure(to=dest, modes="stablehlo,jaxpr,jaxpr_html")
    msgs = self.run_step()
    self.assertNotEmpty(msgs)
    kept = re.findall(r"(/\S+?\.(?:jaxpr\.txt\.map|jaxpr\.txt|jaxpr\.html|"
                      r"mlir))(?=[,.] ?|$)", " ".join(msgs))
    self.assertIn(dest, msgs[0])
    # Nothing is lost: every file named in the warnings exists, complete.
    self.assertLen({os.path.basename(k) for k in kept}, 4)
    for k in kept:
      self.assertTrue(os.path.isfile(k), k)
      if k.endswith(".jaxpr.txt"):
        with open(k) as f:
          self.assertIn("sin", f.read())

  def test_full_disk(self):
    def no_space(path, data):
      raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)
    self.enter_context(absltest.mock.patch.object(
        jaxpr_dump, "_write_local_file", no_space))
    self.configure(modes="stablehlo,jaxpr,jaxpr_html")
    msgs = self.run_step()
    self.assertNotEmpty(msgs)
    self.assertTrue(all("No space left on device" in m for m in msgs), msgs)
    self.assertTrue(any(".jaxpr.txt" in m and "Lost" in m for m in msgs))
    self.assertEqual(os.listdir(self.dump_dir), [])  # No partial files.

  def test_full_destination_keeps_files_in_fallback(self):
    real = jaxpr_dump._write_local_file
    dest = self.dump_dir
    def full_dest(path, data):
      if os.path.dirname(path) == dest:
        with open(path, "wb") as f:
          f.write(data[:3])  # A partial write, then the disk is full.
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)
      real(path, data)
    self.enter_context(absltest.mock.patch.object(
        jaxpr_dump, "_write_local_file", full_dest))
    self.configure(modes="jaxpr")
    msgs = self.run_step()
    self.assertLen(msgs, 1)
    self.assertIn("Kept them in", msgs[0])
    self.assertEqual(os.listdir(dest), [])  # The partial file is removed.
    kept = re.findall(r"(/\S+\.jaxpr\.txt)(?=[,.])",
                      msgs[0].split("Kept them in")[1])
    self.assertLen(set(kept), 1)
    with open(kept[0]) as f:
      self.assertIn("= sin", f.read())

  def test_failure_while_printing(self):
    def broken(closed_jaxpr):
      raise RuntimeError("printer exploded")
    self.enter_context(absltest.mock.patch.object(
        jaxpr_dump, "jaxpr_text_and_regions", broken))
    self.configure(modes="jaxpr")
    msgs = self.run_step()
    self.assertLen(msgs, 1)
    self.assertIn("printer exploded", msgs[0])
    self.assertIn("'step'", msgs[0])

  def test_unreachable_remote_keeps_staged_files(self):
    staging = self.make_dir()
    def refuse(local_path, dest):
      raise ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused")
    self.enter_context(absltest.mock.patch.object(
        jaxpr_dump, "_upload_file", refuse))
    self.configure(to="gs://bucket/run", modes="jaxpr,jaxpr_html",
                   local_dir=staging)
    msgs = self.run_step()
    self.assertLen(msgs, 1)
    self.assertIn("Connection refused", msgs[0])
    self.assertIn("gs://bucket/run", msgs[0])
    staged = sorted(os.listdir(staging))
    self.assertLen(staged, 3)
    for name in staged:
      self.assertIn(os.path.join(staging, name), msgs[0])

  def test_upload_then_delete_only_after_success(self):
    staging = self.make_dir()
    remote = self.make_dir()
    calls = []
    def upload(local_path, dest):
      calls.append(local_path)
      self.assertTrue(os.path.exists(local_path))  # Still staged while sent.
      with open(local_path, "rb") as src, open(
          os.path.join(remote, os.path.basename(local_path)), "wb") as dst:
        dst.write(src.read())
    self.enter_context(absltest.mock.patch.object(
        jaxpr_dump, "_upload_file", upload))
    for delete in (True, False):
      for local_dir in (staging, ""):  # "": new temporary directories.
        with self.subTest(delete_local_after=delete, local_dir=local_dir):
          jax.clear_caches()
          calls.clear()
          self.configure(to="gs://bucket/x", modes="jaxpr,stablehlo",
                         local_dir=local_dir, delete_local_after=delete)
          self.assertEqual(self.run_step(), [])
          sent = sorted(os.path.basename(p) for p in calls)
          self.assertLen(sent, 3)  # .mlir, .jaxpr.txt, .jaxpr.txt.map
          self.assertContainsSubset(sent, os.listdir(remote))
          left = sorted(os.path.basename(p) for p in calls
                        if os.path.exists(p))
          self.assertEqual(left, [] if delete else sent)
          if delete:  # Temporary directories go with their files.
            self.assertEqual(os.listdir(self.tmp_dir), [])

  def test_missing_sponge_directory(self):
    self.configure(to="sponge", modes="jaxpr")
    env = {k: v for k, v in os.environ.items()
           if k != "TEST_UNDECLARED_OUTPUTS_DIR"}
    self.enter_context(absltest.mock.patch.dict(os.environ, env, clear=True))
    msgs = self.run_step()
    self.assertLen(msgs, 1)
    self.assertIn("TEST_UNDECLARED_OUTPUTS_DIR", msgs[0])


if __name__ == "__main__":
  absltest.main(testLoader=jtu.JaxTestLoader())
