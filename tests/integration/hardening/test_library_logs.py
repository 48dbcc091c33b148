"""Issue 19 item 6: malformed requests to the webhook port log one JSON line, no payload.

Runs in a child process, as ``nimctl run`` does: structlog configured for JSON,
the webhook server on TLS, a client sending a malformed header that quotes a
"secret". Every stderr line must be JSON, aiohttp's complaint must be among them
(routed, not dropped), and the client's bytes must appear nowhere.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

CHILD = r"""
import asyncio, ssl, sys
from pathlib import Path
from nimctl_runtime.certs import generate_ca, generate_serving_cert, client_ssl_context
from nimctl_runtime.logsetup import configure_logging
from nimctl_runtime.webhook import WebhookServer

async def main(tmp):
    configure_logging("json", "info")
    ca = generate_ca()
    generate_serving_cert(ca, ["127.0.0.1"]).write(tmp)
    server = WebhookServer(cert_dir=tmp, host="127.0.0.1", port=0)
    stop = asyncio.Event()
    task = asyncio.create_task(server.run(stop))
    await server.wait_started()
    for garbage in (
        b"POST /x HTTP/1.1\r\nHost: a\r\nX-Bad\x01Header: SECRET-PAYLOAD-42\r\n\r\n",
        b"SECRET-PAYLOAD-42 / HTTP/1.1\r\n\r\n",
        b"POST /x HTTP/1.1\r\nContent-Length: SECRET-PAYLOAD-42\r\n\r\n",
    ):
        for _ in range(2):  # a second request on the connection is past aiohttp's debug-only case
            reader, writer = await asyncio.open_connection(
                "127.0.0.1", server.port, ssl=client_ssl_context(ca.cert_pem),
                server_hostname="127.0.0.1")
            writer.write(b"GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n" + garbage)
            await writer.drain()
            answer = await asyncio.wait_for(reader.read(), 5)
            assert b" 400 " in answer, answer
            writer.close()
    stop.set()
    await task

asyncio.run(main(Path(sys.argv[1])))
"""


def test_garbage_requests_log_json_lines_without_the_payload(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stderr.strip().splitlines()
    records = [json.loads(line) for line in lines]  # every line is JSON
    assert "SECRET-PAYLOAD-42" not in out.stderr
    assert "Traceback" not in out.stderr
    complaints = [r for r in records if r.get("logger") == "aiohttp.server"]
    assert complaints, lines
    assert all(r["level"] == "error" and r.get("status") == 400 for r in complaints)
    assert all(r.get("error_type") for r in complaints)
