//! Dynamic sizes: one pipeline for a kernel whose sizes change between
//! steps (a batch of 64, then 50, then 33). When a trace site compiles
//! again with the same structure and other sizes, each kernel is lowered
//! for the new sizes as usual (cheap: host work only) and compared with
//! the site's last one: where the two differ only in numeric literals,
//! those literals become reads of a small uniform buffer (`dyn_sizes`)
//! that each executable fills with its own values, and the generic kernel
//! is compiled once. Later sizes lower to the same generic text, so they
//! find its pipeline in the cache and compile nothing. The first sizes of
//! a site keep literal kernels (the static fast path: divisions by
//! constants stay multiplications).
//!
//! Correctness does not rest on guessing which literals depend on a size:
//! a generic kernel is used for new sizes only when their own kernel has
//! the same text but for the generic's dynamic literals, and it is given
//! exactly the values that kernel would have had inline. Anything else (a
//! new literal that differs, another structure) generalises further or
//! compiles as before.

/// A numeric literal of a WGSL text and what it is.
#[derive(Clone, Debug, PartialEq)]
struct Literal {
    /// Byte range in the text.
    start: usize,
    end: usize,
    kind: LiteralKind,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LiteralKind {
    /// `123u`
    U32,
    /// `123i`
    I32,
    /// `1.5`, `2e-3`, `4.0`: an f32 where we print them.
    Float,
    /// A bare integer or a hexadecimal literal: left as it is (an array
    /// length or workgroup size must stay a constant).
    Fixed,
}

/// The numeric literals of `text`, in order (identifiers such as `v12`,
/// `vec4` or `in0_p1` hold digits but no literal).
fn literals(text: &str) -> Vec<Literal> {
    let bytes = text.as_bytes();
    let ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        // Comments (dumped kernels name each line's node and source line)
        // hold no literal.
        if bytes[i] == b'/' && bytes.get(i + 1) == Some(&b'/') {
            while i < bytes.len() && bytes[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        let starts = bytes[i].is_ascii_digit() && (i == 0 || !ident(bytes[i - 1]));
        if !starts {
            i += 1;
            continue;
        }
        let start = i;
        if bytes[i] == b'0' && bytes.get(i + 1).is_some_and(|&b| b == b'x' || b == b'X') {
            i = digits_end(bytes, i + 2, u8::is_ascii_hexdigit);
            if bytes.get(i).is_some_and(|&b| b == b'u' || b == b'i') {
                i += 1;
            }
            out.push(Literal {
                start,
                end: i,
                kind: LiteralKind::Fixed,
            });
            continue;
        }
        let (end, float) = decimal_end(bytes, i);
        i = end;
        let kind = match bytes.get(i) {
            Some(b'u') if !float => {
                i += 1;
                LiteralKind::U32
            }
            Some(b'i') if !float => {
                i += 1;
                LiteralKind::I32
            }
            Some(b'f') if float => {
                i += 1;
                LiteralKind::Float
            }
            _ if float => LiteralKind::Float,
            _ => LiteralKind::Fixed,
        };
        // A literal glued to an identifier character is not one.
        if bytes.get(i).is_some_and(|&b| ident(b)) {
            while i < bytes.len() && ident(bytes[i]) {
                i += 1;
            }
            continue;
        }
        out.push(Literal {
            start,
            end: i,
            kind,
        });
    }
    out
}

/// The end of the run of bytes from `i` that `digit` accepts.
fn digits_end(bytes: &[u8], mut i: usize, digit: fn(&u8) -> bool) -> usize {
    while bytes.get(i).is_some_and(digit) {
        i += 1;
    }
    i
}

/// The end of the decimal number starting at `i` (before any suffix), and
/// whether it has a fraction or an exponent (a float).
fn decimal_end(bytes: &[u8], i: usize) -> (usize, bool) {
    let mut i = digits_end(bytes, i, u8::is_ascii_digit);
    let mut float = false;
    if bytes.get(i) == Some(&b'.') && bytes.get(i + 1).is_some_and(u8::is_ascii_digit) {
        float = true;
        i = digits_end(bytes, i + 1, u8::is_ascii_digit);
    }
    if bytes.get(i).is_some_and(|&b| b == b'e' || b == b'E') {
        let mut j = i + 1;
        if bytes.get(j).is_some_and(|&b| b == b'+' || b == b'-') {
            j += 1;
        }
        if bytes.get(j).is_some_and(u8::is_ascii_digit) {
            float = true;
            i = digits_end(bytes, j, u8::is_ascii_digit);
        }
    }
    (i, float)
}

/// The 32-bit pattern of a literal's value, as its kernel reads it.
fn bits(text: &str, lit: &Literal) -> Option<u32> {
    let body = &text[lit.start..lit.end];
    match lit.kind {
        LiteralKind::U32 => body.trim_end_matches('u').parse::<u32>().ok(),
        LiteralKind::I32 => body
            .trim_end_matches('i')
            .parse::<i32>()
            .ok()
            .map(|v| v as u32),
        LiteralKind::Float => body
            .trim_end_matches('f')
            .parse::<f32>()
            .ok()
            .map(f32::to_bits),
        LiteralKind::Fixed => None,
    }
}

/// The text with each literal and comment cut out (the structure two
/// kernels must share to be one generic kernel).
fn skeleton(text: &str, lits: &[Literal]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for l in lits {
        push_code(&mut out, &text[at..l.start]);
        out.push('#');
        at = l.end;
    }
    push_code(&mut out, &text[at..]);
    out
}

/// Appends `chunk` (text between two literals) without its comments.
fn push_code(out: &mut String, chunk: &str) {
    for (i, line) in chunk.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        // Annotated lines end in spaces before their comment.
        out.push_str(
            line.split_once("//")
                .map_or(line, |(code, _)| code.trim_end()),
        );
    }
}

/// A kernel made generic over some of its literals.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Generic {
    /// The WGSL, reading the dynamic literals from `dyn_sizes` (declared
    /// at binding `binding`).
    pub text: String,
    /// Which literals (by order in the text) are dynamic.
    pub dynamic: Vec<usize>,
    /// The values this kernel's sizes give them, in `dynamic`'s order.
    pub values: Vec<u32>,
}

