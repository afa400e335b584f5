"""manifests/aws/controller-iam-policy.json grants every AWS call the provider makes, and only
those: the operations are read from the source (client method calls and paginated operation
names), so a new call without a policy line fails here."""

from __future__ import annotations

import json
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[4]
POLICY = REPO / "manifests" / "aws" / "controller-iam-policy.json"
SOURCE = REPO / "karpenter_py" / "cloudprovider" / "aws"
SERVICES = {
    "ec2": "ec2",
    "iam": "iam",
    "ssm": "ssm",
    "sqs": "sqs",
    "eks": "eks",
    "pricing": "pricing",
}
# A client attribute (self._sqs, clients.ec2, ...) followed by a botocore operation call.
CALL = re.compile(r"\b_?(ec2|iam|ssm|sqs|eks|pricing)\.([a-z]+(?:_[a-z]+)+)\(")
PAGINATED = re.compile(r"paginate\(\s*[\w.]*?\b_?(ec2|iam|ssm|sqs|eks|pricing)\s*,\s*\"([a-z_]+)\"")
# Methods of our own objects that share a client's attribute name (self.pricing, self.ssm).
NOT_API = {"get_paginator", "on_demand", "invalidate_mutable"}
# IAM actions a call needs beyond its own name.
IMPLIED = {
    "sqs:DeleteMessageBatch": "sqs:DeleteMessage",  # batch deletes are authorised per message
}
# Needed though no method of that name is called: tags on create, passing the node role.
EXTRA = {"iam:PassRole", "iam:TagInstanceProfile"}


def _action(service: str, op: str) -> str:
    return f"{SERVICES[service]}:{''.join(p.capitalize() for p in op.split('_'))}"


def used_actions() -> set[str]:
    out: set[str] = set()
    for path in SOURCE.glob("*.py"):
        text = path.read_text()
        for pattern in (CALL, PAGINATED):
            for service, op in pattern.findall(text):
                if op not in NOT_API:
                    action = _action(service, op)
                    out.add(IMPLIED.get(action, action))
    return out


def granted_actions() -> set[str]:
    doc = json.loads(POLICY.read_text())
    out: set[str] = set()
    for statement in doc["Statement"]:
        assert statement["Effect"] == "Allow"
        actions = statement["Action"]
        out.update([actions] if isinstance(actions, str) else actions)
    return out


def test_every_call_is_granted() -> None:
    assert used_actions() - granted_actions() == set()


def test_nothing_is_granted_beyond_what_the_code_calls() -> None:
    assert granted_actions() - used_actions() - EXTRA == set()


def test_no_wildcard_actions() -> None:
    assert [a for a in granted_actions() if "*" in a] == []
