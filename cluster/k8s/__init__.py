"""Kubernetes: the manifests tfbench writes (JobSet, Indexed Jobs, TFJob), `python -m cluster.k8s`
that writes them, and the pod-side index that turns a pod's index into its TF_CONFIG."""
