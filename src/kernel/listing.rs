//! The kernel IR in its own notation, for dumps, golden files and tests
//! (`LAZYWGPU_DUMP` writes it beside the WGSL): `v3: f32 = Mul(v1, v2)
//! ; n7`. A second printer of the same values as the WGSL printer
//! (`codegen::render`), which shares no code with it: what both print
//! is decided in the IR alone.

use std::fmt;

use super::ir::{Builtin, Check, CoopAccess, CoopMemory, Expr, Inst, PartAccess};

/// A cooperative matrix's place in the IR notation:
/// `in0[offset; stride s, rows]`.
struct CoopPlace<'a>(&'a CoopAccess);

impl fmt::Display for CoopPlace<'_> {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        let a = self.0;
        let major = if a.row_major { "rows" } else { "columns" };
        write!(
            f,
            "{}[{}; stride {}, {major}]",
            CoopMemoryName(a.memory),
            IrExpr(&a.offset),
            IrExpr(&a.stride)
        )
    }
}

/// A buffer's or workgroup array's name.
struct CoopMemoryName(CoopMemory);

impl fmt::Display for CoopMemoryName {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self.0 {
            CoopMemory::Buffer(b) => write!(f, "{b}"),
            CoopMemory::Workgroup(var) => write!(f, "{var}"),
        }
    }
}

/// Prints an expression in the IR notation.
pub(crate) struct IrExpr<'a>(pub &'a Expr);

impl fmt::Display for IrExpr<'_> {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        let e = |x: &Expr| IrExpr(x).to_string();
        match self.0 {
            Expr::Var(v) => write!(f, "{v}"),
            Expr::Bool(b) => write!(f, "{b}"),
            Expr::Invocation => f.write_str("gi"),
            Expr::Local => f.write_str("lid"),
            Expr::SubgroupLane => f.write_str("sid"),
            Expr::Index { base, index } => write!(f, "{}[{}]", e(base), e(index)),
            Expr::Call { f: func, args } => {
                let args: Vec<String> = args.iter().map(e).collect();
                let name = match func {
                    Builtin::Min => "min",
                    Builtin::Max => "max",
                    Builtin::Any => "any",
                    Builtin::Vec4 => "vec4",
                    Builtin::Lanes => "lanes",
                    Builtin::ToF16 => "to_f16",
                    Builtin::Bits => "bits",
                    Builtin::SubgroupBroadcast => "subgroup_broadcast",
                    Builtin::SubgroupShuffle => "subgroup_shuffle",
                    Builtin::SubgroupShuffleXor => "subgroup_shuffle_xor",
                    Builtin::SubgroupAdd => "subgroup_add",
                    Builtin::SubgroupMax => "subgroup_max",
                    Builtin::TextureLoad(t) => {
                        return write!(f, "texture_load {t}({})", args.join(", "));
                    }
                };
                write!(f, "{name}({})", args.join(", "))
            }
            Expr::U32(v) => write!(f, "{v}u"),
            Expr::I32(v) => write!(f, "{v}i"),
            Expr::Sized { lit, .. } => write!(f, "{}", e(lit)),
            Expr::Size { slot, dtype } => write!(f, "size[{slot}] as {dtype}"),
            Expr::Param { word, dtype } => write!(f, "param[{word}] as {dtype}"),
            Expr::Load { buffer, index } => write!(f, "load {buffer}[{}]", e(index)),
            Expr::NonZero { x, .. } => write!(f, "nonzero({})", e(x)),
            Expr::FromBool { x, .. } => write!(f, "from_bool({})", e(x)),
            Expr::Unary { op, x, .. } => write!(f, "{op:?}({})", e(x)),
            Expr::Binary { op, a, b, .. } => write!(f, "{op:?}({}, {})", e(a), e(b)),
            Expr::Cast { to, x, .. } => write!(f, "cast<{to}>({})", e(x)),
            Expr::Round { dtype, x, .. } => write!(f, "round<{dtype}>({})", e(x)),
            Expr::Select {
                cond,
                then,
                otherwise,
            } => write!(f, "({} ? {} : {})", e(cond), e(then), e(otherwise)),
            Expr::Construct { ty, x } => write!(f, "{ty}({})", e(x)),
            Expr::Arith { op, a, b } => write!(f, "({} {} {})", e(a), op.symbol(), e(b)),
            Expr::ClampIndex { k, top } => write!(f, "clamp_index({}, {})", e(k), e(top)),
            Expr::F32(bits) => write!(f, "{:?}f", f32::from_bits(*bits)),
            Expr::IsNonFinite { x, .. } => write!(f, "nonfinite({})", e(x)),
            Expr::IsNan { x, .. } => write!(f, "nan({})", e(x)),
            Expr::Not(x) => write!(f, "!{}", e(x)),
            Expr::Rng {
                normal,
                params,
                index,
            } => {
                let kind = if *normal { "normal" } else { "uniform" };
                write!(
                    f,
                    "rng_{kind}(param[{params}..{}], {})",
                    params + 4,
                    e(index)
                )
            }
        }
    }
}

/// `header`, `body` one level deeper, then the closing brace.
fn nested(header: &str, body: &[Inst], depth: usize, out: &mut String) -> fmt::Result {
    use std::fmt::Write;
    let pad = "  ".repeat(depth);
    writeln!(out, "{pad}{header}")?;
    print_body(body, depth + 1, out);
    writeln!(out, "{pad}}}")
}

