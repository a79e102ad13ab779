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
"""Walking a jaxpr's equations, nested jaxprs included (for our tests)."""
from __future__ import annotations

from collections.abc import Iterator

from jax._src import core


def all_eqns(jaxpr: core.Jaxpr) -> Iterator[core.JaxprEqn]:
  """Every equation, each followed by those of its nested jaxprs, in the
  order the pretty-printer prints them."""
  for eqn in jaxpr.eqns:
    yield eqn
    for sub in core.jaxprs_in_params(eqn.params):
      yield from all_eqns(sub)


def primitive_names(closed_jaxpr: core.ClosedJaxpr) -> set[str]:
  """Names of all primitives in a closed jaxpr, including sub-jaxprs."""
  return {eqn.primitive.name for eqn in all_eqns(closed_jaxpr.jaxpr)}
