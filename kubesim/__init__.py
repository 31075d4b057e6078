"""kubesim: a real Kubernetes 1.20 control plane on loopback with simulated nodes, for Slipway.

See docs/local-cluster.md. Entry points: `python -m kubesim build|up|down|status`,
kubesim.cluster.Cluster, kubesim.behaviours.set_behaviour and the pytest plugin
kubesim.pytest_plugin.
"""
