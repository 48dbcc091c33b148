"""charts/nimctl lints and renders with Helm; every object is valid Kubernetes; the
switches, certificate modes and values schema behave as docs/install.md says."""

from __future__ import annotations

import base64
from typing import Any

import kubernetes_validate
import pytest
from cryptography import x509

from tests.integration.chart.helm import find, lint, render, require_helm

pytestmark = pytest.mark.usefixtures("helm")

NS = "nimctl-system"
CRD_KINDS = {"Certificate", "Issuer", "ServiceMonitor"}  # not in Kubernetes' own schemas


@pytest.fixture(scope="module")
def helm() -> Any:
    return require_helm()


def args_of(objects: list[dict[str, Any]]) -> list[str]:
    pod = find(objects, "Deployment")["spec"]["template"]["spec"]
    return list(pod["containers"][0]["args"])


def rules_of(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return list(find(objects, "ClusterRole", "nimctl")["rules"])


def granted(objects: list[dict[str, Any]]) -> set[tuple[str, str]]:
    return {(r["apiGroups"][0], r["resources"][0]) for r in rules_of(objects)}


def test_chart_lints_clean() -> None:
    report = lint()
    problems = [m for m in report["messages"] if m["severity"] >= 2]
    assert report["errors"] == [] and problems == [], report


@pytest.mark.parametrize(
    "values",
    [
        {},
        {"nim": {"enabled": False}},
        {"nemo": {"enabled": False}},
        {"gpu": {"enabled": False}},
        {"operator": {"admissionController": {"enabled": False}}},
        {"serviceMonitor": {"enabled": True}},
        {"operator": {"admissionController": {"tls": {"mode": "cert-manager"}}}},
    ],
    ids=["defaults", "no-nim", "no-nemo", "no-gpu", "no-webhooks", "servicemonitor", "cert-manager"],
)
def test_every_rendered_object_is_valid_kubernetes(values: dict[str, Any]) -> None:
    objects = render(values)
    assert objects
    for obj in objects:
        if obj["kind"] in CRD_KINDS:
            continue
        try:
            kubernetes_validate.validate(obj, "1.32", strict=True)
        except kubernetes_validate.ValidationError as exc:
            pytest.fail(f"{obj['kind']}/{obj['metadata']['name']}: {exc.message} at {list(exc.path)}")


def test_defaults_run_two_leader_elected_replicas_with_probes_and_metrics() -> None:
    objects = render()
    deployment = find(objects, "Deployment")
    assert deployment["spec"]["replicas"] == 2
    pod = deployment["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["command"] == ["nimctl"]
    assert container["args"][:3] == ["--log-format=json", "--log-level=info", "run"]
    assert "--leader-elect" in container["args"]
    assert "--metrics-bind-address=:8080" in container["args"]
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
    assert container["resources"]["limits"] == {"cpu": "1", "memory": "512Mi"}
    assert pod["serviceAccountName"] == "nimctl"
    metrics = find(objects, "Service", "nimctl-metrics-service")
    assert metrics["spec"]["ports"][0]["port"] == 8080
    assert metrics["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
    lease_role = find(objects, "Role", "nimctl-leader-election")
    assert lease_role["metadata"]["namespace"] == NS
    assert lease_role["rules"] == [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "create", "update"]}
    ]


def test_pods_meet_the_restricted_pod_security_standard() -> None:
    pod = find(render(), "Deployment")["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    for c in pod["containers"]:
        sc = c["securityContext"]
        assert sc["allowPrivilegeEscalation"] is False
        assert sc["capabilities"]["drop"] == ["ALL"]
        assert sc["readOnlyRootFilesystem"] is True
    assert not pod.get("hostNetwork") and not pod.get("hostPID")
    assert all("hostPath" not in v for v in pod["volumes"])


def test_user_values_reach_the_pod() -> None:
    objects = render(
        {
            "operator": {
                "replicas": 3,
                "image": {"repository": "registry.example/nimctl", "tag": "v9", "pullSecrets": ["regcred"]},
                "priorityClassName": "system-cluster-critical",
                "nodeSelector": {"node-role.kubernetes.io/control-plane": ""},
                "tolerations": [{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}],
                "watchNamespace": "team-a",
            }
        }
    )
    deployment = find(objects, "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    assert deployment["spec"]["replicas"] == 3
    assert pod["containers"][0]["image"] == "registry.example/nimctl:v9"
    assert pod["imagePullSecrets"] == [{"name": "regcred"}]
    assert pod["priorityClassName"] == "system-cluster-critical"
    assert pod["nodeSelector"] == {"node-role.kubernetes.io/control-plane": ""}
    assert pod["tolerations"][0]["effect"] == "NoSchedule"
    env = {e["name"]: e for e in pod["containers"][0]["env"]}
    assert env["WATCH_NAMESPACE"]["value"] == "team-a"
    assert env["POD_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"


def test_image_tag_defaults_to_the_app_version() -> None:
    pod = find(render(), "Deployment")["spec"]["template"]["spec"]
    assert pod["containers"][0]["image"] == "nimctl:0.1.0"


@pytest.mark.parametrize(
    ("group", "flag", "kind"),
    [
        ("nim", "--disable-nim-controllers", ("apps.nvidia.com", "nimservices")),
        ("nemo", "--disable-nemo-controllers", None),
        ("gpu", "--disable-gpu-lifecycle", None),
    ],
)
def test_each_switch_turns_off_its_controllers_and_their_rules(group: str, flag: str, kind: Any) -> None:
    on = render()
    off = render({group: {"enabled": False}})
    assert flag not in args_of(on)
    assert flag in args_of(off)
    others = [f for f in ("--disable-nim-controllers", "--disable-nemo-controllers", "--disable-gpu-lifecycle") if f != flag]
    assert not set(others) & set(args_of(off))
    if kind is not None:
        assert kind in granted(on)
        assert kind not in granted(off)
    assert granted(off) <= granted(on)


def test_without_nim_there_are_no_nim_webhooks() -> None:
    objects = render({"nim": {"enabled": False}})
    assert not [o for o in objects if o["kind"] == "ValidatingWebhookConfiguration"]
    assert "--enable-webhooks" not in args_of(objects)


def test_optional_api_rules_follow_what_the_cluster_serves() -> None:
    detect = {"rbac": {"optionalAPIs": "detect"}}
    plain = granted(render(detect))
    assert ("gateway.networking.k8s.io", "httproutes") not in plain
    served = granted(render(detect, api_versions=["gateway.networking.k8s.io/v1", "gateway.networking.k8s.io/v1/HTTPRoute"]))
    assert ("gateway.networking.k8s.io", "httproutes") in served
    assert ("gateway.networking.k8s.io", "grpcroutes") not in served
    everything = granted(render())  # the default: the operator may meet them while running
    for optional in [("gateway.networking.k8s.io", "grpcroutes"), ("leaderworkerset.x-k8s.io", "leaderworkersets"), ("monitoring.coreos.com", "servicemonitors"), ("serving.kserve.io", "inferenceservices")]:
        assert optional in everything


@pytest.mark.parametrize("kind", ["ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"])
def test_webhook_configurations_match_what_the_operator_serves(kind: str) -> None:
    from webhooks.setup import mutating_webhook_configuration, validating_webhook_configuration

    build = validating_webhook_configuration if kind.startswith("Validating") else mutating_webhook_configuration
    chart = find(render(), kind)
    ours = build(b"ca", service=(NS, "nimctl-webhook-service", 443))
    for hook in (*chart["webhooks"], *ours["webhooks"]):
        hook["clientConfig"].pop("caBundle", None)
    assert chart["webhooks"] == ours["webhooks"]


def test_defaulting_can_be_turned_off() -> None:
    objects = render({"operator": {"admissionController": {"defaulting": False}}})
    assert not [o for o in objects if o["kind"] == "MutatingWebhookConfiguration"]
    assert "--disable-defaulting" in args_of(objects)
    assert "--disable-defaulting" not in args_of(render())


def test_webhook_names_and_service() -> None:
    from nimctl_runtime.webhook.paths import validate_path
    from webhooks.setup import GROUP, VERSION, WEBHOOKS

    objects = render()
    chart = find(objects, "ValidatingWebhookConfiguration")
    assert [h["name"] for h in chart["webhooks"]] == [w[0] for w in WEBHOOKS]
    assert chart["webhooks"][0]["clientConfig"]["service"]["path"] == validate_path(GROUP, VERSION, "NIMService")
    service = find(objects, "Service", "nimctl-webhook-service")
    assert service["spec"]["ports"][0]["targetPort"] == "webhook-server"


def test_generated_certificates_serve_the_webhook_service_name() -> None:
    objects = render()
    secret = find(objects, "Secret", "nimctl-webhook-server-cert")
    config = find(objects, "ValidatingWebhookConfiguration")
    ca_bundle = config["webhooks"][0]["clientConfig"]["caBundle"]
    assert secret["data"]["ca.crt"] == ca_bundle
    cert = x509.load_pem_x509_certificate(base64.b64decode(secret["data"]["tls.crt"]))
    ca = x509.load_pem_x509_certificate(base64.b64decode(ca_bundle))
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(x509.DNSName)
    assert f"nimctl-webhook-service.{NS}.svc" in names
    assert cert.issuer == ca.subject
    pod = find(objects, "Deployment")["spec"]["template"]["spec"]
    volume = next(v for v in pod["volumes"] if v["name"] == "cert")
    assert volume["secret"]["secretName"] == "nimctl-webhook-server-cert"
    assert "--webhook-cert-dir=/tmp/k8s-webhook-server/serving-certs" in args_of(objects)


def test_cert_manager_mode_requests_a_certificate_and_injects_its_ca() -> None:
    objects = render({"operator": {"admissionController": {"tls": {"mode": "cert-manager"}}}})
    certificate = find(objects, "Certificate")
    assert certificate["spec"]["secretName"] == "nimctl-webhook-server-cert"
    assert certificate["spec"]["issuerRef"] == {"kind": "Issuer", "name": "nimctl-selfsigned-issuer"}
    assert find(objects, "Issuer")["spec"] == {"selfSigned": {}}
    config = find(objects, "ValidatingWebhookConfiguration")
    assert config["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == f"{NS}/nimctl-serving-cert"
    assert not [o for o in objects if o["kind"] == "Secret"]
    # auto picks cert-manager when the cluster serves it.
    auto = render(api_versions=["cert-manager.io/v1"])
    assert find(auto, "Certificate")


def test_bad_values_are_refused_saying_which_key() -> None:
    helm = require_helm()
    with pytest.raises(helm.HelmValuesError) as err:
        render({"operator": {"replicas": "two"}})
    assert "replicas" in str(err.value)
    with pytest.raises(helm.HelmValuesError) as err:
        render({"nim": {"enabeld": False}})
    assert "enabeld" in str(err.value)
    with pytest.raises(helm.HelmValuesError) as err:
        render({"operator": {"admissionController": {"tls": {"mode": "self"}}}})
    assert "mode" in str(err.value)


def test_two_replicas_survive_a_drain_and_a_node_failure() -> None:
    """A PodDisruptionBudget keeps one replica up in a drain; anti-affinity spreads them."""
    objects = render()
    deployment = find(objects, "Deployment")
    selector = deployment["spec"]["selector"]["matchLabels"]
    pdb = find(objects, "PodDisruptionBudget", "nimctl")
    assert pdb["metadata"]["namespace"] == NS
    assert pdb["spec"] == {"minAvailable": 1, "selector": {"matchLabels": selector}}
    anti = deployment["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"]
    term = anti["preferredDuringSchedulingIgnoredDuringExecution"][0]["podAffinityTerm"]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    assert term["labelSelector"]["matchLabels"] == selector
    # one replica: nothing to keep up or spread; a user's affinity replaces ours
    single = render({"operator": {"replicas": 1}})
    assert not [o for o in single if o["kind"] == "PodDisruptionBudget"]
    assert "affinity" not in find(single, "Deployment")["spec"]["template"]["spec"]
    mine = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": "role", "operator": "In", "values": ["infra"]}]}]}}}  # fmt: skip
    custom = render({"operator": {"affinity": mine}})
    assert find(custom, "Deployment")["spec"]["template"]["spec"]["affinity"] == mine


def test_the_operator_may_patch_nimbuilds_for_its_finalizer() -> None:
    rules = [r for r in rules_of(render()) if "nimbuilds" in r.get("resources", [])]
    assert any("patch" in r["verbs"] for r in rules)
