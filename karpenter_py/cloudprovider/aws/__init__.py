"""The AWS cloud provider: EC2 instance types, pricing, launches and interruption handling."""
