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

import functools
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
import pallas_kernels

register = pallas_kernels.registrar(__name__)


def ints(seed, *shape):
  return np.random.RandomState(seed).randint(-3, 4, shape).astype(np.float32)


def interpreted(*args, **kwargs):
  return _pallas_call(*args, **{**kwargs, "interpret": True})
_pallas_call = pl.pallas_call


def _partial_blocks(interpret):
  spec = pl.BlockSpec(lambda i, j: (i, j), (8, 128))
  return _pallas_call(
      lambda x_ref, o_ref: o_ref.__setitem__(..., 2 * x_ref[...] + 1),
      out_shape=jax.ShapeDtypeStruct((10, 130), jnp.float32), grid=(2, 2),
      in_specs=[spec], out_specs=spec, interpret=interpret)
PARTIAL_BLOCKS = register("partial_blocks", _partial_blocks,
                          (ints(0, 10, 130),), 2 * ints(0, 10, 130) + 1)


def _narrow_output(interpret):
  # paged_attention's m and l outputs: (..., 1) arrays under blocks as wide
  # as the head dimension.
  def kernel(x_ref, o_ref):
    o_ref[...] = jnp.broadcast_to(x_ref[...].sum(1, keepdims=True),
                                  o_ref.shape)
  return _pallas_call(
      kernel, out_shape=jax.ShapeDtypeStruct((16, 1), jnp.float32), grid=(2,),
      in_specs=[pl.BlockSpec(lambda i: (i, 0), (8, 128))],
      out_specs=pl.BlockSpec(lambda i: (i, 0), (8, 128)), interpret=interpret)
NARROW_OUTPUT = register("output_narrower_than_its_block", _narrow_output,
                         (ints(1, 16, 128),),
                         ints(1, 16, 128).sum(1, keepdims=True))
register("padding_reads_as_uninitialized_memory", excluded="reads the "
         "padding of a block that overhangs its array: undefined")


class OverhangingBlockTest(jtu.JaxTestCase):

  def test_partial_blocks_read_the_array_and_write_only_it(self):
    PARTIAL_BLOCKS.check()

  def test_output_narrower_than_its_block(self):
    NARROW_OUTPUT.check()

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


def _grid_position(interpret):
  def kernel(o_ref):
    i = pl.program_id(0)
    def body(k, acc):
      return acc + lax.cond(k == pl.program_id(1), lambda: 100 * i,
                            lambda: pl.num_programs(1))
    o_ref[...] = jnp.full(o_ref.shape,
                          lax.fori_loop(0, pl.num_programs(0), body, 0))
  return _pallas_call(
      kernel, out_shape=jax.ShapeDtypeStruct((3 * 8, 2 * 128), jnp.int32),
      grid=(3, 2), out_specs=pl.BlockSpec(lambda i, j: (i, j), (8, 128)),
      interpret=interpret)
GRID_POSITION = register(
    "program_id_and_num_programs_in_loops_and_conditionals", _grid_position,
    # Each of 3 steps adds 100 * i once (k == j) and 2 otherwise; the kernel
    # fills each block with it. Without inputs, its tpu_custom_call has
    # result layouts and no operand layouts: StableHLO's verifier refuses the
    # module (in some processes).
    want=100 * np.arange(3)[:, None] + 4 + np.zeros((3, 2), np.int32),
    pick=lambda out: out[::8, ::128], split="Failed to deserialize StableHLO")


def _load_store_index(interpret):
  # The forms of flash_attention's `pl.load(ref, (0, 0, pl.ds(...), :))`.
  def kernel(x_ref, o_ref):
    rows = pl.load(x_ref, (1, 2, pl.ds(4, 8), slice(None)))
    pl.store(o_ref, (0, pl.ds(0, 8), slice(None)), rows * 2)
    pl.store(o_ref, (1, pl.ds(0, 8), slice(None)), pl.load(
        x_ref, (0, 1, pl.ds(0, 8), slice(None))))
  return _pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(
      (2, 8, 128), jnp.float32), interpret=interpret)
_x = ints(2, 2, 3, 16, 128)
LOAD_STORE_INDEX = register("integer_and_slice_indices", _load_store_index,
                            (_x,), np.stack([2 * _x[1, 2, 4:12], _x[0, 1, :8]]))


class GridPositionTest(jtu.JaxTestCase):

  def test_program_id_and_num_programs_in_loops_and_conditionals(self):
    GRID_POSITION.check()


class LoadStoreIndexTest(jtu.JaxTestCase):

  def test_integer_and_slice_indices(self):
    LOAD_STORE_INDEX.check()


def _upstream(f):
  """make(interpret) of a jitted function of jax 0.4.26's kernels: its
  pallas_calls take `interpret`, traced afresh."""
  def make(interpret):
    def run(*args):
      jax.clear_caches()
      with mock.patch.object(pl, "pallas_call", lambda *a, **k: _pallas_call(
          *a, **{**k, "interpret": interpret})):
        return f(*args)
    return run
  return make


def _flash_attention(q, k, v):
  from jax.experimental.pallas.ops.tpu import flash_attention as fa
  sizes = fa.BlockSizes(
      block_q=128, block_k_major=128, block_k=128, block_b=1,
      block_q_major_dkv=128, block_k_major_dkv=128, block_k_dkv=128,
      block_q_dkv=128, block_k_major_dq=128, block_k_dq=128, block_q_dq=128)
  attention = lambda q: fa.flash_attention(q, k, v, block_sizes=sizes)
  return attention(q), jax.grad(lambda q: attention(q).sum())(q)


