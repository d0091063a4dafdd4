"""Horovod's launch: horovodrun as local runs start it, Horovod's rendezvous and per-rank Gloo
environment for ranks tfbench places itself, and horovodrun's elastic driver."""
