"""The terminal front end, which reads input and draws what the protocol reports.

How things look (``console``, ``render``), the chat over the protocol (``chat``), the
approval prompt (``approvals``) and Ctrl-C while a turn runs (``signals``).

It reads input and renders ``conversations.records`` outcomes; it decides nothing about a
turn and phrases no fact of the conversation itself.
"""

from terminal.console import Console

__all__ = ["Console"]
