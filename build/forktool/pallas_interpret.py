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

`build/fork.py upstream-tests --pallas-interpret [--pallas-rtol RTOL]
[--hypothesis-max-examples N]` loads it (`-p forktool.pallas_interpret`; RTOL
in $JAX_FORK_PALLAS_INTERPRET_RTOL, N in $JAX_FORK_HYPOTHESIS_MAX_EXAMPLES),
without editing the test files. For the whole session:
- every `jax.experimental.pallas.pallas_call` runs with `interpret=True`, or
  with $JAX_FORK_PALLAS_INTERPRET_PARAMS ("1", or "FIELD=VALUE,...":
  `--interpret-params`, `--interpret-param FIELD=VALUE`)
  `interpret=pltpu.InterpretParams(...)`, whose warnings are then errors;
- the TPU gates answer as a TPU v5e (`EMULATED_TPU`) would:
  `jtu.device_under_test()` is "tpu" (so `jtu.test_device_matches(["tpu"])`
  is true), `jtu.is_device_tpu(version, variant)` and
  `jtu.is_device_tpu_at_least(version)` compare with v5e;
- `numpy.testing.assert_allclose` uses at least RTOL as its rtol: interpret
  mode sums in XLA CPU's order, not the TPU's;
- with N, hypothesis runs at most N examples per test and does not shrink a
  failing one (each example compiles kernels);
