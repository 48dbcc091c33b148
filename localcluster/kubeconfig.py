"""Kubeconfig files for localcluster users: the server URL, its CA and a bearer token.

kubectl, kubernetes-asyncio and our own client read these unchanged. Each user
gets a distinct random token; the server maps tokens back to user names.
"""

from __future__ import annotations

import base64
import io
import os
from pathlib import Path

from ruamel.yaml import YAML

CLUSTER_NAME = "nimctl-localcluster"


def render_kubeconfig(
    server: str, ca_pem: bytes, user: str, token: str, namespace: str = "default"
) -> str:
    """The text of a kubeconfig whose current context talks to *server* as *user*."""
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": CLUSTER_NAME,
                "cluster": {
                    "server": server,
                    "certificate-authority-data": base64.b64encode(ca_pem).decode(),
                },
            }
        ],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [
            {
                "name": f"{user}@{CLUSTER_NAME}",
                "context": {"cluster": CLUSTER_NAME, "user": user, "namespace": namespace},
            }
        ],
        "current-context": f"{user}@{CLUSTER_NAME}",
        "preferences": {},
    }
    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    buf = io.StringIO()
    yaml.dump(doc, buf)
    return buf.getvalue()


def write_kubeconfig_file(path: str | Path, text: str) -> Path:
    """Write *text* to *path* (parents created, mode 0600: it holds a credential)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    p.chmod(0o600)
    return p
