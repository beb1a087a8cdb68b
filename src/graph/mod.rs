//! The traced graph: nodes and ops, collection of a step's graph, and its
//! structural cache key.

mod collect;
mod explain;
mod node;
pub mod op;
pub mod semantics;

pub(crate) use collect::{GKind, GNode, Graph, GraphKey};
pub(crate) use explain::Recompile;
pub(crate) use node::{Node, NodeState, attribute_to, record_as};
