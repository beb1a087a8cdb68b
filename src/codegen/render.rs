//! Printing the kernel IR (`kernel::ir`) as WGSL. Nothing here decides:
//! each instruction and expression has one spelling, with PyTorch's NaN
//! rules for the graph's ops taken from `exprs`.

use std::fmt::{self, Write};

use crate::dtype::DType;
use crate::kernel::ir::{Buffer, Builtin, CoopMatrix, CoopMemory, Expr, Inst, PartAccess, Ty, Var};
use crate::kernel::{Binding, Declared, Entry, Kernel};

use super::exprs::{
    ERF_FUNCTIONS, HALF_FUNCTIONS, POW_FUNCTION, RNG_FUNCTIONS, TANH_FUNCTIONS, binary_expr,
    cast_expr, is_nan, is_nonfinite, lit, storage_type, unary_expr, value_type,
};

/// The WGSL type of a value.
pub(crate) fn wgsl_type(ty: Ty) -> String {
    value_type(ty.dtype, ty.vec)
}

/// Whether `e` prints as one token (no parentheses needed around it as an
/// operand of an operator).
fn atomic(e: &Expr) -> bool {
    match e {
        // Ops print as infix or prefix expressions (`a + b`, `-a`, a cast
        // to the same type as `a` itself).
        Expr::Arith { .. } | Expr::Unary { .. } | Expr::Binary { .. } | Expr::Cast { .. } => false,
        _ => true,
    }
}

/// `e` as an operand of an operator.
struct Operand<'a>(&'a Expr);

impl fmt::Display for Operand<'_> {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        if atomic(self.0) {
            write!(f, "{}", self.0)
        } else {
            write!(f, "({})", self.0)
        }
    }
}

impl fmt::Display for Expr {
    /// The expression in WGSL.
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            Expr::Var(v) => write!(f, "{v}"),
            Expr::Invocation => f.write_str("gi"),
            Expr::Bool(b) => write!(f, "{b}"),
            Expr::Local => f.write_str("lid"),
            Expr::SubgroupLane => f.write_str("sid"),
            Expr::Index { base, index } => write!(f, "{}[{index}]", Operand(base)),
            Expr::Call { f: func, args } => f.write_str(&call_text(*func, args)),
            Expr::U32(v) => write!(f, "{v}u"),
            Expr::I32(v) => write!(f, "{v}i"),
            Expr::Sized { lit, .. } => write!(f, "{lit}"),
            Expr::Size { slot, dtype } => f.write_str(&size_text(*slot, *dtype)),
            Expr::Param { word, dtype } => f.write_str(&param_text(*word, *dtype)),
            Expr::Load { buffer, index } => f.write_str(&load_text(buffer, &index.to_string())),
            Expr::NonZero { x, vec } => write!(f, "({x} != {})", lit(DType::U32, 0, *vec)),
            Expr::FromBool { x, vec } => write!(
                f,
                "select({}, {}, {x})",
                lit(DType::U32, 0, *vec),
                lit(DType::U32, 1, *vec)
            ),
            // Operands that are expressions of their own are parenthesised:
            // the op's spelling may be infix (`a + b`, `-a`).
            Expr::Unary { op, dtype, vec, x } => f.write_str(&unary_expr(
                *op,
                dtype.compute(),
                &Operand(x).to_string(),
                *vec,
            )),
            Expr::Binary {
                op,
                operand,
                vec,
                a,
                b,
            } => f.write_str(&binary_expr(
                *op,
                operand.compute(),
                &Operand(a).to_string(),
                &Operand(b).to_string(),
                *vec,
            )),
            Expr::Cast { from, to, vec, x } => f.write_str(&cast_expr(
                from.compute(),
                to.compute(),
                &Operand(x).to_string(),
                *vec,
            )),
            Expr::Round { dtype, vec, x } => f.write_str(&round_text(*dtype, *vec, x)),
            Expr::Select {
                cond,
                then,
                otherwise,
            } => write!(f, "select({otherwise}, {then}, {cond})"),
            Expr::Construct { ty, x } => write!(f, "{}({x})", wgsl_type(*ty)),
            Expr::Arith { op, a, b } => {
                write!(f, "{} {} {}", Operand(a), op.symbol(), Operand(b))
            }
            Expr::ClampIndex { k, top } => write!(f, "u32(clamp({k}, 0i, {top}))"),
            Expr::F32(bits) => f.write_str(&f32_literal(*bits)),
            Expr::IsNonFinite { x, vec } => f.write_str(&is_nonfinite(&x.to_string(), *vec)),
            Expr::IsNan { x, vec } => f.write_str(&is_nan(&x.to_string(), *vec)),
            Expr::Not(x) => write!(f, "!{}", Operand(x)),
            Expr::Rng {
                normal,
                params,
                index,
            } => f.write_str(&rng_text(*normal, *params, index)),
        }
    }
}

