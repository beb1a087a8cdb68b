//! `Display` and `Debug` for tensors. `Display` reads the values (and so
//! computes them); `Debug` never touches the device.

use std::fmt;

use super::Tensor;
use crate::dtype::DType;

/// Past this many elements only the edges of each dimension are shown.
const SUMMARY_THRESHOLD: usize = 1000;
const EDGE_ITEMS: usize = 3;

impl fmt::Display for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let values: Result<Vec<String>, _> = match self.dtype() {
            DType::F32 | DType::F16 | DType::BF16 => self.to_f32_vec().map(|v| {
                // As PyTorch: integral values print as `2.`, others with 4 decimals.
                let integral = v.iter().all(|x| !x.is_finite() || *x == x.trunc());
                v.iter().map(|x| format_f32(*x, integral)).collect()
            }),
            DType::I32 => self
                .to_vec::<i32>()
                .map(|v| v.iter().map(i32::to_string).collect()),
            DType::U32 => self
                .to_vec::<u32>()
                .map(|v| v.iter().map(u32::to_string).collect()),
            DType::I64 => self
                .to_vec::<i64>()
                .map(|v| v.iter().map(i64::to_string).collect()),
            DType::U8 => self
                .to_vec::<u8>()
                .map(|v| v.iter().map(u8::to_string).collect()),
            DType::Bool => self
                .to_vec::<bool>()
                .map(|v| v.iter().map(bool::to_string).collect()),
        };
        match values {
            Ok(values) => {
                let width = values.iter().map(String::len).max().unwrap_or(0);
                let summarize = values.len() > SUMMARY_THRESHOLD;
                f.write_str("tensor(")?;
                write_nested(f, &values, self.shape(), 0, width, summarize)?;
                write!(f, ", shape={:?}, dtype={})", self.shape(), self.dtype())
            }
            Err(e) => write!(
                f,
                "tensor(<unreadable: {e}>, shape={:?}, dtype={})",
                self.shape(),
                self.dtype()
            ),
        }
    }
}

fn format_f32(x: f32, integral: bool) -> String {
    if integral && x.abs() < 1e9 {
        format!("{x:.0}.")
    } else if x.is_finite() && (x.abs() >= 1e5 || (x != 0.0 && x.abs() < 1e-4)) {
        format!("{x:.4e}")
    } else {
        format!("{x:.4}")
    }
}

fn write_nested(
    f: &mut fmt::Formatter<'_>,
    values: &[String],
    shape: &[usize],
    depth: usize,
    width: usize,
    summarize: bool,
) -> fmt::Result {
    let Some((&dim, rest)) = shape.split_first() else {
        return write!(
            f,
            "{:>width$}",
            values.first().map(String::as_str).unwrap_or("")
        );
    };
    let stride: usize = rest.iter().product();
    f.write_str("[")?;
    let shown: Vec<Option<usize>> = if summarize && dim > 2 * EDGE_ITEMS {
        (0..EDGE_ITEMS)
            .map(Some)
            .chain([None])
            .chain((dim - EDGE_ITEMS..dim).map(Some))
            .collect()
    } else {
        (0..dim).map(Some).collect()
    };
    for (k, item) in shown.iter().enumerate() {
        if k > 0 {
            if rest.is_empty() {
                f.write_str(", ")?;
            } else {
                write!(f, ",\n{:indent$}", "", indent = depth + 8)?;
            }
        }
        match item {
            Some(i) => write_nested(
                f,
                &values[i * stride..(i + 1) * stride],
                rest,
                depth + 1,
                width,
                summarize,
            )?,
            None => f.write_str("...")?,
        }
    }
    f.write_str("]")
}

impl fmt::Debug for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let node = self.node();
        write!(
            f,
            "Tensor(shape={:?}, dtype={}, {}, recorded at {})",
            self.shape(),
            self.dtype(),
            if node.is_pending() {
                "pending"
            } else {
                "stored"
            },
            node.location
        )
    }
}
