#!/usr/bin/env python3
"""The library's import graph between files, and its circles.

    python3 scripts/import_cycles.py            # every circle, with one import per edge
    python3 scripts/import_cycles.py --edges    # the whole graph, one edge a line

A file depends on another when it names an item of it: a `use` or an inline path starting
`crate::`, `super::` or `self::`. A path is resolved to the deepest module file it reaches;
an item that module re-exports (`pub use child::Item`) is followed to the file that defines
it, so a folder's `mod.rs` re-exporting its children is not itself a circle. Test modules
(`#[cfg(test)] mod ... { }`) are left out: a test may import what it tests from anywhere.
Macros, glob imports of items and paths built by macros are read as far as their text goes.
Exits 1 when there is a circle, 0 when there is none.
"""

from __future__ import annotations

import argparse
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent / "src"
IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


def strip(text: str) -> str:
    """The text without comments, string and char literals (replaced by spaces or "")."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if text.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif text.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
        elif c == "r" and re.match(r'r#*"', text[i:]) and not re.match(r"\w", text[i - 1 : i] or " "):
            hashes = re.match(r"r(#*)\"", text[i:]).group(1)
            end = text.find('"' + hashes, i + 2 + len(hashes))
            out.append('""')
            i = n if end < 0 else end + 1 + len(hashes)
        elif c == '"':
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
            out.append('""')
            i += 1
        elif c == "'" and re.match(r"'(\\.|[^\\'])'", text[i:]):
            i += len(re.match(r"'(\\.|[^\\'])'", text[i:]).group(0))
        else:
            out.append(c)
            i += 1
    return "".join(out)


def drop_test_modules(text: str) -> str:
    """`text` without the bodies of `#[cfg(test)] mod name { ... }`."""
    while True:
        m = re.search(r"#\[cfg\(test\)\]\s*(pub(\([^)]*\))?\s+)?mod\s+" + IDENT + r"\s*\{", text)
        if not m:
            return text
        depth, i = 1, m.end()
        while i < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        text = text[: m.start()] + text[i:]


def expand_use(tree: str) -> list[tuple[str, str]]:
    """`a::{b, c::d as e}` as [(path, name)]: [("a::b", "b"), ("a::c::d", "e")]."""
    tree = re.sub(r"\s+", "", tree)
    out: list[tuple[str, str]] = []

    def walk(prefix: str, t: str) -> None:
        if "{" in t and t.endswith("}"):
            head, body = t[: t.index("{")], t[t.index("{") + 1 : -1]
            depth, start = 0, 0
            for k, ch in enumerate(body + ","):
                if ch in "{":
                    depth += 1
                elif ch == "}":
                    depth -= 1
                elif ch == "," and depth == 0:
                    if body[start:k]:
                        walk(prefix + head, body[start:k])
                    start = k + 1
            return
        name = t
        if "as" in t and re.fullmatch(r".*as" + IDENT, t):
            m = re.fullmatch(r"(.*?)as(" + IDENT + ")", t)
            if m and not m.group(1).endswith("::"):
                t, name = m.group(1), m.group(2)
        path = prefix + t
        if path.endswith("::self"):
            path = path[: -len("::self")]
        out.append((path, name.split("::")[-1]))

    walk("", tree)
    return out


class Crate:
    def __init__(self, root: pathlib.Path):
        self.files: dict[tuple[str, ...], pathlib.Path] = {}
        for f in sorted(root.rglob("*.rs")):
            rel = f.relative_to(root).with_suffix("").parts
            if rel == ("lib",):
                mod: tuple[str, ...] = ()
            elif rel[-1] == "mod":
                mod = rel[:-1]
            else:
                mod = rel
            self.files[mod] = f
        self.text = {m: drop_test_modules(strip(f.read_text(encoding="utf-8"))) for m, f in self.files.items()}
        # Re-exports: module -> {name: absolute path}.
        self.reexports: dict[tuple[str, ...], dict[str, list[str]]] = {}
        for m, t in self.text.items():
            names: dict[str, list[str]] = {}
            for u in re.finditer(r"\bpub(\([^)]*\))?\s+use\s+([^;]+);", t):
                for path, name in expand_use(u.group(2)):
                    absolute = self.absolute(m, path)
                    if absolute is not None:
                        names[name] = absolute
            self.reexports[m] = names

    def absolute(self, here: tuple[str, ...], path: str) -> list[str] | None:
        """`path` as segments from the crate root, or None when it is not the crate's."""
        segs = [s for s in path.split("::") if s]
        if not segs:
            return None
        base = list(here)
        if segs[0] == "crate":
            base, segs = [], segs[1:]
        elif segs[0] in ("super", "self"):
            while segs and segs[0] in ("super", "self"):
                if segs[0] == "super":
                    if not base:
                        return None
                    base = base[:-1]
                segs = segs[1:]
        elif tuple(base + [segs[0]]) in self.files:
            pass  # a child module named without self:: (2018 paths)
        else:
            return None
        return base + segs

    def target(self, segs: list[str], depth: int = 0) -> tuple[str, ...] | None:
        """The file defining what `segs` names."""
        mod: tuple[str, ...] = ()
        i = 0
        while i < len(segs) and mod + (segs[i],) in self.files:
            mod, i = mod + (segs[i],), i + 1
        if i < len(segs) and depth < 16:
            again = self.reexports.get(mod, {}).get(segs[i])
            if again is not None and again != segs[: i + 1]:
                return self.target(again + segs[i + 1 :], depth + 1)
        return mod

    def edges(self) -> dict[tuple[tuple[str, ...], tuple[str, ...]], str]:
        """(from, to) -> one path that makes the edge."""
        found: dict[tuple[tuple[str, ...], tuple[str, ...]], str] = {}
        for m, t in self.text.items():
            # A re-export is the folder's face, not a use: followed in `target`, not an edge.
            t = re.sub(r"\bpub(\([^)]*\))?\s+use\s+[^;]+;", "", t)
            paths: list[str] = []
            for u in re.finditer(r"\buse\s+([^;]+);", t):
                paths += [p for p, _ in expand_use(u.group(1))]
            body = re.sub(r"\buse\s+[^;]+;", "", t)
            paths += re.findall(r"\b(?:crate|super|self)(?:::" + IDENT + ")+", body)
            for p in paths:
                segs = self.absolute(m, p)
                if segs is None:
                    continue
                to = self.target(segs)
                if to is not None and to != m:
                    found.setdefault((m, to), p)
        return found