/// Word `slot` of the dynamic sizes read as `dtype` (the sizes are
/// `vec4<u32>`s, four words each).
fn size_text(slot: usize, dtype: DType) -> String {
    let word = format!("dyn_sizes[{}][{}]", slot / 4, slot % 4);
    reinterpret(&word, dtype)
}

/// Parameter word `word` read as `dtype` (a bool as the word being
/// nonzero).
fn param_text(word: usize, dtype: DType) -> String {
    let word = format!("param_word({word}u)");
    match dtype.compute() {
        DType::Bool => format!("({word} != 0u)"),
        d => reinterpret(&word, d),
    }
}

/// `x` rounded to the precision of `dtype` (f16 or bf16), by the helper
/// function the half-precision prelude defines.
fn round_text(dtype: DType, vec: bool, x: &Expr) -> String {
    let name = if dtype == DType::F16 {
        "f16_round"
    } else {
        "bf16_round"
    };
    format!("{name}{}({x})", if vec { "x4" } else { "" })
}

/// A draw of the RNG prelude's uniform or normal function at `index`,
/// its seed and offset the four parameter words from `params` on.
fn rng_text(normal: bool, params: usize, index: &Expr) -> String {
    let name = if normal { "rng_normal" } else { "rng_uniform" };
    // Seed low and high, offset low and high (`cpu::rng`).
    let p = params;
    format!(
        "{name}(param_word({p}u), param_word({}u), param_word({}u), \
         param_word({}u), {index})",
        p + 1,
        p + 2,
        p + 3
    )
}

/// A `u32` word read as `dtype` (`u32`, `i32` or `f32`).
fn reinterpret(word: &str, dtype: DType) -> String {
    match dtype {
        DType::U32 => word.to_string(),
        d => format!("bitcast<{}>({word})", value_type(d, false)),
    }
}

/// A built-in function applied to `args`.
fn call_text(func: Builtin, args: &[Expr]) -> String {
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let name = match func {
        Builtin::Min => "min",
        Builtin::Max => "max",
        Builtin::Any => "any",
        Builtin::Vec4 => "vec4<f32>",
        Builtin::Lanes => "vec4",
        Builtin::ToF16 => "f16",
        Builtin::Bits => "bitcast<u32>",
        Builtin::SubgroupBroadcast => "subgroupBroadcast",
        Builtin::SubgroupShuffle => "subgroupShuffle",
        Builtin::SubgroupShuffleXor => "subgroupShuffleXor",
        Builtin::SubgroupAdd => "subgroupAdd",
        Builtin::SubgroupMax => "subgroupMax",
        Builtin::TextureLoad(t) => {
            return format!(
                "textureLoad({t}, vec2<u32>({}, {}), {}, 0)",
                args[0], args[1], args[2]
            );
        }
    };
    format!("{name}({})", args.join(", "))
}

/// An f32 literal: Rust's shortest round-trip spelling (always with a
/// point or an exponent, a WGSL float literal), or the bits of a NaN or
/// an infinity.
fn f32_literal(bits: u32) -> String {
    let v = f32::from_bits(bits);
    if v.is_finite() {
        format!("{v:?}")
    } else {
        format!("bitcast<f32>({bits:#010x}u)")
    }
}

/// Element `index` of `buffer` as a value: a 16-bit float widened to
/// `f32` (a `bf16` is the half of its word the index selects, read
/// atomically from an output, whose words are shared with neighbours).
fn load_text(buffer: &Buffer, index: &str) -> String {
    match buffer.half {
        None => format!("{buffer}[{index}]"),
        Some(DType::F16) => format!("f32({buffer}[{index}])"),
        Some(_) if buffer.output => {
            format!("bf16_at(atomicLoad(&{buffer}[({index}) >> 1u]), {index})")
        }
        Some(_) => format!("bf16_at({buffer}[({index}) >> 1u], {index})"),
    }
}

