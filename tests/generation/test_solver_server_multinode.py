"""The frozen solver on every machine of a multi-node run: two torchrun "nodes" of one
process each on this machine (each its node's LOCAL_RANK 0), every node starting its own
solver server, the main process's client spreading the reward's requests over both."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from rank_report import child_env, read_results

from rzero.engine.serving import free_port

pytestmark = pytest.mark.slow

NODE_SCRIPT = textwrap.dedent("""
    import sys
    from pathlib import Path
    from rank_report import report
    from rzero.config import load_config
    from rzero.engine import distributed
    from rzero.generation.solver_server import frozen_solver
    from rzero.generation.interface import SamplingParams

    checkpoint, run_files = sys.argv[1], Path(sys.argv[2])
    distributed.init()
    cfg = load_config(None, [f"model.name={checkpoint}", "model.device=cpu",
                             "generation.solver_replicas=1", "run.num_machines=2"])
    out = {"rank": distributed.rank(), "local_rank": distributed.local_rank()}
    with frozen_solver(cfg, checkpoint, run_files) as solver:
        if solver is not None:
            out["urls"] = solver.base_urls
            out["listed"] = (run_files / "solver_urls.txt").read_text().split()
            rows = solver.generate([[{"role": "user", "content": f"What is {i} + 1?"}]
                                    for i in range(4)], 1, SamplingParams(max_new_tokens=4))
            out["rows"] = len(rows)
            out["requests_per_url"] = solver.requests_per_url
            out["engine"] = solver.engine
        else:
            out["solver"] = None
        distributed.barrier()  # the main process is done with every node's server
    out["urls_file_left"] = (run_files / "solver_urls.txt").exists()
    try:
        distributed.on_each_machine(lambda: 1 / 0 if distributed.rank() == 1 else "fine")
    except Exception as exc:
        out["error"] = f"{type(exc).__name__}: {exc}"
    out["each"] = distributed.on_each_machine(lambda: distributed.rank() * 10)
    report(out)
""")


def test_every_node_serves_the_frozen_solver(format_checkpoint, tmp_path):
    script = tmp_path / "node.py"
    script.write_text(NODE_SCRIPT)
    run_files = tmp_path / "iter_01"
    run_files.mkdir()
    port = free_port()
    env = child_env(
        tmp_path / "results", PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1", CUDA_VISIBLE_DEVICES=""
    )
    nodes = []
    for node in (0, 1):
        # node 1 is reached at an address it is given, node 0 at its host name (the default)
        node_env = {**env, "RZERO_NODE_ADDRESS": "127.0.0.1"} if node == 1 else env
        nodes.append(
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "torch.distributed.run",
                    "--nnodes",
                    "2",
                    "--node_rank",
                    str(node),
                    "--nproc_per_node",
                    "1",
                    "--master_addr",
                    "127.0.0.1",
                    "--master_port",
                    str(port),
                    str(script),
                    str(format_checkpoint),
                    str(run_files),
                ],
                env=node_env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
        )
    logs = [p.communicate(timeout=600)[0] for p in nodes]
    assert [p.returncode for p in nodes] == [0, 0], "\n".join(log[-3000:] for log in logs)
    main, other = read_results(tmp_path / "results", world=2)
    assert (main["local_rank"], other["local_rank"]) == (0, 0)  # two machines, one process each
    assert other["solver"] is None  # only the main process scores the challenger's steps
    # one server per node, both bound to all interfaces, both in the client and the URLs file
    assert len(main["urls"]) == 2 and main["listed"] == main["urls"]
    assert main["urls"][1].startswith("http://127.0.0.1:")
    assert main["engine"] == "transformers server x2"
    assert main["rows"] == 4 and main["requests_per_url"] == [2, 2]
    logs_dir = run_files / "solver_logs"
    served = sorted(logs_dir.iterdir())
    assert [p.name.rsplit("-", 1)[1] for p in served] == ["rank0", "rank1"]
    for folder in served:  # each node's server answered its share of the requests
        log = next(folder.glob("*.log")).read_text()
        assert log.count("chat/completions") >= 2, log[-2000:]
    assert not main["urls_file_left"] and not other["urls_file_left"]
    # a failure on the second machine stops both, each saying where it came from
    assert main["error"] == (
        "MainProcessFailed: machine 1 (global rank 1) failed: ZeroDivisionError: division by zero"
    )
    assert other["error"] == "ZeroDivisionError: division by zero"
    assert main["each"] == other["each"] == [0, 10]
