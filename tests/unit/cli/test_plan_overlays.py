"""``plan -f`` with a NodeOverlay: with the NodeOverlay gate on (read as the controller reads it:
``--feature-gates`` over ``FEATURE_GATES``) the overlay's price changes the instance type chosen;
with it off the overlay is ignored, with a warning."""

from __future__ import annotations

import json
from typing import Any

import pytest

from karpenter_py.cli.main import main
from tests import factories
from tests.unit.cli.conftest import Writer, nodepool, pod

CHEAPEST = "c-2x-amd64-linux"
IGNORED = (
    "warning: {path}: document 3 (NodeOverlay pricey-c2): ignored: the NodeOverlay feature gate "
    "is off (FEATURE_GATES or --feature-gates NodeOverlay=true turns it on)\n"
)


def _choice(out: str) -> list[tuple[str, str, float]]:
    plan: dict[str, Any] = json.loads(out)
    return [(c["instanceType"], c["capacityType"], c["price"]) for c in plan["nodeClaims"]]


@pytest.mark.parametrize(
    ("env", "flags", "expected", "warned"),
    [
        # Gate off (the default): the cheapest type, the overlay ignored.
        (None, [], [(CHEAPEST, "spot", 0.032)], True),
        # On: c-2x now costs 1.0, so the arm64 4-cpu type (spot 0.048) is cheapest.
        ("NodeOverlay=true", [], [("c-4x-arm64-linux", "spot", 0.048)], False),
        (
            None,
            ["--feature-gates", "NodeOverlay=true"],
            [("c-4x-arm64-linux", "spot", 0.048)],
            False,
        ),
        # The flag wins over the variable, as for the controller.
        (
            "NodeOverlay=true",
            ["--feature-gates", "NodeOverlay=false"],
            [(CHEAPEST, "spot", 0.032)],
            True,
        ),
    ],
)
def test_overlay_changes_the_choice_with_the_gate_on(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    write: Writer,
    catalog_file: str,
    env: str | None,
    flags: list[str],
    expected: list[tuple[str, str, float]],
    warned: bool,
) -> None:
    if env is None:
        monkeypatch.delenv("FEATURE_GATES", raising=False)
    else:
        monkeypatch.setenv("FEATURE_GATES", env)
    path = write(
        nodepool(),
        pod("web", cpu="500m"),
        factories.nodeoverlay_dict(
            "pricey-c2",
            requirements=[
                {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": [CHEAPEST]}
            ],
            price="1",
        ),
    )
    code = main(["plan", "-f", path, "--instance-types", catalog_file, "-o", "json", *flags])
    out, err = capsys.readouterr()
    assert code == 0
    assert _choice(out) == expected
    assert err == (IGNORED.format(path=path) if warned else "")


def test_a_bad_gate_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], write: Writer, catalog_file: str
) -> None:
    path = write(nodepool(), pod("web"))
    code = main(["plan", "-f", path, "--feature-gates", "NodeOverlay=maybe"])
    assert (code, capsys.readouterr().err) == (
        2,
        'error: --feature-gates="NodeOverlay=maybe": NodeOverlay=maybe is not true or false\n',
    )
