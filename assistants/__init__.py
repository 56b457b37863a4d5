"""The assistants: state, prompts, routing tools, the assistant wrapper and the specialists."""
