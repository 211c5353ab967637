"""Conversational-memory benchmarks with gold evidence: one model, a seeded generator, two loaders.

The data side of session-retriever measurements: a :class:`Benchmark` holds
:class:`Conversation` s (chronological :class:`Session` s of :class:`Turn` s) and the
:class:`Question` s asked about each, every question with its gold answer and gold
evidence (session ids and turn ids, validated against its conversation).

* :func:`synthetic` - a seeded, offline, deterministic benchmark (>= 500 questions at
  the default size) whose questions paraphrase their evidence;
* :func:`overlap` - the same layout in the words users reuse: most questions echo their
  evidence, names, products, places and numbers recur (:mod:`memlab.bench._overlap`);
* :func:`load_longmemeval` / :func:`load_locomo` - the public sets, from a file the
  user supplies (neither is bundled or downloaded).

Categories
----------

==============================  ============================================  ==============================================  ==================
category                        synthetic                                     LongMemEval ``question_type``                   LoCoMo ``category``
==============================  ============================================  ==============================================  ==================
``single_session_fact``         one user turn states a fact                   ``single-session-user``,                        4 (single-hop)
                                                                              ``single-session-assistant``
``multi_session_aggregation``   amounts in 2-3 sessions; asks a count/total   ``multi-session``                               1 (multi-hop)
``knowledge_update``            a value, then a new one in a later session    ``knowledge-update``                            -
``temporal``                    "when" / "which first" / "how many days",     ``temporal-reasoning``                          2 (temporal)
                                answered from the session dates
``preference``                  a stated taste; asks for a recommendation     ``single-session-preference``                   -
``abstention``                  asks about something never stated             any ``question_id`` ending in ``_abs``          5 (adversarial)
``open_domain``                 -                                             -                                               3 (open-domain /
                                                                                                                              commonsense)
==============================  ============================================  ==============================================  ==================

Rules:

* **abstention** questions carry no evidence (``abstention=True``, empty evidence lists):
  whatever sessions / turns the source lists for LongMemEval's ``_abs`` items or LoCoMo's
  category 5 are dropped (LongMemEval's own retrieval metrics skip abstention, having "no
  ground truth answer location"), and those turns are not marked ``has_answer`` on that account. For
  LoCoMo category 5 the answer is the item's ``answer`` when present, else ``""``
  (``adversarial_answer``, the tempting wrong answer, is not kept). The synthetic
  answer is :data:`ABSTENTION_ANSWER`.
* **knowledge_update** (synthetic) evidence lists *both* the superseded and the latest
  statement (sessions and turns, chronological), so a retriever is credited for finding
  the change, and the answer is the value of the **last** evidence session (the latest
  wins). LongMemEval's ``answer_session_ids`` are kept as the file gives them.
* evidence ids are chronological; every evidence turn lies in an evidence session.

The synthetic benchmark
-----------------------

``size`` questions (default :data:`DEFAULT_SIZE` = 600) split equally over the six
categories above, the first ``size % 6`` categories (table order) one more
(:func:`category_counts`); conversation *i* asks one question of each category whose
count exceeds *i*, so the default is 100 conversations of 6 questions. Each
conversation has 12-20 sessions dated 1-9 days apart; the evidence sits in fewer than
half of them (the rest are distractor sessions of small talk and decoys). Question
wordings paraphrase the evidence (synonym tables, reordering) while decoy lines reuse
the question's words about other people or hypotheticals; the tables are data in
``memlab/bench/_synthetic.py``. Ids: conversation ``syn-0001``, session
``syn-0001-s03``, turn ``syn-0001-s03:4``, question ``syn-0001-q2``. Temporal answers are
ISO dates (``2023-04-12``), ``"N days"``, or the gerund phrase the question names.
Same ``seed`` and ``size``: the identical benchmark, on any machine.

The overlap benchmark
---------------------

:func:`overlap` (``seed``, ``size``, ``paraphrase`` = :data:`PARAPHRASE_SHARE` = 0.25): the
synthetic layout, categories and sizes, with other tables. Exactly
``round(paraphrase * answerable questions)`` questions (half up; chosen by the seed) are
paraphrases worded like the synthetic ones; the others **echo** the evidence's words
("What did I name the beagle I adopted from the shelter?"). Distractors are **mentions**:
lines about the same names, products, places and numbers that do not answer ("The
beagle dug up half the garden again"), not copies of the question. Some
``single_session_fact`` facts are the assistant's (a hotel it recommended): the evidence
turn is its reply. Abstention questions are the synthetic benchmark's. Ids ``ovl-0001``,
``ovl-0001-s03``, ``ovl-0001-s03:4``, ``ovl-0001-q2``.

Lexical overlap
---------------

:meth:`Conversation.lexical_overlap`: the share of a question's content words
(:func:`memlab.text.content_words`) found in its evidence turns; None for abstention.
:meth:`Benchmark.to_frame` has it per question (``overlap``, with ``paraphrase``) and
:meth:`Benchmark.overlaps` lists it. Measured at seed 0, default size (p10 / p50 / p90,
mean): ``synthetic`` 0 / 0 / 0, 0.019; ``overlap`` 0 / 0.5 / 0.8, 0.41 (its echo questions
0.54, its paraphrases 0.015). A benchmark of low overlap rewards retrievers that match
meaning; one of high overlap rewards shared words.

Splits
------

Every benchmark splits by conversation into ``dev`` (tune on it) and ``heldout`` (report
it): :meth:`Benchmark.split` / :func:`split_of`, a keyed BLAKE2b hash of the conversation
id below :data:`DEV_SHARE` (0.5) is ``dev``. The part of a conversation depends on its id
alone: the same on any machine, for any size, and for a loaded public set.

LongMemEval
-----------

A JSON list of items (``question_id``, ``question_type``, ``question``, ``answer``,
``question_date`` optional, ``haystack_session_ids``, ``haystack_dates``,
``haystack_sessions`` - lists of ``{"role", "content", "has_answer"?}`` -,
``answer_session_ids``). One :class:`Conversation` per item (id = ``question_id``) with
its one question; turn ids ``{session_id}:{index}``; evidence sessions =
``answer_session_ids``; evidence turns = the ``has_answer: true`` turns inside them
(``has_answer`` elsewhere is cleared, so it always means "evidence").
Dates such as ``2023/05/20 (Sat) 02:21`` become ``2023-05-20T02:21:00`` (turns take
their session's time) and sessions are sorted by date (``longmemeval_oracle.json`` is
unsorted); an unreadable date is kept as written and the order left alone.

LoCoMo
------

``locomo10.json``: a list of samples (``sample_id``, ``conversation`` with ``speaker_a``,
``speaker_b``, ``session_N`` lists of ``{speaker, dia_id, text}`` and
``session_N_date_time``, ``qa`` of ``{question, answer, evidence, category}``). One
:class:`Conversation` per sample (id = ``sample_id``), sessions ``session_N`` (empty ones
skipped), turn ids = the dia ids, question ids ``{sample_id}:q{index}``. ``speaker_a``'s
turns get role ``user``, ``speaker_b``'s ``assistant``; a turn's text is
``"{speaker}: {text}"`` (plus ``" [shares {blip_caption}]"`` for an image), as LoCoMo's
own prompts render it. Dates such as ``1:56 pm on 8 May, 2023`` become
``2023-05-08T13:56:00``. Evidence entries are read for every ``D<s>:<t>`` they hold
(``"D8:6; D9:17"``, ``"(D1:3)"``; ``D3:07`` matches ``D3:7``); evidence sessions are those of
the evidence turns. A turn is ``has_answer`` when it is evidence for some question.
With ``strict=True`` (default) an evidence id naming no turn raises; ``strict=False``
drops it with one warning. LoCoMo has no question dates (``question_date=""``).

Memlab turns
------------

The model keeps messages (a :class:`Turn` is one message, its id the source's). How an
evaluation writes them as memlab turns is the benchmark's ``turns``
(:attr:`Benchmark.turns`), which both loaders take: ``turns="exchange"`` (the default)
pairs each user message with the assistant message right after it (one
``add_qa(question=user text, answer=assistant text)``, LongMemEval's "round"; a message
without its partner is a memlab turn of its own), ``turns="message"`` makes every message
a memlab turn (a user message as the question, an assistant message as the answer, the
other side empty). Gold evidence stays the message ids in both modes: a memlab turn
holds the messages it was made of, so a ``has_answer`` user message of LongMemEval is
found through its exchange in ``"exchange"`` mode and on its own in ``"message"`` mode;
LoCoMo's ``speaker_a`` / ``speaker_b`` turns pair as user / assistant. A ``turns`` other
than these two raises :class:`memlab.ValidationError` naming the value before the file
is read.

Errors: a missing file, invalid JSON, or a field of the wrong shape raises
:class:`memlab.ValidationError` naming the path and the item index and field.
"""

