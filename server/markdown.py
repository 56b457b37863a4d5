"""Assistant replies as safe HTML: Markdown rendered by markdown-it-py, cleaned by nh3.

The model's words are not trusted: raw HTML in a reply is shown as text (markdown-it's
``html`` option is off), and what the renderer makes is cleaned again by nh3 (the Rust
sanitizer ammonia) against a short list of tags. Links keep only ``http``, ``https`` and
``mailto`` addresses, open in a new tab with ``rel="noopener noreferrer nofollow"``;
images are dropped (a reply must not load anything). The page sets this HTML as it is
and sets nothing else from the model but text.
"""

from __future__ import annotations

from functools import lru_cache

import nh3
from markdown_it import MarkdownIt

ALLOWED_TAGS = frozenset(
    {
        "p", "br", "strong", "em", "del", "code", "pre", "blockquote", "hr",
        "ul", "ol", "li", "a", "h1", "h2", "h3", "h4", "h5", "h6",
        "table", "thead", "tbody", "tr", "th", "td",
    }
)  # fmt: skip
ALLOWED_ATTRIBUTES = {"a": {"href", "title"}, "ol": {"start"}, "th": {"align"}, "td": {"align"}}
LINK_SCHEMES = ("http://", "https://", "mailto:")
LINK_REL = "noopener noreferrer nofollow"


@lru_cache(maxsize=1)
def _parser() -> MarkdownIt:
    # CommonMark with tables and strikethrough; raw HTML stays text, no typographer; an
    # image is read as a link to it (never loaded).
    parser = MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])
    return parser.disable("image")


def _keep(tag: str, attribute: str, value: str) -> str | None:
    """Drop a link whose address is not http(s) or mailto (relative ones included)."""
    if tag == "a" and attribute == "href":
        return value if value.strip().lower().startswith(LINK_SCHEMES) else None
    return value


def reply_html(text: str) -> str:
    """Return the reply ``text`` (Markdown) as sanitized HTML."""
    rendered = _parser().render(text)
    return nh3.clean(
        rendered,
        tags=set(ALLOWED_TAGS),
        attributes={tag: set(names) for tag, names in ALLOWED_ATTRIBUTES.items()},
        url_schemes={"http", "https", "mailto"},
        link_rel=LINK_REL,
        set_tag_attribute_values={"a": {"target": "_blank"}},
        attribute_filter=_keep,
        strip_comments=True,
    )