/// Prints a body in the IR notation, one instruction a line, nested
/// blocks indented.
pub(crate) fn print_body(body: &[Inst], depth: usize, out: &mut String) {
    use std::fmt::Write;
    let pad = "  ".repeat(depth);
    for inst in body {
        let _ = match inst {
            Inst::If { cond, body } => nested(&format!("if {} {{", IrExpr(cond)), body, depth, out),
            Inst::Loop {
                counter,
                count,
                unroll,
                body,
            } => nested(
                &format!("for {counter} in 0..{} unroll {unroll} {{", IrExpr(count)),
                body,
                depth,
                out,
            ),
            other => writeln!(
                out,
                "{pad}{}",
                variable_line(other)
                    .or_else(|| memory_line(other))
                    .unwrap_or_default()
            ),
        };
    }
}

/// An instruction on private variables and arrays, or `None`.
fn variable_line(inst: &Inst) -> Option<String> {
    Some(match inst {
        Inst::Let {
            var,
            ty,
            value,
            node,
        } => {
            let node = node.map(|n| format!("  ; n{n}")).unwrap_or_default();
            format!("{var}: {ty} = {}{node}", IrExpr(value))
        }
        Inst::Declare { var, ty, init } => match init {
            Some(init) => format!("var {var}: {ty} = {}", IrExpr(init)),
            None => format!("var {var}: {ty}"),
        },
        Inst::Accumulate { var, value } => format!("{var} += {}", IrExpr(value)),
        Inst::Assign { var, value } => format!("{var} = {}", IrExpr(value)),
        Inst::DeclareArray { var, element, len } => format!("var {var}: [{element}; {len}]"),
        Inst::SetElement { var, index, value } => {
            format!("{var}[{}] = {}", IrExpr(index), IrExpr(value))
        }
        Inst::Break => "break".to_string(),
        Inst::Check { check, node } => {
            let what = match check {
                Check::NonFinite { value, .. } => format!("finite {}", IrExpr(value)),
                Check::Nan { value, .. } => format!("not nan {}", IrExpr(value)),
                Check::Index { index, size } => {
                    format!("{} in 0..{}", IrExpr(index), IrExpr(size))
                }
            };
            format!("check {what}  ; n{node}")
        }
        _ => return None,
    })
}

/// An instruction on memory, textures, cooperative matrices or the
/// workgroup, or `None`.
fn memory_line(inst: &Inst) -> Option<String> {
    Some(match inst {
        Inst::Barrier => "barrier".to_string(),
        Inst::StorageBarrier => "storage_barrier".to_string(),
        Inst::AtomicMax {
            array,
            index,
            value,
        } => format!("atomic_max {array}[{}] = {}", IrExpr(index), IrExpr(value)),
        Inst::CoopLoad { var, matrix, from } => format!(
            "var {var}: coop<{}x{}, {}, {:?}> = coop_load {}",
            matrix.size,
            matrix.size,
            matrix.dtype,
            matrix.role,
            CoopPlace(from)
        ),
        Inst::CoopMultiplyAdd { acc, a, b } => format!("{acc} = coop_mul_add({a}, {b}, {acc})"),
        Inst::CoopStore { var, to } => format!("coop_store {} = {var}", CoopPlace(to)),
        Inst::TextureStore {
            texture,
            x,
            y,
            layer,
            value,
        } => format!(
            "texture_store {texture}[{}, {}, {}] = {}",
            IrExpr(x),
            IrExpr(y),
            IrExpr(layer),
            IrExpr(value)
        ),
        Inst::Parts {
            buffer,
            parts,
            index,
            access,
            ..
        } => match access {
            PartAccess::Read(var) => format!(
                "{var} = load {buffer}[{}] (in {parts} parts)",
                IrExpr(index)
            ),
            PartAccess::Write(value) => format!(
                "store {buffer}[{}] = {} (in {parts} parts)",
                IrExpr(index),
                IrExpr(value)
            ),
        },
        Inst::Store {
            buffer,
            index,
            value,
            node,
        } => format!(
            "store {buffer}[{}] = {}  ; n{node}",
            IrExpr(index),
            IrExpr(value)
        ),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dtype::DType;
    use crate::graph::op::BinaryOp;
    use crate::kernel::ir::{Arith, Ty, Var};

    fn var(id: usize) -> Var {
        Var { prefix: "v", id }
    }

    #[test]
    fn the_ir_prints_one_instruction_a_line() {
        let body = vec![
            Inst::Let {
                var: var(1),
                ty: Ty::F32,
                value: Expr::Param {
                    word: 2,
                    dtype: DType::F32,
                },
                node: Some(4),
            },
            Inst::Let {
                var: var(2),
                ty: Ty::of(DType::F32, true),
                value: Expr::Binary {
                    op: BinaryOp::Mul,
                    operand: DType::F32,
                    vec: true,
                    a: Box::new(Expr::Var(var(1))),
                    b: Box::new(Expr::arith(Arith::Add, Expr::Invocation, Expr::U32(1))),
                },
                node: Some(5),
            },
        ];
        let mut out = String::new();
        print_body(&body, 0, &mut out);
        assert_eq!(
            out,
            "v1: f32 = param[2] as f32  ; n4\nv2: f32x4 = Mul(v1, (gi + 1u))  ; n5\n"
        );
    }
}
