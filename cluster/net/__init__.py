"""Emulated networking: network namespaces, links shaped with tbf, the user-space delay line, the
link probe and the facts it records, the private namespace of a local run."""
