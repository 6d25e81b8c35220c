"""The task buffer: valid triplets and induction tasks, seeded with AZR's identity triplet.

The proposer reads K reference triplets from it (deduction/abduction) or one program
(induction); the solver's batch is topped up from it when too few proposals are valid.

Departures from AZR: one triplet buffer serves deduction and abduction (AZR keeps one per
type; the objects are the same kind of triplet, and the proposer prompt for each type says
what to aim for); duplicates (same program and input) are kept once; no size cap.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from pathlib import Path

from rzero.executor.tasks import IDENTITY, CodeTask
from rzero.io import read_jsonl, write_jsonl_atomic


class TaskBuffer:
    """Valid triplets (deduction/abduction) and induction tasks, in insertion order."""

    def __init__(self, tasks: Iterable[CodeTask] = (IDENTITY,)) -> None:
        self.triplets: list[CodeTask] = []
        self.induction: list[CodeTask] = []
        self._seen: set[tuple[str, str, str, str]] = set()
        self.add_all(tasks)

    def add(self, task: CodeTask) -> bool:
        """Keep `task` unless it is already here; True when it was added."""
        key = (
            ("induction", task.program, task.message, repr(task.visible))
            if task.kind == "induction"
            else ("triplet", task.program, task.input, "")
        )
        if key in self._seen:
            return False
        self._seen.add(key)
        (self.induction if task.kind == "induction" else self.triplets).append(task)
        return True

    def add_all(self, tasks: Iterable[CodeTask]) -> int:
        return sum(self.add(task) for task in tasks)

    def __len__(self) -> int:
        return len(self.triplets) + len(self.induction)

    def sample_references(self, k: int, rng: random.Random) -> list[CodeTask]:
        """K distinct triplets, uniformly (fewer when the buffer holds fewer)."""
        return rng.sample(self.triplets, min(k, len(self.triplets)))

    def sample_program(self, rng: random.Random) -> str:
        """A program for an induction proposal: drawn from the triplets, as in AZR."""
        return rng.choice(self.triplets).program

    def sample_tasks(self, kind: str, n: int, rng: random.Random) -> list[CodeTask]:
        """`n` tasks of `kind` drawn uniformly with replacement (AZR's batch top-up).

        Induction falls back to nothing when no induction task is stored yet.
        """
        if kind == "induction":
            return [rng.choice(self.induction) for _ in range(n)] if self.induction else []
        return [rng.choice(self.triplets).as_kind(kind) for _ in range(n)]

    def save(self, path: str | Path) -> None:
        """One JSON task per line, written atomically."""
        rows = [{"task": t.to_json()} for t in self.triplets + self.induction]
        write_jsonl_atomic(path, rows)

    @classmethod
    def load(cls, path: str | Path) -> TaskBuffer:
        return cls(CodeTask.from_json(row["task"]) for row in read_jsonl(path))
