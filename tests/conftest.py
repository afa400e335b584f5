"""Session-wide fixtures: the local control plane (``cluster``) and moto's server (``aws``)."""

pytest_plugins = ["tests.clusterfixture", "tests.motofixture"]
