"""Company policy search and the ``lookup_policy`` tool.

The policy lives in ``data/policy.md`` as questions: each ``## `` heading is a topic and
each ``### `` heading a customer question followed by its answer. ``PolicyIndex`` cuts the
file into one passage per question and ranks passages with BM25 over a small tokenizer
(lowercase, stopwords dropped, light suffix stemming, a few synonyms), so that
"cancel", "cancellation" and "cancelling" meet. Embeddings are optional: when given, their
ranking is fused with the keyword ranking, and when they fail the keyword search carries
on alone. Nothing is read or computed until the first search.

The keyword index is langchain-community's ``BM25Retriever`` (over ``rank_bm25``), with a
relevance gate in place of its fixed top k: a passage must hold enough of the query's
information and score close enough to the best one, so an unrelated question gets "no
policy found" instead of three random passages.
"""

from __future__ import annotations

import functools
import logging
import math
import re
import threading
import warnings
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.tools import BaseTool, tool

from db.engine import reference_data_dir
from db.errors import InvalidInputError
from db.values import MAX_QUESTION_CHARS, plain_text
from tools.common import Question, shorten

logger = logging.getLogger(__name__)

POLICY_FILE_NAME = "policy.md"
# Passages the tool returns at most; more would bury the answer in neighbouring rules.
DEFAULT_K = 3

# A passage is relevant only if it contains at least this share of the query's
# information, where each query term weighs its IDF and a term the policy never uses
# weighs as much as the rarest term it does use. Gibberish and off-topic questions share
# at most a generic word or two ("flight", "book") with the policy and stay below it.
MIN_COVERAGE = 0.5
# Among relevant passages, drop those scoring below this share of the best one, so a
# precise question returns its answer rather than the answer plus two weak neighbours.
RELATIVE_SCORE_CUTOFF = 0.35
# Cosine similarity from which an embedding match counts on its own, without any shared
# keyword. Scales differ between embedding models, hence the constructor argument.
MIN_EMBEDDING_SIMILARITY = 0.5
# Standard constant of reciprocal rank fusion; it damps the weight of the very top ranks.
_RRF_K = 60

_TOKEN = re.compile(r"[a-z]+|\d+")


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_STOPWORDS = (
    # English function words and politeness.
    _words(
        """
        a about above after again all also am an and any anything are as at be been before
        being both but by can could d did do does doing done during each else for from get
        gets getting got had has have having he her here hers hi hello him his how i if in
        into is it its just know let ll m many me might more most much must my myself need
        no nor not now of off on once only or other our ours out own please re s she should
        so some something such t tell than thank thanks that the their them then there
        these they this those to too under until up us ve very want was we were what when
        where which while who whom why will with would yes you your yours
        """
    )
    # Words every query to a travel company's policy may carry: they select nothing.
    | _words("policy policies rule rules travel travelling traveling trip trips")
    # Relative dates name no rule; left in, a word the policy never uses would make a
    # real question ("rebook to a later flight") look off-topic.
    | _words("another different earlier later new next today tomorrow yesterday")
)

# Suffix rules, tried in order; the first that fits wins. Deliberately light: the goal is
# that word families used in customer questions meet, not linguistic accuracy.
_SUFFIX_RULES: tuple[tuple[str, str], ...] = (
    ("ations", ""),
    ("ation", ""),
    ("ments", ""),
    ("ment", ""),
    ("ances", ""),
    ("ance", ""),
    ("ences", ""),
    ("ence", ""),
    ("ings", ""),
    ("ing", ""),
    ("able", ""),
    ("ible", ""),
    ("ies", "y"),
    ("ied", "y"),
    ("ure", ""),
    ("ed", ""),
    ("ly", ""),
    ("s", ""),
)
_MIN_STEM = 3


@functools.lru_cache(maxsize=8192)
def _stem(word: str) -> str:
    """Strip one common suffix, undouble a final consonant and drop a final "e".

    Remembered per word: the policy's 1,900 words are 350 distinct ones, and queries
    repeat the policy's words.
    """
    if len(word) <= _MIN_STEM or word.isdigit():
        return word
    for suffix, replacement in _SUFFIX_RULES:
        if not word.endswith(suffix) or (suffix == "s" and word.endswith("ss")):
            continue
        stem = word[: -len(suffix)] + replacement
        if len(stem) >= _MIN_STEM:
            word = stem
        break
    # "cancell" (from "cancelled", "cancellation") must meet "cancel".
    if len(word) > _MIN_STEM and word[-1] == word[-2] and word[-1] not in "aeiou":
        word = word[:-1]
    # "change" must meet "chang" (from "changing", "changed").
    if len(word) > _MIN_STEM and word.endswith("e"):
        word = word[:-1]
    return word


