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
"""The jaxpr_html dump, opened in headless Chromium (driven by Playwright).

Needs Debian's `chromium` (/usr/bin/chromium) and the `playwright` package;
skips with the reason when either is missing. No browser is downloaded.

Every feature of the page is driven and checked here. The screenshot of a
real training step's view is written to $JAX_TEST_ARTIFACTS_DIR (default: a
fresh temporary directory, named in the test's log).
"""
from __future__ import annotations

import collections
import os
import re
import shutil
import tempfile

from absl.testing import absltest
import numpy as np

import jax
import jax.numpy as jnp
from jax._src import core
from jax._src import jaxpr_dump
from jax._src import jaxpr_util
from jax._src import source_info_util
from jax._src import test_util as jtu

from jaxpr_dump_test import dump_options
from mlp_train_step import train_inputs, train_step

try:
  from playwright import sync_api as playwright_api
except ImportError:
  playwright_api = None

_CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu",
                  "--disable-background-networking"]


def _chromium() -> str | None:
  for c in (os.environ.get("CHROMIUM"), "/usr/bin/chromium",
            shutil.which("chromium")):
    if c and os.access(c, os.X_OK):
      return c
  return None


def line_of(marker: str) -> int:
  with open(__file__, encoding="utf-8") as f:
    hits = [i + 1 for i, l in enumerate(f) if l.rstrip().endswith(marker)]
  assert len(hits) == 1, (marker, hits)
  return hits[0]


def layer(w, x):
  return jnp.sin(x @ w)  # MARK:sin


def _scaled(h):
  return h * 2.0  # MARK:scaled
_scaled.__name__ = "scaled_\U0001F600"  # A non-BMP name, printed.
scaled = jax.jit(_scaled)


def predict(w, x):
  h = layer(w, x)  # MARK:call_layer
  e = jnp.exp(h)  # MARK:exp
  def body(c, xi):
    return c + jnp.cos(xi), None  # MARK:cos
  c, _ = jax.lax.scan(body, jnp.zeros(e.shape[1:], e.dtype), e)
  t = "é\U0001F600"; r = jax.nn.relu(c) + scaled(c)  # MARK:unicode
  return jax.lax.cond(r.sum() > len(t), lambda v: v, lambda v: -v, r).sum()


def _args():
  return np.ones((3, 4), np.float32), np.ones((2, 3), np.float32)


def _inner_jaxpr(f, *args) -> core.ClosedJaxpr:
  """The jaxpr the dump of `jax.jit(f)(*args)` prints."""
  (eqn,) = jax.make_jaxpr(jax.jit(f))(*args).eqns
  return eqn.params["jaxpr"]


def _normalized(text: str) -> str:
  """`text` without what differs between two tracings (object addresses)."""
  return re.sub(r" at 0x[0-9a-f]+", " at 0x?", text)


def _artifacts_dir() -> str:
  d = os.environ.get("JAX_TEST_ARTIFACTS_DIR")
  if d:
    os.makedirs(d, exist_ok=True)
    return d
  return tempfile.mkdtemp(prefix="jaxpr_dump_html_artifacts_")


def _dump_html(directory: str, fun, args, name: str) -> str:
  jax.clear_caches()
  with dump_options(jax_dump_ir_modes="jaxpr_html",
                    jax_dump_ir_filter=f"^{name}$", jax_dump_ir_to=directory):
    jax.block_until_ready(jax.jit(fun)(*args))
  (page,) = [f for f in os.listdir(directory)
             if f.endswith(f"_{name}.jaxpr.html")]
  return os.path.join(directory, page)


