"""The ``request_human_agent`` tool: the primary assistant hands the conversation to a person.

The tool itself changes nothing: the conversation protocol sees the call when the turn
ends and puts the conversation in the desk's queue (``conversations.desk``) with the
reason and summary the model gave. Its answer tells the model what happens next, so
that its last words to the customer are true.
"""

from __future__ import annotations

from langchain_core.tools import BaseTool, tool
from pydantic import BaseModel, Field

from db.handoff_limits import REASON_CHARS, SUMMARY_CHARS

HANDOFF_TOOL = "request_human_agent"
HANDED_OFF = (
    "The conversation is now in the queue for a person from the customer-service team. "
    "Tell the customer, in one or two sentences, that a person will answer here and that "
    "they can keep writing meanwhile. Do not call more tools in this turn."
)


class HandoffRequest(BaseModel):
    """Why a person is needed, and what they should know first."""

    reason: str = Field(description="Why, in a few words.", max_length=REASON_CHARS)
    summary: str = Field(
        description="What the customer wants and what was tried, for the person.",
        max_length=SUMMARY_CHARS,
    )


def make_handoff_tool() -> BaseTool:
    """Build ``request_human_agent`` (its effect is the protocol's, after the turn).

    When to call it is said once, in the crew's prompt (``assistants.prompts``); the
    tool's own description stays short, as it is sent with every request.
    """

    @tool(HANDOFF_TOOL, args_schema=HandoffRequest)
    def request_human_agent(reason: str, summary: str) -> str:
        """Hand the conversation to a person from the customer-service team."""
        return HANDED_OFF

    return request_human_agent
