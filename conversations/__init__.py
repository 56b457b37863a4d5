"""Conversations: the protocol both front ends drive, and where conversations are kept.

``assistant`` drives the compiled graph (send, resolve, cancel, recovered writes), with
``run_stream``, ``run_cancel``, ``state_cache`` and ``unfinished_runs`` beside it;
``words`` holds what the customer is told; ``store``, ``sessions``,
``remembered_state`` and ``checkpoint_serde`` keep conversations, their registry and
their turn locks. Importing this package imports none of them (start-up stays fast).
"""
