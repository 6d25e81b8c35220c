"""The static filter on model-written programs: imports, dangerous builtins, dunder access.

This is AZR's safety check (a list of banned packages and builtins) done on the syntax tree
instead of on the source text, and it is defence in depth only: Python cannot be sandboxed
from inside, and a determined program gets around any such list (through a module that
re-exports `os`, say). The walls that hold are the operating-system ones in `sandbox.py`.

Departures from AZR: AZR bans a fixed list and lets everything else through; here a program
may import only `ALLOWED_MODULES` (what the sandbox child loads before it is locked in a
chroot and can read no more files), and every dunder attribute outside a small harmless set
is refused, not only the known escape routes. `NONDETERMINISTIC_MODULES` (AZR's `random`,
`time`, `datetime`) is not a safety matter; `tasks.py` uses it to refuse proposals.
"""

from __future__ import annotations

import ast
import warnings

# modules a program may import; the sandbox child imports them before it is confined
ALLOWED_MODULES: frozenset[str] = frozenset(
    {
        "abc",
        "array",
        "bisect",
        "cmath",
        "collections",
        "copy",
        "dataclasses",
        "datetime",
        "decimal",
        "enum",
        "fractions",
        "functools",
        "heapq",
        "itertools",
        "json",
        "math",
        "numbers",
        "operator",
        "random",
        "re",
        "statistics",
        "string",
        "textwrap",
        "time",
        "typing",
        "unicodedata",
    }
)

# named in the refusal so that a reader sees why, though anything outside ALLOWED_MODULES
# is refused anyway
FORBIDDEN_MODULES: frozenset[str] = frozenset(
    {
        "asyncio",
        "builtins",
        "ctypes",
        "fcntl",
        "gc",
        "glob",
        "importlib",
        "inspect",
        "io",
        "marshal",
        "mmap",
        "multiprocessing",
        "os",
        "pathlib",
        "pickle",
        "posix",
        "pty",
        "resource",
        "shelve",
        "shutil",
        "signal",
        "socket",
        "ssl",
        "subprocess",
        "sys",
        "tempfile",
        "threading",
        "urllib",
        "http",
        "requests",
        "code",
        "codeop",
        "runpy",
        "sysconfig",
        "site",
        "_thread",
    }
)

# AZR refuses these in proposals: their results change from run to run
NONDETERMINISTIC_MODULES: frozenset[str] = frozenset({"random", "time", "datetime"})

# builtins removed from the child's namespace, and refused by name here
FORBIDDEN_BUILTINS: frozenset[str] = frozenset(
    {
        "__import__",
        "breakpoint",
        "compile",
        "delattr",
        "dir",
        "eval",
        "exec",
        "exit",
        "getattr",
        "globals",
        "help",
        "input",
        "locals",
        "memoryview",
        "open",
        "quit",
        "setattr",
        "vars",
    }
)

# attributes that lead from an ordinary object to frames, code, globals or the type graph
FORBIDDEN_ATTRIBUTES: frozenset[str] = frozenset(
    {
        "ag_code",
        "ag_frame",
        "co_code",
        "cr_code",
        "cr_frame",
        "f_back",
        "f_builtins",
        "f_code",
        "f_globals",
        "f_locals",
        "gi_code",
        "gi_frame",
        "gi_yieldfrom",
        "tb_frame",
        "tb_next",
        "mro",
        # operator's getters take attribute names as strings, which the checks here cannot see
        "attrgetter",
        "methodcaller",
    }
)

# dunder attributes that are harmless and common in small programs
ALLOWED_DUNDERS: frozenset[str] = frozenset({"__init__", "__name__", "__doc__"})


def _is_dunder(name: str) -> bool:
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


def imported_modules(tree: ast.AST) -> list[str]:
    """Top-level names of every module an `import` or `from … import` statement names."""
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name.partition(".")[0] for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                names.append(".")  # relative import: there is no package to import from
            elif node.module:
                names.append(node.module.partition(".")[0])
    return names


def check_program(program: str, allowed_modules: frozenset[str] = ALLOWED_MODULES) -> str | None:
    """Why `program` is refused, or None when it passes the filter.

    Refused: syntax errors; imports outside `allowed_modules`; any use of a name in
    FORBIDDEN_BUILTINS; attributes in FORBIDDEN_ATTRIBUTES or dunders outside ALLOWED_DUNDERS;
    dunder names (`__builtins__`, …) and string constants that spell a forbidden dunder or
    attribute (the usual way around an attribute check).
    """
    try:
        with warnings.catch_warnings():  # a model's odd literal is its problem, not our log's
            warnings.simplefilter("ignore", SyntaxWarning)
            tree = ast.parse(program, mode="exec")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as e:
        return f"syntax error: {type(e).__name__}: {str(e)[:200]}"
    for module in imported_modules(tree):
        if module == ".":
            return "relative imports are not allowed"
        if module in FORBIDDEN_MODULES:
            return f"forbidden module {module!r}"
        if module not in allowed_modules:
            return f"module {module!r} is not available in the sandbox"
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            if node.id in FORBIDDEN_BUILTINS:
                return f"forbidden builtin {node.id!r}"
            if _is_dunder(node.id) and node.id not in ALLOWED_DUNDERS:
                return f"forbidden name {node.id!r}"
        elif isinstance(node, ast.Attribute):
            attr = node.attr
            if attr in FORBIDDEN_ATTRIBUTES or (_is_dunder(attr) and attr not in ALLOWED_DUNDERS):
                return f"forbidden attribute {attr!r}"
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
            if "__" in text and any(bad in text for bad in _DANGEROUS_STRINGS):
                return "string constant names a forbidden attribute"
        elif isinstance(node, ast.alias) and (
            _is_dunder(node.name) or node.name in FORBIDDEN_ATTRIBUTES
        ):
            return f"forbidden import name {node.name!r}"
    return None


_DANGEROUS_STRINGS = (
    "__subclasses__",
    "__globals__",
    "__builtins__",
    "__import__",
    "__class__",
    "__bases__",
    "__base__",
    "__mro__",
    "__code__",
    "__closure__",
    "__dict__",
    "__getattribute__",
    "__loader__",
    "__spec__",
    "__self__",
    "__func__",
    "__reduce__",
    "__reduce_ex__",
)
