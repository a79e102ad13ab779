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
"""Interpret mode runs the TPU kernels jax 0.4.26 ships: blocks that overhang
their arrays, grid positions anywhere in a kernel, the index forms of
`pl.load`/`pl.store` (patch 0021-pallas-interpret-mode-runs-upstream-s-tpu-
kernels.patch)."""
from __future__ import annotations

from unittest import mock

from absl.testing import absltest
from absl.testing import parameterized
import pytest
import numpy as np

import jax
from jax import lax
import jax.numpy as jnp
from jax._src import test_util as jtu
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu


def ints(seed, *shape):
  return np.random.RandomState(seed).randint(-3, 4, shape).astype(np.float32)


def interpreted(*args, **kwargs):
  return _pallas_call(*args, **{**kwargs, "interpret": True})
_pallas_call = pl.pallas_call


class OverhangingBlockTest(jtu.JaxTestCase):

  def test_partial_blocks_read_the_array_and_write_only_it(self):
    x = ints(0, 10, 130)
    spec = pl.BlockSpec(lambda i, j: (i, j), (8, 128))
    out = interpreted(
        lambda x_ref, o_ref: o_ref.__setitem__(..., 2 * x_ref[...] + 1),
        out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), grid=(2, 2),
        in_specs=[spec], out_specs=spec)(x)
    np.testing.assert_array_equal(out, 2 * x + 1)

  def test_output_narrower_than_its_block(self):
    # paged_attention's m and l outputs: (..., 1) arrays under blocks as wide
    # as the head dimension.
    x = ints(1, 16, 128)
    def kernel(x_ref, o_ref):
      o_ref[...] = jnp.broadcast_to(x_ref[...].sum(1, keepdims=True),
                                    o_ref.shape)
    out = interpreted(
        kernel, out_shape=jax.ShapeDtypeStruct((16, 1), x.dtype), grid=(2,),
        in_specs=[pl.BlockSpec(lambda i: (i, 0), (8, 128))],
        out_specs=pl.BlockSpec(lambda i: (i, 0), (8, 128)))(x)
    np.testing.assert_array_equal(out, x.sum(1, keepdims=True))

  @pytest.mark.interpret_true_only("compares with interpret=True")
  def test_padding_reads_as_uninitialized_memory(self):
    # Rows 10 to 15 of the second block are padding: NaN, or with
    # interpret=True (uninitialized_memory="zero") zeros.
    def run(interpret):
      return _pallas_call(
          lambda x_ref, o_ref: o_ref.__setitem__(..., jnp.broadcast_to(
              x_ref[...].sum(1, keepdims=True).sum(0, keepdims=True),
              o_ref.shape)),
          out_shape=jax.ShapeDtypeStruct((2, 8, 128), jnp.float32), grid=(2,),
          in_specs=[pl.BlockSpec(lambda i: (i, 0), (8, 128))],
          out_specs=pl.BlockSpec(lambda i: (i, 0, 0), (None, 8, 128)),
          interpret=interpret)(np.ones((10, 128), np.float32))
    np.testing.assert_array_equal(
        run(pltpu.InterpretParams())[:, 0, 0], [1024, np.nan])
    np.testing.assert_array_equal(run(True)[:, 0, 0], [1024, 256])


class GridPositionTest(jtu.JaxTestCase):

  def test_program_id_and_num_programs_in_loops_and_conditionals(self):
    def kernel(o_ref):
      i = pl.program_id(0)
      def body(k, acc):
        return acc + lax.cond(k == pl.program_id(1), lambda: 100 * i,
                              lambda: pl.num_programs(1))
      o_ref[...] = jnp.full(o_ref.shape,
                            lax.fori_loop(0, pl.num_programs(0), body, 0))
    out = interpreted(
        kernel, out_shape=jax.ShapeDtypeStruct((3 * 8, 2 * 128), jnp.int32),
        grid=(3, 2), out_specs=pl.BlockSpec(lambda i, j: (i, j), (8, 128)))()
    # Each of 3 steps adds 100 * i once (k == j) and 2 otherwise.
    np.testing.assert_array_equal(out[::8, ::128], 100 * np.arange(3)[
        :, None] + 4 + np.zeros((3, 2), np.int32))


