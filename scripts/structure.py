#!/usr/bin/env python3
"""Prints the structure figures the layout is held to (issue 38): files of src/ that name a
simulator crate, the module graph (edges through `crate::` and `super::`, its longest chain,
two-file circles and loops), functions of 150 lines or more, and files over 800 non-test lines.

    python3 scripts/structure.py [SRC_DIR]    # default: src
"""

import os
import re
import sys

SRC = sys.argv[1] if len(sys.argv) > 1 else "src"
FAKES = ("fake_payments", "fake_hermes", "fake_control")


def files():
    for root, _, names in os.walk(SRC):
        for n in sorted(names):
            if n.endswith(".rs"):
                yield os.path.join(root, n)


def module_of(path):
    rel = os.path.relpath(path, SRC)[:-3]
    parts = rel.split(os.sep)
    if parts[-1] == "mod":
        parts = parts[:-1]
    return "::".join(parts)


def code_of(text):
    return text.split("#[cfg(test)]")[0]


def main():
    texts = {p: open(p, encoding="utf-8").read() for p in files()}
    mods = {module_of(p): code_of(t) for p, t in texts.items()}
    names = set(mods)
    naming = sorted(
        os.path.relpath(p, SRC)
        for p, t in texts.items()
        if any(f in t for f in FAKES)
    )
    print(f"files naming a simulator crate: {len(naming)}")
    for n in naming:
        print(f"  src/{n}")

    edges = {m: set() for m in names}
    for m, code in mods.items():
        here = m.split("::")
        for line in code.splitlines():
            if line.strip().startswith("//"):
                continue
            for kind, match in [("crate", x) for x in re.finditer(r"crate::([A-Za-z0-9_:]+)", line)] + [
                ("super", x) for x in re.finditer(r"((?:super::)+)([A-Za-z0-9_:]*)", line)
            ]:
                if kind == "crate":
                    parts = [p for p in match.group(1).split("::") if p]
                else:
                    # Each `super::` names the module's parent, from a file or a mod.rs alike.
                    ups = match.group(1).count("super::")
                    base = here[: max(0, len(here) - ups)]
                    parts = base + [p for p in match.group(2).split("::") if p]
                target = None
                for k in range(len(parts), 0, -1):
                    c = "::".join(parts[:k])
                    if c in names:
                        target = c
                        break
                if target and target != m and not target.startswith(m + "::") and not m.startswith(target + "::"):
                    edges[m].add(target)
    n_edges = sum(len(v) for v in edges.values())
    print(f"modules: {len(names)}, import edges: {n_edges}")

    # Two-file circles.
    circles = sorted({tuple(sorted((a, b))) for a in edges for b in edges[a] if a in edges.get(b, ())})
    print(f"two-file circles: {len(circles)}")
    for a, b in circles:
        print(f"  {a} <-> {b}")

    # Strongly connected components (Tarjan), then the longest chain of the condensation.
    index, low, stack, on, comp = {}, {}, [], set(), {}
    counter = [0]
    sccs = []

    def strong(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            c = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp[w] = len(sccs)
                c.append(w)
                if w == v:
                    break
            sccs.append(c)

    sys.setrecursionlimit(10000)
    for v in sorted(names):
        if v not in index:
            strong(v)
    loops = [sorted(c) for c in sccs if len(c) > 1]
    print(f"import loops (strongly connected sets of more than one module): {len(loops)}")
    for c in loops:
        print(f"  {len(c)} modules: {', '.join(c[:8])}{' …' if len(c) > 8 else ''}")
    dag = {i: set() for i in range(len(sccs))}
    for a in edges:
        for b in edges[a]:
            if comp[a] != comp[b]:
                dag[comp[a]].add(comp[b])
    depth = {}

    def longest(c):
        if c not in depth:
            depth[c] = 1 + max((longest(d) for d in dag[c]), default=0)
        return depth[c]

    print(f"layers (longest import chain): {max((longest(c) for c in dag), default=0)}")

    # Folder loops: the graph of top-level folders.
    top = lambda m: m.split("::")[0]
    folders = {}
    for a in edges:
        for b in edges[a]:
            if top(a) != top(b):
                folders.setdefault(top(a), set()).add(top(b))
    seen_loops = set()
    for a in sorted(folders):
        for b in sorted(folders[a]):
            if a in folders.get(b, ()) and (b, a) not in seen_loops:
                seen_loops.add((a, b))
    print(f"two-folder circles: {len(seen_loops)}")
    for a, b in sorted(seen_loops):
        why = sorted(f"{x} -> {y}" for x in edges for y in edges[x] if top(x) == b and top(y) == a)
        print(f"  {a} <-> {b} ({'; '.join(why[:3])})")

    # Folder floors: each top-level folder's floor is one above the highest folder it imports
    # (a folder inside a loop of folders has none).
    floor = {}

    def floor_of(f, seen=()):
        if f in seen:
            return None
        if f not in floor:
            below = [floor_of(g, seen + (f,)) for g in folders.get(f, ())]
            floor[f] = None if None in below else 1 + max(below, default=0)
        return floor[f]

    tops = sorted({top(m) for m in names})
    for f in tops:
        floor_of(f)
    print(f"folder floors: {max((v or 0) for v in floor.values())}")
    by_floor = {}
    for f in tops:
        by_floor.setdefault(floor[f], []).append(f)
    for k in sorted(by_floor, key=lambda k: (k is None, k or 0)):
        print(f"  {k if k is not None else 'in a loop'}: {' '.join(by_floor[k])}")

    # Functions of 150 lines or more (rustfmt'd code: the closing brace at the fn's indent).
    long_fns = []
    for p, t in texts.items():
        lines = code_of(t).splitlines()
        for i, l in enumerate(lines):
            m = re.match(r"^(\s*)(?:pub(?:\([^)]*\))? )?(?:const )?(?:async )?(?:unsafe )?fn (\w+)", l)
            if not m:
                continue
            indent = m.group(1)
            for j in range(i + 1, len(lines)):
                if lines[j] == indent + "}":
                    if j - i + 1 >= 150:
                        long_fns.append((j - i + 1, os.path.relpath(p, SRC), m.group(2)))
                    break
    long_fns.sort(reverse=True)
    print(f"functions of 150 lines or more: {len(long_fns)}")
    for n, f, name in long_fns:
        print(f"  {n:5} src/{f} {name}")

    big = sorted(
        ((len(code_of(t).splitlines()), os.path.relpath(p, SRC)) for p, t in texts.items()),
        reverse=True,
    )
    over = [(n, f) for n, f in big if n > 800]
    print(f"files over 800 non-test lines: {len(over)}")
    for n, f in over:
        print(f"  {n:5} src/{f}")
    print(f"non-test lines in src: {sum(n for n, _ in big)}")


main()
