//! The guards kernels record (`kernel::sizes`), as data, for a
//! hand-written `Target` without an adapter: what a row sum's, a
//! softmax's and an elementwise kernel's code depends on among their
//! sizes, and, over sizes around every threshold, that two sizes where
//! one's guards all hold at the other get kernels of the same strategies.

use super::KernelSource;
use super::bindings_test::kernels_of;
use crate::kernel::Target;
use crate::kernel::sizes::Guard;
use crate::{Device, DeviceConfig, Tensor};

/// A `[rows, len]` input on the CPU device (nothing runs: kernels are
/// only lowered).
fn input(rows: usize, len: usize) -> Tensor {
    let dev = Device::cpu_with(DeviceConfig::default());
    Tensor::from_vec(vec![0.25f32; rows * len], [rows, len], &dev).expect("input")
}

/// The conditions of `kernel`'s guards, in order.
fn conditions(kernel: &KernelSource) -> Vec<String> {
    kernel.guards.list().iter().map(Guard::condition).collect()
}

/// Whether every guard of `kernels` holds where each dimension `(node,
/// dim)` is `at(node, dim)`.
fn all_hold(kernels: &[KernelSource], at: &dyn Fn(usize, usize) -> usize) -> bool {
    (kernels.iter().flat_map(|k| k.guards.list()))
        .all(|g| g.test.passes(g.size.eval(at)) == g.passed)
}

#[test]
fn a_row_sum_depends_on_its_length_through_three_guards() {
    let budget = Target::lavapipe()
        .loop_budget(1)
        .expect("lavapipe's budget");
    let sum = input(300, 1000).sum([1], false);
    let kernels = kernels_of(&[&sum], &Target::lavapipe());
    assert_eq!(kernels.len(), 1);
    // Read four at a time (a multiple of four), one invocation a row
    // (below the tree's 4,096 elements), within the loop budget.
    let want = [
        "n0[1] % 4 == 0".to_string(),
        "max(n0[1], 1) < 4096".to_string(),
        format!("max(n0[1], 1) < {}", budget + 1),
    ];
    assert_eq!(conditions(&kernels[0]), want);
    // A row of 70,001 elements: past the budget, a workgroup tree.
    let long = input(300, 70_001).sum([1], false);
    let kernels = kernels_of(&[&long], &Target::lavapipe());
    let listed = conditions(&kernels[0]);
    assert!(
        listed.contains(&"max(n0[1], 1) >= 4096".to_string()),
        "{listed:?}"
    );
}

#[test]
fn softmax_and_elementwise_kernels_list_the_tests_of_their_sizes() {
    let x = input(2000, 12);
    let kernels = kernels_of(&[&x.softmax(1)], &Target::lavapipe());
    let listed = conditions(&kernels[0]);
    for want in ["n0[0] >= 1024", "n0[1] % 4 == 0"] {
        assert!(listed.contains(&want.to_string()), "{want}: {listed:?}");
    }
    // 21 elements: not four at a time.
    let odd = input(7, 3).exp();
    let kernels = kernels_of(&[&odd], &Target::lavapipe());
    assert_eq!(
        conditions(&kernels[0]),
        ["(n1[0] * n1[1]) % 4 != 0"],
        "{}",
        kernels[0].kernel
    );
}

/// Over row lengths around the thresholds (the tree's 4,096, the loop
/// budget, multiples of four), a row sum, a softmax and an elementwise
/// kernel lowered at one length and at another whose dimensions keep
/// every guard get the same strategies.
#[test]
fn kernels_whose_guards_hold_at_another_size_choose_as_they_do() {
    let lengths = [1usize, 3, 4, 12, 255, 256, 1000, 4095, 4096, 5000, 70_001];
    let lowered = |len: usize| -> Vec<Vec<KernelSource>> {
        let x = input(3, len);
        [x.sum([1], false), x.softmax(1), &x * 2.0]
            .iter()
            .map(|t| kernels_of(&[t], &Target::lavapipe()))
            .collect()
    };
    let all: Vec<Vec<Vec<KernelSource>>> = lengths.iter().map(|&l| lowered(l)).collect();
    let mut compared = 0;
    for (a, at_a) in lengths.iter().zip(&all) {
        for (b, at_b) in lengths.iter().zip(&all) {
            for (ka, kb) in at_a.iter().zip(at_b) {
                // The node whose dims the guards read is the input: its
                // rows stay 3, its length is `b`.
                let at = |_: usize, dim: usize| if dim == 0 { 3 } else { *b };
                if ka.len() != kb.len() || !all_hold(ka, &at) {
                    continue;
                }
                compared += 1;
                let strategies =
                    |k: &[KernelSource]| k.iter().map(|s| s.strategy).collect::<Vec<_>>();
                assert_eq!(strategies(ka), strategies(kb), "length {a}, then {b}");
            }
        }
    }
    assert!(compared > 3 * lengths.len(), "{compared} pairs compared");
}
