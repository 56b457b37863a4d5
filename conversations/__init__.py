"""Conversations: the protocol both front ends drive, and where conversations are kept.

``assistant`` drives the compiled graph (send, resolve, cancel, recovered writes);
``words`` holds what the customer is told; ``store``, ``sessions``,
``remembered_state`` and ``checkpoint_serde`` keep conversations, their registry and
their turn locks. Importing this package imports none of them (start-up stays fast).
"""
