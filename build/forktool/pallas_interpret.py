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
"""pytest plugin: upstream's Pallas TPU tests in interpret mode on CPU.

`build/fork.py upstream-tests --pallas-interpret [--pallas-rtol RTOL]` loads
it (`-p forktool.pallas_interpret`, RTOL in $JAX_FORK_PALLAS_INTERPRET_RTOL),
without editing the test files. For the whole session:
- every `jax.experimental.pallas.pallas_call` runs with `interpret=True`;
- `jax._src.test_util.is_device_tpu_at_least` answers True, so tests gated
  on a TPU generation run;
- `numpy.testing.assert_allclose` uses at least RTOL as its rtol: interpret
  mode sums in XLA CPU's order, not the TPU's;
- a test that fails with a NotImplementedError saying that a feature is "not
  supported in interpret mode" (remote copies, barrier semaphores) is
  reported as skipped, "not runnable on CPU: ...".
"""
from __future__ import annotations

import functools
import os

import pytest

from forktool.upstream_tests import NOT_RUNNABLE


def pytest_configure(config):
  del config
  import numpy as np
  from jax._src import test_util as jtu
  from jax.experimental import pallas as pl

  min_rtol = float(os.environ["JAX_FORK_PALLAS_INTERPRET_RTOL"])
  pallas_call = pl.pallas_call
  assert_allclose = np.testing.assert_allclose

  @functools.wraps(pallas_call)
  def interpreted_pallas_call(*args, **kwargs):
    return pallas_call(*args, **{**kwargs, "interpret": True})

  @functools.wraps(assert_allclose)
  def looser_assert_allclose(actual, desired, rtol=1e-7, *args, **kwargs):
    return assert_allclose(actual, desired, max(rtol, min_rtol), *args,
                           **kwargs)

  pl.pallas_call = interpreted_pallas_call
  jtu.is_device_tpu_at_least = lambda version: True
  np.testing.assert_allclose = looser_assert_allclose


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
  report = (yield).get_result()
  exc = call.excinfo
  if (exc is not None and exc.errisinstance(NotImplementedError)
      and "not supported in interpret mode" in str(exc.value)):
    report.outcome = "skipped"
    report.longrepr = (str(item.path), item.location[1] or 0,
                       f"{NOT_RUNNABLE}: {exc.value}")
