//! Stored tensor data on either backend.

use std::sync::Arc;

use crate::shape::Layout;

/// Stored data: a buffer and where the tensor's elements are inside it.
/// Views share the buffer with a different layout.
#[derive(Clone)]
pub(crate) struct Storage {
    pub buffer: DataBuffer,
    pub layout: Layout,
}

/// The memory holding elements (as 32-bit patterns, see [`crate::DType`]).
#[derive(Clone)]
pub(crate) enum DataBuffer {
    /// A wgpu storage buffer.
    Gpu(Arc<GpuBuffer>),
    /// Host memory of the CPU reference backend.
    Cpu(Arc<Vec<u32>>),
}

/// A wgpu storage buffer (from the device's pool, to which it returns).
pub(crate) type GpuBuffer = crate::runtime::pool::PooledBuffer;
