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
"""Remat policies that answer with an enum, around state and debug callbacks
(patch 0175).

jax 0.4.26's partial-eval rules of `get`/`swap`/`addupdate` and of
`debug_callback` read a policy's answer as a bool, and `pe.Recompute`, which
`save_and_offload_only_these_names` returns for what it neither saves nor
offloads, is true: those policies saved what their bool twins recompute.
"""
from __future__ import annotations

from absl.testing import absltest
import numpy as np

import jax
from jax import lax
import jax.numpy as jnp
from jax._src import ad_checkpoint as ad_checkpoint_internal
from jax._src import test_util as jtu
from jax._src.interpreters import partial_eval as pe
from jax._src.lax.control_flow.for_loop import for_loop
from jax.ad_checkpoint import checkpoint_name

jax.config.parse_flags_with_absl()


def _enum_policy(*saved_names: str):
  return jax.checkpoint_policies.save_and_offload_only_these_names(
      names_which_can_be_saved=list(saved_names),
      names_which_can_be_offloaded=[], offload_src="device",
      offload_dst="pinned_host")


def _recompute_everything(*_, **__):
  return pe.Recompute


class RematEnumPolicyTest(jtu.JaxTestCase):

  def test_state_reads_are_recomputed(self):
    def f(x):
      def body(i, refs):
        x_ref, y_ref = refs
        y_ref[i] = jnp.sin(x_ref[i]) * 2.
      return for_loop(x.shape[0], body, (x, jnp.zeros_like(x)))[1]
    x = jnp.arange(1., 5.)
    cp = jax.checkpoint_policies
    def residuals(policy):
      return ad_checkpoint_internal.saved_residuals(
          jax.checkpoint(f, policy=policy), x)
    # The loop's counter alone; jax 0.4.26 saved the values read too.
    expected = residuals(cp.nothing_saveable)
    self.assertLen(expected, 1)
    for policy in (_enum_policy(), _recompute_everything,
                   cp.save_from_both_policies(cp.nothing_saveable,
                                              _enum_policy())):
      self.assertEqual(len(residuals(policy)), len(expected))
      grad = jax.grad(lambda v: jax.checkpoint(f, policy=policy)(v).sum())
      self.assertAllClose(grad(x), 2. * jnp.cos(x))
      self.assertAllClose(jax.jit(grad)(x), 2. * jnp.cos(x))

  def test_debug_callback_runs_again_when_not_saved(self):
    calls = []
    def f(x):
      y = checkpoint_name(jnp.sin(x), "y")
      jax.debug.callback(lambda v: calls.append(np.asarray(v)), y)
      return jnp.sin(y)
    x = jnp.arange(1., 5.)
    def count_calls(policy, transform):
      calls.clear()
      grad = transform(jax.grad(
          lambda v: jax.checkpoint(f, policy=policy)(v).sum()))
      self.assertAllClose(grad(x), jnp.cos(jnp.sin(x)) * jnp.cos(x))
      jax.effects_barrier()
      for value in calls:
        self.assertAllClose(value, jnp.sin(x))
      return len(calls)
    cp = jax.checkpoint_policies
    for transform in (lambda g: g, jax.jit):
      # Forward pass and the backward pass's recomputation; jax 0.4.26 ran
      # the callback once for the enum policy.
      self.assertEqual(count_calls(cp.save_only_these_names("y"), transform),
                       2)
      self.assertEqual(count_calls(_enum_policy("y"), transform), 2)
      self.assertEqual(count_calls(cp.everything_saveable, transform), 1)

  def test_saveable_answers_still_save(self):
    x = jnp.arange(1., 5.)
    def f(v):
      y = checkpoint_name(jnp.sin(v), "y")
      jax.debug.callback(lambda _: None, y)
      return lax.sin(y)
    saved = ad_checkpoint_internal.saved_residuals(
        jax.checkpoint(f, policy=lambda *_, **__: pe.Saveable), x)
    self.assertEqual(
        len(saved),
        len(ad_checkpoint_internal.saved_residuals(
            jax.checkpoint(f, policy=jax.checkpoint_policies
                           .everything_saveable), x)))


if __name__ == "__main__":
  absltest.main(testLoader=jtu.JaxTestLoader())
