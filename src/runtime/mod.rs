//! Devices and execution: adapter choice, caches, encode/submit/readback on
//! wgpu, and dispatch to the CPU reference.

pub mod adapter;
pub mod device;
pub(crate) mod gpu;
pub(crate) mod guards;
pub(crate) mod memory_report;
pub(crate) mod overlap;
pub(crate) mod pool;
pub(crate) mod profile;
pub(crate) mod stages;
pub(crate) mod storage;
pub(crate) mod submit;
