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
"""Jaxpr dumps to gs:// URLs, against a GCS API server on loopback.

The server is the PyPI package `gcp-storage-emulator`, started and stopped
here (127.0.0.1 only, in-memory, bounded waits); the clients are
`etils.epath` and `gcsfs`. Skips with the reason when any is missing.
"""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
import warnings

from absl.testing import absltest
import numpy as np

import jax
import jax.numpy as jnp
from jax._src import jaxpr_dump
from jax._src import test_util as jtu

from jaxpr_dump_test import dump_options

try:
  import gcsfs
  from etils import epath
except ImportError:
  gcsfs = epath = None

_BUCKET = "jax-dumps"


def _emulator_exe() -> str | None:
  here = os.path.join(os.path.dirname(sys.executable), "gcp-storage-emulator")
  for c in (here, shutil.which("gcp-storage-emulator")):
    if c and os.access(c, os.X_OK):
      return c
  return None


def _free_port() -> int:
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


def _wait_for_port(port: int, proc: subprocess.Popen, timeout: float) -> None:
  deadline = time.monotonic() + timeout
  while time.monotonic() < deadline:
    if proc.poll() is not None:
      raise RuntimeError(f"gcp-storage-emulator exited with {proc.returncode}")
    try:
      with socket.create_connection(("127.0.0.1", port), timeout=1):
        return
    except OSError:
      time.sleep(0.1)
  raise RuntimeError(f"gcp-storage-emulator not listening after {timeout}s")


def step(w, x):
  return jnp.tanh(x @ w).sum()


