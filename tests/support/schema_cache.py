"""Reuse the argument schema LangChain infers for a tool function (tests only).

``@tool`` builds a pydantic model from a function's signature and docstring each time a
tool is made: about 10 ms a tool and half a second a crew, and the tests build a crew
(or the graph, which builds one) in most set-ups, which made it the largest single cost
of the in-process tests. The model depends only on the function's code, signature,
docstring and the options ``@tool`` passes, so the tests make each distinct one once
per process and reuse it: a tool made over another database gets the same schema it
would have inferred. Anything that changes the schema (another signature, default,
docstring, option) is another key and is inferred afresh.

``TRAVEL_ASSISTANT_TEST_SCHEMA_CACHE=0`` turns it off. The program itself never uses it.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable, Sequence
from typing import Any

ENV = "TRAVEL_ASSISTANT_TEST_SCHEMA_CACHE"


def install() -> None:
    """Patch ``StructuredTool.from_function``'s schema inference with a cache."""
    if os.environ.get(ENV, "1") == "0":
        return
    from langchain_core.tools import structured

    original = structured.create_schema_from_function
    if getattr(original, "_cached", False):
        return
    cache: dict[tuple[Any, ...], Any] = {}

    def cached(
        model_name: str,
        func: Callable[..., Any],
        *,
        filter_args: Sequence[str] | None = None,
        parse_docstring: bool = False,
        error_on_invalid_docstring: bool = False,
        include_injected: bool = True,
    ) -> Any:
        options = {
            "filter_args": filter_args,
            "parse_docstring": parse_docstring,
            "error_on_invalid_docstring": error_on_invalid_docstring,
            "include_injected": include_injected,
        }
        try:
            key = (
                model_name,
                func.__module__,
                func.__qualname__,
                func.__code__,
                str(inspect.signature(func)),
                func.__doc__,
                tuple(filter_args) if filter_args is not None else None,
                parse_docstring,
                error_on_invalid_docstring,
                include_injected,
            )
            hash(key)
        except (AttributeError, TypeError, ValueError):
            return original(model_name, func, **options)
        if key not in cache:
            cache[key] = original(model_name, func, **options)
        return cache[key]

    cached._cached = True  # type: ignore[attr-defined]
    structured.create_schema_from_function = cached