def _attention_in_numpy(q, k, v):
  """softmax(q k^T) v and its gradient with respect to q (of its sum)."""
  q, k, v = (a.astype(np.float64) for a in (q, k, v))
  s = q @ np.swapaxes(k, -1, -2)
  p = np.exp(s - s.max(-1, keepdims=True))
  p /= p.sum(-1, keepdims=True)
  dp = np.broadcast_to(v.sum(-1)[..., None, :], p.shape)
  ds = p * (dp - (p * dp).sum(-1, keepdims=True))
  return (p @ v).astype(np.float32), (ds @ k).astype(np.float32)


_qkv = tuple(ints(i, 1, 1, 128, 128) / 4 for i in range(3))
FLASH_ATTENTION = register(
    "flash_attention_forward_and_backward", _upstream(_flash_attention), _qkv,
    _attention_in_numpy(*_qkv),
    # The softmax's exp and sums, in float32.
    tol=dict(rtol=1e-4, atol=1e-4),
    # The chip's dots take one bf16 pass of their float32 operands: the
    # softmax weights round to 8 bits (a relative 2**-9), in sums of 128.
    chip_tol=dict(rtol=2e-2, atol=2e-2))


def _paged_attention(megacore_mode):
  from jax.experimental.pallas.ops.tpu.paged_attention import (
      paged_attention)
  batch, heads, head_dim, page_size, pages = 2, 2, 128, 16, 4
  q = ints(3, batch, heads, head_dim) / 4
  k_pages = ints(4, heads, batch * pages, page_size, head_dim) / 4
  v_pages = ints(5, heads, batch * pages, page_size, head_dim)
  lengths = np.array([40, 64], np.int32)
  indices = np.arange(batch * pages, dtype=np.int32).reshape(batch, pages)
  f = functools.partial(paged_attention, pages_per_compute_block=2,
                        megacore_mode=megacore_mode,
                        inline_seq_dim=megacore_mode != "batch")
  k = k_pages[:, indices].reshape(heads, batch, -1, head_dim)
  v = v_pages[:, indices].reshape(heads, batch, -1, head_dim)
  logits = np.einsum("bhd,hbtd->bht", q, k)
  valid = np.arange(k.shape[2])[None, None] < lengths[:, None, None]
  logits = np.where(valid, logits, -np.inf)
  weights = np.exp(logits - logits.max(-1, keepdims=True))
  weights /= weights.sum(-1, keepdims=True)
  want = np.einsum("bht,hbtd->bhd", weights, v).astype(np.float32)
  return _upstream(f), (q, k_pages, v_pages, lengths, indices), want


PAGED_ATTENTION = register(
    "paged_attention", *_paged_attention(None),
    # jax 0.4.26's kernel reads lengths_ref[batch], its value unused
    # (pallas_interpret_checks_test).
    params=dict(out_of_bounds_reads="uninitialized"),
    tol=dict(rtol=1e-4, atol=1e-4),   # the softmax, in float32
    # The chip's dots take one bf16 pass: the weights round to 8 bits (a
    # relative 2**-9), in sums of 64 values up to 3.
    chip_tol=dict(rtol=2e-2, atol=2e-2))
for _mode in ("kv_head", "batch"):
  register(f"paged_attention_megacore_{_mode}", excluded="written for two "
           "TensorCores (megacore): on one, as on a TPU v5e, it hangs")


def _gmm(lhs, rhs, sizes):
  from jax.experimental.pallas.ops.tpu.megablox import gmm
  return gmm(lhs, rhs, sizes, tiling=(128, 128, 128))
_lhs, _rhs = ints(6, 128, 8), ints(7, 2, 8, 16)
GMM = register("gmm_with_partial_tiles", _upstream(_gmm),
               (_lhs, _rhs, np.array([48, 80], np.int32)),
               np.concatenate([_lhs[:48] @ _rhs[0], _lhs[48:] @ _rhs[1]]))


# Upstream's kernels are written for standard promotion (jax 0.4.30's
# paged_attention multiplies float32 weights by its bfloat16 pages).
@jtu.with_config(jax_numpy_dtype_promotion="standard")
class UpstreamKernelTest(jtu.JaxTestCase):
  """jax 0.4.26's own TPU kernels, forced into interpret mode."""

  def setUp(self):
    super().setUp()
    self.enter_context(mock.patch.object(pl, "pallas_call", interpreted))

  def test_flash_attention_forward_and_backward(self):
    from jax.experimental.pallas.ops.tpu import flash_attention as fa
    out, grad = FLASH_ATTENTION.check()
    q, k, v = FLASH_ATTENTION.args
    reference = lambda q: fa.mha_reference(q, k, v, None)
    self.assertAllClose(out, reference(q), atol=1e-5, rtol=1e-5)
    self.assertAllClose(grad, jax.grad(lambda q: reference(q).sum())(q),
                        atol=1e-4, rtol=1e-4)

  # Reads lengths_ref out of bounds: pallas_interpret_checks_test.
  @parameterized.parameters(None, "kv_head", "batch")
  @pytest.mark.interpret_true_only("jax 0.4.26's kernel reads out of bounds")
  def test_paged_attention_with_head_dim_128(self, megacore_mode):
    # interpret=True models two TensorCores, as the megacore modes need.
    # (With inline_seq_dim, "batch" reads the sequence length at the
    # unadjusted batch index: wrong on any chip, fixed in jax 0.4.27.)
    make, args, want = _paged_attention(megacore_mode)
    PAGED_ATTENTION.assert_close(make(True)(*args), want)

  def test_gmm_with_partial_tiles(self):
    GMM.check()


if __name__ == "__main__":
  absltest.main(testLoader=jtu.JaxTestLoader())