- a test of what interpret mode does not model (`TPU_ONLY`: the TPU
  compiler's behaviour), or that fails on a limit of the CPU (`CPU_LIMITS`:
  a NotImplementedError saying that a feature is "not supported in interpret
  mode", XLA:CPU's missing bfloat16 dots), is reported as skipped, "not
  runnable on CPU: ...", with the reason;
- a megacore gate that no chip passes (`MEGACORE_GATES`) answers whether the
  model has two TensorCores (interpret=True's, or `--interpret-param
  num_cores_or_threads=2`), and a case that a bug of upstream's kernel fails
  on any chip (`KERNEL_BUGS`) is expected to fail (a strict xfail), with the
  reason.
"""
from __future__ import annotations

import ast
import functools
import os

import pytest

from forktool.results_stream import cap_hypothesis
from forktool.upstream_tests import KERNEL_BUG
from forktool.upstream_tests import NOT_RUNNABLE

EMULATED_TPU = ("TPU v5 lite", 5)  # device kind, generation

# Upstream's tests of what interpret mode does not model (the TPU compiler's
# own behaviour, semaphore Refs' dtypes), by pytest id prefix.
_CALL = "pallas/pallas_call_tpu_test.py::"
TPU_ONLY = {
    _CALL + "PallasCallTest::test_cost_analysis":
        "checks the TPU compiler's cost analysis",
    _CALL + "PallasCallTest::test_vmem_limit":
        "checks the TPU compiler's VMEM limit",
    _CALL + "PallasCallTest::test_allow_input_fusion":
        "checks the TPU compiler's input fusion",
    _CALL + "PallasCallInputOutputAliasingTest::":
        "checks the TPU compiler's buffer aliasing (memory_analysis)",
    _CALL + "PallasCallDMATest::test_can_allocate_":
        "checks semaphore Refs' dtypes; interpret mode holds semaphores as "
        "integer counters",
}

# Upstream's megacore gates, by file: jax 0.4.26's paged attention test runs
# its megacore cases if `jax.devices()[0].device_kind == "TPU V4" and
# jtu.is_device_tpu(version=5, variant="p")`, true of no chip (0.4.28 made it
# an `or`); they run when the model has two TensorCores.
MEGACORE_GATES = {"pallas/paged_attention_kernel_test.py": "_megacore_enabled"}

# Cases that a bug of upstream's kernel fails on any chip, by pytest id prefix
# and a fragment of their parameters.
_PAGED = "pallas/paged_attention_kernel_test.py::PagedAttentionKernelTest::"
KERNEL_BUGS = {
    (_PAGED + "test_paged_attention", "megacore_mode='batch'"):
        "jax 0.4.26's paged_attention with megacore_mode='batch' and "
        "inline_seq_dim (the default) reads a sequence's length at the "
        "unadjusted batch index (fixed in jax 0.4.27)",
}
_MEGACORE = [False]  # whether the modelled chip has two TensorCores


def pytest_configure(config):
  import jax
  import numpy as np
  from jax._src import test_util as jtu
  from jax.experimental import pallas as pl

  min_rtol = float(os.environ["JAX_FORK_PALLAS_INTERPRET_RTOL"])
  pallas_call = pl.pallas_call
  assert_allclose = np.testing.assert_allclose

  interpret = True
  fields = os.environ.get("JAX_FORK_PALLAS_INTERPRET_PARAMS")
  if fields:
    from jax.experimental.pallas import tpu as pltpu
    interpret = pltpu.InterpretParams(**{  # "1", or "field=value,..."
        k: ast.literal_eval(v) for k, _, v in (
            f.partition("=") for f in fields.split(",") if f != "1")})
    config.addinivalue_line(
        "filterwarnings", "error::jax.experimental.pallas.tpu.InterpretWarning")
  _MEGACORE[0] = interpret is True or interpret.num_cores_or_threads > 1

  @functools.wraps(pallas_call)
  def interpreted_pallas_call(*args, **kwargs):
    return pallas_call(*args, **{**kwargs, "interpret": interpret})

  @functools.wraps(assert_allclose)
  def looser_assert_allclose(actual, desired, rtol=1e-7, *args, **kwargs):
    return assert_allclose(actual, desired, max(rtol, min_rtol), *args,
                           **kwargs)

  def is_device_tpu(version=None, variant=""):
    kind = EMULATED_TPU[0]
    expected = f"v{version}{variant}"
    return version is None or (
        "v5 lite" in kind if expected == "v5e" else expected in kind)

  pl.pallas_call = interpreted_pallas_call
  jax.config.update("jax_test_dut", "tpu")
  jtu.get_tpu_version = lambda: EMULATED_TPU[1]
  jtu.is_device_tpu = is_device_tpu
  np.testing.assert_allclose = looser_assert_allclose


def pytest_collection_modifyitems(config, items):
  del config
  for item in items:
    test_id = item.nodeid.split("tests/", 1)[-1]
    for pattern, reason in TPU_ONLY.items():
      if test_id.startswith(pattern):
        item.add_marker(pytest.mark.skip(reason=f"{NOT_RUNNABLE}: {reason}"))
    gate = MEGACORE_GATES.get(test_id.split("::")[0])
    if gate and getattr(item, "module", None) is not None:
      setattr(item.module, gate, lambda: _MEGACORE[0])
    params = getattr(getattr(item, "obj", None), "__x_params_repr__", "")
    for (prefix, fragment), reason in KERNEL_BUGS.items():
      if test_id.startswith(prefix) and fragment in params:
        item.add_marker(pytest.mark.xfail(
            reason=f"{KERNEL_BUG}: {reason}", strict=True))
  if cap := os.environ.get("JAX_FORK_HYPOTHESIS_MAX_EXAMPLES"):
    cap_hypothesis(items, int(cap))


# Errors of CPU's own limits, by exception type and message.
CPU_LIMITS = (
    (NotImplementedError, "not supported in interpret mode", None),
    (Exception, "unsupported operand type BF16 in op dot",
     "XLA:CPU of jaxlib 0.4.26 has no bfloat16 dot of this shape"),
)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
  report = (yield).get_result()
  exc = call.excinfo
  for kind, text, reason in CPU_LIMITS:
    if exc is not None and exc.errisinstance(kind) and text in str(exc.value):
      report.outcome = "skipped"
      report.longrepr = (str(item.path), item.location[1] or 0,
                         f"{NOT_RUNNABLE}: {reason or exc.value}")
      break
