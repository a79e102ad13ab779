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
"""The wheel's native half of the PJRT adapter, on a machine with no compiler.

The fork's wheel (built here by the build tooling, which needs a C compiler)
carries `jax/_src/pjrt_adapter-<sha256 of pjrt_adapter.c, 16 hex>.so`
(build/forktool/native.py). It is installed into a folder of its own and
imported by a Python whose PATH holds only its own bin folder and a folder
with a `python` link: no `cc`, `gcc` or `clang` can be found there, `CC` is
unset and the caches (XDG_CACHE_HOME, HOME) are empty folders.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
import shutil
import subprocess
import sys
import tempfile
import textwrap
import zipfile

from absl.testing import absltest

from forktool import native as N
from forktool import wheel as W

REPO = Path(__file__).resolve().parents[1]
COMPILERS = ("cc", "gcc", "clang", "c99", "tcc")


class NoCompilerTest(absltest.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.tmp = Path(tempfile.mkdtemp(prefix="fork-native-test-"))
    cls.wheel = W.build_from_series(cls.tmp / "dist", REPO / "patches")
    cls.site = cls.tmp / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                    "--no-compile", "--target", str(cls.site), str(cls.wheel)],
                   check=True, env=dict(os.environ,
                                        PIP_DISABLE_PIP_VERSION_CHECK="1"))

  @classmethod
  def tearDownClass(cls):
    shutil.rmtree(cls.tmp, ignore_errors=True)
    super().tearDownClass()

  def no_compiler_env(self) -> dict[str, str]:
    links = Path(tempfile.mkdtemp(prefix="bin-", dir=self.tmp))
    (links / "python").symlink_to(sys.executable)
    (links / "python3").symlink_to(sys.executable)
    path = os.pathsep.join([str(Path(sys.executable).parent), str(links)])
    for name in COMPILERS:   # the premise
      self.assertIsNone(shutil.which(name, path=path), name)
    cache = Path(tempfile.mkdtemp(prefix="cache-", dir=self.tmp))
    home = Path(tempfile.mkdtemp(prefix="home-", dir=self.tmp))
    env = {k: v for k, v in os.environ.items()
           if k not in ("CC", "PYTHONPATH", "XDG_CACHE_HOME", "HOME", "PATH")}
    env.update(PATH=path, PYTHONPATH=str(self.site), XDG_CACHE_HOME=str(cache),
               HOME=str(home), JAX_PLATFORMS="cpu")
    return env

  def test_the_wheel_carries_the_native_half(self):
    with zipfile.ZipFile(self.wheel) as zf:
      names = zf.namelist()
      name = N.library_path(zf.read(N.SOURCE))
    self.assertTrue(name in names, f"{self.wheel.name} has no {name}: was "
                    "it built without a C compiler?")
    self.assertNotRegex(self.wheel.name, r"-any\.whl$")

  def test_installed_native_half_loads_with_no_compiler(self):
    env = self.no_compiler_env()
    probe = textwrap.dedent(f"""
        import ctypes, hashlib, os, shutil
        from pathlib import Path
        import jax
        from jax._src import pjrt_adapter
        assert not any(shutil.which(c) for c in {COMPILERS!r})
        assert "CC" not in os.environ
        here = Path(pjrt_adapter.__file__).parent
        source = (here / "pjrt_adapter.c").read_bytes()
        name = f"pjrt_adapter-{{hashlib.sha256(source).hexdigest()[:16]}}.so"
        lib = ctypes.CDLL(str(here / name))
        lib.jax_pjrt_adapter_new   # the adapter's entry point
        print(here / name)
        print(sorted(p.name for p in Path(os.environ["XDG_CACHE_HOME"],
                                          ).rglob("*")))
        """)
    r = subprocess.run([sys.executable, "-c", probe], env=env, cwd=self.tmp,
                       capture_output=True, text=True)
    self.assertEqual(r.returncode, 0, r.stderr)
    library, cached = r.stdout.splitlines()
    with zipfile.ZipFile(self.wheel) as zf:
      expected = N.library_path(zf.read(N.SOURCE))
      shipped = zf.read(expected)
    self.assertEqual(Path(library), self.site / expected)
    self.assertEqual(Path(library).read_bytes(), shipped)
    self.assertEqual(cached, "[]")   # nothing compiled into the cache

  def test_a_newer_plugin_is_served_with_no_compiler(self):
    sys.path.insert(0, str(Path(__file__).parent))
    from conftest import pjrt_plugin_path  # pylint: disable=g-import-not-at-top
    if pjrt_plugin_path() is None:
      self.skipTest("no newer PJRT CPU plugin (lammps-jax-pjrt-cpu)")
    config = self.tmp / "plugin.json"
    config.write_text(json.dumps({"library_path": pjrt_plugin_path(),
                                  "create_options": {"cpu_device_count": 2}}))
    env = self.no_compiler_env()
    env.update(PJRT_NAMES_AND_LIBRARY_PATHS=f"plugin:{config}",
               JAX_PLATFORMS="plugin")
    probe = textwrap.dedent("""
        import os, jax, jax.numpy as jnp
        from pathlib import Path
        print(jax.devices()[0].client.platform, float(jnp.arange(4.).sum()))
        print(sorted(p.name for p in Path(os.environ["XDG_CACHE_HOME"]).rglob("*")))
        """)
    r = subprocess.run([sys.executable, "-c", probe], env=env, cwd=self.tmp,
                       capture_output=True, text=True)
    self.assertEqual(r.returncode, 0, r.stderr)
    self.assertEqual(r.stdout.splitlines(), ["cpu 6.0", "[]"])


if __name__ == "__main__":
  absltest.main()
