#!/usr/bin/env python3
"""Sizes the compiler issue tracks, measured on src/ (no arguments):

- WGSL in Rust string literals outside the WGSL printer
  (src/codegen/render.rs, src/codegen/exprs.rs) and shaders/: lines of
  string literals that spell WGSL syntax, per file;
- functions longer than 80 lines;
- files longer than 800 lines;
- imports between the stages that do not point one way along
  tensor -> graph -> schedule -> kernel -> codegen -> runtime: each
  edge that runs back up (a stage importing a later one, but the front
  end recording graph nodes) or skips stages (importing one earlier than
  the stage right before it).

Prints a report; exits 0 (it measures, it does not judge).
"""
import os
import re
import sys
from collections import defaultdict

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
SRC = os.path.join(ROOT, "src")

PRINTERS = {"src/codegen/render.rs", "src/codegen/exprs.rs"}
# WGSL spellings that plain Rust strings (messages, names) do not use.
WGSL = re.compile(
    r"(@group|@binding|@compute|@workgroup_size|var<|array<|vec4<|bitcast<|"
    r"for \(var |workgroupBarrier|textureLoad|textureStore|atomic[A-Z]|"
    r"inverseSqrt|\bselect\(|\blet [a-z_]\w*(: \w+)? = |\d+u\b)"
)
STAGES = ["tensor", "graph", "schedule", "kernel", "codegen", "runtime"]
# The front end records graph nodes: the one import of a later stage that
# the design has.
SANCTIONED = {("tensor", "graph")}
# Modules every stage may import (no stage of their own).
LEAVES = {"dtype", "shape", "error", "config", "metrics", "storage", "rng"}


def rust_files():
    for dirpath, _, files in os.walk(SRC):
        for f in sorted(files):
            if f.endswith(".rs"):
                path = os.path.join(dirpath, f)
                yield os.path.relpath(path, ROOT), path


def stage_of(rel):
    parts = rel.split("/")
    return parts[1] if len(parts) > 2 else parts[1][:-3]


def string_literals(text):
    """The string literals of Rust source, found by walking it (comments,
    char literals and lifetimes skipped; raw strings included)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            i = text.find("\n", i)
            i = n if i < 0 else i
        elif text.startswith("/*", i):
            i = text.find("*/", i)
            i = n if i < 0 else i + 2
        elif c == "r" and re.match(r'r#*"', text[i:]) and not (text[i - 1].isalnum() or text[i - 1] == "_"):
            hashes = re.match(r"r(#*)\"", text[i:]).group(1)
            end = text.find('"' + hashes, i + 2 + len(hashes))
            end = n if end < 0 else end
            out.append(text[i + 2 + len(hashes) : end])
            i = end + 1 + len(hashes)
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i + 1 : j])
            i = j + 1
        elif c == "'":
            m = re.match(r"'(\\.[^']*|[^'\\])'", text[i:])
            i += len(m.group(0)) if m else 1
        else:
            i += 1
    return out


def wgsl_literals(rel, text):
    """Source lines of string literals that spell WGSL (a literal spread
    over several lines with continuations counts each line)."""
    if rel in PRINTERS or rel.endswith("_test.rs"):
        return 0
    cut = text.find("\n#[cfg(test)]\nmod tests")
    if cut >= 0:
        text = text[:cut]
    count = 0
    for lit in string_literals(text):
        if WGSL.search(lit):
            count += lit.count("\n") + 1
    return count


def long_functions(text):
    lines = text.splitlines()
    out = []
    fn = re.compile(r"^(\s*)(pub(\([a-z]+\))? )?(const )?(unsafe )?fn (\w+)")
    for i, line in enumerate(lines):
        m = fn.match(line)
        if not m or line.rstrip().endswith(";"):
            continue
        indent = m.group(1)
        for j in range(i + 1, len(lines)):
            if lines[j] == indent + "}":
                if j - i + 1 > 80:
                    out.append((m.group(6), i + 1, j - i + 1))
                break
    return out


def imports(rel, text):
    edges = set()
    for m in re.finditer(r"crate::(\w+)", text):
        edges.add(m.group(1))
    if "/" in rel[4:]:
        for m in re.finditer(r"\bsuper::super::(\w+)", text):
            edges.add(m.group(1))
    return edges


def main():
    literal_lines = {}
    long_fns = []
    long_files = []
    edges = defaultdict(set)
    for rel, path in rust_files():
        text = open(path, encoding="utf-8").read()
        n = wgsl_literals(rel, text)
        if n:
            literal_lines[rel] = n
        long_fns += [(rel, name, line, size) for name, line, size in long_functions(text)]
        count = text.count("\n")
        if count > 800:
            long_files.append((rel, count))
        here = stage_of(rel)
        for target in imports(rel, text):
            if target != here:
                edges[(here, target)].add(rel)

    print("## WGSL string literals outside the printer and shaders/")
    total = sum(literal_lines.values())
    for rel, n in sorted(literal_lines.items(), key=lambda kv: -kv[1]):
        print(f"  {n:4}  {rel}")
    print(f"  {total:4}  lines in all (target: none)\n")

    print("## Functions past 80 lines")
    for rel, name, line, size in sorted(long_fns, key=lambda f: -f[3]):
        print(f"  {size:4}  {rel}:{line} {name}")
    print(f"  {len(long_fns):4}  functions (target: none)\n")

    print("## Files past 800 lines")
    for rel, n in long_files:
        print(f"  {n:4}  {rel}")
    print(f"  {len(long_files):4}  files (target: none)\n")

    print("## Imports between stages that do not run one way")
    rank = {s: i for i, s in enumerate(STAGES)}
    odd = []
    for (src, dst), files in sorted(edges.items()):
        if src not in rank or dst not in rank or dst in LEAVES or (src, dst) in SANCTIONED:
            continue
        if rank[dst] > rank[src]:
            kind = "back up"
        elif rank[dst] < rank[src] - 1:
            kind = "skips"
        else:
            continue
        odd.append((kind, src, dst, sorted(files)))
    for kind, src, dst, files in odd:
        print(f"  {kind:7}  {src} -> {dst}: {', '.join(files)}")
    print(f"  {len(odd):4}  edges (each must be justified in ARCHITECTURE.md)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
