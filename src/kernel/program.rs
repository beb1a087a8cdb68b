//! A kernel as one value: what it binds (each binding with the name its
//! body reads it by), how it is launched, its workgroup arrays, the helper
//! functions its expressions need, and its body as IR. Lowering
//! (`codegen`) builds it; printers take it whole and decide nothing: the
//! WGSL printer (`codegen::render::kernel_wgsl`) and the IR listing
//! (`Kernel`'s `Display`) that dumps and tests read.

use std::fmt;

use super::binding::Binding;
use super::ir::{Expr, Inst, Ty, Var};
use super::listing::{IrExpr, print_body};
use super::sizes::Sz;

/// One kernel.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Kernel {
    /// Everything bound, in binding order from binding 0: the one list
    /// the printers declare and the runtime binds.
    pub bindings: Vec<Declared>,
    /// Helper functions the body's expressions call.
    pub helpers: Helpers,
    /// How it is launched.
    pub entry: Entry,
    /// The statements of its entry point.
    pub body: Vec<Inst>,
}

/// A binding and the name the body reads it by.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Declared {
    /// What the runtime binds there.
    pub binding: Binding,
    /// The identifier the body uses (`in0`, `out1_p2`, `ta`).
    pub name: String,
    /// A storage buffer's element type (a `bf16` one is words shared with
    /// neighbours); `None` for the other kinds of binding.
    pub element: Option<Ty>,
}

/// How a kernel is launched: `workgroup_size` invocations a workgroup
/// over a grid of workgroups (split over y past 65,535 at dispatch); `gi`
/// is the invocation's index, or the workgroup's unless `per_invocation`,
/// and invocations at `gi >= count` return at once.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Entry {
    pub workgroup_size: usize,
    pub per_invocation: bool,
    /// Invocations (or workgroups) that run: a `u32` expression.
    pub count: Expr,
    /// Arrays in workgroup memory.
    pub arrays: Vec<WorkgroupArray>,
    /// Whether the body reads its subgroup lane (`Expr::SubgroupLane`).
    pub subgroup_id: bool,
}

impl Entry {
    /// An invocation per unit of work, `invocations` of them, in
    /// workgroups of `WORKGROUP_SIZE` (no workgroup memory, no lanes).
    pub fn per_invocation(invocations: usize) -> Entry {
        Entry {
            workgroup_size: super::WORKGROUP_SIZE,
            per_invocation: true,
            count: Expr::count(invocations),
            arrays: Vec::new(),
            subgroup_id: false,
        }
    }

    /// `per_invocation` for a number of invocations that is a size: its
    /// count keeps its provenance (`Expr::Sized`).
    pub fn per_invocation_of(invocations: &Sz) -> Entry {
        Entry {
            count: Expr::size_u32(invocations),
            ..Entry::per_invocation(invocations.literal())
        }
    }

    /// The workgroups this per-invocation entry launches for
    /// `invocations`.
    pub fn groups_of(&self, invocations: usize) -> usize {
        invocations.div_ceil(self.workgroup_size)
    }

    /// The workgroups that `per_invocation(invocations)` launches.
    pub fn groups_for(invocations: usize) -> usize {
        invocations.div_ceil(super::WORKGROUP_SIZE)
    }
}

/// An array in workgroup memory.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct WorkgroupArray {
    /// The variable the body indexes it by.
    pub var: Var,
    pub element: Ty,
    pub len: usize,
}

/// The helper functions a kernel's expressions call (random numbers,
/// `pow` and `erf` with PyTorch's special cases, `tanh` accurate near
/// zero, 16-bit rounding), and
/// whether it stores `f16` (WGSL's `enable f16`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Helpers {
    pub rng: bool,
    pub pow: bool,
    pub erf: bool,
    pub tanh: bool,
    pub halves: bool,
    pub f16: bool,
    /// Whether the body uses cooperative matrices (`Inst::Coop*`, WGSL's
    /// `enable wgpu_cooperative_matrix`, native adapters with
    /// `EXPERIMENTAL_COOPERATIVE_MATRIX` only).
    pub cooperative_matrix: bool,
}

impl Kernel {
    /// The kernel as it is printed: its index arithmetic simplified with
    /// its literals' values (`kernel::simplify_indices`).
    pub fn simplified(&self) -> Kernel {
        Kernel {
            bindings: self.bindings.clone(),
            helpers: self.helpers,
            entry: self.entry.clone(),
            body: super::simplify_indices(self.body.clone(), &self.entry),
        }
    }

    /// What the kernel binds, in binding order.
    pub fn binding_list(&self) -> impl Iterator<Item = Binding> + '_ {
        self.bindings.iter().map(|d| d.binding)
    }
}

impl fmt::Display for Declared {
    /// As the IR listing names a binding: `in0_p1: f32 = read n3 part 1`.
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{}", self.name)?;
        if let Some(t) = self.element {
            write!(f, ": {}{}", t.dtype, if t.vec { "x4" } else { "" })?;
        }
        write!(f, " = {}", self.binding.describe())
    }
}

impl fmt::Display for Kernel {
    /// The kernel as IR: its bindings, launch and body.
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        for (i, d) in self.bindings.iter().enumerate() {
            writeln!(f, "binding {i} {d}")?;
        }
        let Entry {
            workgroup_size,
            per_invocation,
            count,
            arrays,
            subgroup_id: _,
        } = &self.entry;
        let unit = if *per_invocation {
            "invocations"
        } else {
            "workgroups"
        };
        writeln!(
            f,
            "entry: workgroups of {workgroup_size}, gi in 0..{} indexes {unit}",
            IrExpr(count)
        )?;
        for a in arrays {
            writeln!(f, "workgroup {}: [{}; {}]", a.var, a.element, a.len)?;
        }
        let mut body = String::new();
        print_body(&self.body, 0, &mut body);
        f.write_str(&body)
    }
}