class GcsDumpTest(jtu.JaxTestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    if gcsfs is None:
      raise absltest.SkipTest("needs gcsfs and etils[epath] "
                              "(pip install gcsfs 'etils[epath]')")
    exe = _emulator_exe()
    if exe is None:
      raise absltest.SkipTest("needs gcp-storage-emulator "
                              "(pip install gcp-storage-emulator)")
    cls.port = _free_port()
    cls._log = tempfile.TemporaryFile()
    cls.proc = subprocess.Popen(
        [exe, "start", "--host", "127.0.0.1", "--port", str(cls.port), "-M"],
        stdout=cls._log, stderr=subprocess.STDOUT)
    try:
      _wait_for_port(cls.port, cls.proc, timeout=30)
      cls.env = {"STORAGE_EMULATOR_HOST": f"http://127.0.0.1:{cls.port}",
                 "FSSPEC_GS_TOKEN": "anon", "NO_GCE_CHECK": "true",
                 "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false"}
      cls._saved_env = {k: os.environ.get(k) for k in cls.env}
      os.environ.update(cls.env)
      gcsfs.GCSFileSystem.clear_instance_cache()
      cls.fs = gcsfs.GCSFileSystem()
      cls.fs.mkdir(_BUCKET)
    except BaseException:
      cls._stop_emulator()
      raise

  @classmethod
  def _stop_emulator(cls):
    cls.proc.terminate()
    try:
      cls.proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
      cls.proc.kill()
      cls.proc.wait(timeout=10)
    cls._log.close()

  @classmethod
  def tearDownClass(cls):
    cls._stop_emulator()
    for k, v in cls._saved_env.items():
      if v is None:
        os.environ.pop(k, None)
      else:
        os.environ[k] = v
    gcsfs.GCSFileSystem.clear_instance_cache()
    super().tearDownClass()

  def setUp(self):
    super().setUp()
    self.enter_context(dump_options())
    jax.clear_caches()
    self.staging = tempfile.mkdtemp(prefix="jaxpr_dump_gcs_test_")
    self.addCleanup(shutil.rmtree, self.staging, ignore_errors=True)
    self.prefix = f"{_BUCKET}/{self._testMethodName}"

  def configure(self, url, *, modes="stablehlo,jaxpr,jaxpr_html",
                delete_local_after=True):
    jax.config.update("jax_dump_ir_modes", modes)
    jax.config.update("jax_dump_ir_filter", "^step$")
    jax.config.update("jax_dump_ir_local_dir", self.staging)
    jax.config.update("jax_dump_ir_delete_local_after", delete_local_after)
    jax.config.update("jax_dump_ir_to", url)

  def run_step(self):
    w = np.full((3, 2), 0.5, np.float32)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    with warnings.catch_warnings(record=True) as caught:
      warnings.simplefilter("always")
      out = jax.jit(step)(w, x)
    np.testing.assert_allclose(out, np.tanh(x @ w).sum(), rtol=1e-6)
    return [str(c.message) for c in caught
            if issubclass(c.category, jaxpr_dump.DumpIRWarning)]

  def remote_files(self, prefix=None):
    prefix = prefix or self.prefix
    self.fs.invalidate_cache()
    return {os.path.basename(p): self.fs.cat_file(p)
            for p in self.fs.find(prefix)}

  def test_upload_arrives_intact_and_staging_is_emptied(self):
    self.configure(f"gs://{self.prefix}")
    self.assertEqual(self.run_step(), [])
    remote = self.remote_files()
    exts = sorted(n.split(".", 1)[1] for n in remote)
    self.assertEqual(exts, ["jaxpr.html", "jaxpr.txt", "jaxpr.txt.map",
                            "mlir"])
    (txt,) = [n for n in remote if n.endswith(".jaxpr.txt")]
    w = np.ones((3, 2), np.float32)
    x = np.ones((2, 3), np.float32)
    self.assertEqual(remote[txt].decode(),
                     str(jax.make_jaxpr(step)(w, x)) + "\n")
    source_map = json.loads(remote[txt + ".map"])
    self.assertEqual(source_map["sources"], [__file__])
    self.assertIn(b"<!DOCTYPE html>", remote[txt[:-4] + ".html"])
    (mlir,) = [n for n in remote if n.endswith(".mlir")]
    self.assertIn(b"stablehlo.tanh", remote[mlir])
    # Local copies go only after success; here everything succeeded.
    self.assertEqual(os.listdir(self.staging), [])

  def test_keep_local_copies(self):
    self.configure(f"gs://{self.prefix}", modes="jaxpr",
                   delete_local_after=False)
    self.assertEqual(self.run_step(), [])
    remote = self.remote_files()
    self.assertLen(remote, 2)
    self.assertCountEqual(os.listdir(self.staging), remote)
    for name, data in remote.items():
      with open(os.path.join(self.staging, name), "rb") as f:
        self.assertEqual(f.read(), data)

  def test_epath_reads_back(self):
    self.configure(f"gs://{self.prefix}/", modes="jaxpr")
    self.assertEqual(self.run_step(), [])
    names = [p.name for p in epath.Path(f"gs://{self.prefix}").iterdir()]
    self.assertLen(names, 2)
    txt = [n for n in names if n.endswith(".jaxpr.txt")][0]
    text = (epath.Path(f"gs://{self.prefix}") / txt).read_text()
    self.assertIn("= tanh", text)

  def test_failing_remote_keeps_staged_files(self):
    # The server answers, but the bucket does not exist: every upload fails.
    self.configure("gs://no-such-bucket-here/run", modes="jaxpr,jaxpr_html")
    msgs = self.run_step()
    self.assertLen(msgs, 1)
    self.assertIn("gs://no-such-bucket-here/run", msgs[0])
    staged = sorted(os.listdir(self.staging))
    self.assertLen(staged, 3)
    for name in staged:
      self.assertIn(os.path.join(self.staging, name), msgs[0])
    with open(os.path.join(self.staging, [n for n in staged
                                          if n.endswith(".txt")][0])) as f:
      self.assertIn("= tanh", f.read())

  def test_a_script_that_exits_at_once_leaves_its_dumps(self):
    # Uploads are synchronous: a script that never waits loses nothing.
    code = textwrap.dedent(f"""
        import jax, jax.numpy as jnp
        jax.config.update("jax_dump_ir_modes", "jaxpr")
        jax.config.update("jax_dump_ir_to", "gs://{self.prefix}/exit")
        def step(x):
          return jnp.cos(x) * 2.0
        print(jax.jit(step)(jnp.float32(0)))
    """)
    env = dict(os.environ, JAX_PLATFORMS="cpu", **self.env)
    out = subprocess.run([sys.executable, "-c", code], env=env, check=True,
                         capture_output=True, text=True, timeout=180)
    self.assertEqual(out.stdout.strip(), "2.0")
    remote = self.remote_files(f"{self.prefix}/exit")
    names = [n for n in remote if n.endswith("_step.jaxpr.txt")]
    self.assertLen(names, 1)
    self.assertIn(b"= cos", remote[names[0]])


if __name__ == "__main__":
  absltest.main(testLoader=jtu.JaxTestLoader())
