"""deploy/ cannot run here (no Docker engine), so check it agrees with the code: env var names,
port, probe paths, non-root user."""

import re
from pathlib import Path

import yaml

from app.api.health import routes as health_routes
from app.config import Settings
from tests.integration.test_packaging import SERVER_SOURCES

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
KNOWN_ENV = set(Settings.env_vars())
PROBE_PATHS = {r.path for r in health_routes}


def _memwarden_env_names(values) -> set[str]:
    return {name for name in values if name.startswith("MEMWARDEN_")}


def test_dockerfile_runs_as_non_root_on_the_default_port():
    text = (DEPLOY / "Dockerfile").read_text()
    users = re.findall(r"^USER\s+(\S+)", text, re.M)
    assert users and users[-1] not in {"root", "0"}
    assert f"EXPOSE {Settings().port}" in text
    assert _memwarden_env_names(re.findall(r"(MEMWARDEN_[A-Z_]+)=", text)) <= KNOWN_ENV
    assert "/healthz" in text


def test_dockerfile_installs_the_wheel_built_from_the_sources_the_packaging_test_builds():
    """The image runs the built wheel (what test_packaging proves works outside a checkout), not an
    editable checkout, and its build stage copies exactly what that test builds the wheel from."""
    text = (DEPLOY / "Dockerfile").read_text()
    build_stage, runtime_stage = text.split("\nFROM ", 2)[1:]
    copied = {src for line in re.findall(r"^COPY (?!--)(.+)$", build_stage, re.M) for src in line.split()[:-1]}
    assert copied == set(SERVER_SOURCES)
    assert "pip wheel" in build_stage
    assert re.search(r"pip install [^\n]*\.whl", runtime_stage) and "-e " not in runtime_stage
    assert "COPY app" not in runtime_stage


def test_compose_runs_pgvector_with_a_volume_and_known_settings():
    compose = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    db, app = compose["services"]["db"], compose["services"]["app"]
    assert db["image"].startswith("pgvector/pgvector:")
    assert any(v.endswith(":/var/lib/postgresql/data") for v in db["volumes"])
    assert set(compose["volumes"]) >= {"pgdata"}
    env = app["environment"]
    assert _memwarden_env_names(env) <= KNOWN_ENV
    assert "@db:5432/" in env["MEMWARDEN_DATABASE_URL"]
    assert app["ports"][0].endswith(f":{Settings().port}")


def test_kubernetes_probes_ports_and_secret_references_agree_with_the_app():
    deployment = yaml.safe_load((DEPLOY / "k8s" / "deployment.yaml").read_text())
    service = yaml.safe_load((DEPLOY / "k8s" / "service.yaml").read_text())
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert {"/readyz", "/healthz"} <= PROBE_PATHS
    assert container["ports"][0]["containerPort"] == Settings().port
    assert service["spec"]["ports"][0]["targetPort"] == container["ports"][0]["name"]
    names = {e["name"] for e in container["env"]}
    assert names <= KNOWN_ENV
    secret_refs = [e for e in container["env"] if "valueFrom" in e]
    assert {e["name"] for e in secret_refs} >= {"MEMWARDEN_DATABASE_URL", "MEMWARDEN_SECRET_KEY"}
    assert deployment["spec"]["template"]["spec"]["securityContext"]["runAsNonRoot"] is True
