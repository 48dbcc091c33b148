"""``until nc -z host port`` loops: which Service they wait for, and when it answers."""

from __future__ import annotations

from typing import Any

from localcluster.simulator.tcpwait import service_of, tcp_wait_problem, tcp_waits

WAIT = {
    "name": "wait-for-postgres",
    "image": "busybox",
    "command": [
        "sh",
        "-c",
        'until nc -z pg.nemo.svc.cluster.local 5432; do echo "Waiting"; sleep 5; done;',
    ],
}


def lookup_of(objs: dict[tuple[str, str, str], dict[str, Any]]) -> Any:
    return lambda kind, ns, name: objs.get((kind, ns, name))


def test_the_loop_names_host_and_port() -> None:
    assert tcp_waits(WAIT) == [("pg.nemo.svc.cluster.local", 5432)]
    assert tcp_waits({"command": ["sh", "-c", "sleep 5"]}) == []


def test_cluster_dns_names_resolve_to_services() -> None:
    assert service_of("pg", "app") == ("app", "pg")
    assert service_of("pg.db", "app") == ("db", "pg")
    assert service_of("pg.db.svc", "app") == ("db", "pg")
    assert service_of("pg.db.svc.cluster.local", "app") == ("db", "pg")
    assert service_of("db.example.com", "app") is None


def test_the_loop_finishes_once_the_service_has_ready_endpoints() -> None:
    svc = {"spec": {"ports": [{"port": 5432}]}}
    objs: dict[tuple[str, str, str], dict[str, Any]] = {}
    assert "does not answer" in (tcp_wait_problem(WAIT, "app", lookup_of(objs)) or "")
    objs[("Service", "nemo", "pg")] = svc
    objs[("Endpoints", "nemo", "pg")] = {"subsets": [{"notReadyAddresses": [{"ip": "10.0.0.1"}]}]}
    assert tcp_wait_problem(WAIT, "app", lookup_of(objs)) is not None
    objs[("Endpoints", "nemo", "pg")] = {"subsets": [{"addresses": [{"ip": "10.0.0.1"}]}]}
    assert tcp_wait_problem(WAIT, "app", lookup_of(objs)) is None
    objs[("Service", "nemo", "pg")] = {"spec": {"ports": [{"port": 80}]}}
    assert tcp_wait_problem(WAIT, "app", lookup_of(objs)) is not None  # wrong port


def test_hosts_outside_the_cluster_do_not_hold_the_pod() -> None:
    ext = {"command": ["sh", "-c", "until nc -z db.example.com 5432; do sleep 5; done"]}
    assert tcp_wait_problem(ext, "app", lookup_of({})) is None
