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
"""Source regions of the pretty-printer and source maps of printed jaxprs."""
from __future__ import annotations

import functools
import inspect
import random
import re
import types
from unittest import mock

from absl.testing import absltest
import numpy as np

import jax
from jax import lax
import jax.numpy as jnp
from jax._src import core
from jax._src import pretty_printer as pp
from jax._src import source_info_util
from jax._src import test_util as jtu
from jax._src.lib import xla_client
from jax.experimental.shard_map import shard_map
from jax.sharding import Mesh, PartitionSpec as P

jax.config.parse_flags_with_absl()

_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _fmt(doc, width=80, **kw):
  regions = []
  text = doc.format(width, use_color=False, source_map=regions, **kw)
  return text, regions


def _check_well_formed(test, text, regions):
  """Structural invariants every source map must satisfy."""
  lines = text.split("\n")
  test.assertLen(regions, len(lines))
  for line, line_regions in zip(lines, regions):
    test.assertIsInstance(line_regions, list)
    prev_end, prev_source = -1, object()
    for start, end, source in line_regions:
      test.assertLess(start, end)                # never empty
      test.assertGreaterEqual(start, prev_end)   # in order, no overlap
      test.assertLessEqual(end, len(line))
      if start == prev_end:                      # adjacent ones differ
        test.assertNotEqual(source, prev_source)
      prev_end, prev_source = end, source


def _fake_colorama():
  """Stands in for `colorama` (not installed here): ANSI codes per color."""
  return types.SimpleNamespace(
      Fore=types.SimpleNamespace(**{c.name: f"\x1b[3{i}m"
                                    for i, c in enumerate(pp.Color)}),
      Back=types.SimpleNamespace(**{c.name: f"\x1b[4{i}m"
                                    for i, c in enumerate(pp.Color)}),
      Style=types.SimpleNamespace(DIM="\x1b[2m", NORMAL="\x1b[22m",
                                  BRIGHT="\x1b[1m"))


class PrettyPrinterSourceMapTest(jtu.JaxTestCase):

  def test_issue_example(self):
    doc = pp.concat([
        pp.text("abc"), pp.source_map(pp.text("def"), 101),
        pp.source_map(pp.concat([pp.text("gh"), pp.brk(""), pp.text("ijkl")]),
                      77),
        pp.text("mn")])
    regions = []
    text = doc.format(8, source_map=regions)
    self.assertEqual(text, "abcdefgh\nijklmn")
    self.assertEqual(regions, [[(3, 6, 101), (6, 8, 77)], [(0, 4, 77)]])

  def test_appends_to_the_given_list(self):
    regions = [["earlier"]]
    pp.source_map(pp.text("ab"), 1).format(source_map=regions)
    self.assertEqual(regions, [["earlier"], [(0, 2, 1)]])

  def test_innermost_wins(self):
    doc = pp.source_map(pp.concat([
        pp.text("a"), pp.source_map(pp.text("bb"), 2),
        pp.source_map(pp.source_map(pp.text("c"), 4), 3), pp.text("dd")]), 1)
    self.assertEqual(_fmt(doc), ("abbcdd", [[(0, 1, 1), (1, 3, 2), (3, 4, 4),
                                             (4, 6, 1)]]))

  def test_unsourced_text_splits_regions(self):
    doc = pp.concat([pp.source_map(pp.text("ab"), 1), pp.text(" "),
                     pp.source_map(pp.text("cd"), 1)])
    self.assertEqual(_fmt(doc), ("ab cd", [[(0, 2, 1), (3, 5, 1)]]))

  def test_empty_lines_and_unsourced_lines(self):
    doc = pp.concat([pp.source_map(pp.text("a"), 1), pp.brk(), pp.brk(),
                     pp.text("plain"), pp.brk(), pp.source_map(pp.text(""), 2)])
    text, regions = _fmt(doc)
    self.assertEqual(text, "a\n\nplain\n")
    self.assertEqual(regions, [[(0, 1, 1)], [], [], []])

  def test_indentation_is_not_in_regions(self):
    doc = pp.source_map(pp.nest(4, pp.concat([
        pp.text("x"), pp.brk(), pp.text("yy"), pp.brk(),
        pp.source_map(pp.text("z"), 2)])), 1)
    text, regions = _fmt(doc)
    self.assertEqual(text, "x\n    yy\n    z")
    self.assertEqual(regions, [[(0, 1, 1)], [(4, 6, 1)], [(4, 5, 2)]])

  def test_flat_breaks_belong_to_their_source(self):
    doc = pp.group(pp.concat([
        pp.source_map(pp.concat([pp.text("a"), pp.brk(), pp.text("b")]), 1),
        pp.brk(), pp.source_map(pp.text("c"), 2)]))
    self.assertEqual(_fmt(doc), ("a b c", [[(0, 3, 1), (4, 5, 2)]]))
    # The same document, broken: the breaks become line ends.
    self.assertEqual(_fmt(doc, width=2),
                     ("a\nb\nc", [[(0, 1, 1)], [(0, 1, 1)], [(0, 1, 2)]]))

  def test_format_arguments_are_keyword_only(self):
    doc = pp.text("a")
    with self.assertRaises(TypeError):
      doc.format(80, False)  # pytype: disable=wrong-arg-count
    with self.assertRaises(TypeError):
      doc.format(80, False, " # ")  # pytype: disable=wrong-arg-count
    self.assertEqual(doc.format(80, use_color=False, annotation_prefix=" # "),
                     "a")


