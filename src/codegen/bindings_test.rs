//! The bindings a generated WGSL module declares (read back by naga, not
//! from the text) are exactly `KernelSource::bindings()`, in order and in
//! kind, for every kernel builder: elementwise (vec4 and scalar, with and
//! without parameters), reductions (per invocation, workgroup tree, split),
//! softmax, each matmul kernel with its packing kernels, and buffers bound
//! in parts (a target with tiny bindings).

use super::{CodegenContext, KernelSource, generate};
use crate::graph::Graph;
use crate::kernel::{
    Binding, MatmulKernel, ReduceSplit, ReduceStrategy, SoftmaxStrategy, Strategy, Target,
};
use crate::schedule::{lower_for_gpu, plan, split_reductions};
use crate::{Device, DeviceConfig, Tensor};

/// Every kernel (and packing kernel) of the graph computing `outputs`, as
/// the runtime would generate them.
pub(super) fn kernels_of(outputs: &[&Tensor], target: &Target) -> Vec<KernelSource> {
    kernels_checked(outputs, target, false)
}

/// `kernels_of`, in anomaly mode when `checked`.
pub(super) fn kernels_checked(
    outputs: &[&Tensor],
    target: &Target,
    checked: bool,
) -> Vec<KernelSource> {
    let nodes: Vec<_> = outputs.iter().map(|t| t.node()).collect();
    let graph = Graph::collect_with(&nodes, true, checked);
    let key = &split_reductions(&graph.key, ReduceSplit::CPU).key;
    kernels_of_key(key, target)
}

/// The kernels of the graph computing `outputs` after the whole lowering
/// for `target` (`schedule::lower_for_gpu`: long sorts and scans split).
pub(super) fn kernels_lowered(outputs: &[&Tensor], target: &Target) -> Vec<KernelSource> {
    let nodes: Vec<_> = outputs.iter().map(|t| t.node()).collect();
    let graph = Graph::collect_with(&nodes, true, false);
    kernels_of_key(&lower_for_gpu(&graph.key, target).key, target)
}

/// The kernels generated for `key` on `target`, packing kernels first.
fn kernels_of_key(key: &crate::graph::GraphKey, target: &Target) -> Vec<KernelSource> {
    let cx = CodegenContext::plain(target);
    let mut plan = plan(key, target);
    let mut out = Vec::new();
    for mut source in generate(key, &cx, &mut plan) {
        source.print_wgsl(None);
        out.extend(source.packs.iter().cloned());
        out.push(source);
    }
    out
}

/// The bindings `wgsl` declares, as (binding index, kind) in index order.
fn declared(wgsl: &str) -> Vec<(u32, String)> {
    let module = naga::front::wgsl::parse_str(wgsl).expect("generated WGSL parses");
    let mut found: Vec<(u32, String)> = module
        .global_variables
        .iter()
        .filter_map(|(_, var)| {
            let binding = var.binding.as_ref()?;
            let kind = match var.space {
                naga::AddressSpace::Uniform => "uniform".to_string(),
                naga::AddressSpace::Storage { access } => {
                    if access.contains(naga::StorageAccess::STORE) {
                        "storage rw".to_string()
                    } else {
                        "storage r".to_string()
                    }
                }
                naga::AddressSpace::Handle => match &module.types[var.ty].inner {
                    naga::TypeInner::Image {
                        class: naga::ImageClass::Storage { .. },
                        ..
                    } => "texture w".to_string(),
                    _ => "texture".to_string(),
                },
                other => format!("{other:?}"),
            };
            Some((binding.binding, kind))
        })
        .collect();
    found.sort();
    found
}

/// The kind of WGSL declaration each binding must have.
fn expected(source: &KernelSource) -> Vec<(u32, String)> {
    source
        .bindings()
        .enumerate()
        .map(|(i, b)| {
            let kind = match b {
                Binding::Params {
                    uniform_bytes: Some(_),
                } => "uniform",
                Binding::Params {
                    uniform_bytes: None,
                } => "storage r",
                Binding::Read { .. } => "storage r",
                Binding::Write { .. } => "storage rw",
                Binding::Texture { write: true, .. } => "texture w",
                Binding::Texture { write: false, .. } => "texture",
                Binding::Checks => "storage rw",
                Binding::Sizes { .. } => "uniform",
            };
            (i as u32, kind.to_string())
        })
        .collect()
}

fn check(outputs: &[&Tensor], target: &Target, what: &str) -> usize {
    check_mode(outputs, target, what, false)
}

fn check_mode(outputs: &[&Tensor], target: &Target, what: &str, checked: bool) -> usize {
    let kernels = kernels_checked(outputs, target, checked);
    for (k, source) in kernels.iter().enumerate() {
        assert_eq!(
            declared(&source.wgsl),
            expected(source),
            "{what}, kernel {k}: declared bindings differ from bindings()\n{}",
            source.wgsl
        );
    }
    kernels.len()
}

fn input(shape: &[usize], dev: &Device) -> Tensor {
    let n: usize = shape.iter().product();
    Tensor::from_vec(vec![0.5f32; n], shape, dev).expect("input")
}

