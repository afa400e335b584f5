"""``karpenter-py viewer``: the cluster's nodes, cost and disruption decisions, live or once."""