/// Makes `new` (a kernel's text for the new sizes) generic against
/// `before` (the same kernel's text for the site's last sizes) and the
/// literals already dynamic there (`known`): the literals that differ join
/// them. `binding` is where `dyn_sizes` is declared. `None` when the two
/// differ in anything but literals, a differing literal must stay a
/// constant, or nothing differs.
pub(crate) fn generalize(
    before: &str,
    new: &str,
    known: &[usize],
    binding: usize,
) -> Option<Generic> {
    let (lb, ln) = (literals(before), literals(new));
    if lb.len() != ln.len() || skeleton(before, &lb) != skeleton(new, &ln) {
        return None;
    }
    let mut dynamic: Vec<usize> = known.to_vec();
    for (i, (a, b)) in lb.iter().zip(&ln).enumerate() {
        if before[a.start..a.end] != new[b.start..b.end] && !dynamic.contains(&i) {
            dynamic.push(i);
        }
    }
    dynamic.sort_unstable();
    if dynamic.is_empty() {
        return None;
    }
    let mut values = Vec::with_capacity(dynamic.len());
    let mut text = String::with_capacity(new.len() + 64);
    let mut at = 0;
    for (slot, &i) in dynamic.iter().enumerate() {
        let l = ln.get(i)?;
        values.push(bits(new, l)?);
        let word = format!("dyn_sizes[{}][{}]", slot / 4, slot % 4);
        text.push_str(&new[at..l.start]);
        text.push_str(&match l.kind {
            LiteralKind::U32 => word,
            LiteralKind::I32 => format!("bitcast<i32>({word})"),
            LiteralKind::Float => format!("bitcast<f32>({word})"),
            LiteralKind::Fixed => return None,
        });
        at = l.end;
    }
    text.push_str(&new[at..]);
    text.push_str(&format!(
        "@group(0) @binding({binding}) var<uniform> dyn_sizes: array<vec4<u32>, {}>;\n",
        values.len().div_ceil(4)
    ));
    Some(Generic {
        text,
        dynamic,
        values,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const B64: &str = "fn main() {\n let gi = wid.x * 256u + lid;\n if (gi >= 50176u) { return; }\n let c1: u32 = gi / 784u;  // n3 div src/a.rs:12:5\n let v2: vec4<f32> = in0[gi] * 0.015625;\n out0_p1[gi] = v2 + f32(3i) + 0x7f800000u;\n}\n";

    #[test]
    fn literals_are_found_and_identifiers_are_not() {
        let kinds: Vec<(String, LiteralKind)> = literals(B64)
            .iter()
            .map(|l| (B64[l.start..l.end].to_string(), l.kind))
            .collect();
        assert_eq!(
            kinds,
            vec![
                ("256u".into(), LiteralKind::U32),
                ("50176u".into(), LiteralKind::U32),
                ("784u".into(), LiteralKind::U32),
                ("0.015625".into(), LiteralKind::Float),
                ("3i".into(), LiteralKind::I32),
                ("0x7f800000u".into(), LiteralKind::Fixed),
            ]
        );
    }

    #[test]
    fn literals_that_differ_become_reads_of_the_sizes_buffer() {
        // Batch 64 -> 50: the element count and the 1/64 scale change.
        let b50 = B64.replace("50176u", "39200u").replace("0.015625", "0.02");
        let g = generalize(B64, &b50, &[], 3).expect("same structure");
        assert_eq!(g.dynamic, vec![1, 3]);
        assert_eq!(g.values, vec![39200, 0.02f32.to_bits()]);
        assert!(g.text.contains("if (gi >= dyn_sizes[0][0])"), "{}", g.text);
        assert!(g.text.contains("* bitcast<f32>(dyn_sizes[0][1])"));
        assert!(g.text.contains("gi / 784u"), "static sizes stay literals");
        assert!(
            g.text
                .contains("@binding(3) var<uniform> dyn_sizes: array<vec4<u32>, 1>")
        );
        // Batch 33 against 50, with the same literals known dynamic: the
        // same generic text, other values.
        let b33 = B64
            .replace("50176u", "25872u")
            .replace("0.015625", "0.030303031");
        let g33 = generalize(&b50, &b33, &g.dynamic, 3).expect("same structure");
        assert_eq!(g33.text, g.text);
        assert_eq!(g33.values[0], 25872);
    }

    #[test]
    fn comments_do_not_count() {
        // Dumped kernels name the source line of each node: another line
        // for the same node is no other structure.
        let b50 = B64
            .replace("50176u", "39200u")
            .replace("src/a.rs:12:5", "src/b.rs:80:1");
        let g = generalize(B64, &b50, &[], 3).expect("same structure");
        assert_eq!(g.dynamic, vec![1]);
    }

    #[test]
    fn another_structure_or_a_constant_that_differs_is_not_generic() {
        let other = B64.replace("gi / 784u", "gi % 784u");
        assert_eq!(generalize(B64, &other, &[], 0), None);
        let hex = B64.replace("0x7f800000u", "0x7f800001u");
        assert_eq!(generalize(B64, &hex, &[], 0), None);
        assert_eq!(generalize(B64, B64, &[], 0), None, "nothing differs");
    }
}
