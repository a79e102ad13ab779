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
"""Tests for jax.experimental.source_mapper.

The maps are also read by Mozilla's `source-map` (npm), run with Node.js from
tests/js; install it with `npm ci --prefix tests/js`.  Those tests skip (with
the reason) when `node` or tests/js/node_modules is missing.
"""
from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap

from absl.testing import absltest
from absl.testing import parameterized

import jax
from jax import lax
import jax.numpy as jnp
from jax._src import config
from jax._src import core
from jax._src import source_info_util
from jax._src import sourcemap
from jax._src import test_util as jtu
from jax.experimental import source_mapper

_JS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "js")
_JS_READER = os.path.join(_JS_DIR, "read_source_map.js")


def _marker_lines() -> dict[str, int]:
  """1-based line numbers of the `# <name>` markers in this file."""
  out = {}
  with open(__file__, encoding="utf-8") as f:
    for n, line in enumerate(f, 1):
      m = re.search(r"# <(\w+)>$", line)
      if m:
        out[m.group(1)] = n
  return out


# A small multi-function program: an MLP whose layers run in a scan, each
# layer a jit-ed function.
@jax.jit
def _layer(w, b, x):
  y = jnp.dot(x, w) + b[None, :]  # <dot>
  return jnp.tanh(y)  # <tanh>


def _mlp(params, x):
  ws, bs = params
  def body(h, wb):
    h = _layer(*wb, h)  # <call_layer>
    return h, jnp.sum(h * h)  # <body_sum>
  h, norms = lax.scan(body, x, (ws, bs))  # <scan>
  return jnp.mean(h) + 0.5 * jnp.sum(norms)  # <out>


def _sin_cos(x):
  y = jnp.sin(x)  # <ann_sin>
  return jnp.cos(y)  # <ann_cos>


def _mlp_args():
  ws = jnp.ones((3, 4, 4), jnp.float32)
  bs = jnp.zeros((3, 4), jnp.float32)
  x = jnp.ones((2, 4), jnp.float32)
  return (ws, bs), x


def _eqns_in_print_order(jaxpr: core.Jaxpr):
  for eqn in jaxpr.eqns:
    yield eqn
    for sub in core.jaxprs_in_params(eqn.params):
      yield from _eqns_in_print_order(sub)


_EQN_LINE = re.compile(r"^\s*(?:\w+:\S+\s+)*\w+:\S+ = \w")


def _node_skip_reason() -> str | None:
  if shutil.which("node") is None:
    return "needs Node.js (`node` is not on PATH)"
  if not os.path.isdir(os.path.join(_JS_DIR, "node_modules", "source-map")):
    return ("needs the npm package source-map: run "
            "`npm ci --prefix tests/js`")
  return None


def read_with_mozilla(source_map: sourcemap.SourceMap,
                      queries: list[tuple[int, int]]) -> dict:
  """Runs tests/js/read_source_map.js; queries are (0-based line, column)."""
  request = {"map": json.loads(source_map.to_json()),
             "queries": [[line + 1, col] for line, col in queries]}
  proc = subprocess.run(["node", _JS_READER], input=json.dumps(request),
                        capture_output=True, text=True, cwd=_JS_DIR,
                        timeout=120, check=False)
  if proc.returncode != 0:
    raise AssertionError(f"the source-map reader failed:\n{proc.stderr}")
  return json.loads(proc.stdout)


def absolute(sm: sourcemap.SourceMap) -> list[list[tuple[int, ...]]]:
  """The segments of `sm` with absolute fields."""
  return sourcemap.absolute_mappings(sm.mappings)


# Frames carry column positions from Python 3.11 on (PEP 657); before that
# every source column is 0.
_COLUMNS = sys.version_info >= (3, 11)


