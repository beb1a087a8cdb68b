//! The wgpu backend: one adapter and device per process (`context`),
//! compiled executables and pipelines in LRU caches (`compile`), bind
//! groups (`bind`), and one command buffer per graph (`execute`).

mod bind;
mod compile;
mod context;
pub(crate) mod disk_cache;
mod dynamic;
mod execute;
mod pipelines;
mod rebind;
mod scratch;
mod sites;
mod wait;

pub(crate) use compile::GpuCaches;
pub(crate) use context::GpuContext;
pub(crate) use execute::run_graph;