/// The statement storing `value` at element `index` of `buffer`. A 16-bit
/// node's value is already rounded to its dtype where it was computed
/// (`Gen::rounded`), so storing only converts it. A `bf16` replaces its
/// half of a word shared with the neighbouring element, which another
/// invocation may write at the same time: a compare-exchange loop on the
/// word.
fn store_text(buffer: &Buffer, index: &str, value: &str) -> String {
    match buffer.half {
        None => format!("{buffer}[{index}] = {value};"),
        Some(DType::F16) => format!("{buffer}[{index}] = f16({value});"),
        Some(_) => format!(
            "{{ let hi = ({index}) & 1u; let hw = ({index}) >> 1u; \
             let hb = bf16_bits({value}) << (16u * hi); let hm = 0xffffu << (16u * hi); \
             var ho = atomicLoad(&{buffer}[hw]); \
             loop {{ let hr = atomicCompareExchangeWeak(&{buffer}[hw], ho, (ho & ~hm) | hb); \
             if (hr.exchanged) {{ break; }} ho = hr.old_value; }} }}"
        ),
    }
}

/// A whole kernel as a WGSL module: its bindings declared from
/// `Kernel::bindings` alone (binding `i` is entry `i`), the helper
/// functions it calls, its workgroup arrays and its entry point.
/// `origins` (per graph node) annotates each line that computes or
/// stores a node.
pub(crate) fn kernel_wgsl(kernel: &Kernel, origins: Option<&[String]>) -> String {
    let mut out = String::new();
    if kernel.helpers.f16 {
        out.push_str("enable f16;\n");
    }
    if kernel.helpers.cooperative_matrix {
        out.push_str("enable wgpu_cooperative_matrix;\n");
    }
    for (i, declared) in kernel.bindings.iter().enumerate() {
        declare(i, declared, &mut out);
    }
    let helpers = kernel.helpers;
    for (used, text) in [
        (helpers.rng, RNG_FUNCTIONS),
        (helpers.pow, POW_FUNCTION),
        (helpers.erf, ERF_FUNCTIONS),
        (helpers.tanh, TANH_FUNCTIONS),
        (helpers.halves, HALF_FUNCTIONS),
    ] {
        if used {
            out.push_str(text);
        }
    }
    let entry = &kernel.entry;
    out.push('\n');
    for a in &entry.arrays {
        let _ = writeln!(
            out,
            "var<workgroup> {}: array<{}, {}>;",
            a.var,
            array_element_type(a.element),
            a.len
        );
    }
    out.push_str(&entry_point(entry));
    render_body(&kernel.body, origins, &mut out);
    out.push_str("}\n");
    out
}

/// The declaration of binding `i`.
fn declare(i: usize, declared: &Declared, out: &mut String) {
    let Declared {
        binding,
        name,
        element,
    } = declared;
    let _ = match binding {
        Binding::Params {
            uniform_bytes: Some(bytes),
        } => writeln!(
            out,
            "@group(0) @binding({i}) var<uniform> {name}: array<vec4<u32>, {}>;\n\
             fn param_word(i: u32) -> u32 {{ return {name}[i / 4u][i % 4u]; }}",
            bytes / 16
        ),
        Binding::Params {
            uniform_bytes: None,
        } => writeln!(
            out,
            "@group(0) @binding({i}) var<storage, read> {name}: array<u32>;\n\
             fn param_word(i: u32) -> u32 {{ return {name}[i]; }}"
        ),
        Binding::Read { .. } | Binding::Write { .. } => {
            let access = if matches!(binding, Binding::Read { .. }) {
                "read"
            } else {
                "read_write"
            };
            let ty = element.map_or_else(
                || "u32".to_string(),
                |t| match (t.dtype, access) {
                    // bf16 outputs share words between neighbouring invocations.
                    (DType::BF16, "read_write") => "atomic<u32>".to_string(),
                    _ => storage_type(t.dtype, t.vec),
                },
            );
            writeln!(
                out,
                "@group(0) @binding({i}) var<storage, {access}> {name}: array<{ty}>;"
            )
        }
        Binding::Texture { write: true, .. } => writeln!(
            out,
            "@group(0) @binding({i}) var {name}: texture_storage_2d_array<rgba32float, write>;"
        ),
        Binding::Texture { write: false, .. } => writeln!(
            out,
            "@group(0) @binding({i}) var {name}: texture_2d_array<f32>;"
        ),
        Binding::Checks => writeln!(
            out,
            "@group(0) @binding({i}) var<storage, read_write> {name}: array<atomic<u32>, 2>;"
        ),
        Binding::Sizes { vec4s } => writeln!(
            out,
            "@group(0) @binding({i}) var<uniform> {name}: array<vec4<u32>, {vec4s}>;"
        ),
    };
}

