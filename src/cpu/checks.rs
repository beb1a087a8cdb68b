//! Anomaly mode on the CPU reference: the checks the GPU kernels make
//! (`kernel::ir::Check`), made on each node's whole value as it is
//! computed, so that both backends name the same op and line.

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::graph::op::Op;
use crate::graph::semantics::indexed_axis_len;
use crate::graph::{GKind, Graph};

use super::Arr;

/// Checks node `i` of `graph`, whose value is `value` and whose inputs'
/// values are `inputs`: arithmetic that made NaN or infinity from finite
/// inputs, a kernel root's NaN, an index outside its axis.
pub(super) fn check(graph: &Graph, i: usize, value: &Arr, inputs: &[&Arr]) -> Result<()> {
    let node = &graph.key.nodes[i];
    let GKind::Op { op, .. } = &node.kind else {
        return Ok(());
    };
    let location = || graph.locations[i].to_string();
    let f32_values = |a: &Arr| matches!(a, Arr::F32(_)).then(|| a.to_f64());
    match op {
        Op::Unary(_) | Op::Binary(_) if node.dtype == DType::F32 => {
            let out = value.to_f64();
            let ins: Vec<Vec<f64>> = inputs.iter().filter_map(|a| f32_values(a)).collect();
            let produced = (0..out.len()).find(|&j| {
                !out[j].is_finite() && ins.iter().all(|x| x.get(j).is_none_or(|v| v.is_finite()))
            });
            match produced {
                Some(j) => Err(Error::NonFinite {
                    op: graph.op_label(i),
                    location: location(),
                    what: format!("{} at element {j} from finite inputs", out[j]),
                }),
                None => Ok(()),
            }
        }
        _ if op.is_kernel_root() && node.dtype == DType::F32 => {
            match value.to_f64().iter().position(|v| v.is_nan()) {
                Some(j) => Err(Error::NonFinite {
                    op: graph.op_label(i),
                    location: location(),
                    what: format!("NaN at element {j}"),
                }),
                None => Ok(()),
            }
        }
        Op::Gather(_) | Op::ScatterAdd(_) => {
            let size = indexed_axis_len(&graph.key.nodes, i).unwrap_or(0);
            let index = inputs[1].to_f64();
            match index.iter().position(|&k| k < 0.0 || k >= size as f64) {
                Some(j) => Err(Error::IndexOutOfRange {
                    op: graph.op_label(i),
                    location: location(),
                    detail: format!("index {} at element {j}, axis of length {size}", index[j]),
                }),
                None => Ok(()),
            }
        }
        _ => Ok(()),
    }
}