def strongly_connected(nodes, edges) -> list[list]:
    """Tarjan's components with more than one node."""
    graph: dict = {n: [] for n in nodes}
    for a, b in edges:
        graph[a].append(b)
    index: dict = {}
    low: dict = {}
    stack: list = []
    on: set = set()
    out: list[list] = []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in nodes:
        if v not in index:
            visit(v)
    return sorted(out, key=lambda c: (-len(c), c))


def name(m: tuple[str, ...]) -> str:
    return "::".join(("crate",) + m)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--edges", action="store_true", help="print every edge, not only the circles")
    args = p.parse_args()
    crate = Crate(ROOT)
    edges = crate.edges()
    if args.edges:
        for (a, b), via in sorted(edges.items()):
            print(f"{name(a)} -> {name(b)}  ({via})")
        return 0
    cycles = strongly_connected(list(crate.files), edges.keys())
    for comp in cycles:
        members = set(comp)
        print(f"circle of {len(comp)} files:")
        for (a, b), via in sorted(edges.items()):
            if a in members and b in members:
                print(f"  {name(a)} -> {name(b)}  ({via})")
    print(f"{len(cycles)} circle(s) among {len(crate.files)} files, {len(edges)} imports between files")
    return 1 if cycles else 0


if __name__ == "__main__":
    sys.exit(main())