/// The opening of `entry`'s entry point through its early return:
/// `gi` the index of the invocation (or, unless `per_invocation`, of the
/// workgroup) over a grid split over y past 65,535 workgroups, a return
/// once `gi` reaches `count`; the subgroup lane as `sid` where asked.
fn entry_point(entry: &Entry) -> String {
    let size = entry.workgroup_size;
    let gi = if entry.per_invocation {
        format!("(wid.y * nwg.x + wid.x) * {size}u + lid")
    } else {
        "wid.y * nwg.x + wid.x".to_string()
    };
    let builtins = if entry.subgroup_id {
        ", @builtin(subgroup_invocation_id) sid: u32"
    } else {
        ""
    };
    format!(
        "@compute @workgroup_size({size})\n\
         fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>, \
         @builtin(local_invocation_index) lid: u32{builtins}) {{\n\
         let gi = {gi};\n\
         if (gi >= {}) {{ return; }}\n",
        entry.count
    )
}

/// Prints `body` as WGSL statements, one a line; `origins` (per graph
/// node) annotates each line that computes or stores a node.
pub(crate) fn render_body(body: &[Inst], origins: Option<&[String]>, out: &mut String) {
    for inst in body {
        match inst {
            Inst::If { cond, body } => {
                let _ = writeln!(out, "    if ({cond}) {{");
                render_body(body, origins, out);
                out.push_str("    }\n");
            }
            Inst::Loop {
                counter,
                count,
                unroll,
                body,
            } => render_loop((*counter, count, *unroll), body, origins, out),
            Inst::Parts {
                buffer,
                parts,
                per_part,
                index,
                access,
            } => {
                render_parts((buffer, *parts, *per_part), index, access, out);
            }
            other => {
                let line = variable_statement(other, origins)
                    .or_else(|| memory_statement(other, origins))
                    .unwrap_or_default();
                let _ = writeln!(out, "    {line}");
            }
        }
    }
}

/// `  // n3 add src/a.rs:12:5` after a line that computes or stores node
/// `node`, when dumping (`origins`).
fn note(origins: Option<&[String]>, node: Option<usize>) -> String {
    match (origins, node) {
        (Some(origins), Some(n)) => format!("  // n{n} {}", origins[n]),
        _ => String::new(),
    }
}

/// A statement on private variables and arrays, or `None`.
fn variable_statement(inst: &Inst, origins: Option<&[String]>) -> Option<String> {
    Some(match inst {
        Inst::Let {
            var,
            ty,
            value,
            node,
        } => format!(
            "let {var}: {} = {value};{}",
            wgsl_type(*ty),
            note(origins, *node)
        ),
        Inst::Declare { var, ty, init } => match init {
            Some(init) => format!("var {var}: {} = {init};", wgsl_type(*ty)),
            None => format!("var {var}: {};", wgsl_type(*ty)),
        },
        Inst::Accumulate { var, value } => format!("{var} = {var} + {};", Operand(value)),
        Inst::Assign { var, value } => format!("{var} = {value};"),
        Inst::DeclareArray { var, element, len } => {
            format!("var {var}: array<{}, {len}>;", wgsl_type(*element))
        }
        Inst::SetElement { var, index, value } => format!("{var}[{index}] = {value};"),
        Inst::Break => "break;".to_string(),
        _ => return None,
    })
}

/// A statement on memory, textures, cooperative matrices or the
/// workgroup, or `None`.
fn memory_statement(inst: &Inst, origins: Option<&[String]>) -> Option<String> {
    Some(match inst {
        Inst::Store {
            buffer,
            index,
            value,
            node,
        } => format!(
            "{}{}",
            store_text(buffer, &index.to_string(), &value.to_string()),
            note(origins, Some(*node))
        ),
        Inst::TextureStore {
            texture,
            x,
            y,
            layer,
            value,
        } => format!("textureStore({texture}, vec2<u32>({x}, {y}), {layer}, {value});"),
        Inst::Barrier => "workgroupBarrier();".to_string(),
        Inst::StorageBarrier => "storageBarrier();".to_string(),
        Inst::CoopLoad { var, matrix, from } => format!(
            "var {var} = coopLoad{}<{}>(&{}[{}], {});",
            if from.row_major { "T" } else { "" },
            coop_type(*matrix),
            coop_memory(from.memory),
            from.offset,
            from.stride
        ),
        Inst::CoopMultiplyAdd { acc, a, b } => format!("{acc} = coopMultiplyAdd({a}, {b}, {acc});"),
        Inst::CoopStore { var, to } => format!(
            "coopStore{}({var}, &{}[{}], {});",
            if to.row_major { "T" } else { "" },
            coop_memory(to.memory),
            to.offset,
            to.stride
        ),
        Inst::AtomicMax {
            array,
            index,
            value,
        } => format!("atomicMax(&{array}[{index}], {value});"),
        Inst::Check { .. } => unreachable!("checks are legalised (kernel::legalise)"),
        _ => return None,
    })
}