#[test]
fn declared_bindings_are_the_binding_list_for_every_kernel_kind() {
    let dev = Device::cpu_with(DeviceConfig::default());
    let lavapipe = Target::lavapipe();
    let x = input(&[64, 128], &dev);
    let w = input(&[96, 128], &dev);
    let odd = input(&[7, 9], &dev);
    let cases: Vec<(Tensor, &str)> = vec![
        ((&x * 2.0 + 1.0).tanh(), "elementwise vec4 with parameters"),
        (odd.exp(), "elementwise scalar without parameters"),
        (x.sum([1], false), "reduction per invocation"),
        (
            input(&[4, 4096], &dev).max([1], true),
            "reduction workgroup tree",
        ),
        (input(&[1 << 18], &dev).sum_all(), "split reduction"),
        (x.softmax(-1), "softmax vec4"),
        (odd.log_softmax(0), "softmax over a strided axis"),
        ((x.matmul(&w.t()) + 1.0).relu(), "matmul with epilogue"),
        (
            crate::nn::functional::layer_norm(&x, &[128], None, None, 1e-5),
            "row normalisation",
        ),
    ];
    for (t, what) in &cases {
        check(&[t], &lavapipe, what);
    }
    for matmul in [MatmulKernel::Tiled, MatmulKernel::Blocked] {
        let target = Target {
            matmul,
            ..Target::lavapipe()
        };
        check(&[&x.matmul(&w.t())], &target, &format!("{matmul:?} matmul"));
    }
    // The lane matmul brings two packing kernels.
    assert_eq!(check(&[&x.matmul(&w.t())], &lavapipe, "lane matmul"), 3);
    // Bindings of 1 KiB: every buffer here is bound in several parts.
    let tiny = Target {
        binding_part_bytes: 1024,
        ..Target::lavapipe()
    };
    let y = (&x * 2.0 + &x.t().reshape([64, 128])).exp();
    check(&[&y, &x.sum_all()], &tiny, "buffers in parts");
    // A strided view of a stored buffer, copied out, reads the buffer's
    // last part but writes its four elements alone: one output part.
    let big = Tensor::from_vec(vec![0.5f32; 4096], [4096], &dev).expect("big");
    let tail = big.slice(0, 4088, 4096, 2);
    let kernels = kernels_of(&[&tail], &tiny);
    assert_eq!(kernels.len(), 1);
    assert_eq!(kernels[0].parts(false), [16]);
    assert_eq!(kernels[0].parts(true), [1]);
    check(&[&tail], &tiny, "strided view copied out");
    // Anomaly mode: each kernel that checks binds the flags last (after
    // the lane matmul's textures too).
    for (t, what) in &cases {
        check_mode(&[t], &lavapipe, what, true);
    }
    let index = Tensor::from_vec(vec![1i32, 0], [2], &dev).expect("index");
    check_mode(&[&x.index_select(0, &index)], &lavapipe, "gather", true);
    let checked = kernels_checked(&[&(&x * 2.0).log()], &lavapipe, true);
    assert!(
        checked
            .iter()
            .all(|k| k.bindings().any(|b| b == Binding::Checks)),
        "every kernel checks its log"
    );
}

/// The strategy each kernel was generated with, for the workloads whose
/// kernels were tuned: a W2-sized sum, a W3-sized softmax, a matmul on
/// lavapipe (two packing kernels, then the lane kernel), W1's chain.
#[test]
fn kernels_carry_the_strategy_they_were_generated_with() {
    let dev = Device::cpu_with(DeviceConfig::default());
    let lavapipe = Target::lavapipe();
    let strategies = |t: &Tensor| -> Vec<Strategy> {
        kernels_of(&[t], &lavapipe)
            .iter()
            .map(|k| k.strategy)
            .collect()
    };
    let big = input(&[1 << 24], &dev);
    assert_eq!(
        strategies(&big.sum_all()),
        vec![
            Strategy::Reduce(ReduceStrategy::SumByFours),
            Strategy::Reduce(ReduceStrategy::WorkgroupTree)
        ]
    );
    assert_eq!(
        strategies(&input(&[4096, 1024], &dev).softmax(-1)),
        vec![Strategy::Softmax(SoftmaxStrategy::RowPerInvocationVec4)]
    );
    let (a, b) = (input(&[64, 128], &dev), input(&[128, 96], &dev));
    assert_eq!(
        strategies(&a.matmul(&b)),
        vec![
            Strategy::Pack,
            Strategy::Pack,
            Strategy::Matmul {
                kernel: lavapipe.matmul,
                // 64 rows in two tiles of 32; 24 texels of columns in
                // three tiles of 8 lanes (none idle).
                tile: Some(crate::kernel::LaneTile {
                    rows: 32,
                    lanes: 8,
                    texels: 1,
                    a_in_place: false,
                    a_vec4: false,
                    a_transposed: false,
                    b_transposed: false,
                    b_in_place: false
                }),
                // Rows of 96 columns: stored four at a time.
                vec4_out: true,
            }
        ]
    );
    let x = input(&[1 << 12], &dev);
    let w1 = ((&x * 2.0 + 1.0).tanh() - &x).sigmoid() * &x + 0.5;
    assert_eq!(strategies(&w1), vec![Strategy::Elementwise { vec4: true }]);
}