# Customer words the policy spells differently, mapped by stem onto the policy's words.
_SYNONYMS: dict[str, str] = {
    _stem(word): _stem(canonical)
    for word, canonical in {
        "activity": "excursion",
        "amend": "change",
        "baggage": "bag",
        "checkin": "check",
        "city": "destination",
        "cost": "fee",
        "euro": "eur",
        "h": "hour",
        "hr": "hour",
        "hrs": "hour",
        "kgs": "kg",
        "kilo": "kg",
        "kilogram": "kg",
        "luggage": "bag",
        "modify": "change",
        "move": "change",
        "paid": "pay",
        "penalty": "fee",
        "plane": "aircraft",
        "rebook": "change",
        "rent": "rental",
        "reschedule": "change",
        "suitcase": "bag",
        "tour": "excursion",
    }.items()
}


def tokenize(text: str) -> list[str]:
    """Split text into the search terms used on both sides of the index.

    Args:
        text: Any text: a passage of the policy or a customer's query.

    Returns:
        Lowercased, stemmed terms without stopwords, in their original order.
    """
    terms: list[str] = []
    for word in _TOKEN.findall(text.lower()):
        if word in _STOPWORDS:
            continue
        stem = _stem(word)
        terms.append(_SYNONYMS.get(stem, stem))
    return terms


@dataclass(frozen=True)
class PolicyPassage:
    """One question of the policy with its answer.

    Attributes:
        topic: The ``## `` heading the question sits under, e.g. "Baggage".
        question: The ``### `` heading, e.g. "How much baggage can I bring in Business?".
        answer: The Markdown text under the question.
        score: How well it matched the last query (0 for passages not from a search).
    """

    topic: str
    question: str
    answer: str
    score: float = 0.0

    def render(self) -> str:
        """Return the passage as readable text: topic and question, then the answer."""
        heading = self.topic if self.question == self.topic else f"{self.topic}: {self.question}"
        return f"{heading}\n{self.answer}"


def parse_policy(markdown: str) -> list[PolicyPassage]:
    """Cut policy Markdown into one passage per ``### `` question.

    Text under a ``# `` or ``## `` heading before its first question (a preamble or a
    topic introduction) becomes a passage named after that heading, so nothing written
    in the policy is unsearchable.

    Args:
        markdown: The policy text.

    Returns:
        The passages in document order.
    """
    passages: list[PolicyPassage] = []
    title = ""
    topic = ""
    question = ""
    lines: list[str] = []

    def flush() -> None:
        answer = "\n".join(lines).strip()
        if answer:
            heading = question or topic or title
            passages.append(PolicyPassage(topic or title, heading, answer))
        lines.clear()

    for line in markdown.splitlines():
        if line.startswith("### "):
            flush()
            question = line[4:].strip()
        elif line.startswith("## "):
            flush()
            topic, question = line[3:].strip(), ""
        elif line.startswith("# "):
            flush()
            title, topic, question = line[2:].strip(), "", ""
        else:
            lines.append(line)
    flush()
    return passages


@functools.cache
def _gated_retriever_type() -> Any:
    """Return langchain-community's ``BM25Retriever`` with the relevance gate.

    Imported on the first search, not with the tool: the import takes about half a
    second, and the package announces its sunset with a warning we do not pass on.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", "`langchain-community` is being sunset", DeprecationWarning
        )
        from langchain_community.retrievers import BM25Retriever

    class _GatedBM25Retriever(BM25Retriever):
        """BM25Retriever that returns only relevant passages, scored, instead of the top k."""

        min_coverage: float = MIN_COVERAGE
        relative_cutoff: float = RELATIVE_SCORE_CUTOFF

        def _get_relevant_documents(
            self, query: str, *, run_manager: CallbackManagerForRetrieverRun
        ) -> list[Document]:
            terms = _unique(self.preprocess_func(query))
            if not terms:
                return []
            bm25: Any = self.vectorizer
            idf: dict[str, float] = bm25.idf
            unknown = max(idf.values(), default=1.0)
            weights = {t: idf.get(t, unknown) for t in terms}
            total = sum(weights.values())
            scores = [float(s) for s in bm25.get_scores(terms)]
            relevant: list[tuple[int, float]] = []
            for i, score in enumerate(scores):
                covered = sum(w for t, w in weights.items() if t in bm25.doc_freqs[i])
                if score > 0 and total > 0 and covered / total >= self.min_coverage:
                    relevant.append((i, score))
            if not relevant:
                return []
            top = max(score for _i, score in relevant)
            kept = sorted(
                ((i, s) for i, s in relevant if s >= self.relative_cutoff * top),
                key=lambda item: item[1],
                reverse=True,
            )
            return [
                self.docs[i].model_copy(update={"metadata": {**self.docs[i].metadata, "score": s}})
                for i, s in kept[: self.k]
            ]

    return _GatedBM25Retriever


@dataclass(frozen=True)
class _Loaded:
    """The parsed policy and its keyword index, built once."""

    passages: tuple[PolicyPassage, ...]
    retriever: Any  # the gated BM25Retriever


def _cosine(left: Sequence[float], right: Sequence[float]) -> float:
    dot = sum(a * b for a, b in zip(left, right, strict=True))
    norms = math.sqrt(sum(a * a for a in left)) * math.sqrt(sum(b * b for b in right))
    return dot / norms if norms else 0.0


def _lucene_idf(term_sets: Sequence[Iterable[str]]) -> dict[str, float]:
    """Return each term's idf, ``ln(1 + (N - n + 0.5) / (n + 0.5))``, always positive."""
    counts = Counter(term for terms in term_sets for term in terms)
    total = len(term_sets)
    return {term: math.log(1 + (total - n + 0.5) / (n + 0.5)) for term, n in counts.items()}