from __future__ import annotations

import os

from memlab.bench._conversation_model import (
    CATEGORIES,
    DEV_SHARE,
    FRAME_COLUMNS,
    TURN_UNITS,
    SPLITS,
    Benchmark,
    Conversation,
    Question,
    Role,
    Session,
    Split,
    Turn,
    TurnUnit,
    split_of,
)
from memlab.bench._overlap import PARAPHRASE_SHARE
from memlab.bench._overlap import generate as _generate_overlap
from memlab.bench._public_sets import LOCOMO_CATEGORIES, LONGMEMEVAL_CATEGORIES
from memlab.bench._public_sets import load_locomo as _load_locomo
from memlab.bench._public_sets import load_longmemeval as _load_longmemeval
from memlab.bench._synthetic import ABSTENTION_ANSWER, DEFAULT_SIZE, category_counts
from memlab.bench._synthetic import generate as _generate

__all__ = [
    "ABSTENTION_ANSWER",
    "CATEGORIES",
    "DEFAULT_SIZE",
    "DEV_SHARE",
    "FRAME_COLUMNS",
    "LOCOMO_CATEGORIES",
    "LONGMEMEVAL_CATEGORIES",
    "TURN_UNITS",
    "PARAPHRASE_SHARE",
    "SPLITS",
    "Benchmark",
    "Conversation",
    "Question",
    "Role",
    "Session",
    "Split",
    "Turn",
    "TurnUnit",
    "category_counts",
    "load_locomo",
    "load_longmemeval",
    "overlap",
    "split_of",
    "synthetic",
]


