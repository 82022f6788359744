"""NCCL hints: the table libnccl-tuner-netd.so reads, the policy that fills it, and its delivery.

``layout`` mirrors the C header; ``conditions`` and ``policy`` turn what netd measures into a
table; ``pins`` is the pin authority (per communicator, first asker pins, all ranks or none);
``socket_server`` answers the plugin at communicator init; ``pin_client`` asks a remote pin
service for multi-node communicators; ``api`` serves /v1/nccl; ``nccl_env`` recommends the NCCL
environment the tuner cannot change. See docs/nccl.md.
"""
