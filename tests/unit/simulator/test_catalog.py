from nimctl_runtime.localcluster.catalog import RUN_FOREVER, ImageCatalog, strip_tag


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
