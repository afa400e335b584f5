"""karpenter_py.kube.config and .errors (kept here until tests/unit/kube exists)."""

import base64
import ssl
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from karpenter_py.kube import ConfigError, load_config, load_incluster, load_kubeconfig
from karpenter_py.kube.errors import (
    AlreadyExistsError,
    ApiError,
    ConflictError,
    ForbiddenError,
    GoneError,
    InvalidError,
    NotFoundError,
    ServerError,
    TooManyRequestsError,
    UnauthorizedError,
    error_from_status,
    error_from_watch_status,
)


def write(path: Path, doc: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(doc))
    return path


def kubeconfig(
    server="https://127.0.0.1:6443", user=None, cluster_extra=None, current="main"
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": current,
        "contexts": [
            {"name": "main", "context": {"cluster": "c", "user": "u", "namespace": "kube-system"}}
        ],
        "clusters": [{"name": "c", "cluster": {"server": server, **(cluster_extra or {})}}],
        "users": [{"name": "u", "user": user if user is not None else {"token": "abc"}}],
    }


def test_token_kubeconfig(tmp_path):
    cfg = load_kubeconfig([write(tmp_path / "kc", kubeconfig())])
    assert cfg.server == "https://127.0.0.1:6443"
    assert cfg.token == "abc"
    assert cfg.namespace == "kube-system"
    assert "abc" not in repr(cfg)


def test_relative_ca_and_token_file_paths_resolve_against_the_kubeconfig(tmp_path):
    (tmp_path / "ca.crt").write_text("PEM")
    cfg = load_kubeconfig(
        [
            write(
                tmp_path / "kc",
                kubeconfig(
                    user={"tokenFile": "tok"}, cluster_extra={"certificate-authority": "ca.crt"}
                ),
            )
        ]
    )
    assert cfg.ca_pem == "PEM"
    assert cfg.token_file == str(tmp_path / "tok")


def test_inline_data_and_insecure(tmp_path):
    ca = base64.b64encode(b"CA").decode()
    cfg = load_kubeconfig(
        [
            write(
                tmp_path / "kc",
                kubeconfig(
                    cluster_extra={
                        "certificate-authority-data": ca,
                        "insecure-skip-tls-verify": True,
                    }
                ),
            )
        ]
    )
    assert cfg.ca_pem == "CA"
    assert cfg.insecure_skip_tls_verify


def test_merge_first_file_wins_and_context_override(tmp_path):
    a = kubeconfig(server="https://a")
    b = kubeconfig(server="https://b")
    b["contexts"].append({"name": "other", "context": {"cluster": "c2", "user": "u"}})
    b["clusters"].append({"name": "c2", "cluster": {"server": "https://c2"}})
    b["current-context"] = "other"
    paths = [write(tmp_path / "a", a), write(tmp_path / "b", b)]
    assert load_kubeconfig(paths).server == "https://a"  # a's current-context and cluster "c" win
    assert load_kubeconfig(paths, context="other").server == "https://c2"


def test_env_kubeconfig(tmp_path, monkeypatch):
    path = write(tmp_path / "kc", kubeconfig(server="https://env"))
    monkeypatch.setenv("KUBECONFIG", f"{tmp_path / 'missing'}:{path}")
    assert load_config().server == "https://env"
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    with pytest.raises(ConfigError, match="KUBECONFIG"):
        load_config()


@pytest.mark.parametrize(
    ("user", "match"),
    [
        ({"exec": {"command": "aws"}}, "exec"),
        ({"client-certificate-data": base64.b64encode(b"x").decode()}, "without its key"),
        ({"client-key-data": "!!!notbase64"}, "base64"),
    ],
)
def test_unsupported_or_broken_users(tmp_path, user, match):
    with pytest.raises(ConfigError, match=match):
        load_kubeconfig([write(tmp_path / "kc", kubeconfig(user=user))])


def test_missing_context_and_file(tmp_path):
    with pytest.raises(ConfigError, match="context"):
        load_kubeconfig([write(tmp_path / "kc", kubeconfig(current="nope"))])
    with pytest.raises(ConfigError, match="cannot read"):
        load_kubeconfig([tmp_path / "absent"])


def test_in_cluster(tmp_path):
    (tmp_path / "token").write_text("sa-token")
    (tmp_path / "namespace").write_text("karpenter\n")
    (tmp_path / "ca.crt").write_text("PEM")
    cfg = load_incluster(
        {"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "443"}, tmp_path
    )
    assert cfg.server == "https://[fd00::1]:443"
    assert cfg.token_file == str(tmp_path / "token")
    assert cfg.token is None
    assert cfg.namespace == "karpenter"
    with pytest.raises(ConfigError):
        load_incluster({}, tmp_path)


def test_ssl_context_with_client_certificate(tmp_path):
    key, crt = tmp_path / "k.pem", tmp_path / "c.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", crt,
         "-days", "1", "-subj", "/CN=admin"],
        check=True, capture_output=True,
    )  # fmt: skip
    doc = kubeconfig(
        server="https://127.0.0.1:6443",
        user={"client-certificate": str(crt), "client-key": str(key)},
        cluster_extra={"certificate-authority": str(crt)},
    )
    cfg = load_kubeconfig([write(tmp_path / "kc", doc)])
    ctx = cfg.ssl_context()
    assert isinstance(ctx, ssl.SSLContext)
    assert ctx.verify_mode == ssl.CERT_REQUIRED
    assert (
        load_kubeconfig([write(tmp_path / "kc2", kubeconfig(server="http://x"))]).ssl_context()
        is None
    )


# ----------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("status", "reason", "cls"),
    [
        (401, "Unauthorized", UnauthorizedError),
        (403, "Forbidden", ForbiddenError),
        (404, "NotFound", NotFoundError),
        (409, "Conflict", ConflictError),
        (409, "AlreadyExists", AlreadyExistsError),
        (410, "Expired", GoneError),
        (422, "Invalid", InvalidError),
        (429, "TooManyRequests", TooManyRequestsError),
        (500, "InternalError", ServerError),
        (504, "Timeout", ServerError),
        (418, "Teapot", ApiError),
    ],
)
def test_status_mapping(status, reason, cls):
    err = error_from_status(
        status, {"reason": reason, "message": "m"}, verb="get", resource="pods", name="p"
    )
    assert type(err) is cls
    assert (err.status, err.reason, err.message) == (status, reason, "m")
    assert str(err) == f"get pods p: {status} {reason}: m"


def test_retry_after_from_header_or_details():
    first = error_from_status(429, {}, retry_after="3")
    assert isinstance(first, TooManyRequestsError)
    assert first.retry_after == 3.0
    err = error_from_status(429, {"details": {"retryAfterSeconds": 9}})
    assert isinstance(err, TooManyRequestsError)
    assert err.retry_after == 9.0
    dated = error_from_status(429, {}, retry_after="Wed, 21 Oct 2015 07:28:00 GMT")
    assert isinstance(dated, TooManyRequestsError)
    assert dated.retry_after is None  # HTTP-date form is not something the apiserver sends


def test_watch_status_410_is_gone():
    err = error_from_watch_status(
        {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old"}
    )
    assert isinstance(err, GoneError)
    assert err.relist_required
    assert err.verb == "watch"
    assert isinstance(error_from_watch_status({"message": "?"}), ServerError)


def test_error_from_non_status_body():
    err = error_from_status(502, b"<html>bad gateway</html>")
    assert isinstance(err, ServerError)
    assert "bad gateway" in err.message
    assert error_from_status(404, b"").message == ""
