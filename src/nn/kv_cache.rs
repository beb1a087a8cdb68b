//! A key/value cache for generation: preallocated per layer at a stated
//! capacity, written in place at the current position, attended over its
//! filled prefix. Shapes never change while decoding (the position is a
//! runtime parameter, the attention covers the whole capacity under a
//! mask), so decoding token after token reuses one compiled graph.

use super::functional::{AttentionOptions, scaled_dot_product_attention_with};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::runtime::device::Device;
use crate::tensor::Tensor;

/// One attention layer's cache of keys and values `[batch, kv_heads,
/// capacity, head_dim]`. Appending past the capacity is
/// [`Error::CacheFull`]: generation stops there (no sliding window).
pub struct KvCache {
    keys: Tensor,
    values: Tensor,
    /// Which positions of each sequence hold a real token (`[batch,
    /// capacity]` bool), once a padding mask was appended.
    valid: Option<Tensor>,
    len: usize,
}

impl KvCache {
    /// An empty cache of `capacity` positions, in `dtype` (f32, or the
    /// model's f16/bf16).
    pub fn new(
        batch: usize,
        kv_heads: usize,
        capacity: usize,
        head_dim: usize,
        dtype: DType,
        dev: &Device,
    ) -> KvCache {
        let shape = [batch, kv_heads, capacity, head_dim];
        KvCache {
            keys: Tensor::zeros_dtype(shape, dtype, dev),
            values: Tensor::zeros_dtype(shape, dtype, dev),
            valid: None,
            len: 0,
        }
    }

    /// Positions held.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no position is held.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Positions the cache can hold.
    pub fn capacity(&self) -> usize {
        self.keys.shape()[2]
    }

    /// Forgets every position (the buffers stay).
    pub fn reset(&mut self) {
        self.len = 0;
        self.valid = None;
    }

    /// The whole key buffer `[batch, kv_heads, capacity, head_dim]`
    /// (positions past [`KvCache::len`] hold stale values).
    pub fn keys(&self) -> &Tensor {
        &self.keys
    }

    /// The whole value buffer, as [`KvCache::keys`].
    pub fn values(&self) -> &Tensor {
        &self.values
    }

    /// Writes `k` and `v` `[batch, kv_heads, L, head_dim]` at positions
    /// `len..len + L`: a select over the capacity whose position is a
    /// runtime parameter, so every decoding step is the same graph.
    #[track_caller]
    pub fn append(&mut self, k: &Tensor, v: &Tensor) -> Result<()> {
        self.append_masked(k, v, None)
    }

    /// [`KvCache::append`] with `mask` `[batch, L]` (bool, or 0/1
    /// integers) saying which of the new positions hold real tokens: the
    /// others (left padding) are never attended to.
    #[track_caller]
    pub fn append_masked(&mut self, k: &Tensor, v: &Tensor, mask: Option<&Tensor>) -> Result<()> {
        let want = |t: &Tensor| {
            let s = self.keys.shape();
            t.rank() == 4 && t.shape()[..2] == s[..2] && t.shape()[3] == s[3]
        };
        if !want(k) || !want(v) || k.shape() != v.shape() {
            panic!(
                "KvCache::append: k {:?} and v {:?} must be [batch, kv_heads, L, head_dim] matching the cache's {:?} at {}",
                k.shape(),
                v.shape(),
                self.keys.shape(),
                std::panic::Location::caller()
            );
        }
        let adding = k.shape()[2];
        let capacity = self.capacity();
        if self.len + adding > capacity {
            return Err(Error::CacheFull {
                len: self.len,
                adding,
                capacity,
            });
        }
        if adding == 0 {
            return Ok(());
        }
        let dev = self.keys.device().clone();
        // Position j of the cache takes new row j - len where that is in
        // 0..adding.
        let start = -(self.len as i32);
        let offset = Tensor::arange(start, start + capacity as i32, 1, &dev);
        let inside = offset
            .ge(0i32)
            .logical_and(&offset.lt(adding as i32))
            .reshape([capacity as isize, 1]);
        let rows = offset.maximum(0i32).minimum(adding as i32 - 1);
        let write = |cache: &Tensor, new: &Tensor| {
            let spread = new.cast(cache.dtype()).index_select(2, &rows);
            inside.where_cond(&spread, cache)
        };
        self.keys = write(&self.keys, k);
        self.values = write(&self.values, v);
        if mask.is_some() || self.valid.is_some() {
            let batch = self.keys.shape()[0];
            let new = match mask {
                Some(m) => m.truthy(),
                None => Tensor::full([batch, adding], true, &dev),
            };
            let old = match &self.valid {
                Some(v) => v.clone(),
                None => Tensor::full([batch, capacity], true, &dev),
            };
            let spread = new.index_select(1, &rows);
            let inside = inside.reshape([1, capacity as isize]);
            self.valid = Some(inside.where_cond(&spread, &old));
        }
        self.len += adding;
        Ok(())
    }

    /// Attention of `q` `[batch, heads, L, head_dim]`, the queries of
    /// the last `L` positions appended, over every position held, causal
    /// (query `i` sees positions up to its own), grouped-query when
    /// `heads` is a multiple of the cache's `kv_heads`: `[batch, heads,
    /// L, head_dim]`. It covers the whole capacity under a mask, so its
    /// cost is that of a full cache whatever the length.
    #[track_caller]
    pub fn attend(&self, q: &Tensor, scale: Option<f32>) -> Tensor {
        let l = q.shape().get(2).copied().unwrap_or(0);
        let dev = q.device().clone();
        let first = self.len as i32 - l as i32;
        let query_pos = Tensor::arange(first, first + l as i32, 1, &dev).unsqueeze(1);
        let key_pos = Tensor::arange(0, self.capacity() as i32, 1, &dev).unsqueeze(0);
        let causal = key_pos.le(&query_pos);
        // With padding: `[batch, 1, L, capacity]`, a sequence's pad
        // positions masked for all its queries.
        // A padding position's own query still sees itself, so that its
        // row (never read) stays finite: a row of -inf scores would give
        // NaN values that the next layer caches, and 0 * NaN is NaN in
        // every later product with them.
        let keep = match &self.valid {
            Some(valid) => {
                let b = valid.shape()[0] as isize;
                let valid = valid.reshape([b, 1, 1, self.capacity() as isize]);
                causal.logical_and(&valid.logical_or(&key_pos.eq(&query_pos)))
            }
            None => causal,
        };
        let options = AttentionOptions {
            attn_mask: Some(&keep),
            scale,
            enable_gqa: true,
            ..AttentionOptions::default()
        };
        let q = q.cast(self.keys.dtype());
        scaled_dot_product_attention_with(&q, &self.keys, &self.values, &options)
    }
}
