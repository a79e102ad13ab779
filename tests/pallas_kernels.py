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
"""The kernels of the fork's Pallas TPU tests, as data.

Each Pallas test file registers, at import, the kernels its tests run (the
tests run them from here) and names those a TPU cannot run, with the reason.
tests/tpu_test.py runs every registered kernel on the chip and under both
interpret presets (`interpret=True`, `pltpu.InterpretParams()`) and compares.
"""
from __future__ import annotations

import dataclasses
import importlib
from typing import Any, Callable

import numpy as np

import jax

# The words of InterpretParams()' refusals of what a TPU's Mosaic refuses in
# kernels Pallas lowers (regexes; Mosaic's own words, in parentheses).
DMA_WINDOW = (r"a TPU refuses this DMA \(Mosaic: (Offsets|Slice sizes) along "
              "tiled dimensions must be aligned to tiles")
VIEW = (r"a TPU refuses this load or store through a view \(Mosaic: "
        "Unsupported tiling for 2d load/store")
INT_VECTORS = r"a TPU refuses .* of int(8|16) vectors \(Mosaic: "
SCALAR_READ = (r"a TPU refuses a scalar read of \w+ from VMEM \(Mosaic: Only "
               "32-bit scalar vector.extracts supported")

# The files that register kernels, imported by `registry()`.
MODULES = ("pallas_tpu_interpret_test", "pallas_pipeline_test",
           "pallas_interpret_kernels_test", "pallas_interpret_checks_test",
           "pallas_interpret_devices_test", "pallas_tpu_lowering_test")


@dataclasses.dataclass(frozen=True, eq=False)
class Kernel:
  """A test kernel: `make(interpret)(*args)` runs it (`interpret=False`: on
  the default device, compiled by Mosaic).

  want: NumPy's answer (a pytree like the output's, of `pick(output)`).
  tol: None where the data are exact (the answer is exact in any order of
    summation and at any precision the chip's dots take), else the
    `assert_allclose` tolerance, with its reason where it is registered.
  chip_tol: the tolerance of the chip's answers (default: `tol`).
  params: the `InterpretParams` fields its checked run takes.
  refused: a regex: `InterpretParams()` refuses the kernel in these words,
    as the chip does (`interpret=True` runs it).
  split: a regex of the words with which Pallas's TPU lowering refuses the
    kernel on a CPU host (export for TPU) while interpret mode runs it: a
    split issue 48 is to close. The chip runs it all the same; the
    differential counts it apart.
  excluded: why the chip does not run it (it is then neither run nor
    compared; `make` may be None).
  rule: the rule of InterpretParams() it is a twin for (refused, or run):
    tests/tpu_test.py's test_mosaic_rules_on_the_chip runs these apart.
  """
  name: str
  make: Callable[[Any], Callable[..., Any]] | None
  args: tuple = ()
  want: Any = None
  tol: dict | None = None
  chip_tol: dict | None = None
  params: dict = dataclasses.field(default_factory=dict)
  refused: str | None = None
  split: str | None = None
  excluded: str | None = None
  rule: str | None = None
  pick: Callable[[Any], Any] | None = None

  @property
  def exact(self) -> bool:
    return self.tol is None and self.chip_tol is None

  def run(self, interpret: Any) -> Any:
    """The kernel's output (its `pick`) as NumPy arrays."""
    out = jax.block_until_ready(self.make(interpret)(*self.args))
    if self.pick is not None:
      out = self.pick(out)
    return jax.tree_util.tree_map(np.asarray, out)

  def assert_close(self, got: Any, want: Any, tol: dict | None = None):
    """got == want, exactly or to `tol` (default: the kernel's)."""
    tol = self.tol if tol is None else tol
    got_leaves, got_tree = jax.tree_util.tree_flatten(got)
    want_leaves, want_tree = jax.tree_util.tree_flatten(want)
    if got_tree != want_tree:
      raise AssertionError(f"{self.name}: output {got_tree}, want {want_tree}")
    for g, w in zip(got_leaves, want_leaves):
      g, w = np.asarray(g), np.asarray(w)
      if g.shape != w.shape:
        raise AssertionError(f"{self.name}: shape {g.shape}, want {w.shape}")
      if tol is None:
        np.testing.assert_array_equal(g, w, err_msg=self.name)
      else:
        np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64),
                                   err_msg=self.name, **tol)

  def check(self, interpret: Any = True) -> Any:
    """Runs the kernel and compares it with NumPy; returns its output."""
    got = self.run(interpret)
    self.assert_close(got, self.want)
    return got


REGISTRY: dict[str, Kernel] = {}


def registrar(module_name: str) -> Callable[..., Kernel]:
  """`register(name, make, args, want, **fields)` for one test file: the
  kernel is called '<file, less _test>.<name>'."""
  prefix = module_name.rsplit(".", 1)[-1].removesuffix("_test")
  def register(name, make=None, args=(), want=None, **fields) -> Kernel:
    kernel = Kernel(f"{prefix}.{name}", make, tuple(args), want, **fields)
    if kernel.name in REGISTRY:
      raise ValueError(f"kernel {kernel.name} registered twice")
    REGISTRY[kernel.name] = kernel
    return kernel
  return register


def registry() -> list[Kernel]:
  """Every kernel of the files in MODULES, each once."""
  for name in MODULES:
    importlib.import_module(name)
  return list(REGISTRY.values())