class PrettyPrinterSourceMapContractTest(jtu.JaxTestCase):
  """Patch 0006's own details of the printer's source regions.

  From jax 0.4.27 the printer's source maps are upstream's own (superseding
  patch 0006), which does not merge adjacent regions of equal sources,
  takes None for a source, starts a region before a color code, gives a
  line holding only an annotation no list of regions, and does not check
  `source_map=`.
  """
  superseded_patch = "0006"

  def test_none_source_marks_nothing(self):
    doc = pp.source_map(pp.concat([
        pp.text("a"), pp.source_map(pp.text("b"), None)]), 1)
    self.assertEqual(_fmt(doc)[1], [[(0, 2, 1)]])
    self.assertEqual(_fmt(pp.source_map(pp.text("a"), None))[1], [[]])

  def test_adjacent_equal_sources_merge(self):
    # Equal (not identical) sources merge; different ones do not.
    frame = lambda line: source_info_util.Frame("f.py", "f", line, 0, line, 9)
    a1, a2, b1, b2 = frame(3), frame(3), frame(4), frame(4)
    self.assertIsNot(a1, a2)
    doc = pp.concat([pp.source_map(pp.text("ab"), a1),
                     pp.source_map(pp.text("cd"), a2),
                     pp.source_map(pp.text("e"), b1),
                     pp.text(""),  # empty text does not split a region
                     pp.source_map(pp.text("f"), b2)])
    self.assertEqual(_fmt(doc)[1], [[(0, 4, a1), (4, 6, b1)]])

  def test_annotations_do_not_shift_columns(self):
    doc = pp.concat([
        pp.source_map(pp.text("ab", annotation="first"), 1), pp.brk(),
        pp.source_map(pp.concat([pp.text("c", annotation="x"),
                                 pp.text("de", annotation="y")]), 2)])
    text, regions = _fmt(doc, annotation_prefix=" ;; ")
    # Two annotations on one line put the second on a line of its own.
    self.assertEqual(text, "ab  ;; first\ncde ;; x\n    ;; y")
    self.assertEqual(regions, [[(0, 2, 1)], [(0, 3, 2)], []])
    _check_well_formed(self, text, regions)

  def test_columns_count_color_codes(self):
    fake = _fake_colorama()
    doc = pp.concat([
        pp.source_map(pp.concat([
            pp.text("let"), pp.keyword(pp.text("kw")), pp.text("x")]), 1),
        pp.type_annotation(pp.text(":t")),
        pp.source_map(pp.text("yy"), 2), pp.text(".")])
    with mock.patch.object(pp, "colorama", fake):
      regions = []
      text = doc.format(source_map=regions, use_color=True)
      plain_regions = []
      plain = doc.format(source_map=plain_regions, use_color=False)
    self.assertNotEqual(text, plain)
    self.assertEqual(_ANSI.sub("", text), plain)
    self.assertEqual(plain_regions, [[(0, 6, 1), (8, 10, 2)]])
    (s1, e1, src1), (s2, e2, src2) = regions[0]
    self.assertEqual((src1, src2), (1, 2))
    # Columns index the emitted text; regions start and end on real text.
    self.assertEqual(_ANSI.sub("", text[s1:e1]), "letkwx")
    self.assertEqual(text[s2:e2], "yy")
    self.assertTrue(text[s1:].startswith("let"))
    self.assertTrue(text[:e1].endswith("x"))

  def test_same_text_and_oracle_on_random_documents(self):
    # Each text is written in the letter of its innermost source ('.' if it
    # has none), so the expected regions are the maximal runs of one letter.
    rng = random.Random(0)

    def gen(depth, source):
      r = rng.random()
      if depth == 0 or r < 0.3:
        ch = "." if source is None else chr(ord("A") + source)
        return pp.text(ch * rng.randint(0, 3))
      if r < 0.4:
        return pp.brk("" if source is None else
                      chr(ord("A") + source) * rng.randint(0, 2))
      if r < 0.55:
        return pp.nest(rng.randint(1, 3), gen(depth - 1, source))
      if r < 0.65:
        return pp.group(gen(depth - 1, source))
      if r < 0.8:
        new = rng.randint(0, 5)
        return pp.source_map(gen(depth - 1, new), new)
      return pp.concat([gen(depth - 1, source)
                        for _ in range(rng.randint(0, 4))])

    for _ in range(300):
      doc = gen(6, None)
      width = rng.randint(0, 12)
      plain = doc.format(width, use_color=False)
      text, regions = _fmt(doc, width)
      self.assertEqual(text, plain)
      _check_well_formed(self, text, regions)
      expected = [
          [(m.start(), m.end(), ord(m.group()[0]) - ord("A"))
           for m in re.finditer(r"A+|B+|C+|D+|E+|F+", line)]
          for line in text.split("\n")]
      self.assertEqual(regions, expected)

  def test_source_map_must_be_a_list(self):
    with self.assertRaisesRegex(TypeError, "source_map must be"):
      pp.text("a").format(source_map=())


