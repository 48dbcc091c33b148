"""Every NIMCache admission rule (nim-operator.md §6.2), denied with NVIDIA's path and message."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from nimctl_runtime.meta import Obj
from nimctl_runtime.webhook import ValidationFailed
from webhooks.nimcache import NIMCacheValidator, valid_no_proxy_token


def base() -> Obj:
    return {
        "apiVersion": "apps.nvidia.com/v1alpha1",
        "kind": "NIMCache",
        "metadata": {"name": "llm-cache", "namespace": "nim"},
        "spec": {
            "source": {
                "ngc": {
                    "modelPuller": "nvcr.io/nim/meta/llama-3.1-8b-instruct:1.3.3",
                    "pullSecret": "ngc-secret",
                    "authSecret": "ngc-api-secret",
                    "model": {"engine": "tensorrt_llm", "tensorParallelism": "1"},
                }
            },
            "storage": {"pvc": {"create": True, "size": "50Gi", "volumeAccessMode": "ReadWriteOnce"}},
        },
    }


def with_(change: Callable[[Obj], None]) -> Obj:
    obj = base()
    change(obj["spec"])
    return obj


def ngc(s: Obj) -> Obj:
    result: Obj = s["source"]["ngc"]
    return result


DENIED: list[tuple[str, Callable[[Obj], None], str]] = [
    ("all plus more", lambda s: ngc(s).update(model={"profiles": ["all", "abc"]}), "nimcache.spec.source.ngc.model.profiles: Invalid value: [\"all\",\"abc\"]: must only have a single entry when it contains 'all'"),
    ("profiles with engine", lambda s: ngc(s)["model"].update(profiles=["abc"]), "nimcache.spec.source.ngc.model.engine: Forbidden: must be empty if nimcache.spec.source.ngc.model.profiles is provided"),
    ("profiles with tp", lambda s: ngc(s).update(model={"profiles": ["abc"], "tensorParallelism": "2"}), "nimcache.spec.source.ngc.model.tensorParallelism: Forbidden: must be empty if nimcache.spec.source.ngc.model.profiles is provided"),
    ("profiles with precision", lambda s: ngc(s).update(model={"profiles": ["abc"], "precision": "fp8"}), "nimcache.spec.source.ngc.model.precision: Forbidden"),
    ("profiles with qos", lambda s: ngc(s).update(model={"profiles": ["abc"], "qosProfile": "latency"}), "nimcache.spec.source.ngc.model.qosProfile: Forbidden"),
    ("profiles with gpus", lambda s: ngc(s).update(model={"profiles": ["abc"], "gpus": [{"product": "h100"}]}), "nimcache.spec.source.ngc.model.gpus: Forbidden"),
    ("profiles with lora", lambda s: ngc(s).update(model={"profiles": ["abc"], "lora": True}), "nimcache.spec.source.ngc.model.lora: Forbidden"),
    ("profiles with buildable", lambda s: ngc(s).update(model={"profiles": ["abc"], "buildable": False}), "nimcache.spec.source.ngc.model.buildable: Forbidden"),
    ("qos unknown", lambda s: ngc(s)["model"].update(qosProfile="fast"), 'nimcache.spec.source.ngc.model.qosProfile: Unsupported value: "fast": supported values: "latency", "throughput"'),
    ("no auth secret", lambda s: ngc(s).pop("authSecret"), "nimcache.spec.source.ngc.authSecret: Required value: must be non-empty"),
    ("no model puller", lambda s: ngc(s).update(modelPuller=""), "nimcache.spec.source.ngc.modelPuller: Required value: must be non-empty"),
    ("hostPath only", lambda s: s.update(storage={"hostPath": "/models"}), "nimcache.spec.storage: Required value: must not be empty"),
    ("pvc without name", lambda s: s.update(storage={"pvc": {"size": "10Gi"}}), "nimcache.spec.storage.pvc.name: Required value: must be provided when nimcache.spec.storage.pvc.create is false"),
    ("pvc access mode", lambda s: s["storage"]["pvc"].update(volumeAccessMode="RWO"), 'nimcache.spec.storage.pvc.volumeAccessMode: Invalid value: "RWO": unrecognized volumeAccessMode'),
    ("noProxy token", lambda s: s.update(proxy={"noProxy": "localhost,bad_host!"}), 'nimcache.spec.proxy.noProxy: Invalid value: "bad_host!": invalid token'),
    ("httpProxy scheme", lambda s: s.update(proxy={"httpProxy": "proxy:3128"}), 'nimcache.spec.proxy.httpProxy: Invalid value: "proxy:3128": must start with http:// or https://'),
    ("httpsProxy scheme", lambda s: s.update(proxy={"httpsProxy": "socks5://p"}), 'nimcache.spec.proxy.httpsProxy: Invalid value: "socks5://p": must start with http:// or https://'),
]


@pytest.mark.parametrize(("case", "change", "expected"), DENIED, ids=[d[0] for d in DENIED])
async def test_rule_denies(case: str, change: Callable[[Obj], None], expected: str) -> None:
    with pytest.raises(ValidationFailed) as info:
        await NIMCacheValidator().validate_create(with_(change))
    assert expected in str(info.value)


ALLOWED: list[tuple[str, Callable[[Obj], None]]] = [
    ("base", lambda s: None),
    ("all", lambda s: ngc(s).update(model={"profiles": ["all"]})),
    ("explicit profiles", lambda s: ngc(s).update(model={"profiles": ["a", "b"]})),
    ("qos", lambda s: ngc(s)["model"].update(qosProfile="throughput")),
    ("hf source", lambda s: s.update(source={"hf": {"endpoint": "https://huggingface.co", "namespace": "meta", "modelName": "m", "authSecret": "hf", "modelPuller": "p", "pullSecret": "s"}})),
    ("existing pvc", lambda s: s.update(storage={"pvc": {"name": "models"}})),
    ("proxy", lambda s: s.update(proxy={"httpProxy": "http://proxy:3128", "httpsProxy": "https://proxy:3128", "noProxy": "localhost,.svc,10.0.0.0/8,127.0.0.1:8080,[::1],[fd00::]/8,example.com"})),
]


@pytest.mark.parametrize(("case", "change"), ALLOWED, ids=[a[0] for a in ALLOWED])
async def test_rule_respected_is_allowed(case: str, change: Callable[[Obj], None]) -> None:
    assert await NIMCacheValidator().validate_create(with_(change)) == []


async def test_spec_is_immutable_after_creation() -> None:
    old, new = base(), base()
    new["spec"]["storage"]["pvc"]["size"] = "100Gi"
    with pytest.raises(ValidationFailed, match=r"^nimcache.spec: Forbidden: is immutable once the object is created$"):
        await NIMCacheValidator().validate_update(old, new)
    relabelled = base()
    relabelled["metadata"]["labels"] = {"team": "a"}
    assert await NIMCacheValidator().validate_update(old, relabelled) == []


@pytest.mark.parametrize(
    ("token", "ok"),
    [("localhost", True), (".cluster.local", True), ("10.0.0.1:80", True), ("10.0.0.0/8", True),
     ("[::1]:443", True), ("[fd00::]/8", True), ("a b", False), ("10.0.0.1:99999", False), ("[zz]", False)],
)
def test_no_proxy_tokens(token: str, ok: bool) -> None:
    assert valid_no_proxy_token(token) is ok
