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
"""PEP 517 build backend, so that `pip install .`, `pip wheel .`,
`python -m build`, `uv pip install .` and `uv build` build the fork.

The upstream sdist comes from the config setting `sdist=PATH`
(`pip install . -C sdist=PATH`), $JAX_FORK_SDIST, the cache, or
`pip download` (run in an environment of its own, see
`upstream.child_pip_env`).
"""
from __future__ import annotations

from pathlib import Path

from . import sdist as S
from . import upstream as U
from . import wheel as W


def _sdist_setting(config_settings) -> str | None:
  if config_settings and config_settings.get("sdist"):
    return str(config_settings["sdist"])
  return None


def get_requires_for_build_wheel(config_settings=None):
  return []


def get_requires_for_build_sdist(config_settings=None):
  return []


def prepare_metadata_for_build_wheel(metadata_directory,
                                     config_settings=None):
  """Writes the wheel's .dist-info without applying the series."""
  version = W.series_version(U.REPO_ROOT / "patches")
  dist_info = Path(metadata_directory) / f"jax-{version}.dist-info"
  dist_info.mkdir(parents=True, exist_ok=True)
  text = W.wheel_metadata(U.REPO_ROOT / "patches",
                          _sdist_setting(config_settings))
  (dist_info / "METADATA").write_text(text, encoding="utf-8")
  return dist_info.name


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
  whl = W.build_from_series(Path(wheel_directory), U.REPO_ROOT / "patches",
                            _sdist_setting(config_settings))
  return whl.name


def build_sdist(sdist_directory, config_settings=None):
  return S.build_sdist(Path(sdist_directory)).name
