"""What the Dockerfile's runtime stage sets, for the compose and Kubernetes tests to agree with."""

from __future__ import annotations

import re

from tests.support import REPO


def dockerfile_env() -> dict[str, str]:
    runtime = (REPO / "Dockerfile").read_text().split("\nFROM ")[-1]
    return dict(re.findall(r"(STREAMCRAWL_[A-Z_]+)=(\S+)", runtime))