@jtu.with_config(jax_numpy_rank_promotion="allow")
class JaxprHtmlTest(jtu.JaxTestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    if playwright_api is None:
      raise absltest.SkipTest("the playwright package is not installed "
                              "(pip install playwright)")
    chromium = _chromium()
    if chromium is None:
      raise absltest.SkipTest("Chromium is not installed (apt-get install "
                              "chromium; expected /usr/bin/chromium)")
    cls._tmp = tempfile.mkdtemp(prefix="jaxpr_dump_html_test_")
    cls.page_path = _dump_html(cls._tmp, predict, _args(), "predict")
    cls._pw = playwright_api.sync_playwright().start()
    cls.browser = cls._pw.chromium.launch(
        executable_path=chromium, args=_CHROMIUM_ARGS, headless=True,
        timeout=60_000)

  @classmethod
  def tearDownClass(cls):
    cls.browser.close()
    cls._pw.stop()
    shutil.rmtree(cls._tmp, ignore_errors=True)
    super().tearDownClass()

  def open_page(self, path=None, viewport=None):
    context = self.browser.new_context(offline=True, viewport=viewport)
    self.addCleanup(context.close)
    page = context.new_page()
    page.set_default_timeout(15_000)
    self.requests, self.errors = [], []
    page.on("request", lambda r: self.requests.append(r.url))
    page.on("pageerror", lambda e: self.errors.append(str(e)))
    page.on("console", lambda m: m.type == "error" and
            self.errors.append(m.text))
    page.goto("file://" + (path or self.page_path))
    return page

  def highlighted(self, page):
    return page.eval_on_selector_all(
        ".src-line.highlight", "els => els.map(e => e.id)")

  def eqn(self, page, text):
    return page.locator(".eqn", has_text=text).first

  def page_text(self, page) -> str:
    return page.evaluate("JSON.parse(document.getElementById('dump-data')"
                         ".textContent).jaxpr")

  def test_self_contained_and_shows_sources(self):
    page = self.open_page()
    self.assertEqual(self.requests, ["file://" + self.page_path])
    self.assertEqual(self.errors, [])
    self.assertIn("predict", page.title())
    # The page shows exactly the jaxpr the dump prints.
    self.assertEqual(_normalized(self.page_text(page)),
                     _normalized(str(_inner_jaxpr(predict, *_args()))))
    self.assertGreater(page.locator(".jline").count(), 5)
    self.assertIn("= sin", page.inner_text("#jaxpr"))
    src = page.locator(".src-file h2").all_inner_texts()
    self.assertIn(__file__, src)
    row = page.locator(f"#src-{src.index(__file__)}-{line_of('# MARK:sin')}")
    self.assertIn("jnp.sin(x @ w)", row.inner_text())

  def test_syntax_highlighting(self):
    page = self.open_page()
    def texts(cls):
      return set(page.locator(cls).all_inner_texts())
    self.assertContainsSubset({"sin", "exp", "cos", "scan", "cond", "pjit",
                               "custom_jvp_call", "dot_general"},
                              texts(".tok-prim"))
    self.assertContainsSubset({"lambda", "let", "in"}, texts(".tok-kw"))
    self.assertIn("f32[2,4]", texts(".tok-type"))
    self.assertContainsSubset({"name", "jaxpr", "length"}, texts(".tok-param"))
    self.assertIn("2.0", texts(".tok-num"))
    # Every binder is a definition, every other mention a use.
    self.assertGreater(page.locator(".var-def").count(), 10)
    self.assertGreater(page.locator(".var-use").count(), 10)
    self.assertEqual(self.errors, [])

  def test_uses_link_to_their_definition(self):
    page = self.open_page()
    # Every use links to an existing definition of the same name.
    broken = page.evaluate("""() => Array.from(
        document.querySelectorAll('.var-use')).filter(a => {
          const d = document.getElementById('def-' + a.dataset.var);
          return !d || d.textContent !== a.dataset.var ||
                 a.getAttribute('href') !== '#def-' + a.dataset.var;
        }).length""")
    self.assertEqual(broken, 0)
    # The input of `exp` is the output of `sin`: its use leads there.
    sin_line = page.locator(".jline", has_text="= sin").first.inner_text()
    out = re.search(r"(\w+):f32\[[\d,]*\] = sin", sin_line)[1]
    exp_eqn = self.eqn(page, "= exp")
    exp_eqn.locator(f".var-use[data-var='{out}']").click()
    flashed = page.locator(".var-def.flash")
    self.assertEqual(flashed.count(), 1)
    self.assertEqual(flashed.get_attribute("id"), f"def-{out}")
    self.assertIn("= sin", page.locator(".jline", has=flashed).inner_text())

  def test_click_shows_the_full_traceback(self):
    page = self.open_page()
    self.eqn(page, "= sin").click()
    frames = page.locator("#traceback .frame")
    wheres = frames.all_inner_texts()
    # The innermost frame (layer) and its caller (predict) are both there,
    # outermost first as in Python tracebacks.
    sin_at = f"{__file__}:{line_of('# MARK:sin')}:"
    call_at = f"{__file__}:{line_of('# MARK:call_layer')}:"
    self.assertTrue(any(sin_at in w and "(layer)" in w for w in wheres))
    self.assertTrue(any(call_at in w and "(predict)" in w for w in wheres))
    self.assertGreater([i for i, w in enumerate(wheres) if sin_at in w][0],
                       [i for i, w in enumerate(wheres) if call_at in w][0])
    innermost = page.locator("#traceback .frame.innermost")
    self.assertIn(sin_at, innermost.inner_text())
    self.assertIn("selected", innermost.get_attribute("class"))
    self.assertIn("jnp.sin(x @ w)", innermost.locator(".code").inner_text())
    src = page.locator(".src-file h2").all_inner_texts().index(__file__)
    self.assertEqual(self.highlighted(page),
                     [f"src-{src}-{line_of('# MARK:sin')}"])
    # The column is marked: the call starts at `jnp`.
    self.assertEqual(page.inner_text(".src-line.highlight .col"), "j")
    # Clicking a caller's frame shows its line.
    page.locator("#traceback .frame", has_text=call_at).click()
    self.assertEqual(self.highlighted(page),
                     [f"src-{src}-{line_of('# MARK:call_layer')}"])
    self.assertIn(call_at, page.inner_text("#location"))
    # Hovering another equation does not move a selection.
    self.eqn(page, "= exp").hover()
    self.assertEqual(self.highlighted(page),
                     [f"src-{src}-{line_of('# MARK:call_layer')}"])
    self.assertEqual(self.errors, [])

  def test_search_next_previous_and_count(self):
    page = self.open_page()
    text = self.page_text(page).lower()
    count = page.locator("#search-count")
    page.fill("#search", "f32[2")
    n = text.count("f32[2")
    self.assertGreater(n, 3)
    self.assertEqual(count.inner_text(), f"1 of {n}")
    page.press("#search", "Enter")
    self.assertEqual(count.inner_text(), f"2 of {n}")
    page.click("#search-next")
    self.assertEqual(count.inner_text(), f"3 of {n}")
    page.click("#search-prev")
    page.press("#search", "Shift+Enter")
    self.assertEqual(count.inner_text(), f"1 of {n}")
    page.click("#search-prev")  # Wraps around.
    self.assertEqual(count.inner_text(), f"{n} of {n}")
    current = page.locator(".jline.search-current")
    self.assertEqual(current.count(), 1)
    self.assertIn("f32[2", current.inner_text())
    lines_with_hits = sum("f32[2" in l for l in text.split("\n"))
    self.assertEqual(page.locator(".jline.search-hit").count(),
                     lines_with_hits)
    page.fill("#search", "no such text")
    self.assertEqual(count.inner_text(), "no matches")
    self.assertEqual(page.locator(".jline.search-hit").count(), 0)
    page.fill("#search", "")
    self.assertEqual(count.inner_text(), "")

  def test_nested_jaxprs_collapse(self):
    page = self.open_page()
    toggles = page.locator(".fold-toggle")
    self.assertGreaterEqual(toggles.count(), 4)  # scan, cond, pjit, jvp...
    scan_row = page.locator(".jline", has=page.locator(".tok-prim",
                                                       has_text="scan")).first
    cos_row = page.locator(".jline", has_text="= cos").first
    self.assertTrue(cos_row.is_visible())
    scan_row.locator(".fold-toggle").click()
    self.assertFalse(cos_row.is_visible())
    self.assertGreater(page.locator(".jline.folded-away").count(), 0)
    self.assertEqual(scan_row.locator(".fold-ellipsis").count(), 1)
    scan_row.locator(".fold-toggle").click()
    self.assertTrue(cos_row.is_visible())
    self.assertEqual(page.locator(".jline.folded-away").count(), 0)
    # Collapse everything; searching reveals what it finds.
    for i in reversed(range(toggles.count())):  # Inner ones first.
      toggles.nth(i).click()
    self.assertFalse(cos_row.is_visible())
    page.fill("#search", "= cos")
    self.assertTrue(cos_row.is_visible())

  def test_equation_counts_per_source_line(self):
    page = self.open_page()
    closed = _inner_jaxpr(predict, *_args())
    expected: collections.Counter = collections.Counter()
    for _, eqn in jaxpr_util.all_eqns(closed.jaxpr):
      frame = source_info_util.user_frame(eqn.source_info)
      if frame is not None and frame.file_name == __file__:
        expected[frame.start_line] += 1
    src = page.locator(".src-file h2").all_inner_texts().index(__file__)
    for marker in ("# MARK:sin", "# MARK:exp", "# MARK:cos",
                   "# MARK:unicode", "# MARK:scaled"):
      line = line_of(marker)
      with self.subTest(marker):
        self.assertGreater(expected[line], 0)
        self.assertEqual(
            page.inner_text(f"#src-{src}-{line} .count"), str(expected[line]))
    self.assertEqual(page.inner_text(f"#src-{src}-1 .count"), "")

  def test_keyboard_navigation(self):
    page = self.open_page()
    eqns = page.locator(".eqn")
    page.keyboard.press("j")
    self.assertIn("active", eqns.nth(0).get_attribute("class"))
    first_where = page.inner_text("#location")
    self.assertNotEqual(first_where, "")
    page.keyboard.press("j")
    page.keyboard.press("ArrowDown")
    self.assertIn("active", eqns.nth(2).get_attribute("class"))
    page.keyboard.press("k")
    self.assertIn("active", eqns.nth(1).get_attribute("class"))
    self.assertEqual(page.locator(".eqn.active").count(), 1)
    self.assertGreater(page.locator("#traceback .frame").count(), 0)
    page.keyboard.press("Escape")
    self.assertEqual(page.locator(".eqn.active").count(), 0)
    page.keyboard.press("/")
    self.assertEqual(page.evaluate("document.activeElement.id"), "search")
    page.keyboard.type("f32[4]")
    page.keyboard.press("Escape")  # Leaves the search box.
    self.assertNotEqual(page.evaluate("document.activeElement.id"), "search")
    n = self.page_text(page).lower().count("f32[4]")
    self.assertGreater(n, 2)
    self.assertEqual(page.inner_text("#search-count"), f"1 of {n}")
    page.keyboard.press("n")
    self.assertEqual(page.inner_text("#search-count"), f"2 of {n}")
    page.keyboard.press("N")
    self.assertEqual(page.inner_text("#search-count"), f"1 of {n}")

  def test_utf16_columns(self):
    # The page positions text with the same UTF-16 columns as the source map:
    # each equation span holds exactly the text the printer attributed to it,
    # lines with a non-BMP character included.
    page = self.open_page()
    text, regions = jaxpr_dump.jaxpr_text_and_regions(
        _inner_jaxpr(predict, *_args()))
    self.assertIn("\U0001F600", text)
    expected = [_normalized(line[a:b])
                for line, regs in zip(text.split("\n"), regions)
                for a, b, _ in regs]
    got = page.eval_on_selector_all(".eqn", "els => els.map(e => e.textContent)")
    self.assertEqual([_normalized(g) for g in got], expected)
    # A Python line with 'é' and an emoji before the call: the marked column
    # is the call's first character.
    line = line_of("# MARK:unicode")
    with open(__file__, encoding="utf-8") as f:
      py_line = f.read().split("\n")[line - 1]
    src = page.locator(".src-file h2").all_inner_texts().index(__file__)
    spans = page.locator(".eqn")
    for i in range(spans.count()):
      spans.nth(i).click()
      if page.locator(f"#src-{src}-{line}.highlight").count():
        break
    else:
      self.fail("no equation of the unicode line")
    col = page.inner_text(".src-line.highlight .col")
    loc = page.inner_text("#location")
    utf16_col = int(re.search(rf":{line}:(\d+) ", loc)[1])
    py_col = len(py_line.encode("utf-16-le")[:2 * utf16_col]
                 .decode("utf-16-le"))
    self.assertTrue(py_line[py_col:].startswith(("jax.nn.relu(c)", "scaled(c)")),
                    py_line[py_col:])
    self.assertEqual(col, py_line[py_col])
    self.assertEqual(page.inner_text(
        "#traceback .frame.innermost .code .col"), py_line[py_col])
    self.assertEqual(self.errors, [])

  def test_hostile_text_is_escaped(self):
    name = "</script><b id=injected>x</b><!-- @DATA@ @JS@"
    text = "{ lambda ; a:f32[]. let b:f32[] = sin a in (b,) } </script><b>"
    data = {"name": name, "jaxpr": text, "lines": [[[0, 10, 0]]],
            "equations": [[[0, 1, 0, "<b>f</b>"]]],
            "sources": ["<b>evil.py"],
            "sourcesContent": ["x = '</script><b>'\n"], "counts": {}}
    path = os.path.join(self._tmp, "hostile.html")
    with open(path, "w", encoding="utf-8") as f:
      f.write(jaxpr_dump.render_html(data))
    page = self.open_page(path)
    self.assertEqual(self.errors, [])
    self.assertEqual(page.title(), "jaxpr of " + name)
    self.assertEqual(page.locator("b").count(), 0)
    self.assertEqual(self.page_text(page), text)
    self.assertEqual(page.locator(".src-file h2").inner_text(), "<b>evil.py")
    page.locator(".eqn").first.click()
    self.assertIn("<b>f</b>", page.inner_text("#traceback"))
    self.assertEqual(page.locator("b").count(), 0)

  def test_training_step_screenshot(self):
    # A real training step (MLP, scan over micro-batches, remat, Adam): its
    # view works and a screenshot is kept as a test artifact.
    path = _dump_html(self._tmp, train_step, train_inputs(), "train_step")
    page = self.open_page(path, viewport={"width": 1600, "height": 1000})
    self.assertEqual(self.errors, [])
    self.assertGreater(page.locator(".eqn").count(), 50)
    self.assertGreater(page.locator(".fold-toggle").count(), 2)
    self.assertGreater(page.locator(".src-line .count.some").count(), 5)
    self.eqn(page, "= dot_general").click()
    self.assertGreater(page.locator("#traceback .frame").count(), 1)
    self.assertEqual(page.locator(".src-line.highlight").count(), 1)
    page.fill("#search", "dot_general")
    self.assertRegex(page.inner_text("#search-count"), r"^1 of \d+$")
    shot = os.path.join(_artifacts_dir(), "train_step.jaxpr.html.png")
    page.screenshot(path=shot)
    with open(shot, "rb") as f:
      self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
    self.assertGreater(os.path.getsize(shot), 20_000)
    print(f"screenshot of the train step's view: {shot}")


if __name__ == "__main__":
  absltest.main(testLoader=jtu.JaxTestLoader())
