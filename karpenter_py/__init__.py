"""karpenter-py: Karpenter, the Kubernetes node autoscaler, in Python."""