class LoadStoreIndexTest(jtu.JaxTestCase):

  def test_integer_and_slice_indices(self):
    # The forms of flash_attention's `pl.load(ref, (0, 0, pl.ds(...), :))`.
    x = ints(2, 2, 3, 16, 128)
    def kernel(x_ref, o_ref):
      rows = pl.load(x_ref, (1, 2, pl.ds(4, 8), slice(None)))
      pl.store(o_ref, (0, pl.ds(0, 8), slice(None)), rows * 2)
      pl.store(o_ref, (1, pl.ds(0, 8), slice(None)), pl.load(
          x_ref, (0, 1, pl.ds(0, 8), slice(None))))
    out = interpreted(kernel,
                      out_shape=jax.ShapeDtypeStruct((2, 8, 128), x.dtype))(x)
    np.testing.assert_array_equal(out, np.stack([2 * x[1, 2, 4:12],
                                                 x[0, 1, :8]]))


class UpstreamKernelTest(jtu.JaxTestCase):
  """jax 0.4.26's own TPU kernels, forced into interpret mode."""

  def setUp(self):
    super().setUp()
    self.enter_context(mock.patch.object(pl, "pallas_call", interpreted))

  def test_flash_attention_forward_and_backward(self):
    from jax.experimental.pallas.ops.tpu import flash_attention as fa
    q, k, v = (jnp.asarray(ints(i, 1, 1, 128, 128) / 4) for i in range(3))
    sizes = fa.BlockSizes(
        block_q=128, block_k_major=128, block_k=128, block_b=1,
        block_q_major_dkv=128, block_k_major_dkv=128, block_k_dkv=128,
        block_q_dkv=128, block_k_major_dq=128, block_k_dq=128, block_q_dq=128)
    attention = lambda q: fa.flash_attention(q, k, v, block_sizes=sizes)
    reference = lambda q: fa.mha_reference(q, k, v, None)
    self.assertAllClose(attention(q), reference(q), atol=1e-5, rtol=1e-5)
    self.assertAllClose(jax.grad(lambda q: attention(q).sum())(q),
                        jax.grad(lambda q: reference(q).sum())(q),
                        atol=1e-4, rtol=1e-4)

  # Reads lengths_ref out of bounds: pallas_interpret_checks_test.
  @parameterized.parameters(None, "kv_head", "batch")
  @pytest.mark.interpret_true_only("jax 0.4.26's kernel reads out of bounds")
  def test_paged_attention_with_head_dim_128(self, megacore_mode):
    # interpret=True models two TensorCores, as the megacore modes need.
    # (With inline_seq_dim, "batch" reads the sequence length at the
    # unadjusted batch index: wrong on any chip, fixed in jax 0.4.27.)
    from jax.experimental.pallas.ops.tpu.paged_attention import (
        paged_attention)
    batch, heads, head_dim, page_size, pages = 2, 2, 128, 16, 4
    q = jnp.asarray(ints(3, batch, heads, head_dim) / 4)
    k_pages = jnp.asarray(ints(4, heads, batch * pages, page_size, head_dim))
    v_pages = jnp.asarray(ints(5, heads, batch * pages, page_size, head_dim))
    lengths = jnp.array([40, 64], jnp.int32)
    indices = jnp.arange(batch * pages, dtype=jnp.int32).reshape(batch, pages)
    out = paged_attention(q, k_pages / 4, v_pages, lengths, indices,
                          pages_per_compute_block=2,
                          megacore_mode=megacore_mode,
                          inline_seq_dim=megacore_mode != "batch")
    k = (k_pages / 4)[:, indices].reshape(heads, batch, -1, head_dim)
    v = v_pages[:, indices].reshape(heads, batch, -1, head_dim)
    logits = jnp.einsum("bhd,hbtd->bht", q, k)
    valid = jnp.arange(k.shape[2])[None, None] < lengths[:, None, None]
    weights = jax.nn.softmax(jnp.where(valid, logits, -jnp.inf), -1)
    self.assertAllClose(out, jnp.einsum("bht,hbtd->bhd", weights, v),
                        atol=1e-4, rtol=1e-4)

  def test_gmm_with_partial_tiles(self):
    from jax.experimental.pallas.ops.tpu.megablox import gmm
    lhs, rhs = ints(6, 128, 8), ints(7, 2, 8, 16)
    sizes = jnp.array([48, 80], jnp.int32)
    out = gmm(lhs, rhs, sizes, tiling=(128, 128, 128))
    np.testing.assert_array_equal(
        out, np.concatenate([lhs[:48] @ rhs[0], lhs[48:] @ rhs[1]]))


if __name__ == "__main__":
  absltest.main(testLoader=jtu.JaxTestLoader())
