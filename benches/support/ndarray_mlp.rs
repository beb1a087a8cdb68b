//! W5 in plain ndarray, the CPU yardstick: the 784-128-10 MLP (ReLU,
//! batch 64, cross-entropy, SGD lr 0.01) with its backward pass written
//! out by hand.

use ndarray::{Array1, Array2, Axis};

/// Weights, a fixed batch, and the step.
pub struct Mlp {
    w1: Array2<f32>,
    b1: Array1<f32>,
    w2: Array2<f32>,
    b2: Array1<f32>,
    x: Array2<f32>,
    y: Vec<usize>,
}

impl Mlp {
    /// Deterministic weights in PyTorch's init range and a fixed batch.
    #[allow(clippy::new_without_default)]
    pub fn new() -> Mlp {
        let u = |i: usize, bound: f32| {
            ((i * 2654435761) % 10007) as f32 / 10007.0 * 2.0 * bound - bound
        };
        Mlp {
            w1: Array2::from_shape_fn((784, 128), |(i, j)| u(i * 128 + j, 1.0 / 28.0)),
            b1: Array1::from_shape_fn(128, |i| u(i + 7, 1.0 / 28.0)),
            w2: Array2::from_shape_fn((128, 10), |(i, j)| u(i * 10 + j + 3, 1.0 / 128f32.sqrt())),
            b2: Array1::from_shape_fn(10, |i| u(i + 11, 1.0 / 128f32.sqrt())),
            x: Array2::from_shape_fn((64, 784), |(i, j)| u(i * 784 + j + 5, 1.0)),
            y: (0..64).map(|i| i % 10).collect(),
        }
    }

    /// One forward + backward + update; returns the loss.
    pub fn step(&mut self, lr: f32) -> f32 {
        let n = self.x.nrows() as f32;
        let h_pre = self.x.dot(&self.w1) + &self.b1;
        let h = h_pre.mapv(|v| v.max(0.0));
        let logits = h.dot(&self.w2) + &self.b2;
        let max = logits.map_axis(Axis(1), |r| r.fold(f32::NEG_INFINITY, |a, &b| a.max(b)));
        let mut p = &logits - &max.insert_axis(Axis(1));
        p.mapv_inplace(f32::exp);
        let s = p.sum_axis(Axis(1)).insert_axis(Axis(1));
        p /= &s;
        let mut loss = 0.0;
        for (r, &t) in self.y.iter().enumerate() {
            loss -= p[[r, t]].ln();
            p[[r, t]] -= 1.0;
        }
        let dlogits = p / n;
        let dw2 = h.t().dot(&dlogits);
        let db2 = dlogits.sum_axis(Axis(0));
        let mut dh = dlogits.dot(&self.w2.t());
        dh.zip_mut_with(&h_pre, |d, &z| {
            if z <= 0.0 {
                *d = 0.0
            }
        });
        let dw1 = self.x.t().dot(&dh);
        let db1 = dh.sum_axis(Axis(0));
        self.w1.scaled_add(-lr, &dw1);
        self.b1.scaled_add(-lr, &db1);
        self.w2.scaled_add(-lr, &dw2);
        self.b2.scaled_add(-lr, &db2);
        loss / n
    }
}
