"""No secret in the logs at any level: a launch against moto with ``LOG_LEVEL=debug`` writes
neither the AWS credentials (access key id, secret key, session token) nor the launch
template's user data.

botocore logs request headers (the ``Authorization`` header names the access key id,
``X-Amz-Security-Token`` carries the session token) and request parameters (``UserData``) at
DEBUG; :func:`~karpenter_py.obs.logging.configure_logging` holds the SDK's loggers at INFO.
"""

from __future__ import annotations

import base64
import io
import logging
from collections.abc import Iterator
from typing import Final

import pytest

from karpenter_py.cloudprovider.aws.clients import AwsClients
from karpenter_py.manager.aws import open_aws
from karpenter_py.manager.settings import load_settings
from karpenter_py.obs.logging import configure_logging
from tests.aws.test_provider import _moto_ami, nodeclaim, nodeclass_dict
from tests.motofixture import CLUSTER, MotoServer, seed_network

# Fake credentials moto accepts, distinctive enough that no other log text contains them.
ACCESS_KEY_ID: Final = "AKIAKARPYLOGTEST0001"
SECRET_ACCESS_KEY: Final = "karpy/secret/never+logged/0123456789abcdef"
SESSION_TOKEN: Final = "KarpySessionTokenNeverLogged//abcdef0123456789=="
USER_DATA_MARKER: Final = "karpy-user-data-never-logged"
USER_DATA: Final = f"#!/bin/bash\necho {USER_DATA_MARKER}\n"
SDK_LOGGERS: Final = ("botocore", "aiobotocore", "boto3", "urllib3", "s3transfer")
# Every logger whose level configure_logging sets: restored after the test, or a later test's
# asyncio debug records reach a handler an earlier test left on a closed capture stream.
TOUCHED_LOGGERS: Final = (*SDK_LOGGERS, "aiohttp.access", "aiohttp.server", "asyncio")


@pytest.fixture
def debug_log() -> Iterator[io.StringIO]:
    """Logging configured as ``LOG_LEVEL=debug`` into a buffer; the previous setup restored."""
    root = logging.getLogger()
    saved_handlers, saved_level = list(root.handlers), root.level
    saved = {name: logging.getLogger(name).level for name in TOUCHED_LOGGERS}
    buf = io.StringIO()
    configure_logging("debug", stream=buf)
    yield buf
    root.handlers[:] = saved_handlers
    root.setLevel(saved_level)
    for name, level in saved.items():
        logging.getLogger(name).setLevel(level)


async def test_a_launch_at_debug_logs_no_credentials_and_no_user_data(
    aws_env: MotoServer,
    aws: AwsClients,
    monkeypatch: pytest.MonkeyPatch,
    debug_log: io.StringIO,
) -> None:
    net = await seed_network(aws)
    ami = await _moto_ami(aws)
    for key, value in {
        "AWS_ACCESS_KEY_ID": ACCESS_KEY_ID,
        "AWS_SECRET_ACCESS_KEY": SECRET_ACCESS_KEY,
        "AWS_SESSION_TOKEN": SESSION_TOKEN,
    }.items():
        monkeypatch.setenv(key, value)
    settings = load_settings(
        [],
        {
            "CLOUD_PROVIDER": "aws",
            "CLUSTER_NAME": CLUSTER,
            "CLUSTER_ENDPOINT": "https://ABC.gr7.us-west-2.eks.amazonaws.com",
        },
    )
    async with open_aws(settings, endpoint_url=aws_env.endpoint) as stack:
        stack.nodeclasses.upsert(await nodeclass_dict(aws, net, ami, userData=USER_DATA))
        launched = await stack.provider.create(nodeclaim())

    assert launched.status.provider_id.startswith("aws:///us-west-2b/i-")
    templates = (await aws.ec2.describe_launch_templates())["LaunchTemplates"]
    versions = await aws.ec2.describe_launch_template_versions(
        LaunchTemplateId=templates[0]["LaunchTemplateId"]
    )
    sent = versions["LaunchTemplateVersions"][0]["LaunchTemplateData"]["UserData"]
    assert USER_DATA_MARKER in base64.b64decode(sent).decode()  # what the launch sent
    assert logging.getLogger("karpenter").isEnabledFor(logging.DEBUG)  # the level took
    log = debug_log.getvalue()
    leaked = {
        name: secret in log
        for name, secret in {
            "access key id": ACCESS_KEY_ID,
            "secret access key": SECRET_ACCESS_KEY,
            "session token": SESSION_TOKEN,
            "user data (sent)": sent,
            "user data (text)": USER_DATA_MARKER,
        }.items()
    }
    assert leaked == dict.fromkeys(leaked, False)
