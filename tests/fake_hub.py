"""A local stand-in for the Hugging Face hub's HTTP API, enough for `huggingface_hub`'s
create_repo, create_branch and create_commit of small files (the server answers every
file's preupload with "regular", so contents arrive base64 in the commit's NDJSON body).
`FakeHub().repos[repo][branch]` holds {path: bytes} after the commits; point a client at
it with HF_ENDPOINT=hub.url."""

from __future__ import annotations

import base64
import hashlib
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class FakeHub:
    def __init__(self):
        self.repos: dict[str, dict[str, dict[str, bytes]]] = {}
        self.private: dict[str, bool] = {}
        self.kinds: dict[str, str] = {}  # repo -> model or dataset, as its commits were routed
        self.requests: list[tuple[str, str]] = []
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def reply(self, code: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                hub.requests.append(("POST", self.path))
                path = self.path.split("?")[0]
                if path == "/api/repos/create":
                    spec = json.loads(body)
                    repo = (
                        f"{spec['organization']}/{spec['name']}"
                        if spec.get("organization")
                        else spec["name"]
                    )
                    if repo in hub.repos:
                        # as the hub answers: the existing repo's URL with the conflict
                        return self.reply(
                            409, {"error": "already exists", "url": f"{hub.url}/{repo}"}
                        )
                    hub.repos[repo] = {"main": {}}
                    hub.private[repo] = (
                        bool(spec.get("private")) or spec.get("visibility") == "private"
                    )
                    return self.reply(200, {"url": f"{hub.url}/{repo}", "name": repo})
                if path == "/api/validate-yaml":
                    return self.reply(200, {})
                m = re.fullmatch(
                    r"/api/(?:models|datasets)/([^/]+/[^/]+)/(branch|preupload|commit)/(.+)", path
                )
                if not m or m.group(1) not in hub.repos:
                    return self.reply(404, {"error": f"no route {path}"})
                repo, what, revision = m.group(1), m.group(2), m.group(3).replace("%2F", "/")
                hub.kinds[repo] = "dataset" if path.startswith("/api/datasets/") else "model"
                branches = hub.repos[repo]
                if what == "branch":
                    if revision in branches:
                        return self.reply(409, {"error": "branch exists"})
                    branches[revision] = dict(branches["main"])
                    return self.reply(200, {})
                if what == "preupload":
                    files = json.loads(body)["files"]
                    return self.reply(
                        200,
                        {
                            "files": [
                                {"path": f["path"], "uploadMode": "regular", "shouldIgnore": False}
                                for f in files
                            ]
                        },
                    )
                if revision not in branches:
                    return self.reply(404, {"error": f"no revision {revision}"})
                for line in body.decode().splitlines():
                    item = json.loads(line)
                    if item["key"] == "file":
                        value = item["value"]
                        branches[revision][value["path"]] = base64.b64decode(value["content"])
                oid = hashlib.sha1(body).hexdigest()
                return self.reply(
                    200, {"commitUrl": f"{hub.url}/{repo}/commit/{oid}", "commitOid": oid}
                )

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> FakeHub:
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