def _unique(terms: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(terms))


class PolicyIndex:
    """Searchable company policy, one passage per question.

    The file is read and indexed on the first search (or an explicit ``load()``), once,
    even when several tool calls run in parallel threads.
    """

    def __init__(
        self,
        path: Path | str | None = None,
        *,
        embeddings: Embeddings | None = None,
        min_coverage: float = MIN_COVERAGE,
        relative_cutoff: float = RELATIVE_SCORE_CUTOFF,
        min_similarity: float = MIN_EMBEDDING_SIMILARITY,
    ) -> None:
        """Describe the index; nothing is read until it is needed.

        Args:
            path: The policy Markdown file; by default ``policy.md`` in the reference
                data folder (``TRAVEL_ASSISTANT_DATA`` or the project's ``data/``),
                resolved at load time.
            embeddings: Optional LangChain embeddings whose ranking is fused with the
                keyword ranking. Never required; if they fail, keyword search is used.
            min_coverage: Share of the query's IDF weight a passage must contain.
            relative_cutoff: Share of the best score a further passage must reach.
            min_similarity: Cosine similarity from which an embedding match counts.
        """
        self._path = Path(path) if path is not None else None
        self._embeddings = embeddings
        self._min_coverage = min_coverage
        self._relative_cutoff = relative_cutoff
        self._min_similarity = min_similarity
        self._lock = threading.Lock()
        self._loaded: _Loaded | None = None
        self._passage_vectors: list[list[float]] | None = None

    @property
    def path(self) -> Path:
        """The policy file this index reads."""
        if self._path is not None:
            return self._path
        return reference_data_dir() / POLICY_FILE_NAME  # the packaged policy

    @property
    def passages(self) -> tuple[PolicyPassage, ...]:
        """Every passage of the policy, in document order."""
        return self._index().passages

    def load(self) -> None:
        """Read and index the policy now (later calls reuse the result).

        Calling it when the graph is built turns a missing policy file into an error at
        start-up rather than in the middle of a conversation.

        Raises:
            FileNotFoundError: The policy file does not exist.
            ValueError: The file holds no passage.
        """
        self._index()

    def _index(self) -> _Loaded:
        loaded = self._loaded
        if loaded is not None:
            return loaded
        with self._lock:
            if self._loaded is None:
                self._loaded = self._build()
            return self._loaded

    def _build(self) -> _Loaded:
        path = self.path
        if not path.is_file():
            raise FileNotFoundError(
                f"The company policy file {path} does not exist; restore data/{POLICY_FILE_NAME} "
                "or point TRAVEL_ASSISTANT_DATA at a folder that holds it."
            )
        passages = tuple(parse_policy(path.read_text(encoding="utf-8")))
        if not passages:
            raise ValueError(f"The company policy file {path} holds no question or answer.")
        retriever = _gated_retriever_type().from_texts(
            [f"{p.topic}\n{p.question}\n{p.answer}" for p in passages],
            metadatas=[{"position": i} for i in range(len(passages))],
            preprocess_func=tokenize,
            k=len(passages),
            min_coverage=self._min_coverage,
            relative_cutoff=self._relative_cutoff,
        )
        # Okapi's idf turns negative for a term in more than half of the passages and is
        # then floored to a share of the corpus average, which breaks small policies (a
        # one-passage file scores nothing). Lucene's variant stays positive and ranks the
        # same way; ``get_scores`` reads it from this public attribute.
        retriever.vectorizer.idf = _lucene_idf(retriever.vectorizer.doc_freqs)
        return _Loaded(passages=passages, retriever=retriever)

    def search(self, query: str, k: int = DEFAULT_K) -> list[PolicyPassage]:
        """Return the passages that answer ``query``, best first.

        Args:
            query: The customer's question or its key words.
            k: The most passages to return.

        Returns:
            Up to ``k`` passages that pass the relevance threshold, each carrying its
            score; an empty list when nothing in the policy is relevant.

        Raises:
            ValueError: ``k`` is less than 1.
        """
        if k < 1:
            raise ValueError(f"k must be at least 1, not {k}")
        loaded = self._index()
        if not query.strip():
            return []
        lexical = self._lexical_ranking(loaded, query)
        similarities = self._similarities(loaded, query)
        if similarities is None:
            return [replace(loaded.passages[i], score=score) for i, score in lexical[:k]]

        semantic = sorted(
            ((i, s) for i, s in enumerate(similarities) if s >= self._min_similarity),
            key=lambda item: item[1],
            reverse=True,
        )
        fused: dict[int, float] = {}
        for ranking in (lexical, semantic):
            for rank, (i, _score) in enumerate(ranking):
                fused[i] = fused.get(i, 0.0) + 1.0 / (_RRF_K + rank + 1)
        best = sorted(fused.items(), key=lambda item: item[1], reverse=True)[:k]
        return [replace(loaded.passages[i], score=score) for i, score in best]

    def _lexical_ranking(self, loaded: _Loaded, query: str) -> list[tuple[int, float]]:
        """Rank the passages that pass the keyword threshold, as (position, BM25 score)."""
        documents = loaded.retriever.invoke(query)
        return [(d.metadata["position"], d.metadata["score"]) for d in documents]

    def _similarities(self, loaded: _Loaded, query: str) -> list[float] | None:
        """Return the cosine similarity of ``query`` to each passage, or None without embeddings."""
        if self._embeddings is None:
            return None
        try:
            if self._passage_vectors is None:
                self._passage_vectors = self._embeddings.embed_documents(
                    [p.render() for p in loaded.passages]
                )
            query_vector = self._embeddings.embed_query(query)
        except Exception:
            # Embeddings are an improvement, never a dependency: a provider outage must
            # not take policy answers down with it.
            logger.warning("Policy embeddings failed; using keyword search only.", exc_info=True)
            return None
        return [_cosine(query_vector, vector) for vector in self._passage_vectors]