# ---------------------------- jaxprs ----------------------------------------

def _line_of(fn, needle):
  """Line number of the first source line of `fn` containing `needle`."""
  lines, start = inspect.getsourcelines(fn)
  hits = [start + i for i, l in enumerate(lines) if needle in l]
  assert hits, (needle, fn)
  return hits[0]


def _pieces(text, regions):
  """[(text of a region, its source)] for all regions, in order."""
  out = []
  for line, line_regions in zip(text.split("\n"), regions):
    out.extend((line[a:b], s) for a, b, s in line_regions)
  return out


def _user_frame(traceback):
  return source_info_util.user_frame(source_info_util.SourceInfo(
      traceback, source_info_util.new_name_stack()))


class JaxprSourceMapTest(jtu.JaxTestCase):

  def _print(self, jaxpr, **kw):
    regions = []
    text = jaxpr.pretty_print(source_map=regions, use_color=False, **kw)
    self.assertEqual(text, jaxpr.pretty_print(use_color=False, **kw))
    _check_well_formed(self, text, regions)
    # Equations are marked with their tracebacks; here, the frames in them.
    for _, source in _pieces(text, regions):
      self.assertIsInstance(source, xla_client.Traceback)
    return text, [[(a, b, _user_frame(tb)) for a, b, tb in line]
                  for line in regions]

  def _assert_eqn_frame(self, text, regions, prim, fn, needle):
    """Some region printing primitive `prim` maps to `needle`'s line."""
    line = _line_of(fn, needle)
    got = [(t, s.start_line) for t, s in _pieces(text, regions)
           if re.search(rf"= {prim}\b", t)]
    self.assertTrue(got, f"no region prints {prim}: {text}")
    self.assertIn(line, [l for _, l in got], got)
    for t, s in _pieces(text, regions):
      if re.search(rf"= {prim}\b", t) and s.start_line == line:
        self.assertEqual(s.file_name, __file__)
        self.assertEqual(s.function_name.split(".")[-1], fn.__name__)

  def test_top_level_equations(self):
    def f(x):
      y = jnp.sin(x)
      return y * 3.0
    jaxpr = jax.make_jaxpr(f)(np.ones(3, np.float32))
    text, regions = self._print(jaxpr, width=40)
    lines = text.split("\n")
    self.assertEqual(lines[0], "{ lambda ; a:f32[3]. let")
    self.assertEqual(regions[0], [])       # the binders have no source
    self.assertEqual(regions[-1], [])      # nor has "in (c,) }"
    (a, b, frame), = regions[1]
    self.assertEqual(lines[1][a:b], "b:f32[3] = sin a")
    self.assertEqual(lines[1][:a].strip(), "")
    self.assertEqual(frame.start_line, _line_of(f, "jnp.sin"))
    (a, b, frame), = regions[2]
    self.assertEqual(lines[2][a:b], "c:f32[3] = mul b 3.0")
    self.assertEqual(frame.start_line, _line_of(f, "y * 3.0"))
    # The same through the open Jaxpr (and with the other options:
    # JaxprAnnotationsSourceMapTest.test_color_and_annotations).
    self.assertEqual(self._print(jaxpr.jaxpr, width=40), (text, regions))

  def test_pp_toplevel_jaxpr_prints_what_upstream_prints(self):
    # Expected texts: upstream jax 0.4.26's Jaxpr.pretty_print for the same
    # jaxpr and options (checked against an upstream install); from jax 0.4.27
    # pjit also has the parameters in_layouts and out_layouts.
    layouts = jax.__version_info__ >= (0, 4, 27)
    def f(x, y):
      z = jnp.cos(x) + 1
      return jax.jit(lambda a: a * 2)(z), y
    jaxpr = jax.make_jaxpr(f)(1.0, 2).jaxpr
    cases = [
        (dict(source_info=False, print_shapes=True, custom_pp_eqn_rules=True,
              name_stack=False, print_effects=False),
         "{ lambda ; a:f32[] b:i32[]. let\n    c:f32[] = cos a\n"
         "    d:f32[] = add c 1.0\n    e:f32[] = pjit[\n"
         "      name=<lambda>\n"
         "      jaxpr={ lambda ; f:f32[]. let g:f32[] = mul f 2.0 in (g,) }\n"
         "    ] d\n  in (e, b) }"),
        (dict(source_info=False, print_shapes=False,
              custom_pp_eqn_rules=False, name_stack=False,
              print_effects=True),
         "{ lambda ; a b. let\n    c = cos a\n    d = add c 1.0\n"
         "    e = pjit[\n      donated_invars=(False,)\n"
         + "      in_layouts=(None,)\n" * layouts +
         "      in_shardings=(UnspecifiedValue,)\n      inline=False\n"
         "      jaxpr={ lambda ; f. let g = mul f 2.0 in (g,) : {  } }\n"
         "      keep_unused=False\n      name=<lambda>\n"
         + "      out_layouts=(None,)\n" * layouts +
         "      out_shardings=(UnspecifiedValue,)\n      resource_env=None\n"
         "    ] d\n  in (e, b) : {  } }"),
    ]
    for options, expected in cases:
      doc = core.pp_toplevel_jaxpr(jaxpr, **options)
      self.assertIsInstance(doc, pp.Doc)
      self.assertEqual(doc.format(use_color=False), expected)
      regions = []
      self.assertEqual(doc.format(use_color=False, source_map=regions),
                       expected)
      self.assertLen(regions, expected.count("\n") + 1)
    with self.assertRaises(TypeError):
      core.pp_toplevel_jaxpr(jaxpr, True)  # pytype: disable=wrong-arg-count
    with self.assertRaises(TypeError):
      jaxpr.pretty_print(True)  # pytype: disable=wrong-arg-count

  def test_no_frame_no_region(self):
    def f(x):
      return jnp.sin(x) * 2.0
    jaxpr = jax.make_jaxpr(f)(1.0).jaxpr
    no_tb = jaxpr.eqns[0].replace(
        source_info=source_info_util.new_source_info())
    jaxpr = jaxpr.replace(eqns=[no_tb, *jaxpr.eqns[1:]])
    text, regions = self._print(jaxpr, width=30)
    self.assertEqual(regions[1], [])
    self.assertIn("sin", text.split("\n")[1])
    (_, _, frame), = regions[2]
    self.assertEqual(frame.start_line, _line_of(f, "jnp.sin"))

  def test_tracebacks_are_not_read_when_printing(self):
    # Printing, with a source map or without, does not look into tracebacks:
    # the source of an equation's text is its traceback object itself.
    class Traceback:
      def raw_frames(self):
        raise AssertionError("the traceback was read")
    jaxpr = jax.make_jaxpr(lambda x: jnp.sin(x) * 2.0)(1.0).jaxpr
    tbs = [Traceback(), Traceback()]
    jaxpr = jaxpr.replace(eqns=[
        e.replace(source_info=e.source_info.replace(traceback=tb))
        for e, tb in zip(jaxpr.eqns, tbs)])
    text = str(jaxpr)
    regions = []
    self.assertEqual(jaxpr.pretty_print(source_map=regions), text)
    sources = [s for _, s in _pieces(text, regions)]
    self.assertLen(sources, 2)
    self.assertIs(sources[0], tbs[0])
    self.assertIs(sources[1], tbs[1])

  def test_pjit_nested_and_hoisted(self):
    @jax.jit
    def inner(x):
      return jnp.cos(x)

    def f(x):
      y = inner(x)
      return inner(y)
    text, regions = self._print(jax.make_jaxpr(f)(1.0))
    self.assertIn("let inner = { lambda", text)  # hoisted: used twice
    self._assert_eqn_frame(text, regions, "cos", inner, "jnp.cos")
    self._assert_eqn_frame(text, regions, "pjit", f, "y = inner(x)")
    self._assert_eqn_frame(text, regions, "pjit", f, "return inner(y)")

    def g(x):
      return inner(x) + 1.0
    text, regions = self._print(jax.make_jaxpr(g)(1.0))
    self.assertNotIn("let inner", text)  # nested in place
    self._assert_eqn_frame(text, regions, "cos", inner, "jnp.cos")
    self._assert_eqn_frame(text, regions, "pjit", g, "inner(x) + 1.0")
    # The pjit equation's region surrounds the nested equation's.
    line = next(l for l in text.split("\n") if "= cos" in l)
    self.assertEqual(line.strip()[:7], "jaxpr={")

  def test_scan(self):
    def body(c, x):
      return c + jnp.cos(x), x
    def f(xs):
      return lax.scan(body, 0.0, xs)
    text, regions = self._print(jax.make_jaxpr(f)(jnp.ones(3)))
    self._assert_eqn_frame(text, regions, "cos", body, "jnp.cos")
    self._assert_eqn_frame(text, regions, "scan", f, "lax.scan")

  def test_cond(self):
    def true_fn(x):
      return jnp.cos(x)
    def false_fn(x):
      return jnp.sin(x)
    def f(p, x):
      return lax.cond(p, true_fn, false_fn, x)
    text, regions = self._print(jax.make_jaxpr(f)(True, 1.0))
    self._assert_eqn_frame(text, regions, "cos", true_fn, "jnp.cos")
    self._assert_eqn_frame(text, regions, "sin", false_fn, "jnp.sin")
    self._assert_eqn_frame(text, regions, "cond", f, "lax.cond")

  def test_while(self):
    def cond_fun(c):
      return jnp.sin(c) < 0.5
    def body_fun(c):
      return jnp.cos(c)
    def f(x):
      return lax.while_loop(cond_fun, body_fun, x)
    text, regions = self._print(jax.make_jaxpr(f)(1.0))
    self._assert_eqn_frame(text, regions, "sin", cond_fun, "jnp.sin")
    self._assert_eqn_frame(text, regions, "cos", body_fun, "jnp.cos")
    self._assert_eqn_frame(text, regions, "while", f, "lax.while_loop")

  def test_custom_jvp(self):
    @jax.custom_jvp
    def g(x):
      return jnp.cos(x)
    g.defjvp(lambda primals, tangents: (g(primals[0]), tangents[0]))
    def f(x):
      return g(x) * 2.0
    text, regions = self._print(jax.make_jaxpr(f)(1.0))
    self._assert_eqn_frame(text, regions, "cos", g.fun, "jnp.cos")
    self._assert_eqn_frame(text, regions, "custom_jvp_call", f, "g(x) * 2.0")

  def test_custom_vjp(self):
    @jax.custom_vjp
    def g(x):
      return jnp.cos(x)
    g.defvjp(lambda x: (g(x), None), lambda _, ct: (ct,))
    def f(x):
      return g(x) * 2.0
    text, regions = self._print(jax.make_jaxpr(f)(1.0))
    self._assert_eqn_frame(text, regions, "cos", g.fun, "jnp.cos")
    self._assert_eqn_frame(text, regions, "custom_vjp_call_jaxpr", f,
                           "g(x) * 2.0")

  def test_remat(self):
    def g(x):
      return jnp.cos(x)
    def f(x):
      return jax.checkpoint(g)(x) * 2.0
    text, regions = self._print(jax.make_jaxpr(f)(1.0))
    self._assert_eqn_frame(text, regions, "cos", g, "jnp.cos")
    self._assert_eqn_frame(text, regions, "remat2", f, "jax.checkpoint")

  def test_shard_map(self):
    mesh = Mesh(np.array(jax.devices("cpu")), ("i",))
    def g(x):
      return jnp.cos(x)
    def f(x):
      return shard_map(g, mesh, in_specs=P("i"), out_specs=P("i"))(x)
    n = mesh.size
    text, regions = self._print(jax.make_jaxpr(f)(jnp.ones(2 * n)))
    self._assert_eqn_frame(text, regions, "cos", g, "jnp.cos")
    self._assert_eqn_frame(text, regions, "shard_map", f, "shard_map(g")

  def test_grad_of_nested(self):
    # Transposed equations keep frames too; nothing crashes on the many
    # shapes of a gradient jaxpr, and the map is well formed.
    def f(x):
      y = lax.scan(lambda c, a: (c * jnp.sin(a), None), 1.0, x)[0]
      return functools.partial(jax.jit, inline=False)(jnp.tanh)(y)
    text, regions = self._print(jax.make_jaxpr(jax.grad(f))(jnp.ones(3)))
    self.assertTrue(any(regions))
    self._assert_eqn_frame(text, regions, "scan", f, "lax.scan")


