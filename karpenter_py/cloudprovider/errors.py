"""Typed cloud-provider errors; callers branch on the type, never on message text."""

from __future__ import annotations


class CloudProviderError(Exception):
    """Base of every error a CloudProvider raises on purpose."""


class InsufficientCapacityError(CloudProviderError):
    """No offering of the NodeClaim's options could be launched (EC2 ICE and friends).

    ``offerings`` lists (instance type, zone, capacity type) that failed, so the caller can mark
    them unavailable and the next scheduling round picks something else.
    """

    def __init__(self, message: str, offerings: tuple[tuple[str, str, str], ...] = ()) -> None:
        super().__init__(message)
        self.offerings = offerings


class NodeClaimNotFoundError(CloudProviderError):
    """The instance behind a NodeClaim is gone (Delete returns this once the job is done)."""


class NodeClassNotReadyError(CloudProviderError):
    """The NodeClaim's NodeClass is missing or not Ready; launching cannot succeed yet."""


class CreateError(CloudProviderError):
    """A launch failure with a condition reason worth showing on the NodeClaim."""

    def __init__(self, message: str, *, reason: str = "LaunchFailed") -> None:
        super().__init__(message)
        self.reason = reason
