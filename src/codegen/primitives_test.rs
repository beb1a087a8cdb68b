//! IR primitives no lowering uses on this machine's adapter yet
//! (cooperative matrices, subgroup shuffles and reductions), built by
//! hand into whole kernels, printed by both printers and validated by
//! naga, without an adapter: the kernel builders of the self-tuning and
//! GPU work start from printable, valid IR.

use super::golden_test::golden_kernel_text;
use super::render::kernel_wgsl;
use super::validate::validate_wgsl;
use crate::dtype::DType;
use crate::kernel::ir::{
    Arith, Buffer, Builtin, CoopAccess, CoopMatrix, CoopMemory, CoopRole, Expr, Inst, Ty, Var,
};
use crate::kernel::{Binding, Declared, Entry, Helpers, Kernel};

fn buffer(output: bool, k: usize) -> Buffer {
    Buffer {
        output,
        k,
        part: None,
        half: None,
    }
}

/// Bindings `in0`, `in1` (f32, read) and `out0` (f32, written).
fn two_in_one_out() -> Vec<Declared> {
    let declared = |binding, name: &str| Declared {
        binding,
        name: name.to_string(),
        element: Some(Ty::F32),
    };
    vec![
        declared(Binding::Read { node: 0, part: 0 }, "in0"),
        declared(Binding::Read { node: 1, part: 0 }, "in1"),
        declared(Binding::Write { node: 2, part: 0 }, "out0"),
    ]
}

fn var(prefix: &'static str, id: usize) -> Var {
    Var { prefix, id }
}

fn u(n: u64) -> Expr {
    Expr::U32(n)
}

/// A 64x64x64 matmul, one 8x8 output tile a subgroup: the accumulator
/// loaded from the output, the K loop of A (row-major) times B, stored.
fn coop_matmul() -> Kernel {
    let (n, tile) = (64u64, 8usize);
    let matrix = |role| CoopMatrix {
        size: tile,
        dtype: DType::F32,
        role,
    };
    let at = |output, k, offset: Expr| CoopAccess {
        memory: CoopMemory::Buffer(buffer(output, k)),
        offset,
        stride: u(n),
        row_major: true,
    };
    let (row, col, k) = (var("tr", 1), var("tc", 2), var("k", 3));
    let (acc, a, b) = (var("acc", 4), var("a", 5), var("b", 6));
    let tiles = n / tile as u64;
    let mul = |x: Expr, y: Expr| Expr::arith(Arith::Mul, x, y);
    let add = |x: Expr, y: Expr| Expr::arith(Arith::Add, x, y);
    let out_offset = add(mul(Expr::Var(row), u(n)), Expr::Var(col));
    let k_at = mul(Expr::Var(k), u(tile as u64));
    let body = vec![
        Inst::Let {
            var: row,
            ty: Ty::U32,
            value: mul(Expr::arith(Arith::Div, Expr::Invocation, u(tiles)), u(8)),
            node: None,
        },
        Inst::Let {
            var: col,
            ty: Ty::U32,
            value: mul(Expr::arith(Arith::Rem, Expr::Invocation, u(tiles)), u(8)),
            node: None,
        },
        Inst::CoopLoad {
            var: acc,
            matrix: matrix(CoopRole::C),
            from: at(true, 0, out_offset.clone()),
        },
        Inst::Loop {
            counter: k,
            count: Expr::count(tiles as usize),
            unroll: 1,
            body: vec![
                Inst::CoopLoad {
                    var: a,
                    matrix: matrix(CoopRole::A),
                    from: at(false, 0, add(mul(Expr::Var(row), u(n)), k_at.clone())),
                },
                Inst::CoopLoad {
                    var: b,
                    matrix: matrix(CoopRole::B),
                    from: at(false, 1, add(mul(k_at, u(n)), Expr::Var(col))),
                },
                Inst::CoopMultiplyAdd { acc, a, b },
            ],
        },
        Inst::CoopStore {
            var: acc,
            to: at(true, 0, out_offset),
        },
    ];
    Kernel {
        bindings: two_in_one_out(),
        helpers: Helpers {
            cooperative_matrix: true,
            ..Helpers::default()
        },
        entry: Entry {
            workgroup_size: 8,
            per_invocation: false,
            count: Expr::count((tiles * tiles) as usize),
            arrays: Vec::new(),
            subgroup_id: false,
        },
        body,
    }
}

/// Per element: its subgroup's sum and maximum, its lane-0 value, and its
/// butterfly neighbour's (lane xor 1), summed into the output.
fn subgroup_ops() -> Kernel {
    let x = var("x", 1);
    let call = |f, args| Expr::call(f, args);
    let xs = || Expr::Var(x);
    let terms = [
        call(Builtin::SubgroupAdd, vec![xs()]),
        call(Builtin::SubgroupMax, vec![xs()]),
        call(Builtin::SubgroupShuffle, vec![xs(), u(0)]),
        call(Builtin::SubgroupShuffleXor, vec![xs(), u(1)]),
        call(Builtin::SubgroupBroadcast, vec![xs(), u(2)]),
        Expr::Construct {
            ty: Ty::F32,
            x: Box::new(Expr::SubgroupLane),
        },
    ];
    let mut body = vec![Inst::Let {
        var: x,
        ty: Ty::F32,
        value: Expr::Load {
            buffer: buffer(false, 0),
            index: Box::new(Expr::Invocation),
        },
        node: None,
    }];
    let total = var("t", 2);
    body.push(Inst::Declare {
        var: total,
        ty: Ty::F32,
        init: Some(Expr::F32(0.0f32.to_bits())),
    });
    body.extend(
        terms
            .into_iter()
            .map(|value| Inst::Accumulate { var: total, value }),
    );
    body.push(Inst::Store {
        buffer: buffer(true, 0),
        index: Expr::Invocation,
        value: Expr::Var(total),
        node: 2,
    });
    Kernel {
        bindings: two_in_one_out(),
        helpers: Helpers::default(),
        entry: Entry {
            workgroup_size: 64,
            per_invocation: true,
            count: Expr::count(1000),
            arrays: Vec::new(),
            subgroup_id: true,
        },
        body,
    }
}

#[test]
fn cooperative_matrix_and_subgroup_kernels_print_and_validate() {
    for (name, kernel) in [
        ("coop_matmul", coop_matmul()),
        ("subgroup_ops", subgroup_ops()),
    ] {
        let wgsl = kernel_wgsl(&kernel, None);
        if let Err(e) = validate_wgsl(&wgsl) {
            panic!("{name} is not valid WGSL: {e}\n{wgsl}");
        }
        golden_kernel_text(name, &wgsl, &kernel.to_string());
    }
}