# How much of the query the answer repeats.
QUERY_ECHO_CHARS = 80


def format_passages(query: str, passages: Sequence[PolicyPassage]) -> str:
    """Render search results as the text the model reads.

    Args:
        query: The query that was searched.
        passages: Its results, best first.

    Returns:
        The numbered passages, or a sentence saying that nothing matches.
    """
    # The query comes back shortened: a long one would otherwise be sent to the model
    # again on every later call of the conversation.
    query = shorten(" ".join(query.split()), QUERY_ECHO_CHARS)
    if not passages:
        return (
            f'No policy passage matches "{query}". Try the key words of the question '
            '(for example "cancellation fee Economy" or "hotel free cancellation"); if '
            "the policy still has nothing, say it does not cover this rather than guess."
        )
    blocks = [f"[{n}] {passage.render()}" for n, passage in enumerate(passages, start=1)]
    header = f'Company policy passages for "{query}", best match first:'
    return "\n\n".join([header, *blocks])


def make_lookup_policy_tool(index: PolicyIndex | None = None) -> BaseTool:
    """Build the ``lookup_policy`` tool over a policy index.

    Args:
        index: The index to search; by default the policy in the reference data folder.

    Returns:
        A tool named ``lookup_policy`` taking one argument, ``query``.
    """
    policy = index if index is not None else PolicyIndex()

    @tool(parse_docstring=True)
    def lookup_policy(query: Question) -> str:
        """Look up the company policy before answering any question about its rules.

        Covers flight changes and cancellations (fees per fare class, time limits, fare
        differences), refunds, baggage allowances, check-in, seats, special assistance,
        payment and invoices, and the cancellation terms of hotels, car rentals and
        excursions. Quote the fees and limits the passages state; never state a fee or
        a limit that no passage gives.

        Args:
            query: The customer's question or its key words, in English, for example
                "fee to cancel an Economy ticket" or "baggage allowance in Business".
        """
        text = plain_text(query, "query", MAX_QUESTION_CHARS)
        if not text:
            raise InvalidInputError(
                "The policy query is empty. Pass the customer's question or its key words, "
                'for example "baggage allowance in Economy".'
            )
        return format_passages(text, policy.search(text))

    return lookup_policy
