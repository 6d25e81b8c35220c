"""Pushing checkpoints to the Hugging Face hub (`run.push_to_hub`, `run.hub_model_id`).

One model repository per run; each trained phase's checkpoint is a branch of it, named by
`revision_name` (``iter-01-challenger``, ``iter-01-solver``, ...), so
``from_pretrained(repo, revision="iter-02-solver")`` loads exactly that model; the model card
(README.md) goes to ``main`` and into every branch. `huggingface_hub` finds the token as it
always does (``HF_TOKEN``, or the one `hf auth login` saved) and the endpoint in
``HF_ENDPOINT``. `push_dataset` uploads an `rzero export` folder as a dataset repository.
"""

from __future__ import annotations

from pathlib import Path


def revision_name(k: int, phase: str) -> str:
    """The branch of iteration `k`'s `phase` checkpoint: ``iter-01-solver``."""
    return f"iter-{k:02d}-{phase}"


def push_checkpoint(
    repo_id: str, folder: Path, revision: str, card: str, *, private: bool = True
) -> str:
    """Upload the checkpoint `folder` as branch `revision` of `repo_id` (made private unless
    `private` is off, if it does not exist), with the model card `card` as its README.md and
    on ``main``. Returns the branch's commit id."""
    from huggingface_hub import CommitOperationAdd, HfApi

    api = HfApi()
    api.create_repo(repo_id, private=private, exist_ok=True)
    api.create_commit(
        repo_id,
        [CommitOperationAdd("README.md", card.encode())],
        commit_message=f"model card: {revision}",
    )
    api.create_branch(repo_id, branch=revision, exist_ok=True)
    files = sorted(p for p in folder.rglob("*") if p.is_file() and p.name != "README.md")
    operations = [CommitOperationAdd(p.relative_to(folder).as_posix(), str(p)) for p in files]
    operations.append(CommitOperationAdd("README.md", card.encode()))
    info = api.create_commit(
        repo_id, operations, revision=revision, commit_message=f"{revision}: {folder.name}"
    )
    return info.oid


def push_dataset(repo_id: str, folder: Path, *, private: bool = True) -> str:
    """Upload every file of `folder` (an `rzero export`) to the dataset repository `repo_id`
    (made private unless `private` is off, if it does not exist) in one commit on ``main``.
    Returns the commit id."""
    from huggingface_hub import CommitOperationAdd, HfApi

    api = HfApi()
    api.create_repo(repo_id, repo_type="dataset", private=private, exist_ok=True)
    files = sorted(p for p in folder.rglob("*") if p.is_file())
    operations = [CommitOperationAdd(p.relative_to(folder).as_posix(), str(p)) for p in files]
    info = api.create_commit(
        repo_id, operations, repo_type="dataset", commit_message=f"rzero export: {folder.name}"
    )
    return info.oid