class SourceMapperTest(jtu.JaxTestCase):

  def test_jaxpr_pass(self):
    def jax_fn(x, y):
      return x + y
    dumps = source_mapper.generate_sourcemaps(
        jax_fn, passes=source_mapper.filter_passes("jaxpr"))(
            jnp.array([1, 2, 3]), jnp.array([4, 5, 6]))
    self.assertLen(dumps, 1)
    dump = dumps[0]
    self.assertEqual(dump.pass_name, "jaxpr")
    self.assertIn("add a b", dump.generated_code)
    self.assertEqual(dump.generated_code,
                     str(jax.make_jaxpr(jax_fn)(jnp.array([1, 2, 3]),
                                               jnp.array([4, 5, 6]))))
    sm = dump.source_map
    self.assertEqual(sm.sources,
                     [source_mapper.canonicalize_filename(__file__)])
    self.assertEqual(sm.sources_content, [])
    # One group per line, and an empty one for a final newline.
    self.assertLen(absolute(sm), len(dump.generated_code.split("\n")) + 1)
    self.assertEqual(absolute(sm)[-1], [])
    gen_col, file_idx, src_line, src_col = absolute(sm)[0][0]
    line = dump.generated_code.split("\n")[0]
    self.assertEqual(line[gen_col:].split(" = ")[1][:7], "add a b")
    self.assertEqual(file_idx, 0)
    # 0-based lines: the `return` line is co_firstlineno + 1 in 1-based terms.
    self.assertEqual(src_line, jax_fn.__code__.co_firstlineno)
    # `x + y` in `    return x + y`.
    self.assertEqual(src_col, 13 if _COLUMNS else 0)
    # The segment after the equation ends the mapping.
    self.assertLen(absolute(sm)[0][1], 1)

  @parameterized.parameters(
      ("hlo:stable-hlo", "stablehlo.add", "loc(", 13 if _COLUMNS else 0),
      ("hlo:original", "add(", "source_line=", 0),   # HLO has no columns.
      ("hlo:optimized", "add(", "source_line=", 0),
  )
  def test_hlo_passes(self, pass_name, op, debug_info, src_col_want):
    def jax_fn(x, y):
      return x + y
    dumps = source_mapper.generate_sourcemaps(
        jax_fn, passes=source_mapper.filter_passes(pass_name))(
            jnp.array([1, 2, 3]), jnp.array([4, 5, 6]))
    self.assertLen(dumps, 1)
    dump = dumps[0]
    self.assertEqual(dump.pass_name, pass_name)
    self.assertIn(op, dump.generated_code)
    self.assertIn(debug_info, dump.generated_code)
    sm = dump.source_map
    self.assertEqual(sm.sources,
                     [source_mapper.canonicalize_filename(__file__)])
    lines = dump.generated_code.split("\n")
    self.assertLen(absolute(sm), len(lines) + 1)
    mapped = [(n, m) for n, m in enumerate(absolute(sm)) if m]
    self.assertLen(mapped, 1)
    n, segs = mapped[0]
    self.assertIn(op, lines[n])
    gen_col, file_idx, src_line, src_col = segs[0]
    self.assertEqual(gen_col, len(lines[n]) - len(lines[n].lstrip()))
    self.assertGreater(gen_col, 0)
    self.assertEqual((file_idx, src_line, src_col),
                     (0, jax_fn.__code__.co_firstlineno, src_col_want))

  def test_passes_registry(self):
    names = [p.name for p in source_mapper.all_passes()]
    self.assertIn("jaxpr", names)
    self.assertIn("hlo:stable-hlo", names)
    self.assertEqual([p.name for p in source_mapper.filter_passes("hlo")],
                     [n for n in names if n.startswith("hlo")])
    self.assertEqual(source_mapper.filter_passes("nothing-matches"), [])
    jaxpr_pass = source_mapper.filter_passes("jaxpr$")[0]
    with self.assertRaisesRegex(ValueError, "already registered"):
      source_mapper.register_pass(jaxpr_pass)
    with self.assertRaises(TypeError):
      source_mapper.register_pass("jaxpr")

  def test_custom_pass_shares_compilation(self):
    calls = []

    def compile_fn(f, args, kwargs, **pass_kwargs):
      calls.append(pass_kwargs)
      return jax.make_jaxpr(f)(*args, **kwargs)

    def dump_fn(closed, *, suffix="", **_):
      text, sm = source_mapper.jaxpr_source_map(closed, print_shapes=False)
      return source_mapper.SourceMapDump(sm, text + suffix, "test:custom")

    p1 = source_mapper.Pass("test:custom-1", compile_fn, dump_fn)
    p2 = source_mapper.Pass("test:custom-2", compile_fn, dump_fn)
    source_mapper.register_pass(p1)
    source_mapper.register_pass(p2)
    try:
      self.assertEqual(source_mapper.filter_passes("test:custom"), [p1, p2])
      dumps = source_mapper.generate_sourcemaps(
          lambda x: jnp.sin(x) * 2, source_mapper.filter_passes("test:custom"),
          suffix="!")(jnp.float32(1.0))
    finally:
      del source_mapper.common._pass_registry["test:custom-1"]
      del source_mapper.common._pass_registry["test:custom-2"]
    self.assertEqual(calls, [{"suffix": "!"}])  # One compilation for both.
    self.assertLen(dumps, 2)
    self.assertIn("sin a", dumps[0].generated_code)
    self.assertTrue(dumps[0].generated_code.endswith("!"))

  def test_bad_passes(self):
    with self.assertRaises(TypeError):
      source_mapper.generate_sourcemaps(jnp.sin, ["jaxpr"])

  def test_include_source_content_and_json(self):
    params, x = _mlp_args()
    dumps = source_mapper.generate_sourcemaps(
        _mlp, source_mapper.all_passes(), include_source_content=True)(
            params, x)
    self.assertEqual([d.pass_name for d in dumps],
                     [p.name for p in source_mapper.all_passes()])
    with open(__file__, encoding="utf-8") as f:
      text = f.read()
    for d in dumps:
      sm = d.source_map
      self.assertEqual(sm.sources, [__file__])
      self.assertEqual(sm.sources_content, [text])
      again = sourcemap.SourceMap.from_json(sm.to_json())
      self.assertEqual(again, sm)
      data = json.loads(sm.to_json())
      self.assertEqual(sorted(data), ["mappings", "names", "sources",
                                      "sourcesContent", "version"])

  def test_canonicalize_filename(self):
    def f(x):
      return x * 2
    with config.hlo_source_file_canonicalization_regex(r".*/"):
      self.assertEqual(source_mapper.canonicalize_filename("/a/b/c.py"), "c.py")
      dumps = source_mapper.generate_sourcemaps(
          f, source_mapper.all_passes())(1.0)
    for d in dumps:
      self.assertEqual(d.source_map.sources, [os.path.basename(__file__)],
                       d.pass_name)

  def test_jaxpr_lines_map_to_equation_frames(self):
    # In Python (no Node.js needed): every equation line maps, at its first
    # column, to the user frame of that equation.
    params, x = _mlp_args()
    closed = jax.make_jaxpr(_mlp)(params, x)
    text, sm = source_mapper.jaxpr_source_map(closed)
    lines = text.split("\n")
    eqn_lines = [n for n, l in enumerate(lines) if _EQN_LINE.match(l)]
    eqns = list(_eqns_in_print_order(closed.jaxpr))
    self.assertLen(eqn_lines, len(eqns))
    for n, eqn in zip(eqn_lines, eqns):
      frame = source_info_util.user_frame(eqn.source_info)
      col = len(lines[n]) - len(lines[n].lstrip())
      seg = absolute(sm)[n][0]
      self.assertEqual(seg, (col, 0, frame.start_line - 1, frame.start_column))

  def test_jaxpr_with_two_annotations_per_equation(self):
    # With source_info and name_stack an equation prints two annotations, the
    # second on a line of its own: that line maps nothing, and every equation
    # line still maps to its own source line.
    closed = jax.make_jaxpr(_sin_cos)(1.0)
    kw = dict(source_info=True, name_stack=True)
    regions: list = []
    text = closed.pretty_print(source_map=regions, use_color=False, **kw)
    lines = text.split("\n")
    self.assertLen(regions, len(lines))
    map_text, sm = source_mapper.jaxpr_source_map(closed, **kw)
    self.assertEqual(map_text, text)
    groups = absolute(sm)
    self.assertLen(groups, len(lines) + 1)
    markers = _marker_lines()
    eqn_lines = [n for n, l in enumerate(lines) if _EQN_LINE.match(l)]
    self.assertEqual([lines[n].split(" = ")[1][:3] for n in eqn_lines],
                     ["sin", "cos"])
    for n, name in zip(eqn_lines, ["ann_sin", "ann_cos"]):
      col = len(lines[n]) - len(lines[n].lstrip())
      self.assertEqual(groups[n][0][:3], (col, 0, markers[name] - 1), lines[n])
      self.assertEqual(lines[n + 1].strip(), "# []")
      self.assertEqual(groups[n + 1], [], lines[n + 1])


