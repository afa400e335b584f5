"""The controller process: settings, logging, the kube client and the App, run until stopped."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
from collections.abc import Sequence

from karpenter_py.kube.config import ConfigError, load_config
from karpenter_py.manager.settings import HelpRequested, Settings, SettingsError, load_settings
from karpenter_py.obs.logging import configure_logging

log = logging.getLogger("karpenter.manager")

EXIT_USAGE = 2


def run(argv: Sequence[str] | None = None) -> int:
    """``karpenter-py controller [flags]``: exit 2 with one message on a bad setting."""
    try:
        settings = load_settings(list(argv or ()), os.environ)
    except HelpRequested as help_text:
        print(help_text.text)
        return 0
    except SettingsError as err:
        print(f"error: {err}", file=sys.stderr)
        return EXIT_USAGE
    configure_logging(settings.log_level)
    try:
        return asyncio.run(serve(settings))
    except ConfigError as err:
        print(f"error: cannot load the kubeconfig: {err}", file=sys.stderr)
        return EXIT_USAGE
    except SettingsError as err:  # found only when starting: no AWS region, no cluster endpoint
        print(f"error: {err}", file=sys.stderr)
        return EXIT_USAGE


async def serve(settings: Settings) -> int:
    from karpenter_py.kube.client import KubeClient
    from karpenter_py.manager.app import App

    config = load_config(settings.kubeconfig or None)
    main = asyncio.current_task()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, lambda: main.cancel() if main is not None else None)
    async with contextlib.AsyncExitStack() as stack:
        client = await stack.enter_async_context(
            KubeClient(config, qps=settings.kube_client_qps, burst=settings.kube_client_burst)
        )
        aws = None
        if settings.cloud_provider == "aws":
            from karpenter_py.manager.aws import open_aws

            aws = await stack.enter_async_context(open_aws(settings))
        app = App(settings, client, aws=aws)
        try:
            await app.run()
        except asyncio.CancelledError:
            log.info("shutting down")
    return 0
