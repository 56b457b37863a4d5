"""LangChain tools over the travel database, one module per domain."""
