"""How long the words of a hand-off to a person may be.

The ``request_human_agent`` tool bounds what the model may write (``tools.handoff``) and
the desk cuts what it stores to the same lengths (``conversations.desk``): both import
them from here, from below, and importing this module costs nothing.
"""

from __future__ import annotations

# Why the conversation is handed to a person, in a few words.
REASON_CHARS = 500
# What the customer wants and what was tried, for the person who takes it.
SUMMARY_CHARS = 2000
