"""Benchmark: how long parsing, dumping and CRD generation take for the NIM kinds.

Run: .venv/bin/python -m tests.bench.api_parse   (prints figures; never fails on time)
"""

from __future__ import annotations

import time
from pathlib import Path

from ruamel.yaml import YAML

from api.crdgen import generate_crds
from api.serialize import dump, load, to_plain

MANIFESTS = sorted((Path(__file__).resolve().parents[1] / "unit/api/manifests").glob("*.yaml"))


def _per_call(fn: object, n: int) -> float:
    assert callable(fn)
    fn()
    start = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - start) / n * 1000


def main() -> None:
    yaml = YAML(typ="safe", pure=True)
    for path in MANIFESTS:
        obj = to_plain(yaml.load(path.read_text()))
        model = load(obj)
        parse = _per_call(lambda obj=obj: load(obj), 50)
        out = _per_call(lambda model=model: dump(model), 200)
        print(f"{path.stem:28s} load {parse:7.2f} ms  dump {out:6.3f} ms  ratio {parse / out:6.1f}")
    print(f"generate_crds {_per_call(generate_crds, 3):8.1f} ms")


if __name__ == "__main__":
    main()
