//! The examples' command line, one harness for all of them: each example
//! declares its options as a `clap` struct and flattens in the groups
//! below that it uses (the device, where its files go, the mixed-precision
//! dtype, data parallelism), so `--help` is generated from the
//! definitions and a flag means the same in every example.

// Each example compiles this file as its own module and uses only the
// groups it needs.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use clap::builder::RangedU64ValueParser;
use clap::{Args, Parser, ValueEnum};
use lazywgpu::distributed::{self, ProcessGroup};
use lazywgpu::{DType, Device};

/// Starts the logger (`RUST_LOG=lazywgpu=debug` and the like) and parses
/// the command line into `A`; `--help`, `--version` and malformed options
/// print and exit, as clap does.
pub fn parse<A: Parser>() -> A {
    env_logger::init();
    A::parse()
}

/// A parser for counts that must be at least 1 (intervals, epochs).
pub fn at_least_one() -> RangedU64ValueParser<usize> {
    RangedU64ValueParser::new().range(1..)
}

/// Which device an example runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum DeviceChoice {
    /// `Device::default()`: the GPU where there is an adapter, else the CPU
    /// reference backend with one line on standard error saying why
    /// (`LAZYWGPU_DEVICE` applies).
    Auto,
    /// The GPU (lavapipe counts); an error without an adapter.
    Gpu,
    /// The CPU reference backend (ndarray).
    Cpu,
}

/// `--device`.
#[derive(Args, Debug)]
#[command(next_help_heading = "Device")]
pub struct DeviceArg {
    /// Where the example runs
    #[arg(long, value_enum, default_value_t = DeviceChoice::Auto)]
    pub device: DeviceChoice,
}

impl DeviceArg {
    /// The device asked for.
    pub fn open(&self) -> lazywgpu::Result<Device> {
        match self.device {
            DeviceChoice::Auto => Ok(Device::default()),
            DeviceChoice::Gpu => Device::gpu(),
            DeviceChoice::Cpu => Ok(Device::cpu()),
        }
    }
}

/// `--out DIR`: where an example writes the files it makes (loss curves,
/// checkpoints, tables), so that a run never writes over the repository's
/// own files.
#[derive(Args, Debug)]
#[command(next_help_heading = "Output")]
pub struct OutDir {
    /// Directory for the files the example writes (created if missing)
    /// [default: lazywgpu-out in the target directory the example was
    /// built in, e.g. target/lazywgpu-out]
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

impl OutDir {
    /// The output directory, created if missing.
    pub fn dir(&self) -> std::io::Result<PathBuf> {
        let dir = self.out.clone().unwrap_or_else(default_out_dir);
        std::fs::create_dir_all(&dir)?;
        Ok(dir)
    }

    /// `given` when the user named a file, else `name` in the output
    /// directory.
    pub fn file_or(&self, given: Option<&Path>, name: &str) -> std::io::Result<PathBuf> {
        match given {
            Some(path) => Ok(path.to_path_buf()),
            None => Ok(self.dir()?.join(name)),
        }
    }
}

/// `TARGET/lazywgpu-out`, where `TARGET` is the directory cargo built the
/// running example into (`./target`, or `CARGO_TARGET_DIR`): an example's
/// binary is `TARGET/<profile>/examples/<name>`, and cargo's target
/// directory is never tracked. A binary moved elsewhere writes under the
/// repository's `target/`.
fn default_out_dir() -> PathBuf {
    let beside_binary = std::env::current_exe().ok().and_then(|exe| {
        let examples = exe.parent()?;
        if examples.file_name()? != "examples" {
            return None;
        }
        Some(examples.parent()?.parent()?.join("lazywgpu-out"))
    });
    beside_binary
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target/lazywgpu-out"))
}

/// The dtype of the matrix products under mixed precision.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Precision {
    /// Everything in f32 (no autocast).
    F32,
    /// The forward pass under autocast to f16 on f32 weights, with dynamic
    /// loss scaling (f16's range is narrow).
    F16,
    /// The forward pass under autocast to bf16 on f32 weights (bf16 has
    /// f32's range: no loss scaling).
    Bf16,
}

impl Precision {
    /// The autocast dtype: `None` for f32.
    pub fn autocast(self) -> Option<DType> {
        match self {
            Precision::F32 => None,
            Precision::F16 => Some(DType::F16),
            Precision::Bf16 => Some(DType::BF16),
        }
    }
}

/// `--data-parallel` and `--bucket-kb`.
#[derive(Args, Debug)]
#[command(next_help_heading = "Data parallelism")]
pub struct DataParallelArgs {
    /// Train as one rank of an MPI job: run under `mpirun`, built with
    /// `--features mpi`; each rank trains on its share of every global
    /// batch, gradients averaged across ranks, and reports its steps/s and
    /// all-reduce time per step
    #[arg(long)]
    pub data_parallel: bool,
    /// Gradient bucket size for --data-parallel, in KiB
    #[arg(long, value_name = "N", default_value_t = 1024, value_parser = at_least_one())]
    pub bucket_kb: usize,
}

impl DataParallelArgs {
    /// The MPI group with `--data-parallel`, this process's rank and the
    /// number of ranks; `(None, 0, 1)` without it.
    pub fn join(&self) -> lazywgpu::Result<(Option<ProcessGroup>, usize, usize)> {
        if !self.data_parallel {
            return Ok((None, 0, 1));
        }
        let group = distributed::init()?;
        let (rank, ranks) = (group.rank(), group.world_size());
        Ok((Some(group), rank, ranks))
    }

    /// The gradient bucket size in bytes.
    pub fn bucket_bytes(&self) -> usize {
        self.bucket_kb << 10
    }
}
