"""Keep the user documentation honest: what docs/ names must exist in the code.

A user copies commands, flags, file names, metric names and links from docs/;
each check here fails when one of them stopped being true:

* every ``nimctl`` sub-command and flag shown is accepted by the real parser;
* every ``docs/examples/...`` file mentioned exists;
* every runtime metric name mentioned is registered in ``nimctl_runtime.metrics.REGISTRY``;
* every relative link (and its ``#anchor``) between docs pages resolves;
* the reconciler example in docs/runtime.md runs, as a program, against a
  LocalCluster, does what the page says and exits 0 on SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import re
import shlex
import signal
import socket
import sys
from pathlib import Path

import aiohttp
import pytest

from localcluster.cluster import LocalCluster
from nimctl.cli import build_parser
from nimctl_runtime.client import Client, NotFound
from nimctl_runtime.manager import ManagerOptions
from nimctl_runtime.metrics import REGISTRY

ROOT = Path(__file__).resolve().parents[3]
DOCS = ROOT / "docs"
GENERATED = {DOCS / "reference" / "api.md"}


def doc_pages() -> list[Path]:
    pages = sorted(p for p in DOCS.rglob("*.md") if p not in GENERATED)
    return [*pages, ROOT / "README.md"]


def page_id(page: Path) -> str:
    return str(page.relative_to(ROOT))


# -- nimctl commands and flags ---------------------------------------------------

_CODE_SPAN = re.compile(r"`([^`\n]+)`")
_FENCE = re.compile(r"^```[^\n]*\n(.*?)^```", re.S | re.M)
_COMMAND_END = {"|", "&&", "||", ";", ">", "2>", "&"}


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise AssertionError("nimctl has no sub-commands")


_ENV_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def _starts_command(before: list[str]) -> bool:
    """True when the tokens before ``nimctl`` leave it in command position (not output)."""
    tail: list[str] = []
    for token in reversed(before):
        if token in _COMMAND_END or token == "$":
            break
        tail.append(token)
    return all(_ENV_ASSIGNMENT.match(t) or t in {"time", "exec"} for t in tail)


def nimctl_commands(text: str) -> list[list[str]]:
    """The token lists following each ``nimctl`` invocation in code (fenced or inline)."""
    snippets = [m.group(1) for m in _FENCE.finditer(text)]
    prose = _FENCE.sub("", text)
    snippets += [m.group(1) for m in _CODE_SPAN.finditer(prose)]
    commands: list[list[str]] = []
    for snippet in snippets:
        joined = snippet.replace("\\\n", " ")
        for line in joined.splitlines():
            try:
                tokens = shlex.split(line, comments=True)
            except ValueError:
                tokens = line.split()
            for i, token in enumerate(tokens):
                if (token == "nimctl" or token.endswith("/nimctl")) and _starts_command(tokens[:i]):
                    rest: list[str] = []
                    for t in tokens[i + 1 :]:
                        if t in _COMMAND_END:
                            break
                        rest.append(t)
                    commands.append(rest)
    return commands


def _check_command(
    tokens: list[str], parser: argparse.ArgumentParser, subs: dict[str, argparse.ArgumentParser]
) -> list[str]:
    problems: list[str] = []
    sub: argparse.ArgumentParser | None = None
    skip_value = False
    for token in tokens:
        if skip_value:
            skip_value = False
            continue
        if not token.startswith("-"):
            if sub is None:
                if not re.fullmatch(r"[a-z][a-z0-9-]*", token):
                    return problems  # a placeholder (`nimctl COMMAND`) or program output
                if token not in subs:
                    problems.append(f"unknown sub-command {token!r}")
                    return problems
                sub = subs[token]
            continue
        flag = token.split("=", 1)[0]
        if flag in {"-", "--"}:
            continue
        actions = parser._option_string_actions if sub is None else sub._option_string_actions
        if flag not in actions:
            where = "nimctl" if sub is None else f"nimctl {sub.prog.split()[-1]}"
            problems.append(f"{where} has no flag {flag}")
        elif actions[flag].nargs != 0 and "=" not in token:
            skip_value = True  # the flag's value follows
    return problems


@pytest.mark.parametrize("page", doc_pages(), ids=page_id)
def test_nimctl_commands_in_docs_exist(page: Path) -> None:
    parser = build_parser()
    subs = _subparsers(parser)
    problems: list[str] = []
    for tokens in nimctl_commands(page.read_text()):
        problems += [
            f"`nimctl {' '.join(tokens)}`: {p}" for p in _check_command(tokens, parser, subs)
        ]
    assert not problems, "\n".join(problems)


def test_the_command_checker_catches_a_wrong_flag() -> None:
    parser = build_parser()
    subs = _subparsers(parser)
    text = (
        "run `nimctl local --demoo` or\n```sh\nnimctl frobnicate\n"
        "$ X=1 nimctl run --leader-elect\nnimctl output: not a command\n```\n"
    )
    problems = [p for t in nimctl_commands(text) for p in _check_command(t, parser, subs)]
    assert sorted(problems) == [
        "nimctl local has no flag --demoo",
        "unknown sub-command 'frobnicate'",
    ]


# -- example files ------------------------------------------------------------------

_EXAMPLE_REF = re.compile(r"(?:docs/)?examples/([\w.-]+\.ya?ml)")
_BARE_EXAMPLE = re.compile(r"`([\w.-]+\.ya?ml)`")


@pytest.mark.parametrize("page", doc_pages(), ids=page_id)
def test_example_files_mentioned_exist(page: Path) -> None:
    text = page.read_text()
    names = set(_EXAMPLE_REF.findall(text))
    if page.parent.name == "examples":
        names |= set(_BARE_EXAMPLE.findall(text))
    missing = sorted(n for n in names if not (DOCS / "examples" / n).is_file())
    assert not missing, f"{page_id(page)} names example files that do not exist: {missing}"


# -- metric names ---------------------------------------------------------------------

_METRIC = re.compile(
    r"\b((?:controller_runtime|workqueue|rest_client|leader_election)_[a-z_]+[a-z])\b"
)


def registered_metric_names() -> set[str]:
    names: set[str] = set()
    for metric in REGISTRY.collect():
        names.add(metric.name)
        if metric.type == "counter":
            names.add(metric.name + "_total")
    return names


@pytest.mark.parametrize("page", doc_pages(), ids=page_id)
def test_metric_names_mentioned_are_registered(page: Path) -> None:
    registered = registered_metric_names()
    options = {f.name for f in dataclasses.fields(ManagerOptions)}  # e.g. leader_election_id
    benchmarks = {f.stem for f in (ROOT / "tests" / "bench").glob("*.py")}
    mentioned = set(_METRIC.findall(page.read_text())) - options - benchmarks
    unknown = sorted(mentioned - registered)
    assert not unknown, f"{page_id(page)} names metrics nimctl does not export: {unknown}"


# -- links ------------------------------------------------------------------------------

_LINK = re.compile(r"\]\(([^)\s]+)\)")


def github_anchor(heading: str) -> str:
    text = re.sub(r"`", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors_of(page: Path) -> set[str]:
    text = _FENCE.sub("", page.read_text())
    return {github_anchor(m.group(1)) for m in re.finditer(r"^#+\s+(.*)$", text, re.M)}


@pytest.mark.parametrize("page", doc_pages(), ids=page_id)
def test_relative_links_resolve(page: Path) -> None:
    problems = []
    for target in _LINK.findall(_FENCE.sub("", page.read_text())):
        if re.match(r"^[a-z]+:", target):
            continue  # http(s), mailto
        path_part, _, anchor = target.partition("#")
        dest = (page.parent / path_part).resolve() if path_part else page
        if not dest.exists():
            problems.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors_of(dest):
            problems.append(f"{target}: no heading with anchor #{anchor}")
    assert not problems, f"{page_id(page)}: " + "; ".join(problems)


# -- the runtime.md example ------------------------------------------------------------------


def runtime_example() -> str:
    text = (DOCS / "runtime.md").read_text()
    for block in re.findall(r"^```python\n(.*?)^```", text, re.S | re.M):
        if "class GreeterReconciler" in block:
            return str(block)
    raise AssertionError("docs/runtime.md lost its GreeterReconciler example")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_runtime_example_runs_as_documented(tmp_path: Path) -> None:
    port = _free_port()
    source = runtime_example()
    assert 'health_probe_bind_address=":8081"' in source
    script = tmp_path / "greeter.py"
    script.write_text(
        source.replace(
            'health_probe_bind_address=":8081"', f'health_probe_bind_address="127.0.0.1:{port}"'
        )
    )
    async with LocalCluster(simulator=False) as cluster:
        kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig")
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            str(script),
            str(kubeconfig),
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        try:
            async with Client(str(kubeconfig)) as client:
                await client.create(
                    {
                        "apiVersion": "v1",
                        "kind": "ConfigMap",
                        "metadata": {
                            "name": "alice",
                            "namespace": "default",
                            "labels": {"greet": "me"},
                        },
                        "data": {"name": "Alice"},
                    }
                )
                async with asyncio.timeout(60):
                    while True:
                        try:
                            greeting = await client.get(
                                "v1", "ConfigMap", "alice-greeting", "default"
                            )
                            break
                        except NotFound:
                            await asyncio.sleep(0.2)
                assert greeting["data"] == {"greeting": "hello, Alice"}
                async with asyncio.timeout(30):
                    while True:
                        events = await client.list(
                            "v1", "Event", "default", field_selector="involvedObject.name=alice"
                        )
                        if any(e.get("reason") == "Greeted" for e in events["items"]):
                            break
                        await asyncio.sleep(0.2)
            async with (
                aiohttp.ClientSession() as http,
                http.get(f"http://127.0.0.1:{port}/readyz?verbose") as resp,
            ):
                assert resp.status == 200
                assert "[+]cacheSync ok" in await resp.text()
            proc.send_signal(signal.SIGTERM)
            async with asyncio.timeout(30):
                assert await proc.wait() == 0
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()


# -- the localcluster.md example --------------------------------------------------------------


def localcluster_example() -> str:
    text = (DOCS / "localcluster.md").read_text()
    for block in re.findall(r"^```python\n(.*?)^```", text, re.S | re.M):
        if "extensions_of(cluster)" in block and "asyncio.run(main())" in block:
            return str(block)
    raise AssertionError("docs/localcluster.md lost its Python API example")


async def test_localcluster_example_prints_what_the_page_says(tmp_path: Path) -> None:
    script = tmp_path / "lc_example.py"
    script.write_text(localcluster_example())
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(script),
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        async with asyncio.timeout(90):
            out, _ = await proc.communicate()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 0
    lines = [line for line in out.decode().splitlines() if line.startswith("list ")]
    assert lines == ["list configmaps 429", "list configmaps 200"]


# -- names the pages promise --------------------------------------------------------------------


def _source_text(*packages: str) -> str:
    return "\n".join(f.read_text() for pkg in packages for f in sorted((ROOT / pkg).rglob("*.py")))


def test_environment_variables_in_operations_md_are_read_by_the_code() -> None:
    text = (DOCS / "operations.md").read_text()
    section = text.split("## Environment variables", 1)[1].split("\n## ", 1)[0]
    names = set(re.findall(r"^\| `([A-Z][A-Z0-9_]+)`", section, re.M))
    for row in re.findall(r"^\| (`[A-Z].*?)\|", section, re.M):
        names |= set(re.findall(r"`([A-Z][A-Z0-9_]+)`", row))
    assert {"ENABLE_WEBHOOKS", "WATCH_NAMESPACE", "OPERATOR_VERSION"} <= names
    source = _source_text("nimctl", "nimctl_runtime", "controllers", "platforms", "manifests", "webhooks")
    unread = sorted(n for n in names if n != "KUBECONFIG" and f'"{n}"' not in source)
    assert not unread, f"operations.md documents env vars nothing reads: {unread}"


def test_localcluster_names_in_docs_exist() -> None:
    from localcluster.simulator import gpu_stack, kubelet
    from localcluster.simulator.nodes import builtin_profiles

    text = (DOCS / "localcluster.md").read_text()
    annotations = set(re.findall(r"localcluster\.nimctl\.io/[a-z-]+", text))
    known = {
        kubelet.SIMULATE_ANNOTATION,
        kubelet.READY_AFTER_ANNOTATION,
        gpu_stack.DRA_PLUGIN_ANNOTATION,
    }
    assert annotations and annotations <= known, annotations - known
    modes_section = text.split("#### Making pods fail", 1)[1].split("\n#", 1)[0]
    modes = set(re.findall(r"^\| `([a-z-]+)` \|", modes_section, re.M))
    assert modes and modes <= set(kubelet.FAILURE_MODES), modes - set(kubelet.FAILURE_MODES)
    profiles_section = text.split("### Node profiles", 1)[1].split("\n### ", 1)[0]
    profiles = set(re.findall(r"^\| `([a-z-]+)` \|", profiles_section, re.M))
    assert profiles and profiles <= set(builtin_profiles()), profiles - set(builtin_profiles())
    extensions = (ROOT / "localcluster" / "extensions.py").read_text()
    endpoints = set(re.findall(r"/debug/([a-z/-]+[a-z])", text))
    missing = sorted(e for e in endpoints if f'"{e}"' not in extensions)
    # paths built from pieces in the code, e.g. simulator/stall and simulator/resume
    missing = [e for e in missing if not e.startswith("faults/rules")]
    assert not missing, f"localcluster.md names debug endpoints that are not served: {missing}"


def test_operator_condition_types_and_reasons_exist() -> None:
    text = (DOCS / "operator.md").read_text()
    # The vocabulary lives in api/; controllers and platforms use it.
    source = _source_text("controllers", "platforms", "api")
    names = set(re.findall(r"`(NIM_CACHE_[A-Z_]+)`", text))
    names |= set(re.findall(r"`((?:NIMCache|Job|PVC)[A-Z][A-Za-z]+)`", text))
    names |= {"finalizer.nimservice.apps.nvidia.com", "finalizer.nimcache.apps.nvidia.com"}
    missing = sorted(n for n in names if f'"{n}"' not in source)
    assert not missing, f"operator.md names conditions/reasons the controllers never use: {missing}"
