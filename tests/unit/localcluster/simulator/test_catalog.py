from localcluster.catalog import RUN_FOREVER, ImageCatalog, strip_tag


def test_unknown_images_run_forever_and_tests_can_override() -> None:
    cat = ImageCatalog()
    assert cat.resolve("docker.io/library/nginx:1.27") is RUN_FOREVER
    cat.set("docker.io/library/nginx", logs="ready\n", exit_code=0)
    assert cat.resolve("docker.io/library/nginx:1.27").logs == "ready\n"
    cat.reset()
    assert cat.resolve("docker.io/library/nginx:1.27") is RUN_FOREVER


def test_nim_manifest_probe_and_cache_commands_are_built_in() -> None:
    cat = ImageCatalog()
    probe = cat.resolve(
        "nvcr.io/nim/meta/llama-3.1-8b-instruct:1.3.3",
        ["sh", "-c", "if [ -f /opt/nim/etc/default/model_manifest.yaml ]; then cat x; fi"],
    )
    assert "tensorrt_llm" in probe.logs and probe.exit_code is None
    cache = cat.resolve(
        "nvcr.io/nim/meta/llama-3.1-8b-instruct:1.3.3", ["download-to-cache"], ["--all"]
    )
    assert cache.exit_code == 0


def test_command_specific_rule_wins_over_image_rule() -> None:
    cat = ImageCatalog()
    cat.set("registry.local/tool:*", logs="default\n", exit_code=0)
    cat.set("registry.local/tool:*", logs="failed\n", exit_code=2, command="--break")
    assert cat.resolve("registry.local/tool:1", ["run"]).exit_code == 0
    assert cat.resolve("registry.local/tool:1", ["run"], ["--break"]).exit_code == 2
    assert strip_tag("localhost:5000/a/b:1@sha256:abc") == "localhost:5000/a/b"


def test_a_nim_logs_its_start_with_the_model_its_image_names() -> None:
    from localcluster.simulator.kubelet import container_logs

    def pod(image: str, env: list[dict[str, str]] | None = None) -> dict[str, object]:
        container = {"name": "nim", "image": image, "env": env or []}
        return {"metadata": {"name": "p"}, "spec": {"containers": [container]}}

    cat = ImageCatalog()
    logs = container_logs(
        pod("nvcr.io/nim/nvidia/nv-embedqa-e5-v5:1.5.0"), "nim", cat, started=True
    )
    assert "Model nvidia/nv-embedqa-e5-v5 loaded" in logs
    assert "NIM version: 1.5.0" in logs and "Uvicorn running on http://0.0.0.0:8000" in logs
    multi = pod(
        "nvcr.io/nim/nvidia/llm-nim:1.12.0",
        [{"name": "NIM_MODEL_NAME", "value": "hf://meta-llama/Llama-3.1-8B-Instruct"}],
    )
    assert "Loading model hf://meta-llama/Llama-3.1-8B-Instruct" in container_logs(
        multi, "nim", cat, started=True
    )
    assert container_logs(pod("nginx"), "nim", cat, started=True) == ""
