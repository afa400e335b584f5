"""AWS interruption handling: act on spot, health and state-change events from an SQS queue."""

from karpenter_py.controllers.interruption.controller import Interruption, Outcome, QueuePort

__all__ = ["Interruption", "Outcome", "QueuePort"]