class MlirSourceMapTest(jtu.JaxTestCase):

  def test_location_syntax(self):
    text = "\n".join([
        '#loc1 = loc("/a.py":3:4)',
        '#loc3 = loc("fn"("/b.py":8:6))',  # Used in a location: defined first.
        "module @m {",
        '  %0 = "t.op0"() : () -> i32 loc(#loc2)',
        '  %1 = "t.op1"() : () -> i32 loc("/b.py":7:1)',
        '  %2 = "t.op2"() : () -> i32 loc(callsite(#loc3 at #loc1))',
        '  %3 = "t.op3"() : () -> i32 loc(fused<"meta">[unknown, '
        '"n"("/a.py":9:0)])',
        '  %4 = "t.op4"() : () -> i32 loc("only a name")',
        '  %5 = "t.op5"() : () -> i32 loc(unknown)',
        '  %6 = "t.op6"() {attr = "loc(#loc1)"} : () -> i32 loc(#loc)',
        '  %7 = "t.op7"() : () -> i32 loc("weird \\22(name\\22"(#loc1))',
        '  %8 = "t.op8"() : () -> i32 loc(callsite(unknown at "/c.py":2:2))',
        '  %9 = "t.op9"() : () -> i32 loc("/\\C3\\A9.py":1:0)',  # "/é.py"
        "} loc(#loc)",
        "#loc = loc(unknown)",
        '#loc2 = loc("x/add"(#loc1))',
    ])
    printed, sm = source_mapper.mlir_source_map(text)
    self.assertEqual(sm.sources, ["/a.py", "/b.py", "/c.py", "/\u00e9.py"])
    lines = printed.split("\n")
    self.assertLen(absolute(sm), len(lines) + 1)
    ops = {re.search(r'"t\.(op\d)"', line)[1]: n
           for n, line in enumerate(lines) if '"t.op' in line}
    self.assertLen(ops, 10)
    got = {op: absolute(sm)[n] for op, n in ops.items() if absolute(sm)[n]}
    self.assertEqual([n for n, segs in enumerate(absolute(sm)) if segs],
                     sorted(ops[op] for op in got))
    end = lambda op: (len(lines[ops[op]]),)
    self.assertEqual(got, {
        "op0": [(2, 0, 2, 4), end("op0")],
        "op1": [(2, 1, 6, 1), end("op1")],
        "op2": [(2, 1, 7, 6), end("op2")],
        "op3": [(2, 0, 8, 0), end("op3")],
        "op7": [(2, 0, 2, 4), end("op7")],
        "op8": [(2, 2, 1, 2), end("op8")],
        "op9": [(2, 3, 0, 0), end("op9")],
    })

  def test_dump_debug_info_flag_does_not_apply(self):
    # A source map is not a dump: jax_include_debug_info_in_dumps=false, which
    # keeps locations out of the dumps, leaves the map as it is.
    text = "\n".join(['#loc1 = loc("/a.py":3:4)', "module @m {",
                      '  %0 = "t.op0"() : () -> i32 loc(#loc1)',
                      "} loc(#loc)", "#loc = loc(unknown)"])
    printed, sm = source_mapper.mlir_source_map(text)
    self.assertEqual(sum(map(len, absolute(sm))), 2)
    old = jax.config.values["jax_include_debug_info_in_dumps"]
    self.addCleanup(jax.config.update, "jax_include_debug_info_in_dumps", old)
    jax.config.update("jax_include_debug_info_in_dumps", "false")
    self.assertEqual(source_mapper.mlir_source_map(text), (printed, sm))

  def test_bad_text(self):
    with self.assertRaisesRegex(ValueError, "never defined"):
      source_mapper.mlir_source_map(
          'module {\n  "t.op"() : () -> () loc(#nonexistent)\n}')
    with self.assertRaisesRegex(ValueError, "not an MLIR module"):
      source_mapper.mlir_source_map("%0 = op0 : i32")

  def test_region_operation_maps_its_first_line(self):
    text = "\n".join([
        "func.func @f(%x: tensor<i32> loc(unknown)) -> tensor<i32> {",
        "  %0 = stablehlo.while(%a = %x) : tensor<i32>",
        "   cond {",
        "    %c = stablehlo.compare  LT, %a, %a : (tensor<i32>, tensor<i32>) "
        '-> tensor<i1> loc("/a.py":2:0)',
        '    stablehlo.return %c : tensor<i1> loc("/a.py":2:0)',
        "  } do {",
        "    stablehlo.return %a : tensor<i32> loc(#loc1)",
        "  } loc(#loc1)",
        '  %1 = "t.r"(%0) ({',
        '    "t.y"() : () -> () loc(unknown)',
        "  }) : (tensor<i32>) -> tensor<i32> loc(#loc2)",
        "  return %1 : tensor<i32> loc(unknown)",
        "} loc(unknown)",
        '#loc1 = loc("/a.py":5:3)',
        '#loc2 = loc("/a.py":6:0)',
    ])
    printed, sm = source_mapper.mlir_source_map(text)
    lines = printed.split("\n")
    self.assertLen(absolute(sm), len(lines) + 1)
    firsts = [(line.strip(), segs[0] if segs else None)
              for line, segs in zip(lines, absolute(sm))
              if line.strip() and not line.startswith("#loc")]
    expected = [
        ("module {", None),
        ("func.func @f", None),
        ("%0 = stablehlo.while", (4, 0, 4, 3)),
        ("cond {", None),
        ("%2 = stablehlo.compare", (6, 0, 1, 0)),
        ("stablehlo.return %2", (6, 0, 1, 0)),
        ("} do {", None),
        ("stablehlo.return %iterArg", (6, 0, 4, 3)),
        ("} loc(", (4, 0, 4, 3)),  # The while's location is printed here.
        ('%1 = "t.r"', (4, 0, 5, 0)),
        ('"t.y"()', None),
        ("}) : (tensor<i32>) -> tensor<i32> loc(", (4, 0, 5, 0)),
        ("return %1", None),
        ("} loc(", None),
        ("} loc(", None),
    ]
    self.assertLen(firsts, len(expected))
    for (line, seg), (prefix, want) in zip(firsts, expected):
      self.assertTrue(line.startswith(prefix), (line, prefix))
      self.assertEqual(seg, want, line)