/// Element `index` of a buffer bound in `parts` parts of `per_part`
/// elements: an `if` chain choosing the part at run time (see
/// `Inst::Parts`).
fn render_parts(
    (buffer, parts, per_part): (&Buffer, usize, usize),
    index: &Expr,
    access: &PartAccess,
    out: &mut String,
) {
    out.push_str("    ");
    for j in 0..parts {
        if j > 0 {
            out.push_str(" else ");
        }
        if j + 1 < parts {
            let _ = write!(out, "if ({index} < {}u) ", (j + 1) * per_part);
        }
        let part = Buffer {
            part: Some(j),
            ..*buffer
        };
        let local = Expr::arith(
            crate::kernel::ir::Arith::Sub,
            index.clone(),
            Expr::U32((j * per_part) as u64),
        );
        let local = local.to_string();
        let _ = match access {
            PartAccess::Read(var) => write!(out, "{{ {var} = {}; }}", load_text(&part, &local)),
            PartAccess::Write(value) => write!(
                out,
                "{{ {} }}",
                store_text(&part, &local, &value.to_string())
            ),
        };
    }
    out.push('\n');
}

/// A workgroup array's element type: an `f16` array holds real `f16`s
/// (cooperative matrices load them), every other its values' type.
fn array_element_type(element: Ty) -> String {
    if element.dtype == DType::F16 && !element.vec {
        "f16".to_string()
    } else {
        wgsl_type(element)
    }
}

/// The name of the buffer or workgroup array a cooperative matrix is
/// loaded from or stored to.
fn coop_memory(memory: CoopMemory) -> String {
    match memory {
        CoopMemory::Buffer(b) => b.to_string(),
        CoopMemory::Workgroup(var) => var.to_string(),
    }
}

/// The WGSL type of a cooperative matrix (`coop_mat8x8<f32, A>`): its
/// elements are the memory's own (an `f16` matrix holds real `f16`s).
fn coop_type(m: CoopMatrix) -> String {
    format!(
        "coop_mat{0}x{0}<{1}, {2:?}>",
        m.size,
        array_element_type(Ty::scalar(m.dtype)),
        m.role
    )
}

/// `body` for `counter` in `0..count`, `unroll` copies an iteration,
/// each in a block with its own `counter` guarded by `counter < count`
/// (see `Inst::Loop`).
fn render_loop(
    (counter, count, unroll): (Var, &Expr, usize),
    body: &[Inst],
    origins: Option<&[String]>,
    out: &mut String,
) {
    if unroll == 1 {
        let _ = writeln!(
            out,
            "    for (var {counter} = 0u; {counter} < {count}; {counter} = {counter} + 1u) {{"
        );
        render_body(body, origins, out);
        out.push_str("    }\n");
        return;
    }
    let _ = writeln!(
        out,
        "    for (var {counter}_run = 0u; {counter}_run < {count}; {counter}_run = {counter}_run + {unroll}u) {{"
    );
    for u in 0..unroll {
        let _ = writeln!(
            out,
            "    {{ let {counter} = {counter}_run + {u}u; if ({counter} < {count}) {{"
        );
        render_body(body, origins, out);
        out.push_str("    } }\n");
    }
    out.push_str("    }\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::ir::{Arith, Var};

    #[test]
    fn operators_nest_with_parentheses_and_selects_print_in_wgsl_order() {
        let c = Var { prefix: "c", id: 2 };
        let e = Expr::arith(
            Arith::Mul,
            Expr::arith(Arith::Rem, Expr::Invocation, Expr::U32(3)),
            Expr::Var(c),
        );
        assert_eq!(e.to_string(), "(gi % 3u) * c2");
        let h = Var { prefix: "h", id: 1 };
        let s = Expr::select(Expr::Var(h), e, Expr::U32(0));
        assert_eq!(s.to_string(), "select(0u, (gi % 3u) * c2, h1)");
    }

    #[test]
    fn a_read_over_three_parts_is_an_if_chain() {
        let body = [Inst::Parts {
            buffer: Buffer {
                output: false,
                k: 1,
                part: None,
                half: None,
            },
            parts: 3,
            per_part: 10,
            index: Expr::Var(Var { prefix: "q", id: 0 }),
            access: PartAccess::Read(Var { prefix: "s", id: 4 }),
        }];
        let mut out = String::new();
        render_body(&body, None, &mut out);
        assert_eq!(
            out,
            "    if (q0 < 10u) { s4 = in1_p0[q0 - 0u]; } else if (q0 < 20u) { s4 = in1_p1[q0 - 10u]; } else { s4 = in1_p2[q0 - 20u]; }\n"
        );
    }
}
