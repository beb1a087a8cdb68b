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

impl DataBuffer {
    /// Which memory this is (its address): equal for two handles of one
    /// buffer, as views of one stored value are.
    pub fn identity(&self) -> usize {
        match self {
            DataBuffer::Gpu(buffer) => Arc::as_ptr(buffer) as usize,
            DataBuffer::Cpu(data) => Arc::as_ptr(data) as usize,
        }
    }
}

/// A wgpu storage buffer (from the device's pool, to which it returns).
pub(crate) type GpuBuffer = crate::runtime::pool::PooledBuffer;
