"""Bad input gives one clear line on stderr (file, document, object, field) and exit status 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from karpenter_py.cli.main import main
from tests.unit.cli.conftest import Captured, Writer, node, nodeclaim, nodepool, pod, workload

BAD_YAML = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: [unclosed\n"


def deployment_with(**spec: object) -> dict[str, object]:
    doc = workload("Deployment", "web")
    doc["spec"].update(spec)  # type: ignore[attr-defined]
    return doc


CASES = [
    # (id, documents after a valid NodePool, expected document number, fragments in the message)
    (
        "yaml-syntax",
        [BAD_YAML],
        2,
        ["invalid YAML", "(while parsing a flow sequence started at line"],
    ),
    (
        "unknown-kind",
        [{"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}],
        2,
        ["(Widget w)", "kind:", "unknown kind 'Widget'"],
    ),
    ("not-an-object", ["- just\n- a list\n"], 2, ["expected a Kubernetes object, got list"]),
    (
        "missing-kind",
        [{"apiVersion": "v1", "metadata": {"name": "x"}}],
        2,
        ["kind: kind is required"],
    ),
    (
        "wrong-api-version",
        [{**pod("p"), "apiVersion": "apps/v1"}],
        2,
        ["(Pod p)", "apiVersion:", "'apps/v1'"],
    ),
    (
        "old-nodepool-version",
        [{**nodepool("old"), "apiVersion": "karpenter.sh/v1alpha5"}],
        2,
        ["(NodePool old)", "apiVersion:"],
    ),
    ("nodepool-weight", [nodepool("heavy", weight=500)], 2, ["(NodePool heavy)", "spec.weight:"]),
    (
        "nodepool-bad-operator",
        [
            nodepool(
                "ops",
                template_spec={"requirements": [{"key": "a", "operator": "Near", "values": ["1"]}]},
            )
        ],
        2,
        ["(NodePool ops)", "spec.template.spec.requirements[0]"],
    ),
    (
        "pod-bad-quantity",
        [
            {
                **pod("q"),
                "spec": {
                    "containers": [{"name": "c", "resources": {"requests": {"cpu": "1.5.5"}}}]
                },
            }
        ],
        2,
        ["(Pod q)", "spec.containers[0].resources.requests", "1.5.5"],
    ),
    (
        "deployment-bad-quantity",
        [
            {
                **deployment_with(replicas=1),
                "spec": {
                    "selector": {"matchLabels": {"app": "web"}},
                    "template": {
                        "metadata": {"labels": {"app": "web"}},
                        "spec": {
                            "containers": [
                                {"name": "c", "resources": {"limits": {"memory": "lots"}}}
                            ]
                        },
                    },
                },
            }
        ],
        2,
        ["(Deployment web)", "spec.template.spec.containers[0].resources.limits", "lots"],
    ),
    (
        "negative-replicas",
        [deployment_with(replicas=-1)],
        2,
        ["(Deployment web)", "spec.replicas:"],
    ),
    ("string-replicas", [deployment_with(replicas="3")], 2, ["spec.replicas: expected an integer"]),
    (
        "no-template",
        [
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": "web"},
                "spec": {"replicas": 1},
            }
        ],
        2,
        ["spec.template:"],
    ),
    (
        "selector-mismatch",
        [deployment_with(selector={"matchLabels": {"app": "other"}})],
        2,
        ["spec.selector: does not match"],
    ),
    (
        "pod-without-name",
        [{"apiVersion": "v1", "kind": "Pod", "spec": {"containers": [{"name": "c"}]}}],
        2,
        ["metadata.name"],
    ),
    ("duplicate-pod", [pod("twin"), pod("twin")], 3, ["(Pod twin)", "default/twin", "document 2"]),
    (
        "bad-taint-effect",
        [
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": "n"},
                "spec": {"taints": [{"key": "k", "effect": "Sometimes"}]},
            }
        ],
        2,
        ["(Node n)", "spec.taints[0].effect"],
    ),
    (
        "ec2nodeclass-invalid",
        [
            {
                "apiVersion": "karpenter.k8s.aws/v1",
                "kind": "EC2NodeClass",
                "metadata": {"name": "default"},
                "spec": {"role": "r", "amiFamily": "Plan9"},
            }
        ],
        2,
        ["(EC2NodeClass default)", "spec."],
    ),
    (
        "nodepool-no-nodeclassref",
        [
            {
                "apiVersion": "karpenter.sh/v1",
                "kind": "NodePool",
                "metadata": {"name": "bare"},
                "spec": {"template": {"spec": {"requirements": []}}},
            }
        ],
        2,
        ["(NodePool bare)", "spec.template.spec.nodeClassRef: Field required"],
    ),
    (
        "nodeclaim-twice",
        [nodeclaim("default-a"), nodeclaim("default-a")],
        3,
        ["(NodeClaim default-a)", "NodeClaim default-a is also defined by", "document 2"],
    ),
    (
        "nodeclaim-in-flight-named-like-a-node",
        [node("node-1"), nodeclaim("node-1")],
        3,
        ["(NodeClaim node-1)", "status.nodeName: node node-1 is defined twice"],
    ),
    (
        "list-item",
        [
            {
                "apiVersion": "v1",
                "kind": "List",
                "items": [pod("ok"), {"kind": "Gadget", "apiVersion": "v9"}],
            }
        ],
        2,
        ["items[1].kind", "Gadget"],
    ),
]


@pytest.mark.parametrize(
    ("docs", "document", "fragments"), [pytest.param(d, n, f, id=i) for i, d, n, f in CASES]
)
def test_bad_documents(
    capsys: pytest.CaptureFixture[str],
    write: Writer,
    catalog_file: str,
    captured: Captured,
    docs: list[object],
    document: int,
    fragments: list[str],
) -> None:
    path = write(nodepool(), *docs)
    code = main(["plan", "-f", path, "--instance-types", catalog_file])
    out, err = capsys.readouterr()
    assert code == 2
    assert out == ""
    assert captured.inputs == []  # nothing was planned
    assert err.count("\n") == 1, err  # one line
    assert err.startswith(f"error: {path}: document {document}")
    assert "Traceback" not in err
    for fragment in fragments:
        assert fragment in err


@pytest.mark.parametrize(
    ("setup", "fragments"),
    [
        pytest.param("missing-file", ["nope.yaml: no such file"], id="missing-file"),
        pytest.param(
            "no-nodepool",
            ["no NodePool or Node found; plan needs a NodePool to launch nodes for, or Nodes to"],
            id="no-nodepool",
        ),
        pytest.param("empty-dir", ["directory holds no"], id="empty-directory"),
        pytest.param("catalog-missing", ["absent.json: no such file"], id="catalog-missing"),
        pytest.param("catalog-json", ["bad.json: invalid JSON at line 1"], id="catalog-syntax"),
        pytest.param("catalog-shape", ["shape.json: catalog[0]"], id="catalog-shape"),
        pytest.param(
            "catalog-empty", ["empty.json: the catalog lists no instance types"], id="catalog-empty"
        ),
    ],
)
def test_bad_files(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    write: Writer,
    catalog_file: str,
    captured: Captured,
    setup: str,
    fragments: list[str],
) -> None:
    good = write(nodepool(), pod("x"))
    files, catalog = [good], catalog_file
    if setup == "missing-file":
        files = [str(tmp_path / "nope.yaml")]
    elif setup == "no-nodepool":
        files = [write(pod("x"), name="pods.yaml")]
    elif setup == "empty-dir":
        (tmp_path / "empty").mkdir()
        files = [str(tmp_path / "empty")]
    elif setup == "catalog-missing":
        catalog = str(tmp_path / "absent.json")
    else:
        name, text = {
            "catalog-json": ("bad.json", "[{"),
            "catalog-shape": ("shape.json", json.dumps([{"name": "x"}])),
            "catalog-empty": ("empty.json", "[]"),
        }[setup]
        (tmp_path / name).write_text(text, encoding="utf-8")
        catalog = str(tmp_path / name)
    args = ["plan", "--instance-types", catalog]
    for f in files:
        args += ["-f", f]
    code = main(args)
    out, err = capsys.readouterr()
    assert (code, out) == (2, "")
    assert err.startswith("error: ")
    assert err.count("\n") == 1, err
    for fragment in fragments:
        assert fragment in err
    assert captured.inputs == []


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["plan"], id="no-file"),
        pytest.param(["plan", "-f", "x.yaml", "-o", "yaml"], id="bad-output"),
        pytest.param([], id="no-command"),
        pytest.param(["frobnicate"], id="unknown-command"),
    ],
)
def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    assert "usage:" in capsys.readouterr().err


def test_yaml_error_names_the_line_in_the_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, captured: Captured
) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n---\n" + BAD_YAML)
    assert main(["plan", "-f", str(path)]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"error: {path}: document 2: invalid YAML: expected ',' or ']', but got '<stream end>' "
        "at line 9, column 1 (while parsing a flow sequence started at line 8)\n"
    )
