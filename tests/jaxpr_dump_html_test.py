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
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile

from absl.testing import absltest
import numpy as np

import jax
import jax.numpy as jnp
from jax._src import config
from jax._src import jaxpr_dump
from jax._src import test_util as jtu

try:
  from playwright import sync_api as playwright_api
except ImportError:
  playwright_api = None

_OPTIONS = ("jax_dump_ir_to", "jax_dump_ir_modes", "jax_dump_ir_filter")
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


def predict(w, x):
  h = jnp.sin(x @ w)  # MARK:sin
  e = jnp.exp(h)  # MARK:exp
  def body(c, xi):
    return c + jnp.cos(xi), None  # MARK:cos
  c, _ = jax.lax.scan(body, jnp.zeros(e.shape[1:], e.dtype), e)
  return c.sum()


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
    saved = {k: config._read(k) for k in _OPTIONS}
    try:
      jax.clear_caches()
      jax.config.update("jax_dump_ir_modes", "jaxpr_html")
      jax.config.update("jax_dump_ir_filter", "^predict$")
      jax.config.update("jax_dump_ir_to", cls._tmp)
      w = np.ones((3, 4), np.float32)
      x = np.ones((2, 3), np.float32)
      cls.result = jax.jit(predict)(w, x)
    finally:
      for k, v in saved.items():
        jax.config.update(k, v)
    (page,) = [f for f in os.listdir(cls._tmp) if f.endswith(".jaxpr.html")]
    cls.page_path = os.path.join(cls._tmp, page)
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

  def open_page(self):
    context = self.browser.new_context(offline=True)
    self.addCleanup(context.close)
    page = context.new_page()
    page.set_default_timeout(15_000)
    self.requests, self.errors = [], []
    page.on("request", lambda r: self.requests.append(r.url))
    page.on("pageerror", lambda e: self.errors.append(str(e)))
    page.on("console", lambda m: m.type == "error" and
            self.errors.append(m.text))
    page.goto("file://" + self.page_path)
    return page

  def highlighted(self, page):
    return page.eval_on_selector_all(
        ".src-line.highlight", "els => els.map(e => e.id)")

  def eqn(self, page, text):
    return page.locator(".eqn", has_text=text).first

  def test_self_contained_and_shows_sources(self):
    page = self.open_page()
    self.assertEqual(self.requests, ["file://" + self.page_path])
    self.assertEqual(self.errors, [])
    self.assertIn("predict", page.title())
    self.assertGreater(page.locator(".jline").count(), 5)
    self.assertIn("= sin", page.inner_text("#jaxpr"))
    src = page.locator(".src-file h2").all_inner_texts()
    self.assertEqual(src, [__file__])
    row = page.locator(f"#src-0-{line_of('# MARK:sin')}")
    self.assertIn("jnp.sin(x @ w)", row.inner_text())

  def test_hover_highlights_source_line(self):
    page = self.open_page()
    for prim, marker in [("= sin", "# MARK:sin"), ("= exp", "# MARK:exp"),
                         ("= cos", "# MARK:cos")]:
      with self.subTest(prim):
        self.eqn(page, prim).hover()
        self.assertEqual(self.highlighted(page),
                         [f"src-0-{line_of(marker)}"])
        self.assertIn(f":{line_of(marker)}:",
                      page.inner_text("#location"))
    self.assertEqual(self.errors, [])

  def test_click_pins_the_highlight(self):
    page = self.open_page()
    exp_line = f"src-0-{line_of('# MARK:exp')}"
    self.eqn(page, "= exp").click()
    self.assertEqual(self.highlighted(page), [exp_line])
    page.mouse.move(1, 1)  # Leave the jaxpr: the clicked one stays.
    page.dispatch_event("#jaxpr", "mouseleave")
    self.assertEqual(self.highlighted(page), [exp_line])
    self.eqn(page, "= sin").hover()
    self.assertEqual(self.highlighted(page),
                     [f"src-0-{line_of('# MARK:sin')}"])
    page.dispatch_event("#jaxpr", "mouseleave")
    self.assertEqual(self.highlighted(page), [exp_line])

  def test_search_box(self):
    page = self.open_page()
    page.fill("#search", "cos")
    hits = page.locator(".jline.search-hit").all_inner_texts()
    self.assertLen(hits, 1)
    self.assertIn("cos", hits[0])
    self.assertEqual(page.inner_text("#search-count"), "1 matching line")
    page.fill("#search", "no such text")
    self.assertEqual(page.locator(".jline.search-hit").count(), 0)
    self.assertEqual(page.inner_text("#search-count"), "0 matching lines")
    page.fill("#search", "")
    self.assertEqual(page.inner_text("#search-count"), "")

  def test_hostile_text_is_escaped(self):
    name = "</script><b id=injected>x</b><!--"
    text = "{ lambda ; a:f32[]. let b:f32[] = sin a in (b,) } </script><b>"
    source_map = {"version": 3, "sources": ["<b>evil.py"],
                  "sourcesContent": ["x = '</script><b>'\n"], "names": [],
                  "mappings": ";"}
    path = os.path.join(self._tmp, "hostile.html")
    with open(path, "w", encoding="utf-8") as f:
      f.write(jaxpr_dump.render_html(name, text, json.dumps(source_map)))
    context = self.browser.new_context(offline=True)
    self.addCleanup(context.close)
    page = context.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto("file://" + path)
    self.assertEqual(errors, [])
    self.assertEqual(page.title(), "jaxpr of " + name)
    self.assertEqual(page.locator("b").count(), 0)
    self.assertEqual(page.inner_text("#jaxpr"), text)
    self.assertEqual(page.locator(".src-file h2").inner_text(), "<b>evil.py")


if __name__ == "__main__":
  absltest.main(testLoader=jtu.JaxTestLoader())
