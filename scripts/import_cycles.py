"""Import cycles between the modules of a package, function-level imports included
(`make lint`; tests/test_architecture.py). Imports under `if TYPE_CHECKING:` do not count.

    python scripts/import_cycles.py [PACKAGE]    # exit 1 and one line per cycle, if any
"""

from __future__ import annotations

import sys

import grimp


def import_cycles(package: str) -> list[list[str]]:
    """Every set of modules that import each other in a ring (a strongly connected component
    of more than one module of the import graph), each sorted, largest first."""
    graph = grimp.build_graph(package, exclude_type_checking_imports=True)
    modules = sorted(graph.modules)
    edges = {m: sorted(graph.find_modules_directly_imported_by(m) & graph.modules) for m in modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in modules:  # Tarjan's algorithm, iteratively (no recursion limit)
        if root in index:
            continue
        work = [(root, iter(edges[root]))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(edges[child])))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                ring = []
                while True:
                    m = stack.pop()
                    on_stack.discard(m)
                    ring.append(m)
                    if m == node:
                        break
                if len(ring) > 1:
                    found.append(sorted(ring))
    return sorted(found, key=lambda r: (-len(r), r))


def main(argv: list[str]) -> int:
    package = argv[0] if argv else "rzero"
    rings = import_cycles(package)
    for ring in rings:
        print(f"import cycle of {len(ring)} modules: {' -> '.join(ring)}")
    if not rings:
        print(f"{package}: no import cycle")
    return 1 if rings else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
