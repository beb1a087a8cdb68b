//! `split`, `chunk`, `repeat_interleave`, `eye`, `linspace` and
//! `randint` with PyTorch's semantics (values written out here from its
//! documented rules), gradients included, on both backends.

mod common;

use common::devices;
use lazywgpu::{DType, Tensor};

#[test]
fn split_and_chunk_give_pytorchs_pieces() {
    for dev in devices() {
        let x = Tensor::from_vec((0..10).map(|v| v as f32).collect(), [2, 5], &dev).unwrap();
        let sizes = |ps: &[Tensor]| ps.iter().map(|p| p.shape()[1]).collect::<Vec<_>>();
        assert_eq!(sizes(&x.split(2, 1)), [2, 2, 1]);
        assert_eq!(sizes(&x.chunk(3, 1)), [2, 2, 1]);
        assert_eq!(sizes(&x.chunk(5, -1)), [1, 1, 1, 1, 1]);
        assert_eq!(sizes(&x.split_sizes(&[1, 4], 1)), [1, 4]);
        // Six elements in four chunks of ceil(6/4) = 2: three chunks.
        let y = Tensor::zeros([6], &dev);
        assert_eq!(y.chunk(4, 0).len(), 3);
        let last = &x.split(2, 1)[2];
        assert_eq!(last.to_vec::<f32>().unwrap(), [4.0, 9.0]);
        // The pieces are views: gradients land in their places.
        x.requires_grad_(true);
        let parts = x.chunk(2, 0);
        ((&parts[0] * 2.0f32).sum_all() + (&parts[1] * 3.0f32).sum_all()).backward();
        let g = x.grad().unwrap().to_vec::<f32>().unwrap();
        assert_eq!(g, [2.0, 2.0, 2.0, 2.0, 2.0, 3.0, 3.0, 3.0, 3.0, 3.0]);
    }
}

#[test]
fn repeat_interleave_repeats_each_element_in_place() {
    for dev in devices() {
        let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], [2, 2], &dev).unwrap();
        x.requires_grad_(true);
        let r0 = x.repeat_interleave(2, Some(0));
        assert_eq!(r0.shape(), [4, 2]);
        assert_eq!(
            r0.to_vec::<f32>().unwrap(),
            [1.0, 2.0, 1.0, 2.0, 3.0, 4.0, 3.0, 4.0]
        );
        let r1 = x.repeat_interleave(3, Some(-1));
        assert_eq!(r1.shape(), [2, 6]);
        assert_eq!(
            r1.to_vec::<f32>().unwrap(),
            [1.0, 1.0, 1.0, 2.0, 2.0, 2.0, 3.0, 3.0, 3.0, 4.0, 4.0, 4.0]
        );
        let flat = x.repeat_interleave(2, None);
        assert_eq!(
            flat.to_vec::<f32>().unwrap(),
            [1.0, 1.0, 2.0, 2.0, 3.0, 3.0, 4.0, 4.0]
        );
        r1.sum_all().backward();
        assert_eq!(x.grad().unwrap().to_vec::<f32>().unwrap(), [3.0; 4]);
    }
}

#[test]
fn eye_and_linspace_match_pytorch() {
    for dev in devices() {
        let e = Tensor::eye(2, 3, &dev);
        assert_eq!(e.dtype(), DType::F32);
        assert_eq!(e.to_vec::<f32>().unwrap(), [1.0, 0.0, 0.0, 0.0, 1.0, 0.0]);
        let l = Tensor::linspace(0.0, 1.0, 5, &dev);
        assert_eq!(l.to_vec::<f32>().unwrap(), [0.0, 0.25, 0.5, 0.75, 1.0]);
        // PyTorch's values for linspace(-1, 1, 4) and (0, 1, 7): the second
        // half counted down from the end.
        let l = Tensor::linspace(-1.0, 1.0, 4, &dev)
            .to_vec::<f32>()
            .unwrap();
        assert_eq!(l, [-1.0, -1.0 + 2.0 / 3.0, 1.0 - 2.0 / 3.0, 1.0]);
        let l = Tensor::linspace(0.0, 1.0, 7, &dev).to_vec::<f32>().unwrap();
        let step = 1.0f32 / 6.0;
        assert_eq!(l[2], 2.0 * step);
        assert_eq!(l[4], 1.0 - 2.0 * step);
        assert_eq!(l[6], 1.0);
        assert_eq!(
            Tensor::linspace(3.0, 9.0, 1, &dev).to_vec::<f32>().unwrap(),
            [3.0]
        );
        assert_eq!(Tensor::linspace(3.0, 9.0, 0, &dev).shape(), [0]);
    }
}

#[test]
fn randint_draws_seeded_integers_in_range() {
    for dev in devices() {
        dev.manual_seed(3);
        let r = Tensor::randint(-2, 5, [20_000], &dev);
        assert_eq!(r.dtype(), DType::I64);
        let v = r.to_vec::<i64>().unwrap();
        let mut counts = [0usize; 7];
        for &k in &v {
            assert!((-2..5).contains(&k), "{k}");
            counts[(k + 2) as usize] += 1;
        }
        // Each of 7 values about 20000/7 = 2857 times (5 sigma: ~230).
        for c in counts {
            assert!((2600..3120).contains(&c), "{counts:?}");
        }
        dev.manual_seed(3);
        let again = Tensor::randint(-2, 5, [20_000], &dev)
            .to_vec::<i64>()
            .unwrap();
        assert_eq!(again, v);
    }
}