def synthetic(seed: int = 0, size: int | str = "default") -> Benchmark:
    """The seeded synthetic benchmark: ``size`` questions (``"default"``: :data:`DEFAULT_SIZE`), no network.

    The same ``seed`` and ``size`` give the identical benchmark (``random.Random(seed)``
    only). A ``size`` that is not ``"default"`` or a positive int raises
    :class:`memlab.ValidationError`.
    """
    return _generate(seed, size)


def overlap(seed: int = 0, size: int | str = "default", paraphrase: float = PARAPHRASE_SHARE) -> Benchmark:
    """The seeded overlap benchmark: questions in the evidence's words, ``paraphrase`` of them paraphrased (module docstring).

    Named ``overlap-seed{seed}-{size}`` (``-p{paraphrase}`` appended when not the
    default). Same ``seed``, ``size`` and ``paraphrase``: the identical benchmark. A bad
    ``size`` or a ``paraphrase`` outside [0, 1] raises :class:`memlab.ValidationError`.
    """
    return _generate_overlap(seed, size, paraphrase)


def load_longmemeval(path: str | os.PathLike[str], *, turns: TurnUnit = "exchange") -> Benchmark:
    """A LongMemEval JSON file as a :class:`Benchmark` (one conversation per item; see the module docstring).

    ``turns``: ``"exchange"`` (one memlab turn per user/assistant exchange) or ``"message"``
    (one per message); any other value raises :class:`memlab.ValidationError` before the
    file is read.
    """
    return _load_longmemeval(path, turns=turns)


def load_locomo(path: str | os.PathLike[str], *, strict: bool = True, turns: TurnUnit = "exchange") -> Benchmark:
    """A LoCoMo JSON file (``locomo10.json``) as a :class:`Benchmark` (see the module docstring; ``turns`` as for LongMemEval)."""
    return _load_locomo(path, strict=strict, turns=turns)