class HloSourceMapTest(jtu.JaxTestCase):

  def test_metadata(self):
    text = "\n".join([
        "HloModule m",
        "ENTRY main {",
        '  p = f32[] parameter(0)',
        '  a = f32[] add(p, p), metadata={op_name="x/add" '
        'source_file="/a.py" source_line=12}',
        '  ROOT b = f32[] sine(a), metadata={op_type="sin" '
        'source_file="/q\\"d.py" source_line=3}',
        "}",
    ])
    sm = source_mapper.hlo_source_map(text)
    self.assertEqual(sm.sources, ["/a.py", '/q"d.py'])
    lines = text.split("\n")
    self.assertEqual(absolute(sm), [
        [], [], [], [(2, 0, 11, 0), (len(lines[3]),)],
        [(2, 1, 2, 0), (len(lines[4]),)], [], []])


class MozillaConsumerTest(jtu.JaxTestCase):
  """The maps, read by Mozilla's source-map library under Node.js."""

  def setUp(self):
    super().setUp()
    reason = _node_skip_reason()
    if reason:
      self.skipTest(reason)

  def check_consumer_agrees(self, sm: sourcemap.SourceMap, result: dict):
    # Every mapping the library decodes is one of ours, and vice versa.
    ours = [(n + 1, seg[0], sm.sources[seg[1]] if len(seg) > 1 else None,
             seg[2] + 1 if len(seg) > 1 else None,
             seg[3] if len(seg) > 1 else None)
            for n, line in enumerate(absolute(sm)) for seg in line]
    theirs = [(m["generatedLine"], m["generatedColumn"], m["source"],
               m["originalLine"], m["originalColumn"])
              for m in result["mappings"]]
    self.assertEqual(sorted(theirs, key=repr), sorted(ours, key=repr))

  def test_jaxpr_equations(self):
    params, x = _mlp_args()
    dump, = source_mapper.generate_sourcemaps(
        _mlp, source_mapper.filter_passes("jaxpr"))(params, x)
    lines = dump.generated_code.split("\n")
    eqn_lines = [n for n, l in enumerate(lines) if _EQN_LINE.match(l)]
    closed = jax.make_jaxpr(_mlp)(params, x)
    eqns = list(_eqns_in_print_order(closed.jaxpr))
    self.assertLen(eqn_lines, len(eqns))
    self.assertGreaterEqual(len(eqns), 10)
    queries = [(n, len(lines[n]) - len(lines[n].lstrip())) for n in eqn_lines]
    # Also the last column of each line, and a column past its end.
    queries += [(n, len(lines[n].rstrip()) - 1) for n in eqn_lines]
    queries += [(n, len(lines[n]) + 5) for n in eqn_lines]
    result = read_with_mozilla(dump.source_map, queries)
    positions = result["positions"]
    k = len(eqn_lines)
    for i, eqn in enumerate(eqns):
      frame = source_info_util.user_frame(eqn.source_info)
      line = lines[eqn_lines[i]]
      for pos in positions[i], positions[k + i]:
        self.assertEqual(pos["source"], __file__, line)
        self.assertEqual(pos["line"], frame.start_line, line)
        self.assertEqual(pos["column"], frame.start_column, line)
      self.assertIsNone(positions[2 * k + i]["source"], line)
    # Independently of the jaxpr machinery: the lines the markers show.
    marks = _marker_lines()
    prims = {}
    for i, eqn in enumerate(eqns):
      prims.setdefault(eqn.primitive.name, []).append(positions[i]["line"])
    self.assertEqual(prims["dot_general"], [marks["dot"]])
    self.assertEqual(prims["tanh"], [marks["tanh"]])
    self.assertEqual(prims["pjit"], [marks["call_layer"]])
    self.assertEqual(prims["scan"], [marks["scan"]])
    self.assertEqual(sorted(prims["reduce_sum"]),
                     [marks["body_sum"], marks["out"], marks["out"]])
    self.check_consumer_agrees(dump.source_map, result)

  def test_stablehlo_operations(self):
    params, x = _mlp_args()
    dump, = source_mapper.generate_sourcemaps(
        _mlp, source_mapper.filter_passes("hlo:stable-hlo"))(params, x)
    lines = dump.generated_code.split("\n")
    marks = _marker_lines()
    expected = {"stablehlo.dot_general": marks["dot"],
                "stablehlo.tanh": marks["tanh"],
                "func.call @_layer": marks["call_layer"],
                "stablehlo.while": marks["scan"]}
    queries, wanted = [], []
    for n, l in enumerate(lines):
      for op, src_line in expected.items():
        # (jaxlib 0.4.30's MLIR prints `func.call` inside a function as `call`.)
        bare_op = re.escape(op.removeprefix("func."))
        if re.match(rf"\s*(%\S+ = )?(func\.)?{bare_op}\b", l):
          queries.append((n, len(l) - len(l.lstrip())))
          wanted.append((op, src_line))
    self.assertEqual(sorted({w[0] for w in wanted}), sorted(expected))
    result = read_with_mozilla(dump.source_map, queries)
    for (op, src_line), pos in zip(wanted, result["positions"]):
      self.assertEqual((op, pos["source"], pos["line"]),
                       (op, __file__, src_line))
    self.check_consumer_agrees(dump.source_map, result)

  def test_utf16_columns_through_consumer(self):
    # Source-map columns count UTF-16 code units (ECMA-426): Python reports
    # UTF-8 byte offsets, and 'é' (2 bytes, 1 unit) and an emoji (4 bytes, 2
    # units) before an expression, in the Python line or in the jaxpr text,
    # shift them differently.
    skip = _node_skip_reason()
    if skip:
      self.skipTest(skip)
    mod_dir = tempfile.mkdtemp()
    self.addCleanup(shutil.rmtree, mod_dir, ignore_errors=True)
    path = os.path.join(mod_dir, "unicode_lines.py")
    with open(path, "w", encoding="utf-8") as f:
      f.write(textwrap.dedent("""\
          import jax
          import jax.numpy as jnp
          def inner(x):
            s = "é"; return jnp.sin(x)
          inner.__name__ = "inner_\U0001F600"
          def outer(x):
            t = "\U0001F600é"; y = jnp.cos(x) + 1.0
            return jax.jit(inner)(y) * 2.0
          """))
    spec = importlib.util.spec_from_file_location("unicode_lines", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    jaxpr = jax.make_jaxpr(mod.outer)(jnp.ones(3, jnp.float32))
    text, sm = source_mapper.jaxpr_source_map(jaxpr, width=1000,
                                              include_source_content=True)
    self.assertIn("\U0001F600", text)
    result = read_with_mozilla(sm, [])
    gen_lines = text.split("\n")
    src_lines = sm.sources_content[0].split("\n")

    def at(line: str, utf16_col: int) -> str:
      return line.encode("utf-16-le")[2 * utf16_col:].decode("utf-16-le")

    # Where the printer says each equation's text starts and ends (Python
    # string indices, i.e. code points).
    regions: list = []
    jaxpr.pretty_print(source_map=regions, width=1000, use_color=False)
    cuts = [{c for a, b, _ in line for c in (a, b)} for line in regions]
    mapped = [m for m in result["mappings"] if m["source"] is not None]
    self.assertNotEmpty(mapped)
    non_ascii_gen = non_ascii_src = 0
    for m in mapped:
      n = m["generatedLine"] - 1
      gen = gen_lines[n]
      # The consumer's column (UTF-16) points where an equation's text starts
      # (or resumes after a nested jaxpr).
      self.assertIn(at(gen, m["generatedColumn"]),
                    [gen[c:] for c in cuts[n]], msg=f"{m} in {gen!r}")
      src = src_lines[m["originalLine"] - 1]
      if _COLUMNS:
        self.assertRegex(at(src, m["originalColumn"]),
                         r"^(jnp\.(sin|cos)|jax\.jit\(inner\))",
                         msg=f"{m} in {src!r}")
      else:
        self.assertEqual(m["originalColumn"], 0, msg=f"{m} in {src!r}")
      prefix_gen = gen.encode("utf-16-le")[:2 * m["generatedColumn"]]
      non_ascii_gen += not prefix_gen.decode("utf-16-le").isascii()
      prefix_src = src.encode("utf-16-le")[:2 * m["originalColumn"]]
      non_ascii_src += not prefix_src.decode("utf-16-le").isascii()
    # Both sides had non-ASCII text before some mapped columns.
    self.assertGreater(non_ascii_gen, 0)
    self.assertEqual(non_ascii_src > 0, _COLUMNS)

  @parameterized.parameters(0, 1)
  def test_codec_against_consumer(self, seed):
    # Random maps with multi-digit values, 1-field segments and empty lines.
    import random  # pylint: disable=g-import-not-at-top
    rng = random.Random(seed)
    mappings = []
    for _ in range(300):
      col, line = 0, []
      for _ in range(rng.choice([0, 1, 3])):
        col += rng.randint(0, 3000)
        if rng.random() < 0.2:
          line.append((col,))
        else:
          line.append((col, rng.randint(0, 2), rng.randint(0, 100000),
                       rng.randint(0, 500)))
      mappings.append(line)
    sm = sourcemap.SourceMap(
        version=3, sources=["a.py", "b.py", "c.py"], sources_content=[],
        names=[], mappings=sourcemap.relative_mappings(mappings))
    sm = sourcemap.SourceMap.from_json(sm.to_json())
    self.assertEqual(absolute(sm), mappings)
    self.check_consumer_agrees(sm, read_with_mozilla(sm, []))


if __name__ == "__main__":
  absltest.main(testLoader=jtu.JaxTestLoader())
