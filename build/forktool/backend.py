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
"""PEP 517 build backend, so that `pip install .` builds the fork.

The sdist comes from $JAX_FORK_SDIST, the cache, or `pip download`; the
config setting `sdist=PATH` (`pip install . -C sdist=PATH`) works too.
"""
from __future__ import annotations

from pathlib import Path

from . import upstream as U
from . import wheel as W


def _sdist_setting(config_settings) -> str | None:
  if config_settings and config_settings.get("sdist"):
    return str(config_settings["sdist"])
  return None


def get_requires_for_build_wheel(config_settings=None):
  return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
  whl = W.build_from_series(Path(wheel_directory), U.REPO_ROOT / "patches",
                            _sdist_setting(config_settings))
  return whl.name
