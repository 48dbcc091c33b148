"""Property: any ClusterPolicy built from NVIDIA's component fields survives
YAML -> model -> YAML with exactly the user's fields and values, and the API
server's defaulting of it equals the model's."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML

from api.crdgen import generate_crds
from api.serialize import dump, dump_yaml, load, to_plain
from localcluster import schema as schema_mod
from tests.unit.api_gpu.cases import BASES

COMPONENTS = (
    "driver", "toolkit", "devicePlugin", "dcgm", "dcgmExporter", "gfd", "nodeStatusExporter",
    "migManager", "gds", "gdrcopy", "vfioManager", "sandboxDevicePlugin", "vgpuManager",
    "vgpuDeviceManager", "ccManager", "kataSandboxDevicePlugin",
)
SCHEMA = next(
    c for c in generate_crds() if c["spec"]["names"]["kind"] == "ClusterPolicy"
)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]

words = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-./:", min_size=1, max_size=12)
env_names = st.from_regex(r"\A[A-Z_][A-Z0-9_]{0,10}\Z")
component = st.fixed_dictionaries(
    {},
    optional={
        "enabled": st.booleans(),
        "repository": words,
        "image": st.from_regex(r"\A[a-z][a-z0-9-]{0,10}\Z"),
        "version": words,
        "imagePullPolicy": st.sampled_from(["Always", "IfNotPresent", "Never", "Sometimes"]),
        "imagePullSecrets": st.lists(words, max_size=2),
        "args": st.lists(words, max_size=3),
        "env": st.lists(
            st.fixed_dictionaries({"name": env_names}, optional={"value": words}), max_size=3
        ),
        "resources": st.fixed_dictionaries(
            {}, optional={"limits": st.dictionaries(st.sampled_from(["cpu", "memory"]),
                                                    st.sampled_from(["1", "500m", "2Gi"]))}
        ),
    },
)
specs = st.dictionaries(st.sampled_from(COMPONENTS), component, max_size=6)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(specs)
def test_clusterpolicy_round_trips_and_defaults_like_the_api_server(
    sections: dict[str, Any],
) -> None:
    obj = copy.deepcopy(BASES["ClusterPolicy"])
    obj["spec"].update(sections)
    model = load(obj)
    assert dump(model) == obj
    assert dump(load(dump_yaml(model))) == obj
    # kubectl reads the YAML back as the same object (YAML 1.1, as kubectl does).
    yaml = YAML(typ="safe", pure=True)
    yaml.version = (1, 1)
    assert to_plain(yaml.load(dump_yaml(model))) == obj
    stored = schema_mod.apply_defaults(SCHEMA, copy.deepcopy(obj))
    assert dump(model, defaults=True) == stored
    assert schema_mod.validate_custom_resource(SCHEMA, stored, None) == []