class JaxprAnnotationsSourceMapTest(jtu.JaxTestCase):
  """Jaxprs printed with two annotations per equation (source and name stack).

  The line holding only the second annotation gets an empty list of regions
  (patch 0006's printer; upstream's, from 0.4.27, gives it none).
  """

  _print = JaxprSourceMapTest._print

  def test_color_and_annotations(self):
    def f(x):
      y = jnp.sin(x)
      return jnp.cos(y)
    jaxpr = jax.make_jaxpr(f)(1.0)
    kw = dict(source_info=True, name_stack=True, width=40)
    text, regions = self._print(jaxpr, **kw)
    for line, line_regions in zip(text.split("\n"), regions):
      if " # " in line:  # annotations come after every region
        self.assertLessEqual(max((b for _, b, _ in line_regions), default=0),
                             line.index(" # "))
    with mock.patch.object(pp, "colorama", _fake_colorama()):
      color_regions = []
      color_text = jaxpr.pretty_print(use_color=True, source_map=color_regions,
                                      **kw)
    self.assertIn("\x1b[", color_text)
    self.assertEqual(_ANSI.sub("", color_text), text)
    self.assertEqual([(_ANSI.sub("", t), _user_frame(s))
                      for t, s in _pieces(color_text, color_regions)],
                     _pieces(text, regions))
    # (From test_top_level_equations.) The open jaxpr with the other options
    # maps the sources that the plain print does.
    plain_text, plain_regions = self._print(jaxpr, width=40)
    text2, regions2 = self._print(jaxpr.jaxpr, width=40, source_info=True,
                                  name_stack=True, print_shapes=False)
    self.assertIn("sin", text2)
    self.assertEqual([s for _, s in _pieces(text2, regions2)],
                     [s for _, s in _pieces(plain_text, plain_regions)])


if __name__ == "__main__":
  absltest.main(testLoader=jtu.JaxTestLoader())
