"""A minimal operator process for the leader-election tests: a Manager with the echo controller.

Run as ``python -m tests.integration.runtime_controller.operator_proc --kubeconfig K
--identity I [--lease-duration 2 --renew-deadline 1.5 --retry-period 0.2] [--events]
[--exit-on-loss] [--webhook-port P --webhook-cert-dir D]``. With a webhook port it
also serves, on every replica whatever its leadership, a ConfigMap validating
webhook at ``/validate-configmap``: it refuses a ConfigMap with a ``forbidden``
data key and warns ``validated by <identity>`` otherwise (so a test sees which
replica answered); its readiness joins ``/readyz``. It installs the manager's own SIGTERM/SIGINT handling; exit
status 0 after a graceful stop, 1 when the Lease was lost (only with
``--exit-on-loss``: by default a lost Lease makes it a candidate again), 2 on
any other failure.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from nimctl_runtime.client import Client, load_config
from nimctl_runtime.field import ValidationFailed, forbidden
from nimctl_runtime.logsetup import configure_logging
from nimctl_runtime.manager import LeaderElectionLostError, Manager, ManagerOptions
from nimctl_runtime.webhook.handlers import ValidatingHandler
from nimctl_runtime.webhook.server import WebhookServer

from .echo import add_echo_controller


async def run(args: argparse.Namespace) -> int:
    client = Client(load_config(args.kubeconfig))
    options = ManagerOptions(
        leader_election=True,
        leader_election_id=args.lease,
        leader_election_namespace="default",
        identity=args.identity,
        lease_duration=args.lease_duration,
        renew_deadline=args.renew_deadline,
        retry_period=args.retry_period,
        health_probe_bind_address=args.health,
        graceful_shutdown_timeout=5,
        leader_election_exit_on_loss=args.exit_on_loss,
    )
    manager = Manager(client, options)
    add_echo_controller(manager, identity=args.identity, events=args.events)
    if args.webhook_port:
        server = WebhookServer(
            cert_dir=args.webhook_cert_dir, host="127.0.0.1", port=args.webhook_port
        )
        server.register("/validate-configmap", ValidatingHandler(NoForbiddenKey(args.identity)))
        manager.add(server)
        manager.add_readyz_check("webhook", server.started_checker())
    try:
        await manager.start()
    except LeaderElectionLostError:
        return 1
    finally:
        await client.close()
    return 0


class NoForbiddenKey:
    """Refuses ConfigMaps with a ``forbidden`` key; names the replica that answered."""

    def __init__(self, identity: str) -> None:
        self.identity = identity

    def _check(self, obj: dict[str, Any]) -> list[str]:
        if "forbidden" in (obj.get("data") or {}):
            raise ValidationFailed([forbidden("data.forbidden", f"refused by {self.identity}")])
        return [f"validated by {self.identity}"]

    async def validate_create(self, obj: dict[str, Any]) -> list[str]:
        return self._check(obj)

    async def validate_update(self, old: dict[str, Any], new: dict[str, Any]) -> list[str]:
        return self._check(new)

    async def validate_delete(self, obj: dict[str, Any]) -> list[str]:
        return []


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--kubeconfig", required=True)
    p.add_argument("--identity", required=True)
    p.add_argument("--lease", default="echo-operator")
    p.add_argument("--lease-duration", type=float, default=2.0)
    p.add_argument("--renew-deadline", type=float, default=1.5)
    p.add_argument("--retry-period", type=float, default=0.2)
    p.add_argument("--health", default="0")
    p.add_argument("--events", action="store_true", help="an Event for every write")
    p.add_argument("--exit-on-loss", action="store_true", help="exit 1 when the Lease is lost")
    p.add_argument("--webhook-port", type=int, default=0, help="serve the ConfigMap webhook")
    p.add_argument("--webhook-cert-dir", default="", help="its tls.crt and tls.key")
    args = p.parse_args()
    configure_logging("console", "info")
    try:
        return asyncio.run(run(args))
    except Exception as exc:
        print(f"operator failed: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
